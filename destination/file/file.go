// Package file is a destination.Destination that delivers each message as one
// .eml file in a directory, and searches that directory by action key. The
// file holds the message as package mailrender renders it for SMTP too, and
// a message it cannot render is refused as permanent, as package smtp does. It
// lets workflows and tests run the whole gate, reconciliation included,
// without a mail server: the directory is the destination's own record.
package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/mail"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gatehouse/destination"
	"gatehouse/destination/mailrender"
	"gatehouse/internal/clock"
)

// DefaultFrom is the sender written when a message names none.
const DefaultFrom = "gatehouse@localhost"

// Destination writes messages into Dir, one file per attempt, named by the
// attempt's transport id. A file becomes visible only once complete, so
// Lookup never reads half a message.
type Destination struct {
	Dir string
	// Clock stamps the Date header and the receipt; the system clock when
	// nil.
	Clock clock.Clock
}

// SettleTime implements destination.Settler: 0. The commit point is a
// link in a local directory, atomic and done when Send returns; nothing
// holds a message after the executor.
func (d *Destination) SettleTime() time.Duration { return 0 }

var (
	_ destination.Settler     = (*Destination)(nil)
	_ destination.Destination = (*Destination)(nil)
	_ destination.Records     = (*Destination)(nil)
)

// Identity implements destination.Destination: file:// and the directory's
// absolute path.
func (d *Destination) Identity() string {
	dir, err := filepath.Abs(d.Dir)
	if err != nil {
		dir = filepath.Clean(d.Dir)
	}
	return "file://" + dir
}

// LookupEndpoint implements destination.Records: the directory is its own record.
func (d *Destination) LookupEndpoint() string { return "" }

