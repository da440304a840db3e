package destination

import (
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DuplicateControl is what a provider offers to keep a write from taking
// effect twice, as an HTTP destination declares it.
type DuplicateControl string

// Duplicate controls.
const (
	// ControlIdempotencyKey: the provider stores the first result under a
	// key header for a window and answers it again for the same key and
	// body (Stripe, Adyen, PayPal, the IETF draft). It may have a
	// reference too, for after the window.
	ControlIdempotencyKey DuplicateControl = "idempotency-key"
	// ControlReference: no key, but the provider keeps a field of ours
	// in its record and can be searched by it, with a lag.
	ControlReference DuplicateControl = "reference"
	// ControlNone: nothing; an unknown outcome is a person's to establish.
	ControlNone DuplicateControl = "none"
)

// Profile is an HTTP destination's duplicate control: how reconciliation
// may establish what the provider did, and what its answers mean. It is
// part of what an approval binds (as the endpoint's Lookup), since another
// profile would reconcile differently.
type Profile struct {
	Control DuplicateControl
	// KeyHeader carries the provider-facing key (idempotency-key only).
	KeyHeader string
	// KeyMax is the longest key the provider takes.
	KeyMax int
	// Window is how long the provider keeps a key: within it, the same
	// bytes with the same key are answered from what it stored.
	Window time.Duration
	// Stores5xx: the provider stores a 5xx answer under the key (Stripe
	// stores whatever the endpoint answered once it started), so a retry
	// with that key answers the same 5xx for as long as the window lasts.
	Stores5xx bool
	// Ref is the JSON field of the body where the action key is written
	// and the provider keeps it ("metadata.gatehouse_key"); "" for none.
	Ref string
	// RefID is the field holding the provider-facing key, which tells the
	// gate's own write from anyone else's carrying the action key.
	RefID string
	// Search is the path of the lookup by Ref (GET, Ref as a query
	// parameter: metadata.gatehouse_key → metadata[gatehouse_key]).
	Search string
	// Lag is how long a record may take to become visible to Search.
	Lag time.Duration
	// IDField is the field of a 2xx answer (and of a found record) that
	// holds the provider's object id.
	IDField string
	// Settle is how long after an attempt's lease its write may still
	// appear: the search lag plus DefaultSettleTime unless declared.
	Settle time.Duration
}

// DefaultKeyHeader, DefaultWindow and DefaultKeyMax are an idempotency-key
// profile's when its URL names none (Stripe's: 24 h, 255 characters).
const (
	DefaultKeyHeader = "Idempotency-Key"
	DefaultWindow    = 24 * time.Hour
	DefaultKeyMax    = 255
)

// ProfileParams are the query parameters of an http(s):// destination URL
// that declare its duplicate control.
var ProfileParams = []string{"dup", "header", "window", "keymax", "stores5xx", "ref", "refid", "search", "lag", "id", "settle"}

// ParseProfile reads a duplicate control from a URL's query (or from the
// Lookup an endpoint recorded, which is Profile.String's encoding).
func ParseProfile(q url.Values) (Profile, error) {
	for k := range q {
		if !containsStr(ProfileParams, k) {
			return Profile{}, fmt.Errorf("unknown parameter %q (want %s)", k, strings.Join(ProfileParams, ", "))
		}
	}
	p := Profile{Control: DuplicateControl(q.Get("dup")), IDField: "id"}
	if p.Control == "" {
		return Profile{}, errors.New("declare the duplicate control: dup=idempotency-key, dup=reference or dup=none")
	}
	var err error
	dur := func(name string, def time.Duration) time.Duration {
		s := q.Get(name)
		if s == "" || err != nil {
			return def
		}
		d, perr := time.ParseDuration(s)
		if perr != nil || d < 0 {
			err = fmt.Errorf("%s=%q is not a duration", name, s)
		}
		return d
	}
	p.Lag = dur("lag", 0)
	p.Settle = dur("settle", -1)
	if v := q.Get("id"); v != "" {
		p.IDField = v
	}
	p.Ref, p.RefID, p.Search = q.Get("ref"), q.Get("refid"), q.Get("search")
	switch p.Control {
	case ControlIdempotencyKey:
		p.KeyHeader = textproto.CanonicalMIMEHeaderKey(q.Get("header"))
		if p.KeyHeader == "" {
			p.KeyHeader = DefaultKeyHeader
		}
		p.Window = dur("window", DefaultWindow)
		p.KeyMax = DefaultKeyMax
		if s := q.Get("keymax"); s != "" {
			if p.KeyMax, err = strconv.Atoi(s); err != nil || p.KeyMax < 16 {
				return Profile{}, fmt.Errorf("keymax=%q: want a number of characters ≥ 16", s)
			}
		}
		switch s := q.Get("stores5xx"); s {
		case "", "false", "0", "no":
		case "true", "1", "yes":
			p.Stores5xx = true
		default:
			return Profile{}, fmt.Errorf("stores5xx=%q: want true or false", s)
		}
	case ControlReference:
		if p.Ref == "" {
			return Profile{}, errors.New("dup=reference needs ref=FIELD (where the provider keeps our key) and search=PATH")
		}
	case ControlNone:
		if p.Ref != "" {
			return Profile{}, errors.New("dup=none keeps no reference; declare dup=reference")
		}
	default:
		return Profile{}, fmt.Errorf("dup=%q: want idempotency-key, reference or none", p.Control)
	}
	for _, k := range []string{"header", "window", "keymax", "stores5xx"} {
		if p.Control != ControlIdempotencyKey && q.Get(k) != "" {
			return Profile{}, fmt.Errorf("%s= belongs to dup=idempotency-key", k)
		}
	}
	if err != nil {
		return Profile{}, err
	}
	if p.Ref != "" {
		if p.Search == "" || !strings.HasPrefix(p.Search, "/") {
			return Profile{}, fmt.Errorf("ref=%s needs search=PATH (the provider's lookup, starting with /)", p.Ref)
		}
		if p.RefID == "" {
			// Beside the action key by default: metadata.gatehouse_key →
			// metadata.gatehouse_ref.
			i := strings.LastIndexByte(p.Ref, '.')
			if i < 0 {
				return Profile{}, fmt.Errorf("ref=%s: name refid=FIELD too (where the provider keeps the gate's key for the write)", p.Ref)
			}
			p.RefID = p.Ref[:i+1] + "gatehouse_ref"
		}
	} else if p.Search != "" || p.RefID != "" || p.Lag != 0 {
		return Profile{}, errors.New("search=, refid= and lag= need ref=")
	}
	if p.Settle < 0 {
		p.Settle = p.Lag + DefaultSettleTime
	}
	return p, nil
}

// ParseProfileString reads Profile.String's encoding.
func ParseProfileString(s string) (Profile, error) {
	q, err := url.ParseQuery(s)
	if err != nil {
		return Profile{}, fmt.Errorf("duplicate control %q: %w", s, err)
	}
	return ParseProfile(q)
}

// String is the profile in one canonical line, the way an endpoint
// records it (its Lookup): every parameter spelled out, in a fixed order.
func (p Profile) String() string {
	q := url.Values{}
	q.Set("dup", string(p.Control))
	if p.Control == ControlIdempotencyKey {
		q.Set("header", p.KeyHeader)
		q.Set("window", p.Window.String())
		q.Set("keymax", strconv.Itoa(p.KeyMax))
		q.Set("stores5xx", strconv.FormatBool(p.Stores5xx))
	}
	if p.Ref != "" {
		q.Set("ref", p.Ref)
		q.Set("refid", p.RefID)
		q.Set("search", p.Search)
		q.Set("lag", p.Lag.String())
	}
	q.Set("id", p.IDField)
	q.Set("settle", p.Settle.String())
	return q.Encode()
}

// HasKey reports whether the provider honours a key header.
func (p Profile) HasKey() bool { return p.Control == ControlIdempotencyKey }

// HasReference reports whether the provider's records can be searched.
func (p Profile) HasReference() bool { return p.Ref != "" }

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
