package testmailbox

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// lockedBuffer collects the SMTP server's error log, written from its
// session goroutines, so the fuzz target can look for a recovered panic.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// FuzzSMTPData sends arbitrary bytes as the DATA of one message (headers and
// body alike) to a running mailbox over a real SMTP connection. The mailbox
// must never crash and must keep its all-or-nothing promise: a 250 means the
// whole message is stored, exactly as sent; any refusal means nothing is.
// Seeds: testdata/fuzz/FuzzSMTPData.
func FuzzSMTPData(f *testing.F) {
	f.Add([]byte(message("gh1:c:e:t:x:r0", "Hello")))
	f.Add([]byte("Subject: no blank line"))
	f.Add([]byte("not a header\r\n\r\nbody\r\n"))
	f.Add([]byte("Subject: =?utf-8?q?caf=C3=A9?=\r\n\r\n.\r\n..\r\n.hidden dot\r\n"))
	var errLog lockedBuffer
	// A small size limit makes the oversize path reachable by the fuzzer.
	m := start(f, Config{MaxMessageBytes: 8 << 10, ErrorLog: log.New(&errLog, "", 0)})
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		before, err := m.Count(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		sendErr := sendData(m.SMTPAddr(), data)
		after, err := m.Count(ctx, Filter{})
		if err != nil {
			t.Fatalf("mailbox stopped answering after %q: %v", data, err)
		}
		if strings.Contains(errLog.String(), "panic") {
			t.Fatalf("the SMTP server panicked on %q:\n%s", data, errLog.String())
		}
		if sendErr != nil {
			if after != before {
				t.Fatalf("refused (%v) but %d message(s) stored", sendErr, after-before)
			}
			return
		}
		if after != before+1 {
			t.Fatalf("accepted, but %d message(s) stored", after-before)
		}
		_, page, err := m.List(ctx, Filter{Limit: 1, Offset: after - 1})
		if err != nil || len(page) != 1 {
			t.Fatalf("list newest: %v %v", page, err)
		}
		got, err := m.Get(ctx, page[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := wireForm(data); !bytes.Equal(lineEnds(got.Raw), want) {
			t.Fatalf("stored message differs from what was sent\n input %q\n sent %q\nstored %q", data, want, got.Raw)
		}
	})
}

// sendData delivers data as one message on its own connection and returns
// the error of the final reply (or of any step before it).
func sendData(addr string, data []byte) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.CommandTimeout = 10 * time.Second
	c.SubmissionTimeout = 10 * time.Second
	if err := c.Mail("shop@example.com", nil); err != nil {
		return err
	}
	if err := c.Rcpt("ann@example.com", nil); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// wireForm is what a standard SMTP client means to deliver for data: data
// written through net/textproto's dot writer (which ends every line with
// CRLF, ends the last line and stuffs leading dots) and read back through
// its dot reader, which undoes the stuffing and writes line ends as LF.
func wireForm(data []byte) []byte {
	var wire bytes.Buffer
	bw := bufio.NewWriter(&wire)
	dw := textproto.NewWriter(bw).DotWriter()
	dw.Write(data)
	dw.Close()
	out, _ := io.ReadAll(textproto.NewReader(bufio.NewReader(&wire)).DotReader())
	return out
}

// lineEnds writes CRLF line ends as LF, as the dot reader does.
func lineEnds(b []byte) []byte {
	return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
}
