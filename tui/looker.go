package tui

import (
	"context"
	"fmt"

	"gatehouse/ledger"
	"gatehouse/testmailbox"
)

// MailboxLooker reconciles against a test mailbox's HTTP API: it asks which
// messages carry an action key. It lets the inspector reconcile without an
// SMTP target, which an operator watching a ledger does not have.
type MailboxLooker struct {
	c *testmailbox.Client
}

var _ ledger.Looker = (*MailboxLooker)(nil)

// NewMailboxLooker returns a Looker for the mailbox API at apiURL
// (http://host:port).
func NewMailboxLooker(apiURL string) (*MailboxLooker, error) {
	c, err := testmailbox.NewClient(apiURL, nil)
	if err != nil {
		return nil, fmt.Errorf("mailbox api %s: %w", apiURL, err)
	}
	return &MailboxLooker{c: c}, nil
}

// Lookup implements ledger.Looker. The count is the mailbox's own total,
// never the length of a page.
func (m *MailboxLooker) Lookup(ctx context.Context, actionKey string) (ledger.LookupResult, error) {
	res, err := m.c.List(ctx, testmailbox.Filter{ActionKey: actionKey, Limit: testmailbox.MaxPageLimit})
	if err != nil {
		return ledger.LookupResult{}, fmt.Errorf("%w: %w", ledger.ErrLookupUnavailable, err)
	}
	out := ledger.LookupResult{Found: res.Total > 0, Count: res.Total}
	for _, msg := range res.Messages {
		out.MessageIDs = append(out.MessageIDs, msg.MessageID)
	}
	return out, nil
}
