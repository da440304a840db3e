package ledger

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"strconv"
	"strings"
)

// keyPrefix versions the key format so that a later format can coexist.
const keyPrefix = "gh1"

// Key builds the action key of a business action from business facts only:
//
//	gh1:<customer>:<event>:<action type>:<target>:r<revision>
//
// for example gh1:cust-42:enquiry-1001:reply_ack:task-7:r0. The key is
// deterministic (the same facts give the same key in every process and on
// every retry), readable by an operator, and independent of the subject line,
// the content and any transport or request id. Revision 0 is the first
// message; a deliberate correction uses the next revision. Surrounding
// space is trimmed; ':' and '%' inside a part are percent-escaped so a part can
// never forge another part.
func Key(customer, event, actionType, target string, revision int) string {
	parts := []string{keyPrefix,
		escapeKeyPart(customer), escapeKeyPart(event),
		escapeKeyPart(actionType), escapeKeyPart(target),
		"r" + strconv.Itoa(revision)}
	return strings.Join(parts, ":")
}

// KeyParts are the business facts a key was built from.
type KeyParts struct {
	Customer   string
	Event      string
	ActionType string
	Target     string
	Revision   int
}

// Key rebuilds the key from its parts.
func (p KeyParts) Key() string {
	return Key(p.Customer, p.Event, p.ActionType, p.Target, p.Revision)
}

// ParseKey splits a key built by Key back into its parts and checks that none
// is empty.
func ParseKey(key string) (KeyParts, error) {
	fields := strings.Split(key, ":")
	if len(fields) != 6 || fields[0] != keyPrefix {
		return KeyParts{}, fmt.Errorf("action key %q: want %s:customer:event:type:target:rN", key, keyPrefix)
	}
	rev := strings.TrimPrefix(fields[5], "r")
	n, err := strconv.Atoi(rev)
	if err != nil || n < 0 || rev == fields[5] {
		return KeyParts{}, fmt.Errorf("action key %q: revision %q is not r0, r1, …", key, fields[5])
	}
	p := KeyParts{Revision: n}
	names := []string{"customer", "event", "action type", "target"}
	dst := []*string{&p.Customer, &p.Event, &p.ActionType, &p.Target}
	for i, f := range fields[1:5] {
		v := unescapeKeyPart(f)
		if v == "" {
			return KeyParts{}, fmt.Errorf("action key %q: %s is empty", key, names[i])
		}
		*dst[i] = v
	}
	return p, nil
}

func escapeKeyPart(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "%", "%25")
	return strings.ReplaceAll(s, ":", "%3A")
}

func unescapeKeyPart(s string) string {
	s = strings.ReplaceAll(s, "%3A", ":")
	return strings.ReplaceAll(s, "%25", "%")
}

// NewTransportID draws the transport id (used as Message-ID) of one attempt
// of an action made by the ledger named ledgerID: 96 random bits from
// crypto/rand, the attempt's number, and the ledger's name as the domain.
// Nothing about it can be computed from the action key, so a message that
// copies the key cannot also carry the id, and two ledgers (or two copies
// of one backup) never draw the same one. The intent records it before
// anything is handed over; it is evidence only because it was recorded.
func NewTransportID(ledgerID string, attempt int) string {
	var b [12]byte
	rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	if ledgerID == "" {
		ledgerID = "unnamed"
	}
	return fmt.Sprintf("gh-%s-a%d@%s.gatehouse.invalid", transportEncoding.EncodeToString(b[:]), attempt, ledgerID)
}

// transportEncoding spells the random part: 20 lower-case base32 letters,
// safe in a Message-ID's local part and in a file name.
var transportEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
