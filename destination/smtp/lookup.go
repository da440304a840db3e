package smtp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"

	"gatehouse/destination"
	"gatehouse/destination/mailrender"
)

// lookupPage is how many records one query asks for; Lookup pages until it
// has read as many as the mailbox's total says exist.
const lookupPage = 1000

// mailboxPage is the part of the test mailbox's GET /api/v1/messages reply
// that Lookup needs. Declared here so the destination does not depend on the
// mailbox package, only on its HTTP contract. Pointers tell a missing field
// from a zero: a reply without total or messages was not an answer.
type mailboxPage struct {
	Epoch    string `json:"epoch"` // "" from a mailbox older than epochs
	Total    *int   `json:"total"`
	Messages *[]struct {
		ID        *int64   `json:"id"` // the mailbox's record id, what /raw is fetched by
		MessageID *string  `json:"message_id"`
		ActionKey string   `json:"action_key"`
		To        []string `json:"to"`
	} `json:"messages"`
}

// listed is one message a query listed: its record id and what the
// listing says of it.
type listed struct {
	id    int64
	found destination.FoundMessage
}

// Lookup asks the test mailbox for every message that carries the query's
// action key or its Message-ID, and reports the epoch of the store that
// answered. Any failure to consult it (connection, status, a reply without
// its total or its messages, pages from different epochs, a found
// message's raw form that cannot be read) wraps
// destination.ErrLookupUnavailable, so that reconciliation holds the action
// instead of guessing.
//
// Each found message's Sender and ContentDigest come from its raw form as
// stored (GET /api/v1/messages/{id}/raw, read through mailrender.Decode),
// never from the summary the listing gives, which the mailbox derives its
// own way (its from is the envelope sender). The two failures are told
// apart on purpose:
//
//   - a raw form that cannot be fetched or read in full is the records
//     being unavailable: reporting the message without its digest would
//     read as "another content" and could hide the attempt's own message,
//     so the whole lookup fails;
//   - a raw form that arrived but does not decode (not the gate's format,
//     hostile bytes, over mailrender.MaxMessageOctets) is an answer: the
//     message is reported with every other field and Sender and
//     ContentDigest "", so the ledger sees a message it cannot count as the
//     attempt's, a contradiction for a person, never absence.
//
// The epoch is read once more after the raw forms, so that a store cleared
// or restarted meanwhile (whose record ids may name other messages) makes
// the lookup unavailable too.
func (d *LookingDestination) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	seen := map[int64]bool{}
	var found []listed
	epochs := &epochTracker{}
	for _, filter := range []url.Values{{"action_key": {q.ActionKey}}, {"message_id": {q.MessageID}}} {
		if filter.Get("action_key") == "" && filter.Get("message_id") == "" {
			continue
		}
		page, err := d.lookupAll(ctx, filter, epochs)
		if err != nil {
			return destination.LookupResult{}, fmt.Errorf("%w: look up %s at %s: %w", destination.ErrLookupUnavailable, filter.Encode(), d.api, err)
		}
		for _, m := range page {
			// A message both queries list is one record; two records are
			// two messages even when their fields agree (a copy of the
			// attempt's Message-ID, key and recipient, with another body).
			if !seen[m.id] {
				seen[m.id] = true
				found = append(found, m)
			}
		}
	}
	res := destination.LookupResult{Epoch: epochs.epoch}
	for _, m := range found {
		raw, err := d.fetchRaw(ctx, m.id)
		if err != nil {
			return destination.LookupResult{}, fmt.Errorf("%w: fetch message %d from %s: %w", destination.ErrLookupUnavailable, m.id, d.api, err)
		}
		if dec, err := mailrender.Decode(raw); err == nil {
			m.found.Sender, m.found.ContentDigest = dec.From, mailrender.Digest(dec)
		}
		res.Messages = append(res.Messages, m.found)
	}
	if len(found) > 0 {
		page, err := d.fetch(ctx, url.Values{"limit": {"0"}}, 0)
		if err == nil {
			err = epochs.check(page.Epoch)
		}
		if err != nil {
			return destination.LookupResult{}, fmt.Errorf("%w: read the epoch of %s after the messages: %w", destination.ErrLookupUnavailable, d.api, err)
		}
	}
	return res, nil
}

