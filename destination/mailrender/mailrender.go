// Package mailrender renders a gate message as the RFC 5322 text every mail
// destination hands over (an SMTP server, an .eml file), so that what a
// destination writes and what it refuses is decided once; and it reads a
// stored message back as a reader sees it (Decode, Digest), so that every
// mail destination's records describe a message's sender and content the
// same way.
//
// The body is declared UTF-8, the only encoding the gate accepts, and sent
// as 7bit or 8bit while every line fits SMTP's 998-octet limit; a body with a
// longer line is sent quoted-printable, which any mail reader decodes back
// to the same bytes.
package mailrender

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"gatehouse/destination"
	"gatehouse/internal/mailheader"
)

// MaxLineOctets is the longest line SMTP allows, without its CRLF
// (RFC 5321 §4.5.3.1.6).
const MaxLineOctets = 998

// MaxMessageOctets is the largest message Render produces and Decode reads.
// It leaves room for the largest body the gate accepts (10 MiB of UTF-8),
// which quoted-printable can grow threefold, plus its header; anything
// larger is no message of the gate's, and refusing it bounds what a record
// planted by someone else can make a reader allocate.
const MaxMessageOctets = 32 << 20

// Mail is a rendered message and its envelope.
type Mail struct {
	From string // bare envelope sender
	To   string // bare envelope recipient
	Raw  []byte // the message with CRLF line endings, ending in CRLF
}

// Render renders msg, stamped with date; a message that names no sender is
// from defaultFrom. Decode reads every message Render returns back to the
// same sender, subject and body (the same Digest). A message that cannot be
// rendered (no transport id, an address that does not parse, a header value
// with a line break, a subject, recipient name or body that is not UTF-8, a
// rendering over MaxMessageOctets) would fail the same way on every try, so
// the error is a *destination.DeliveryError with OutcomeRejectedPermanent:
// nothing was handed over and nothing should be retried.
func Render(msg destination.Message, defaultFrom string, date time.Time) (Mail, error) {
	m, err := render(msg, defaultFrom, date)
	if err != nil {
		return Mail{}, &destination.DeliveryError{Outcome: destination.OutcomeRejectedPermanent,
			Err: fmt.Errorf("render message %s: %w", msg.TransportID, err)}
	}
	return m, nil
}

func render(msg destination.Message, defaultFrom string, date time.Time) (Mail, error) {
	if msg.TransportID == "" {
		return Mail{}, errors.New("message has no transport id")
	}
	sender := msg.From
	if sender == "" {
		sender = defaultFrom
	}
	from, err := parseAddress("From", sender)
	if err != nil {
		return Mail{}, err
	}
	to, err := parseAddress("To", msg.To)
	if err != nil {
		return Mail{}, err
	}
	to.Name = msg.ToName
	headers := msg.Headers()
	for name, v := range headers {
		if strings.ContainsAny(v, "\r\n") {
			return Mail{}, fmt.Errorf("header %s contains a line break", name)
		}
	}
	if strings.ContainsAny(msg.Subject, "\r\n") || strings.ContainsAny(msg.ToName, "\r\n") {
		return Mail{}, errors.New("subject or recipient name contains a line break")
	}
	if !utf8.ValidString(msg.Body) {
		return Mail{}, errors.New("body is not UTF-8, the only charset it can be declared in")
	}
	if !utf8.ValidString(msg.Subject) || !utf8.ValidString(msg.ToName) {
		return Mail{}, errors.New("subject or recipient name is not UTF-8, the only charset it can be encoded in")
	}
	cte, body := encodeBody(msg.Body)

	var b bytes.Buffer
	b.Grow(len(body) + 1024)
	h := func(name, value string) { b.WriteString(fold(name, value) + "\r\n") }
	h("Date", date.Format(time.RFC1123Z))
	h("From", addressHeader(from))
	h("To", addressHeader(to))
	h("Subject", encodeSubject(msg.Subject))
	h(mailheader.MessageID, headers[mailheader.MessageID])
	delete(headers, mailheader.MessageID)
	names := make([]string, 0, len(headers))
	for name := range headers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		h(name, headers[name])
	}
	h("MIME-Version", "1.0")
	h("Content-Type", "text/plain; charset=utf-8")
	h("Content-Transfer-Encoding", cte)
	b.WriteString("\r\n")
	b.WriteString(body)
	if b.Len() > MaxMessageOctets {
		// Records could not read it back (Decode), so reconciliation could
		// never recognise it; no mail server takes that much anyway.
		return Mail{}, fmt.Errorf("rendered message is %d octets, over the %d records read back", b.Len(), MaxMessageOctets)
	}
	return Mail{From: from.Address, To: to.Address, Raw: b.Bytes()}, nil
}

