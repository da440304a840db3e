package mailrender

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"unicode/utf8"

	"gatehouse/destination"
	"gatehouse/internal/mailheader"
)

// ErrUndecodable marks a message Decode cannot read as the gate writes
// messages: too large, not one text/plain part, another charset or transfer
// encoding, or fields that readers could show in more than one way. Every
// error Decode returns wraps it.
var ErrUndecodable = errors.New("message cannot be decoded")

// Decoded is a stored message as a reader sees it: the fields that say
// which message it is and who sent it to whom, and its subject and body
// with every encoding undone.
type Decoded struct {
	MessageID string   // its Message-ID field without angle brackets ("" when absent)
	From      string   // the bare address of its one From mailbox
	To        []string // the bare addresses of its To field (none when absent)
	Subject   string   // encoded words decoded ("" when absent)
	Body      string   // transfer encoding undone, line endings LF
}

// Digest is the content digest of a decoded message: the
// destination.ContentDigest of its subject and body, which is what the
// gate approved when the message is the gate's own. Every backend that
// reads messages back computes it here, so they cannot disagree.
func Digest(d Decoded) string { return destination.ContentDigest(d.Subject, d.Body) }

// Decode reads a stored message (CRLF or LF line endings) and returns it as
// a reader sees it. It accepts exactly what a plain-text mail in the gate's
// own format may hold, and returns an error wrapping ErrUndecodable for
// anything else rather than guess at what a reader would show:
//
//   - the message is at most MaxMessageOctets long and its header section
//     parses (RFC 5322);
//   - From, To, Subject, Message-ID, Content-Type and
//     Content-Transfer-Encoding each appear at most once; From is present
//     and names exactly one mailbox; To, when present, parses as an
//     address list;
//   - the subject's encoded words (RFC 2047, Q or B) are whole
//     space-separated words in charset utf-8 or us-ascii; white space
//     between two adjacent encoded words is dropped, as RFC 2047 says; any
//     other word containing "=?" is refused, because lenient readers decode
//     encoded words inside words and strict ones do not;
//   - Content-Type is absent (text/plain; charset=us-ascii) or text/plain
//     with charset utf-8 or us-ascii (absent: us-ascii), and not
//     format=flowed with delsp=yes, which makes readers join words across
//     lines;
//   - Content-Transfer-Encoding is absent (7bit), 7bit, 8bit (the body as
//     stored), quoted-printable or base64;
//   - the decoded subject and body are valid in their charset: UTF-8, or
//     7-bit for us-ascii; subject text outside encoded words must be UTF-8
//     (RFC 6532).
//
// Display names in From and To are parsed by net/mail, only to find the
// addresses: they are not part of the digest.
func Decode(raw []byte) (Decoded, error) {
	d, err := decode(raw)
	if err != nil {
		return Decoded{}, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return d, nil
}

func decode(raw []byte) (Decoded, error) {
	if len(raw) > MaxMessageOctets {
		return Decoded{}, fmt.Errorf("%d octets, over the %d a message may have", len(raw), MaxMessageOctets)
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Decoded{}, fmt.Errorf("header section: %w", err)
	}
	h := m.Header
	for _, name := range []string{"From", "To", "Subject", mailheader.MessageID, "Content-Type", "Content-Transfer-Encoding"} {
		if n := len(h[textproto.CanonicalMIMEHeaderKey(name)]); n > 1 {
			return Decoded{}, fmt.Errorf("%d %s fields: readers differ on which one they show", n, name)
		}
	}
	var d Decoded
	d.MessageID = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(h.Get(mailheader.MessageID)), "<"), ">")
	from, err := h.AddressList("From")
	if err != nil {
		return Decoded{}, fmt.Errorf("From: %w", err)
	}
	if len(from) != 1 {
		return Decoded{}, fmt.Errorf("From names %d mailboxes, want one", len(from))
	}
	d.From = from[0].Address
	if h.Get("To") != "" {
		to, err := h.AddressList("To")
		if err != nil {
			return Decoded{}, fmt.Errorf("To: %w", err)
		}
		for _, a := range to {
			d.To = append(d.To, a.Address)
		}
	}
	if d.Subject, err = decodeHeaderText(h.Get("Subject")); err != nil {
		return Decoded{}, fmt.Errorf("Subject: %w", err)
	}
	charset, err := bodyCharset(h.Get("Content-Type"))
	if err != nil {
		return Decoded{}, fmt.Errorf("Content-Type: %w", err)
	}
	var r io.Reader = m.Body
	switch cte := strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding"))); cte {
	case "", "7bit", "8bit":
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	case "base64":
		// The standard decoder skips the line breaks base64 bodies carry
		// and refuses every other byte outside its alphabet.
		r = base64.NewDecoder(base64.StdEncoding, r)
	default:
		return Decoded{}, fmt.Errorf("Content-Transfer-Encoding %q is none of 7bit, 8bit, quoted-printable, base64", cte)
	}
	// No decoding makes a body longer than its encoded form, and raw is
	// bounded: neither can this read.
	body, err := io.ReadAll(r)
	if err != nil {
		return Decoded{}, fmt.Errorf("body: %w", err)
	}
	if err := inCharset(charset, body); err != nil {
		return Decoded{}, fmt.Errorf("body: %w", err)
	}
	d.Body = strings.ReplaceAll(string(body), "\r\n", "\n")
	return d, nil
}

