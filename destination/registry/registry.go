// Package registry turns destination URLs into the gate's
// destinations, and recorded endpoints back into the records reconciliation
// may consult. It is the one place that knows every scheme:
//
//	file://DIR                       one .eml file per attempt in DIR (its own record)
//	smtp://[user:pass@]host:port     an SMTP server; credentials also from
//	                                 $GATEHOUSE_SMTP_USER / $GATEHOUSE_SMTP_PASSWORD
//	smtp://host:port?api=http://…    the same, whose records a test mailbox API holds
//	fake://OUTCOME                   keeps nothing, answers OUTCOME (accept when empty)
//	http(s)://host:port?dup=CONTROL  an HTTP API taking actions that are requests,
//	                                 under its duplicate control (destination.ParseProfile);
//	                                 its Authorization from $GATEHOUSE_HTTP_AUTHORIZATION
//
// Credentials are never part of an identity or an endpoint.
package registry

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"gatehouse/destination"
	"gatehouse/destination/fake"
	filedest "gatehouse/destination/file"
	"gatehouse/destination/httpdest"
	smtpdest "gatehouse/destination/smtp"
)

// Usage is the one-line description of the accepted URLs.
const Usage = "file://DIR, smtp://host:port[?api=http://host:port], http(s)://host:port?dup=idempotency-key|reference|none[&…] or fake://OUTCOME"

// FakeOutcomes are the answers a fake:// destination can be told to give,
// so a workflow can rehearse every result of a send without a server.
var FakeOutcomes = map[string]destination.Outcome{
	"accept":             destination.OutcomeAccepted,
	"unknown":            destination.OutcomeUnknown,
	"not-delivered":      destination.OutcomeNotDelivered,
	"rejected-temporary": destination.OutcomeRejectedTemporary,
	"rejected-permanent": destination.OutcomeRejectedPermanent,
}

// FakeOutcomeNames lists FakeOutcomes' names in a stable order.
func FakeOutcomeNames() []string {
	return []string{"accept", "unknown", "not-delivered", "rejected-temporary", "rejected-permanent"}
}

// ErrBadURL wraps every malformed destination URL.
var ErrBadURL = errors.New("bad destination")

func bad(raw, format string, a ...any) error {
	return fmt.Errorf("%w %q: %s", ErrBadURL, redact(raw), fmt.Sprintf(format, a...))
}

// scheme is what the registry does with one URL scheme: open a URL (the
// text after "://" is rest), and open a recorded endpoint again.
type scheme struct {
	open   func(raw, rest string) (destination.Destination, error)
	reopen func(ep destination.Endpoint, rest string) (destination.Destination, error)
	// parse is the endpoint a URL names without opening anything (nil:
	// what open makes, for schemes whose open touches nothing).
	parse func(raw, rest string) (destination.Endpoint, error)
}

var schemes = map[string]scheme{
	"file": {
		open: func(raw, rest string) (destination.Destination, error) {
			dir, err := fileDir(raw, rest)
			if err != nil {
				return nil, err
			}
			return filedest.New(dir)
		},
		reopen: func(_ destination.Endpoint, rest string) (destination.Destination, error) { return filedest.New(rest) },
		parse: func(raw, rest string) (destination.Endpoint, error) {
			// Parsing must not create the directory open would.
			dir, err := fileDir(raw, rest)
			if err != nil {
				return destination.Endpoint{}, err
			}
			return destination.EndpointOf(&filedest.Destination{Dir: dir}), nil
		},
	},
	"smtp": {
		open: func(raw, _ string) (destination.Destination, error) {
			d, err := smtpdest.New(raw)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
			}
			return d.Gate(), nil
		},
		reopen: func(ep destination.Endpoint, _ string) (destination.Destination, error) {
			d, err := smtpdest.Open(ep)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
			}
			return d.Gate(), nil
		},
	},
	"http":  httpScheme,
	"https": httpScheme,
	"fake": {
		open: openFake,
		reopen: func(ep destination.Endpoint, rest string) (destination.Destination, error) {
			return openFake(ep.Destination, rest)
		},
	},
}