// encodeSubject writes a subject as header text: as it is when it is
// printable ASCII, as encoded words otherwise. A printable subject holding
// "=?" is encoded too, because readers would decode a word of it that
// looks like an encoded word, and show (and digest) another subject.
func encodeSubject(s string) string {
	enc := mime.QEncoding.Encode("utf-8", s)
	if enc == s && strings.Contains(s, "=?") {
		return encodeLongWord(s)
	}
	return enc
}

// addressHeader writes an address as a header value: bare when it has no
// display name, as people and scripts reading the file expect.
func addressHeader(a *mail.Address) string {
	if a.Name == "" {
		return a.Address
	}
	s := a.String()
	for _, w := range strings.Split(s, " ") {
		if len(w) > longWord {
			// fold would cut this word into encoded words, which a quoted
			// display name may not hold and readers would then fail to
			// parse; a name written as encoded words is an RFC 2047 §5
			// phrase every reader takes.
			return encodeLongWord(a.Name) + " " + (&mail.Address{Address: a.Address}).String()
		}
	}
	return s
}

func parseAddress(field, s string) (*mail.Address, error) {
	if s == "" {
		return nil, fmt.Errorf("%s address is empty", field)
	}
	a, err := mail.ParseAddress(s)
	if err != nil {
		return nil, fmt.Errorf("%s address %q: %w", field, s, err)
	}
	return a, nil
}

// Header lines are folded at 78 octets where they have spaces, as RFC 5322
// §2.2.3 recommends; a word too long for a line is written as encoded
// words, which readers join back without the spaces between them.
const (
	foldAt       = 78
	longWord     = MaxLineOctets - 100 // leaves room for the field name
	encodedChunk = 45                  // bytes per base64 encoded word: 72 octets with its frame
)

// fold writes "name: value", breaking the line before a space wherever it
// would pass foldAt octets.
func fold(name, value string) string {
	var b strings.Builder
	b.WriteString(name + ":")
	lineLen, lineHasWord := b.Len(), false
	for _, w := range strings.Split(value, " ") {
		parts := []string{w}
		if len(w) > longWord {
			parts = strings.Split(encodeLongWord(w), " ")
		}
		for _, part := range parts {
			if part != "" && lineHasWord && lineLen+1+len(part) > foldAt {
				b.WriteString("\r\n")
				lineLen = 0
			}
			b.WriteString(" " + part)
			lineLen += 1 + len(part)
			lineHasWord = lineHasWord || part != ""
		}
	}
	return b.String()
}

// encodeLongWord writes a word as base64 encoded words of at most
// encodedChunk bytes each, cut on rune boundaries and separated by spaces.
func encodeLongWord(w string) string {
	var words []string
	for w != "" {
		n := min(encodedChunk, len(w))
		for n < len(w) && n > 1 && !utf8.RuneStart(w[n]) {
			n--
		}
		words = append(words, "=?utf-8?b?"+base64.StdEncoding.EncodeToString([]byte(w[:n]))+"?=")
		w = w[n:]
	}
	return strings.Join(words, " ")
}

// encodeBody returns the body with CRLF line endings, ending in one, and
// the transfer encoding it needs: 7bit or 8bit while every line fits,
// quoted-printable (whose lines are at most 76 octets) otherwise. A
// quoted-printable body that did not end in a line break ends in a soft
// one, so that it decodes to exactly the bytes given.
func encodeBody(body string) (cte, out string) {
	if crlfBody := crlf(body); longestLine(crlfBody) <= MaxLineOctets {
		body = crlfBody
		if isASCII(body) {
			return "7bit", body
		}
		return "8bit", body
	}
	body = strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\r", "\n")
	var b strings.Builder
	b.Grow(len(body) + len(body)/25)
	w := quotedprintable.NewWriter(&b)
	// Writes to a strings.Builder cannot fail.
	_, _ = w.Write([]byte(body))
	_ = w.Close()
	out = b.String()
	if !strings.HasSuffix(out, "\r\n") {
		out += "=\r\n"
	}
	return "quoted-printable", out
}

// crlf normalises line endings to CRLF and ends a non-empty body with one,
// as SMTP requires. Leading dots are escaped by the SMTP client's data
// writer, not here: a file holds the message as written.
func crlf(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return strings.ReplaceAll(s, "\n", "\r\n")
}

// longestLine is the length of the longest line of a CRLF text, without
// its CRLF.
func longestLine(s string) int {
	longest := 0
	for s != "" {
		line, rest, _ := strings.Cut(s, "\r\n")
		longest = max(longest, len(line))
		s = rest
	}
	return longest
}

// IsASCII reports whether s is 7-bit: an envelope address that is not
// needs SMTPUTF8.
func IsASCII(s string) bool { return isASCII(s) }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
