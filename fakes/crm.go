package fakes

import (
	"errors"
	"fmt"
	"sort"
	"sync"
)

// ErrSourceDown means a fake source system is unavailable right now, as a
// real CRM or helpdesk can be during an incident.
var ErrSourceDown = errors.New("source unavailable")

// ErrNoRecord means the source holds no record with that id.
var ErrNoRecord = errors.New("no such record")

// source is the part every fake source system shares: records of named
// fields that can change on cue, and an availability switch.
type source struct {
	name    string
	mu      sync.Mutex
	down    bool
	records map[string]map[string]string
}

func newSource(name string) source {
	return source{name: name, records: map[string]map[string]string{}}
}

// put replaces a whole record.
func (s *source) put(id string, fields map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := make(map[string]string, len(fields))
	for k, v := range fields {
		rec[k] = v
	}
	s.records[id] = rec
}

// read returns one field; it fails while the source is down so that callers
// see exactly what a workflow would see.
func (s *source) read(id, field string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return "", fmt.Errorf("%s: read %s.%s: %w", s.name, id, field, ErrSourceDown)
	}
	rec, ok := s.records[id]
	if !ok {
		return "", fmt.Errorf("%s: %s: %w", s.name, id, ErrNoRecord)
	}
	return rec[field], nil
}

// set changes one field. Changing a field works while the source is down:
// the change happens in the source system, only reading it fails.
func (s *source) set(id, field, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[id]
	if !ok {
		return fmt.Errorf("%s: %s: %w", s.name, id, ErrNoRecord)
	}
	rec[field] = value
	return nil
}

// SetAvailable brings the source up (true) or takes it down (false).
func (s *source) setAvailable(up bool) {
	s.mu.Lock()
	s.down = !up
	s.mu.Unlock()
}

func (s *source) available() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.down
}

// snapshot copies one record regardless of availability, for displays.
func (s *source) snapshot(id string) (map[string]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.records[id]
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(rec))
	for k, v := range rec {
		out[k] = v
	}
	return out, true
}

func (s *source) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.records))
	for id := range s.records {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// CRM is a fictional customer system: customers with an email address and
// material fields such as consent and order_state. It is safe for concurrent
// use; every read fails with ErrSourceDown while it is unavailable.
type CRM struct{ src source }

// NewCRM returns an empty, available CRM.
func NewCRM() *CRM { return &CRM{src: newSource("crm")} }

// Name is the source name material reads carry ("crm").
func (c *CRM) Name() string { return c.src.name }

// AddCustomer stores a customer with its email and fields (replacing any
// earlier record with the same id).
func (c *CRM) AddCustomer(id, email string, fields map[string]string) {
	rec := map[string]string{"email": email}
	for k, v := range fields {
		rec[k] = v
	}
	c.src.put(id, rec)
}

// Read returns one field of a customer ("email" included).
func (c *CRM) Read(customer, field string) (string, error) { return c.src.read(customer, field) }

// Set changes one field of a customer, as a colleague editing the CRM would.
func (c *CRM) Set(customer, field, value string) error { return c.src.set(customer, field, value) }

// SetAvailable takes the CRM down (false) or brings it back (true).
func (c *CRM) SetAvailable(up bool) { c.src.setAvailable(up) }

// Available reports whether reads currently succeed.
func (c *CRM) Available() bool { return c.src.available() }

// Customer returns a copy of a customer's fields even while the CRM is down
// (for displays, never for decisions).
func (c *CRM) Customer(id string) (map[string]string, bool) { return c.src.snapshot(id) }

// Customers lists customer ids in order.
func (c *CRM) Customers() []string { return c.src.ids() }