// bodyCharset checks a Content-Type value and returns its charset, in
// lower case.
func bodyCharset(v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "us-ascii", nil // RFC 2045 §5.2
	}
	mt, params, err := mime.ParseMediaType(v)
	if err != nil {
		return "", err
	}
	if mt != "text/plain" {
		return "", fmt.Errorf("%s is not text/plain", mt)
	}
	if strings.EqualFold(params["format"], "flowed") && strings.EqualFold(params["delsp"], "yes") {
		return "", errors.New("format=flowed with delsp=yes joins words across lines (RFC 3676)")
	}
	cs := strings.ToLower(params["charset"])
	switch cs {
	case "":
		return "us-ascii", nil
	case "utf-8", "us-ascii":
		return cs, nil
	}
	return "", fmt.Errorf("charset %q is neither utf-8 nor us-ascii", params["charset"])
}

// inCharset checks that text is valid in a charset bodyCharset or an
// encoded word accepted.
func inCharset(charset string, text []byte) error {
	if charset == "us-ascii" {
		if i := bytes.IndexFunc(text, func(r rune) bool { return r >= utf8.RuneSelf }); i >= 0 {
			return fmt.Errorf("byte 0x%02X at %d is not us-ascii", text[i], i)
		}
		return nil
	}
	if !utf8.Valid(text) {
		return errors.New("not valid UTF-8")
	}
	return nil
}

// wordDecoder decodes one encoded word whose charset decodeHeaderText has
// already checked and renamed to utf-8, so that it hands back the bytes
// as sent for inCharset to judge; it knows no other charset.
var wordDecoder = &mime.WordDecoder{CharsetReader: func(charset string, _ io.Reader) (io.Reader, error) {
	return nil, fmt.Errorf("charset %q is neither utf-8 nor us-ascii", charset)
}}

// decodeHeaderText decodes an unstructured header value (RFC 5322 §3.2.5,
// already unfolded) with its encoded words, by the rules Decode lists.
func decodeHeaderText(v string) (string, error) {
	if !utf8.ValidString(v) {
		return "", errors.New("raw header text is not UTF-8")
	}
	var b strings.Builder
	space := ""           // white space seen since the last word
	afterEncoded := false // the last word was an encoded word
	for v != "" {
		if i := strings.IndexFunc(v, isHeaderSpace); i != 0 {
			if i < 0 {
				i = len(v)
			}
			word := v[:i]
			v = v[i:]
			text, encoded, err := decodeWord(word)
			if err != nil {
				return "", err
			}
			if !(encoded && afterEncoded) {
				b.WriteString(space)
			}
			b.WriteString(text)
			space, afterEncoded = "", encoded
			continue
		}
		n := len(v) - len(strings.TrimLeftFunc(v, isHeaderSpace))
		space += v[:n]
		v = v[n:]
	}
	b.WriteString(space)
	return b.String(), nil
}

func isHeaderSpace(r rune) bool { return r == ' ' || r == '\t' }

// decodeWord returns a word of header text as a reader sees it, and
// whether it was an encoded word.
func decodeWord(word string) (string, bool, error) {
	if !strings.Contains(word, "=?") {
		return word, false, nil
	}
	// An encoded word is "=?" charset "?" encoding "?" text "?=" with no
	// other "?" (RFC 2047 §2).
	inner, isPrefixed := strings.CutPrefix(word, "=?")
	inner, isSuffixed := strings.CutSuffix(inner, "?=")
	if !isPrefixed || !isSuffixed || strings.Count(word, "?") != 4 {
		return "", false, fmt.Errorf("word %q holds \"=?\" but is not one encoded word", clip(word))
	}
	charset, rest, _ := strings.Cut(inner, "?")
	cs := strings.ToLower(charset)
	if cs != "utf-8" && cs != "us-ascii" {
		return "", false, fmt.Errorf("encoded word in charset %q, neither utf-8 nor us-ascii", clip(charset))
	}
	text, err := wordDecoder.Decode("=?utf-8?" + rest + "?=")
	if err != nil {
		return "", false, fmt.Errorf("encoded word %q: %w", clip(word), err)
	}
	if err := inCharset(cs, []byte(text)); err != nil {
		return "", false, fmt.Errorf("encoded word %q: %w", clip(word), err)
	}
	return text, true, nil
}

// clip shortens what an error quotes from a message someone else may have
// written.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	n := 80
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
