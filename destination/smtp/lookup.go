package smtp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"gatehouse/destination"
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
		MessageID *string  `json:"message_id"`
		ActionKey string   `json:"action_key"`
		To        []string `json:"to"`
	} `json:"messages"`
}

// Lookup asks the test mailbox for every message that carries the query's
// action key or its Message-ID, and reports the epoch of the store that
// answered. Any failure to consult it (connection, status, a reply without
// its total or its messages, pages from different epochs) wraps
// destination.ErrLookupUnavailable, so that reconciliation holds the action
// instead of guessing.
func (d *LookingDestination) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	seen := map[string]bool{}
	var res destination.LookupResult
	epochs := &epochTracker{}
	for _, filter := range []url.Values{{"action_key": {q.ActionKey}}, {"message_id": {q.MessageID}}} {
		if filter.Get("action_key") == "" && filter.Get("message_id") == "" {
			continue
		}
		found, err := d.lookupAll(ctx, filter, epochs)
		if err != nil {
			return destination.LookupResult{}, fmt.Errorf("%w: look up %s at %s: %w", destination.ErrLookupUnavailable, filter.Encode(), d.api, err)
		}
		for _, m := range found {
			// The mailbox's own record id would be better, but the
			// Message-ID and recipients identify a stored copy well enough
			// to merge the two queries.
			id := m.MessageID + "\x00" + m.ActionKey + "\x00" + strings.Join(m.Recipients, ",")
			if !seen[id] {
				seen[id] = true
				res.Messages = append(res.Messages, m)
			}
		}
	}
	res.Epoch = epochs.epoch
	return res, nil
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

func (d *LookingDestination) lookupAll(ctx context.Context, filter url.Values, epochs *epochTracker) ([]destination.FoundMessage, error) {
	var out []destination.FoundMessage
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
			out = append(out, destination.FoundMessage{MessageID: *m.MessageID, ActionKey: m.ActionKey, Recipients: m.To})
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
