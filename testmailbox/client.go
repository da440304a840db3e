package testmailbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Client talks to a running mailbox's HTTP API (see Mailbox.Handler), for
// tools in another process such as the gatehouse CLI.
type Client struct {
	base  *url.URL
	http  *http.Client
	token string
}

// WithToken returns a copy of c that sends token with every call, as the
// mailbox requires for state-changing calls when it has an API token.
func (c *Client) WithToken(token string) *Client {
	cc := *c
	cc.token = token
	return &cc
}

// NewClient checks the API base URL (http://host:port) and returns a client.
// A nil hc uses http.DefaultClient.
func NewClient(apiURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, fmt.Errorf("mailbox api url %q: %w", apiURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("mailbox api url %q: scheme must be http or https", apiURL)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("mailbox api url %q: missing host:port", apiURL)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return nil, fmt.Errorf("mailbox api url %q: want only http://host:port", apiURL)
	}
	u.Path = ""
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{base: u, http: hc}, nil
}

// do sends one request and decodes a 2xx JSON reply into out; any other
// reply becomes an error carrying the API's own message.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	u := *c.base
	u.Path = path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("mailbox api: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("mailbox api: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("mailbox api %s %s: read reply: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorResponse
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("mailbox api %s %s: %s: %s", method, path, resp.Status, e.Error)
		}
		return fmt.Errorf("mailbox api %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("mailbox api %s %s: decode reply: %w", method, path, err)
	}
	return nil
}

// Get returns one stored message with its raw bytes, as Mailbox.Get does.
func (c *Client) Get(ctx context.Context, id int64) (Message, error) {
	var m Message
	path := "/api/v1/messages/" + strconv.FormatInt(id, 10)
	if err := c.do(ctx, http.MethodGet, path, nil, nil, &m); err != nil {
		return m, err
	}
	err := c.do(ctx, http.MethodGet, path+"/raw", nil, nil, &m.Raw)
	return m, err
}

func filterQuery(f Filter) url.Values {
	q := url.Values{}
	if f.To != "" {
		q.Set("to", f.To)
	}
	if f.ActionKey != "" {
		q.Set("action_key", f.ActionKey)
	}
	if f.MessageID != "" {
		q.Set("message_id", f.MessageID)
	}
	if f.Offset != 0 {
		q.Set("offset", strconv.Itoa(f.Offset))
	}
	q.Set("limit", strconv.Itoa(f.Limit))
	return q
}

// List returns the total of matches and one page (Limit 0 means the API's
// default page of DefaultPageLimit).
func (c *Client) List(ctx context.Context, f Filter) (MessagesResponse, error) {
	if f.Limit == 0 {
		f.Limit = DefaultPageLimit
	}
	var r MessagesResponse
	err := c.do(ctx, http.MethodGet, "/api/v1/messages", filterQuery(f), nil, &r)
	return r, err
}

// Epoch returns the store's current epoch (see Mailbox.Epoch).
func (c *Client) Epoch(ctx context.Context) (string, error) {
	var r MessagesResponse
	err := c.do(ctx, http.MethodGet, "/api/v1/messages", url.Values{"limit": {"0"}}, nil, &r)
	return r.Epoch, err
}

// Count returns how many stored messages match f.
func (c *Client) Count(ctx context.Context, f Filter) (int, error) {
	f.Limit, f.Offset = 0, 0
	var r MessagesResponse
	err := c.do(ctx, http.MethodGet, "/api/v1/messages", filterQuery(f), nil, &r)
	return r.Total, err
}

// Clear deletes every message and returns how many there were.
func (c *Client) Clear(ctx context.Context) (int, error) {
	var r struct {
		Deleted int `json:"deleted"`
	}
	err := c.do(ctx, http.MethodDelete, "/api/v1/messages", nil, nil, &r)
	return r.Deleted, err
}

// EndHolds ends every hold of a timed fault in force now (see
// Mailbox.EndHolds) and returns how many it ended.
func (c *Client) EndHolds(ctx context.Context) (int, error) {
	var r struct {
		Ended int `json:"ended"`
	}
	err := c.do(ctx, http.MethodDelete, "/api/v1/holds", nil, nil, &r)
	return r.Ended, err
}

// Stats returns the mailbox's counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	err := c.do(ctx, http.MethodGet, "/api/v1/stats", nil, nil, &s)
	return s, err
}

// Faults returns the faults in force.
func (c *Client) Faults(ctx context.Context) (FaultsResponse, error) {
	var r FaultsResponse
	err := c.do(ctx, http.MethodGet, "/api/v1/faults", nil, nil, &r)
	return r, err
}

// SetFaults replaces every fault (nil clears them).
func (c *Client) SetFaults(ctx context.Context, faults []Fault) (FaultsResponse, error) {
	if faults == nil {
		faults = []Fault{}
	}
	var r FaultsResponse
	err := c.do(ctx, http.MethodPut, "/api/v1/faults", nil, FaultsRequest{Faults: faults}, &r)
	return r, err
}
