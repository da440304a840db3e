package redact

import (
	"bytes"
	"strings"
	"testing"
)

func TestLocation(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://gh:s3cret@db:5432/gatehouse", "postgres://gh:xxxxx@db:5432/gatehouse"},
		{"postgres://gh@db/gatehouse?password=s3cret&sslmode=require", "postgres://gh@db/gatehouse?password=xxxxx&sslmode=require"},
		{"postgresql://db/g?sslpassword=k3y&sslkey=%2Fk.pem", "postgresql://db/g?sslkey=%2Fk.pem&sslpassword=xxxxx"},
		{"postgres://db/g?passfile=%2Fhome%2Fgh%2F.pgpass", "postgres://db/g?passfile=xxxxx"},
		{"smtp://relay:p%40ss@mail:587?tls=require", "smtp://relay:xxxxx@mail:587?tls=require"},
		{"smtp://relay:p ss@mail:587", "smtp://relay:xxxxx@mail:587"}, // does not parse
		{"/var/lib/gatehouse/ledger.db", "/var/lib/gatehouse/ledger.db"},
		{"postgres://gh@db/g", "postgres://gh@db/g"},
	} {
		if got := Location(tc.in); got != tc.want {
			t.Errorf("Location(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSecretsAndWriter(t *testing.T) {
	loc := "postgres://gh:p%40ss-word@db/g?sslpassword=k3y-value"
	secrets := Secrets(loc)
	for _, want := range []string{"p@ss-word", "p%40ss-word", "k3y-value"} {
		if !strings.Contains(strings.Join(secrets, " "), want) {
			t.Errorf("Secrets(%q) = %v, lacks %q", loc, secrets, want)
		}
	}
	var b bytes.Buffer
	w := NewWriter(&b, secrets...)
	w.Write([]byte("connect to " + loc + " failed: password p@ss-word rejected\n"))
	if got := b.String(); strings.Contains(got, "p@ss") || strings.Contains(got, "k3y-value") || strings.Count(got, Mask) != 3 {
		t.Errorf("scrubbed: %q", got)
	}
}
