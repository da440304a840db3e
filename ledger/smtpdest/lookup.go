package smtpdest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"

	"gatehouse/ledger"
)

// lookupPage is how many records one query asks for; Lookup pages until it
// has read as many as the mailbox's total says exist.
const lookupPage = 1000

// mailboxPage is the part of the test mailbox's GET /api/v1/messages reply
// that Lookup needs. Declared here so the destination does not depend on the
// mailbox package, only on its HTTP contract.
type mailboxPage struct {
	Total    int `json:"total"`
	Messages []struct {
		MessageID string `json:"message_id"`
	} `json:"messages"`
}

// Lookup asks the test mailbox which messages carry actionKey, oldest first.
// Any failure to consult it (connection, status, malformed reply) wraps
// ledger.ErrLookupUnavailable, so that reconciliation holds the action
// instead of guessing.
func (d *LookingDestination) Lookup(ctx context.Context, actionKey string) (ledger.LookupResult, error) {
	var res ledger.LookupResult
	for {
		page, err := d.fetch(ctx, actionKey, len(res.MessageIDs))
		if err != nil {
			return ledger.LookupResult{}, fmt.Errorf("%w: look up %q at %s: %w", ledger.ErrLookupUnavailable, actionKey, d.api, err)
		}
		res.Count = page.Total
		for _, m := range page.Messages {
			res.MessageIDs = append(res.MessageIDs, m.MessageID)
		}
		if len(res.MessageIDs) >= page.Total || len(page.Messages) == 0 {
			break
		}
	}
	res.Found = res.Count > 0
	return res, nil
}

func (d *LookingDestination) fetch(ctx context.Context, key string, offset int) (mailboxPage, error) {
	u := *d.api
	u.Path = "/api/v1/messages"
	u.RawQuery = url.Values{
		"action_key": {key},
		"limit":      {strconv.Itoa(lookupPage)},
		"offset":     {strconv.Itoa(offset)},
	}.Encode()
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
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return mailboxPage{}, fmt.Errorf("decode reply: %w", err)
	}
	return page, nil
}

// parseAddress reads one address ("a@b" or "Name <a@b>") for a header.
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

// encodeSubject leaves an ASCII subject as it is and writes any other as
// RFC 2047 encoded words, which every mail reader decodes.
func encodeSubject(s string) string {
	return mime.QEncoding.Encode("utf-8", s)
}
