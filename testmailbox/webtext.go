package testmailbox

import (
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"strings"
)

// The message page shows a message as text, whatever it holds: any sender
// may write to the mailbox, so this reads leniently (unlike
// destination/mailrender, which accepts only the gate's own format) and
// says in a note what it could not read rather than refuse. An HTML body
// is shown as its source, never rendered.

// shownTextLimit bounds the text the page shows; the raw message has the rest.
const shownTextLimit = 1 << 20

// headerField is one field of a message's header section, in the order
// it came, its value unfolded and its encoded words decoded.
type headerField struct {
	Name, Value string
}

// readableMessage splits raw into its header fields and the text a reader
// would read, with notes on anything that is not shown as it is.
func readableMessage(raw []byte) (fields []headerField, text string, notes []string) {
	s := strings.ReplaceAll(string(raw), "\r\n", "\n")
	head, body, ok := strings.Cut(s, "\n\n")
	if strings.HasPrefix(s, "\n") {
		head, body, ok = "", s[1:], true
	}
	if !ok {
		notes = append(notes, "no blank line ends the header section: there is no body")
	}
	fields = headerFields(head)
	get := func(name string) string {
		for _, f := range fields {
			if strings.EqualFold(f.Name, name) {
				return f.Value
			}
		}
		return ""
	}
	b := readableBody(get("Content-Type"), get("Content-Transfer-Encoding"), body, 0)
	text = strings.ToValidUTF8(b.text, "\uFFFD")
	for _, n := range b.notes {
		notes = append(notes, strings.ToValidUTF8(n, "\uFFFD")) // a parser's error may quote the message
	}
	if len(text) > shownTextLimit {
		text = strings.ToValidUTF8(text[:shownTextLimit], "")
		notes = append(notes, fmt.Sprintf("the text is cut at %d bytes; the raw message has all of it", shownTextLimit))
	}
	return fields, text, notes
}

// headerFields reads a header section: a line that begins with white space
// continues the field before it; a line without a colon is kept, nameless.
func headerFields(head string) []headerField {
	var out []headerField
	var dec mime.WordDecoder
	for _, line := range strings.Split(head, "\n") {
		if line == "" {
			continue
		}
		if (line[0] == ' ' || line[0] == '\t') && len(out) > 0 {
			out[len(out)-1].Value += line
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			out = append(out, headerField{Name: "(not a field)", Value: line})
			continue
		}
		out = append(out, headerField{Name: name, Value: value})
	}
	for i := range out {
		v := strings.TrimSpace(out[i].Value)
		if d, err := dec.DecodeHeader(v); err == nil {
			v = d
		}
		out[i].Name = strings.ToValidUTF8(out[i].Name, "\uFFFD")
		out[i].Value = strings.ToValidUTF8(v, "\uFFFD")
	}
	return out
}

// bodyText is what a body or a part gives a reader: text (plain, or an
// HTML source when html), or none, and notes on how it was read.
type bodyText struct {
	text  string
	html  bool
	found bool
	notes []string
}

// readableBody reads a body of the given Content-Type and
// Content-Transfer-Encoding: a text/plain body decoded, an HTML one's
// source, a multipart's first plain part (else its first HTML one).
func readableBody(ctype, cte, body string, depth int) bodyText {
	mt, params := "text/plain", map[string]string{}
	if ctype != "" {
		var err error
		if mt, params, err = mime.ParseMediaType(ctype); err != nil {
			return bodyText{text: body, found: true, notes: []string{fmt.Sprintf("Content-Type %q does not parse (%v): the body is shown as received", ctype, err)}}
		}
	}
	switch {
	case strings.HasPrefix(mt, "multipart/"):
		return readableParts(mt, params["boundary"], body, depth)
	case mt == "text/plain", mt == "text/html":
		text, notes := decodeTransfer(cte, body)
		if cs := strings.ToLower(params["charset"]); cs != "" && cs != "utf-8" && cs != "us-ascii" {
			notes = append(notes, fmt.Sprintf("charset %s is shown as UTF-8 where it reads as such", cs))
		}
		if mt == "text/html" {
			notes = append(notes, "an HTML body: shown as its source, never rendered")
		}
		return bodyText{text: text, html: mt == "text/html", found: true, notes: notes}
	}
	return bodyText{notes: []string{fmt.Sprintf("a %s body is not text; the raw message has it", mt)}}
}

// readableParts reads a multipart body's first plain text, looking into
// nested multiparts, else its first HTML.
func readableParts(mt, boundary, body string, depth int) bodyText {
	asReceived := func(why string) bodyText {
		return bodyText{text: body, found: true, notes: []string{why + ": shown as received"}}
	}
	if boundary == "" || depth > 4 {
		return asReceived(mt + " without a boundary the page can read")
	}
	mr := multipart.NewReader(strings.NewReader(body), boundary)
	var html bodyText
	for n := 1; ; n++ {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		var b []byte
		if err == nil {
			b, err = io.ReadAll(io.LimitReader(p, DefaultMaxMessageBytes))
		}
		if err != nil {
			return asReceived(fmt.Sprintf("part %d of the %s body does not parse (%v)", n, mt, err))
		}
		part := readableBody(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), string(b), depth+1)
		part.notes = append([]string{fmt.Sprintf("part %d of a %s body", n, mt)}, part.notes...)
		switch {
		case part.found && !part.html:
			return part
		case part.found && !html.found:
			html = part
		}
	}
	if html.found {
		return html
	}
	return bodyText{notes: []string{"no part of the " + mt + " body is text; the raw message has every part"}}
}

// decodeTransfer undoes a Content-Transfer-Encoding; what does not decode
// is shown as received, with a note.
func decodeTransfer(cte, body string) (string, []string) {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "", "7bit", "8bit", "binary":
		return body, nil
	case "quoted-printable":
		b, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
		if err != nil {
			return body, []string{fmt.Sprintf("quoted-printable that does not decode (%v): shown as received", err)}
		}
		return strings.ReplaceAll(string(b), "\r\n", "\n"), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
		if err != nil {
			return body, []string{fmt.Sprintf("base64 that does not decode (%v): shown as received", err)}
		}
		return strings.ReplaceAll(string(b), "\r\n", "\n"), nil
	}
	return body, []string{fmt.Sprintf("Content-Transfer-Encoding %q is not one the page reads: shown as received", cte)}
}