// New returns a destination writing into dir, creating it if needed.
func New(dir string) (*Destination, error) {
	if dir == "" {
		return nil, errors.New("file destination: directory is empty")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("file destination %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("file destination %s: %w", dir, err)
	}
	return &Destination{Dir: abs}, nil
}

// FileName is the name of the file that holds the message of one attempt.
func FileName(transportID string) string {
	return strings.NewReplacer("/", "_", "\\", "_", "\x00", "_").Replace(transportID) + ".eml"
}

// Send writes msg as FileName(msg.TransportID). Writing the same attempt
// twice keeps the first file and reports acceptance, because that attempt's
// message is already there.
func (d *Destination) Send(ctx context.Context, msg destination.Message) (destination.Receipt, error) {
	if err := ctx.Err(); err != nil {
		return destination.Receipt{}, notDelivered(err)
	}
	now := d.now()
	m, err := mailrender.Render(msg, DefaultFrom, now)
	if err != nil {
		return destination.Receipt{}, err // permanent: the renderer decides that for every mail destination
	}
	final := filepath.Join(d.Dir, FileName(msg.TransportID))
	tmp, err := d.writeTemp(m.Raw)
	if err != nil {
		return destination.Receipt{}, notDelivered(err)
	}
	defer os.Remove(tmp)
	// The link is the commit point: not after the attempt's budget.
	if err := destination.MayCommit(ctx); err != nil {
		return destination.Receipt{}, notDelivered(err)
	}
	// A hard link publishes the complete file atomically and, unlike rename,
	// refuses to replace a message already delivered for this attempt.
	if err := os.Link(tmp, final); errors.Is(err, fs.ErrExist) {
		// A file already named for this attempt: its own message written
		// before (a retried Send), or something else under its name, which
		// is no acceptance at all but a contradiction for a person.
		if err := sameContent(final, msg); err != nil {
			return destination.Receipt{}, &destination.DeliveryError{Outcome: destination.OutcomeUnknown, Err: err}
		}
	} else if err != nil {
		return destination.Receipt{}, notDelivered(err)
	}
	if err := syncDir(d.Dir); err != nil {
		// The file is visible but may not survive a crash: the gate must not
		// assume either way.
		return destination.Receipt{}, &destination.DeliveryError{Outcome: destination.OutcomeUnknown, Err: err}
	}
	return destination.Receipt{TransportID: msg.TransportID, Response: "written " + final, At: now}, nil
}

func (d *Destination) now() time.Time {
	if d.Clock != nil {
		return d.Clock.Now()
	}
	return clock.System{}.Now()
}

func (d *Destination) writeTemp(body []byte) (string, error) {
	f, err := os.CreateTemp(d.Dir, ".incoming-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// sameContent checks that the file at path holds msg: its sender, subject
// and body as a reader sees them.
func sameContent(path string, msg destination.Message) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s already exists and cannot be read: %w", path, err)
	}
	d, err := mailrender.Decode(raw)
	if err != nil {
		return fmt.Errorf("%s already exists and cannot be read as a message: %w", path, err)
	}
	if mailrender.Digest(d) != destination.ContentDigest(msg.Subject, msg.Body) {
		return fmt.Errorf("%s already exists and holds other content than attempt %d of %s", path, msg.Attempt, msg.ActionKey)
	}
	return nil
}

func notDelivered(err error) error {
	return &destination.DeliveryError{Outcome: destination.OutcomeNotDelivered, Err: err}
}

// Lookup reports every message in Dir that carries the query's action key
// in its X-Gatehouse-Action-Key header or its Message-ID, oldest attempt
// first, with the sender and content digest mailrender.Decode reads from
// the file. A directory or file that cannot be read makes the lookup
// unavailable, never "absent". A matching file that cannot be decoded (not
// written by the gate, or altered) is still reported, with Sender and
// ContentDigest empty: it carries the attempt's key or Message-ID, so it is
// a contradiction for a person, and neither the attempt's own message nor
// evidence that nothing arrived.
func (d *Destination) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	entries, err := os.ReadDir(d.Dir)
	if err != nil {
		return destination.LookupResult{}, fmt.Errorf("%w: read %s: %v", destination.ErrLookupUnavailable, d.Dir, err)
	}
	var found []stored
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".eml") {
			continue
		}
		if err := ctx.Err(); err != nil {
			return destination.LookupResult{}, fmt.Errorf("%w: %v", destination.ErrLookupUnavailable, err)
		}
		s, ok, err := readMatching(filepath.Join(d.Dir, e.Name()), q)
		if err != nil {
			return destination.LookupResult{}, fmt.Errorf("%w: %v", destination.ErrLookupUnavailable, err)
		}
		if ok {
			found = append(found, s)
		}
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].attempt != found[j].attempt {
			return found[i].attempt < found[j].attempt
		}
		return found[i].messageID < found[j].messageID
	})
	var res destination.LookupResult
	for _, s := range found {
		res.Messages = append(res.Messages, destination.FoundMessage{MessageID: s.messageID, ActionKey: s.key, Recipients: s.to,
			Sender: s.sender, ContentDigest: s.digest})
	}
	return res, nil
}

// stored is what Lookup needs from one file.
type stored struct {
	key       string
	messageID string // without angle brackets
	to        []string
	attempt   int
	sender    string // "" when the file does not decode
	digest    string // "" when the file does not decode
}

// readMatching reads the header of the file at path and, when it carries
// q's action key or Message-ID, decodes the whole file (at most
// mailrender.MaxMessageOctets of it: Decode refuses a longer one anyway).
// ok is false for a file that does not match.
func readMatching(path string, q destination.LookupQuery) (s stored, ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return stored{}, false, err
	}
	defer f.Close()
	m, err := mail.ReadMessage(bufio.NewReader(f))
	if err != nil {
		return stored{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	n, _ := strconv.Atoi(m.Header.Get(destination.HeaderAttempt))
	s = stored{key: m.Header.Get(destination.HeaderActionKey), attempt: n,
		messageID: strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(m.Header.Get("Message-ID")), "<"), ">")}
	if s.key != q.ActionKey && (q.MessageID == "" || s.messageID != q.MessageID) {
		return stored{}, false, nil
	}
	if to, err := m.Header.AddressList("To"); err == nil {
		for _, a := range to {
			s.to = append(s.to, a.Address)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return stored{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, mailrender.MaxMessageOctets+1))
	if err != nil {
		return stored{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	if dec, err := mailrender.Decode(raw); err == nil {
		s.sender, s.digest = dec.From, mailrender.Digest(dec)
	}
	return s, true, nil
}
