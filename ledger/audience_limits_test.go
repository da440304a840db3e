package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"gatehouse/ledger"
	"gatehouse/ledger/audiencefile"
)

// unasked is a directory that must not be consulted.
type unasked struct{ t *testing.T }

func (u unasked) CustomerByID(context.Context, string) (ledger.Customer, bool, error) {
	u.t.Error("a row was looked up in a file that is over its limit")
	return ledger.Customer{}, false, nil
}

func (u unasked) CustomerByEmail(context.Context, string) (ledger.Customer, bool, error) {
	u.t.Error("a row was looked up in a file that is over its limit")
	return ledger.Customer{}, false, nil
}

// counted is a source that yields bytes of rows without end and counts
// what was read.
type counted struct{ read int64 }

func (c *counted) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = "r1\n"[(c.read+int64(i))%3]
	}
	c.read += int64(len(b))
	return len(b), nil
}

// TestAudienceFileLimits: an audience file over audiencefile.MaxBytes is
// refused (ErrInvalid, exit 2) naming the file and the limit, having read
// one byte past the limit and no more; one over audiencefile.MaxRows is
// refused before any row is looked up. Neither records a release.
func TestAudienceFileLimits(t *testing.T) {
	w := newWorld(t)
	in := func(release string, src interface{ Read([]byte) (int, error) }) ledger.AudienceImport {
		return ledger.AudienceImport{ReleaseID: release, SourceName: release + ".csv", Source: src, ActionType: "notice",
			Subject: "Opening hours change", Body: "Our opening hours change on 1 April.", Actor: "ops"}
	}
	endless := &counted{}
	_, err := w.l.ImportAudience(w.ctx, in("endless", endless), unasked{t})
	if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "endless.csv") ||
		!strings.Contains(err.Error(), fmt.Sprintf("limit of %d bytes (64 MiB)", audiencefile.MaxBytes)) {
		t.Fatalf("an endless file: %v, want ErrInvalid naming it and the byte limit", err)
	}
	if endless.read > audiencefile.MaxBytes+1 {
		t.Fatalf("read %d bytes of an endless file, want at most %d", endless.read, audiencefile.MaxBytes+1)
	}

	var b strings.Builder
	b.WriteString("customer_id\n")
	for i := range audiencefile.MaxRows + 1 {
		fmt.Fprintf(&b, "r%d\n", i)
	}
	_, err = w.l.ImportAudience(w.ctx, in("long", strings.NewReader(b.String())), unasked{t})
	if !errors.Is(err, ledger.ErrInvalid) || !strings.Contains(err.Error(), "long.csv") ||
		!strings.Contains(err.Error(), fmt.Sprintf("more than %d rows", audiencefile.MaxRows)) {
		t.Fatalf("%d rows: %v, want ErrInvalid naming the file and the row limit", audiencefile.MaxRows+1, err)
	}
	for _, release := range []string{"endless", "long"} {
		if _, err := w.l.AudienceSummary(w.ctx, release); err == nil {
			t.Errorf("release %s was recorded", release)
		}
	}
}