// fetchRaw returns the raw form of the mailbox's record id, or an error
// when it could not be read in full or the reply is not a message. It
// reads at most one octet more than mailrender.MaxMessageOctets: Decode
// refuses anything longer, so the rest would only cost memory.
func (d *LookingDestination) fetchRaw(ctx context.Context, id int64) ([]byte, error) {
	u := *d.api
	u.Path = "/api/v1/messages/" + strconv.FormatInt(id, 10) + "/raw"
	u.RawQuery = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.cfg.httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("%s: %s", resp.Status, b)
	}
	// Anything but a message is no answer to "the raw form of record id"
	// (a proxy's page, another API): it says nothing of what is stored.
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != "message/rfc822" {
		return nil, fmt.Errorf("the reply is %q, not message/rfc822: not a test mailbox answer", resp.Header.Get("Content-Type"))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, mailrender.MaxMessageOctets+1))
	if err != nil {
		return nil, fmt.Errorf("read the raw message: %w", err)
	}
	return raw, nil
}

// Epoch implements destination.EpochReporter: the mailbox store's current epoch,
// read with a count-only query.
func (d *LookingDestination) Epoch(ctx context.Context) (string, error) {
	page, err := d.fetch(ctx, url.Values{"limit": {"0"}}, 0)
	if err != nil {
		return "", fmt.Errorf("read the epoch of %s: %w", d.api, err)
	}
	return page.Epoch, nil
}

// epochTracker checks that every page of one lookup came from the same life
// of the store: a clear between two pages would splice two stores into one
// answer.
type epochTracker struct {
	epoch string
	seen  bool
}

func (e *epochTracker) check(epoch string) error {
	if e.seen && epoch != e.epoch {
		return fmt.Errorf("the store changed epoch from %q to %q during the lookup (cleared meanwhile)", e.epoch, epoch)
	}
	e.epoch, e.seen = epoch, true
	return nil
}

func (d *LookingDestination) lookupAll(ctx context.Context, filter url.Values, epochs *epochTracker) ([]listed, error) {
	var out []listed
	for {
		page, err := d.fetch(ctx, filter, len(out))
		if err != nil {
			return nil, err
		}
		if err := epochs.check(page.Epoch); err != nil {
			return nil, err
		}
		for _, m := range *page.Messages {
			if m.MessageID == nil {
				return nil, errors.New("reply lists a message without message_id")
			}
			if m.ID == nil {
				return nil, errors.New("reply lists a message without id")
			}
			out = append(out, listed{id: *m.ID, found: destination.FoundMessage{MessageID: *m.MessageID, ActionKey: m.ActionKey, Recipients: m.To}})
		}
		if len(out) >= *page.Total {
			return out, nil
		}
		if len(*page.Messages) == 0 {
			return nil, fmt.Errorf("reply says %d messages but the pages ended after %d", *page.Total, len(out))
		}
	}
}

func (d *LookingDestination) fetch(ctx context.Context, filter url.Values, offset int) (mailboxPage, error) {
	u := *d.api
	u.Path = "/api/v1/messages"
	q := url.Values{"limit": {strconv.Itoa(lookupPage)}}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	for k, v := range filter {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return mailboxPage{}, err
	}
	resp, err := d.cfg.httpClient.Do(req)
	if err != nil {
		return mailboxPage{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return mailboxPage{}, fmt.Errorf("%s: %s", resp.Status, b)
	}
	var page mailboxPage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&page); err != nil {
		return mailboxPage{}, fmt.Errorf("decode reply: %w", err)
	}
	if page.Total == nil || page.Messages == nil {
		return mailboxPage{}, errors.New("the reply has no total or no messages: not a test mailbox answer")
	}
	if *page.Total < 0 {
		return mailboxPage{}, fmt.Errorf("the reply says total %d", *page.Total)
	}
	return page, nil
}