var httpScheme = scheme{
	open: func(raw, _ string) (destination.Destination, error) {
		d, err := httpdest.New(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		return d, nil
	},
	reopen: func(ep destination.Endpoint, _ string) (destination.Destination, error) {
		d, err := httpdest.Open(ep)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		return d, nil
	},
}

// schemeOf is the scheme a URL or an identity names, and the rest of it.
func schemeOf(raw string) (scheme, string, error) {
	name, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return scheme{}, "", bad(raw, "want %s", Usage)
	}
	sc, ok := schemes[name]
	if !ok {
		return scheme{}, "", bad(raw, "unknown scheme %q (want file, smtp, http, https or fake)", name)
	}
	return sc, rest, nil
}

// Open returns the destination a URL names. A file:// directory is created
// if needed.
func Open(raw string) (destination.Destination, error) {
	sc, rest, err := schemeOf(raw)
	if err != nil {
		return nil, err
	}
	return sc.open(raw, rest)
}

// OpenEndpoint returns the destination of a recorded endpoint, with its
// records and the connection settings it kept: what a send that names no
// destination uses. It opens the endpoint's values as they are; nothing is
// turned back into a URL. Credentials, which endpoints never hold, come
// from the environment.
func OpenEndpoint(ep destination.Endpoint) (destination.Destination, error) {
	sc, rest, err := schemeOf(ep.Destination)
	if err != nil {
		return nil, err
	}
	return sc.reopen(ep, rest)
}

// Parse returns the endpoint a URL names (identity, records and connection
// settings) without opening anything or creating a directory.
func Parse(raw string) (destination.Endpoint, error) {
	sc, rest, err := schemeOf(raw)
	if err != nil {
		return destination.Endpoint{}, err
	}
	if sc.parse != nil {
		return sc.parse(raw, rest)
	}
	d, err := sc.open(raw, rest)
	if err != nil {
		return destination.Endpoint{}, err
	}
	return destination.EndpointOf(d), nil
}

// Records reaches the records of a recorded endpoint: the file directory
// (never created by looking), the test mailbox API an SMTP attempt recorded,
// or nothing for a destination without records (an SMTP server without an
// API, a fake, whose records died with the process that sent).
func Records() destination.RecordsOpener {
	return destination.RecordsOpenerFunc(func(ep destination.Endpoint) (destination.Records, error) {
		scheme, rest, _ := strings.Cut(ep.Destination, "://")
		switch scheme {
		case "file":
			// Searching must not create the directory: a mistyped path
			// would then look like a destination that provably holds nothing.
			return &filedest.Destination{Dir: rest}, nil
		case "http", "https":
			// Only a provider that keeps our reference can be searched;
			// an idempotency key without one, or none, leaves a person.
			d, err := httpdest.Open(ep)
			if err != nil || !d.Profile.HasReference() {
				return nil, err
			}
			return d, nil
		case "smtp":
			if ep.Lookup == "" {
				return nil, nil
			}
			d, err := smtpdest.Open(ep)
			if err != nil {
				return nil, err
			}
			if ld, ok := d.Looking(); ok {
				return ld, nil
			}
			return nil, nil
		}
		return nil, nil
	})
}

// fileDir is the directory of a file:// URL: file:///abs and file://rel
// both work, the text after // being the path.
func fileDir(raw, rest string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || rest == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", bad(raw, "want file://DIR (an absolute or relative directory path)")
	}
	abs, err := filepath.Abs(filepath.Clean(rest))
	if err != nil {
		return "", bad(raw, "%v", err)
	}
	return abs, nil
}

func openFake(raw, rest string) (destination.Destination, error) {
	if rest == "" {
		rest = "accept"
	}
	o, ok := FakeOutcomes[rest]
	if !ok {
		return nil, bad(raw, "fake outcome %q unknown (want %s)", rest, strings.Join(FakeOutcomeNames(), ", "))
	}
	d := fake.New()
	d.Name = "fake://" + rest
	d.Script(o)
	return fake.Blind{D: d}, nil
}

// redact hides a password in a URL for messages.
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return u.Redacted()
	}
	if i := strings.LastIndex(raw, "@"); i >= 0 {
		if j := strings.Index(raw, "://"); j >= 0 && j < i {
			return raw[:j+3] + "xxxxx" + raw[i:]
		}
	}
	return raw
}
