package testmailbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver

	"gatehouse/internal/mailaddr"
)

// schemaVersion is stored in PRAGMA user_version so that a mailbox file
// written by a later format is refused instead of misread. Version 2 added
// the store's epoch; version 3 files recipients by their identity
// (normAddr), and a file from before has its recipients filed again.
const schemaVersion = 3

const schema = `
CREATE TABLE IF NOT EXISTS messages (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	received_at INTEGER NOT NULL,
	mail_from   TEXT    NOT NULL,
	rcpt_to     TEXT    NOT NULL,
	subject     TEXT    NOT NULL,
	message_id  TEXT    NOT NULL,
	action_key  TEXT    NOT NULL,
	attempt     TEXT    NOT NULL,
	size        INTEGER NOT NULL,
	duplicate   INTEGER NOT NULL,
	raw         BLOB    NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_action_key ON messages(action_key);
CREATE INDEX IF NOT EXISTS messages_message_id ON messages(message_id);
CREATE TABLE IF NOT EXISTS recipients (
	msg  INTEGER NOT NULL,
	addr TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS recipients_addr ON recipients(addr, msg);
CREATE TABLE IF NOT EXISTS action_keys (
	key TEXT PRIMARY KEY
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS epoch (
	one   INTEGER PRIMARY KEY CHECK (one = 1),
	epoch TEXT    NOT NULL
);
`

// maxBatch bounds how many arrivals one commit carries, so that one slow
// commit cannot hold an unbounded number of SMTP replies.
const maxBatch = 256

// errStoreClosed is returned to sessions whose message could not be stored
// because the mailbox is shutting down.
var errStoreClosed = errors.New("testmailbox: store closed")

// arrival is one message as it arrives, before it has an id.
type arrival struct {
	from       string
	to         []string
	raw        []byte
	subject    string
	messageID  string
	actionKey  string
	attempt    string
	receivedAt time.Time
}

type storeResult struct {
	id        int64
	duplicate bool
	err       error
}

type storeRequest struct {
	a   *arrival
	res chan storeResult
}

// store keeps arrivals in SQLite. All writes go through one goroutine that
// commits arrivals in batches: SQLite has a single writer anyway, and one
// commit per batch instead of per message is what makes a flood cheap.
type store struct {
	write *sql.DB // one connection, used only by the writer goroutine and Clear
	read  *sql.DB // equals write for an in-memory mailbox
	// anchor keeps an in-memory mailbox's database alive (nil for a
	// file): database/sql discards a connection whose transaction's
	// context ends before it does (a reader that gave up), and with the
	// last connection to it gone a shared-cache database is gone too.
	anchor *sql.DB

	insKey, insMsg, insRcpt *sql.Stmt

	reqs chan storeRequest
	quit chan struct{}
	done chan struct{}

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever the contents change
}

// The epoch names one life of a store's contents: a new one is drawn when
// the store is created (every start, for an in-memory store) and when it is
// cleared. Whoever recorded the epoch at hand-over can tell a store that
// lost its memory from one that never received the message.

// openStore opens (creating if needed) the mailbox database at path, or a
// private in-memory database when path is empty.
func openStore(path string) (*store, error) {
	s := &store{
		reqs:    make(chan storeRequest, maxBatch),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	var err error
	if path == "" {
		// A unique name keeps parallel mailboxes apart; the single
		// connection that is never closed keeps the database alive.
		name := "testmailbox-" + randomHex(8)
		s.write, err = sql.Open("sqlite3", "file:"+name+"?mode=memory&cache=shared")
		if err != nil {
			return nil, fmt.Errorf("open in-memory mailbox: %w", err)
		}
		if s.anchor, err = sql.Open("sqlite3", "file:"+name+"?mode=memory&cache=shared"); err == nil {
			err = s.anchor.Ping() // opens the connection it keeps
		}
		if err != nil {
			s.write.Close()
			return nil, fmt.Errorf("open in-memory mailbox: %w", err)
		}
		s.anchor.SetMaxOpenConns(1)
		s.anchor.SetMaxIdleConns(1)
		s.anchor.SetConnMaxLifetime(0)
		s.anchor.SetConnMaxIdleTime(0)
		s.write.SetMaxOpenConns(1)
		s.write.SetMaxIdleConns(1)
		s.write.SetConnMaxLifetime(0)
		s.write.SetConnMaxIdleTime(0)
		s.read = s.write
	} else {
		// synchronous=NORMAL may lose the last commits on power loss; a
		// test mailbox trades that for ingest speed (the ledger does not).
		q := url.Values{}
		q.Set("_journal_mode", "WAL")
		q.Set("_synchronous", "NORMAL")
		q.Set("_busy_timeout", "5000")
		q.Set("_txlock", "immediate")
		s.write, err = sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
		if err != nil {
			return nil, fmt.Errorf("open mailbox %s: %w", path, err)
		}
		s.write.SetMaxOpenConns(1)
		s.write.SetMaxIdleConns(1)
		rq := url.Values{}
		rq.Set("_busy_timeout", "5000")
		rq.Set("_query_only", "true")
		s.read, err = sql.Open("sqlite3", "file:"+path+"?"+rq.Encode())
		if err != nil {
			s.write.Close()
			return nil, fmt.Errorf("open mailbox %s for reading: %w", path, err)
		}
		s.read.SetMaxOpenConns(4)
	}
	if err := s.migrate(); err != nil {
		s.closeDBs()
		return nil, err
	}
	if err := s.prepare(); err != nil {
		s.closeDBs()
		return nil, err
	}
	go s.run()
	return s, nil
}

func (s *store) migrate() error {
	var v int
	if err := s.write.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return fmt.Errorf("read mailbox schema version: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("mailbox schema version %d is newer than this program (%d)", v, schemaVersion)
	}
	if _, err := s.write.Exec(schema); err != nil {
		return fmt.Errorf("create mailbox schema: %w", err)
	}
	if v > 0 && v < 3 {
		if err := s.refileRecipients(); err != nil {
			return err
		}
	}
	// A store without an epoch is new (or older than epochs, and then
	// nobody can have recorded one of it).
	if _, err := s.write.Exec(`INSERT INTO epoch(one, epoch) VALUES (1, ?) ON CONFLICT(one) DO NOTHING`, newEpoch()); err != nil {
		return fmt.Errorf("record mailbox epoch: %w", err)
	}
	if _, err := s.write.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion)); err != nil {
		return fmt.Errorf("set mailbox schema version: %w", err)
	}
	return nil
}

// refileRecipients files every stored message's recipients again by
// normAddr, from the addresses the message was sent to (rcpt_to): a file
// written before recipients were filed by identity holds them trimmed and
// lower-cased, and a query by another spelling of an international
// address would miss them.
func (s *store) refileRecipients() error {
	tx, err := s.write.Begin()
	if err != nil {
		return fmt.Errorf("refile mailbox recipients: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.Query(`SELECT id, rcpt_to FROM messages`)
	if err != nil {
		return fmt.Errorf("refile mailbox recipients: %w", err)
	}
	type filed struct {
		id int64
		to []string
	}
	var all []filed
	for rows.Next() {
		var f filed
		var rcpts string
		if err := rows.Scan(&f.id, &rcpts); err != nil {
			rows.Close()
			return fmt.Errorf("refile mailbox recipients: %w", err)
		}
		if err := json.Unmarshal([]byte(rcpts), &f.to); err != nil {
			rows.Close()
			return fmt.Errorf("refile the recipients of message %d: %w", f.id, err)
		}
		all = append(all, f)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("refile mailbox recipients: %w", err)
	}
	if _, err := tx.Exec(`DELETE FROM recipients`); err != nil {
		return fmt.Errorf("refile mailbox recipients: %w", err)
	}
	for _, f := range all {
		for _, to := range f.to {
			if _, err := tx.Exec(`INSERT INTO recipients (msg, addr) VALUES (?, ?)`, f.id, normAddr(to)); err != nil {
				return fmt.Errorf("refile the recipients of message %d: %w", f.id, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("refile mailbox recipients: %w", err)
	}
	return nil
}

// newEpoch draws a fresh epoch id.
func newEpoch() string { return randomHex(8) }

// readEpoch reads the store's epoch through q (a transaction, so that it
// describes the same contents as the reads beside it).
func readEpoch(ctx context.Context, q querier) (string, error) {
	var e string
	if err := q.QueryRowContext(ctx, `SELECT epoch FROM epoch WHERE one = 1`).Scan(&e); err != nil {
		return "", fmt.Errorf("read mailbox epoch: %w", err)
	}
	return e, nil
}

// epoch returns the store's current epoch.
func (s *store) epoch(ctx context.Context) (string, error) { return readEpoch(ctx, s.read) }

// snapshot counts the messages matching f and, unless countOnly, lists the
// requested page, together with the epoch, all in one read transaction: a
// clear cannot slip between them, so an empty answer is never reported
// under the epoch of contents it no longer holds.
func (s *store) snapshot(ctx context.Context, f Filter, countOnly bool) (epoch string, total int, msgs []Message, err error) {
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return "", 0, nil, fmt.Errorf("read mailbox: %w", err)
	}
	defer tx.Rollback()
	if epoch, err = readEpoch(ctx, tx); err != nil {
		return "", 0, nil, err
	}
	if total, err = countIn(ctx, tx, f); err != nil {
		return "", 0, nil, err
	}
	msgs = []Message{}
	if !countOnly {
		if msgs, err = listIn(ctx, tx, f); err != nil {
			return "", 0, nil, err
		}
	}
	return epoch, total, msgs, nil
}

func (s *store) prepare() error {
	var err error
	if s.insKey, err = s.write.Prepare(`INSERT INTO action_keys(key) VALUES (?) ON CONFLICT(key) DO NOTHING`); err != nil {
		return fmt.Errorf("prepare action key insert: %w", err)
	}
	if s.insMsg, err = s.write.Prepare(`INSERT INTO messages
		(received_at, mail_from, rcpt_to, subject, message_id, action_key, attempt, size, duplicate, raw)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`); err != nil {
		return fmt.Errorf("prepare message insert: %w", err)
	}
	if s.insRcpt, err = s.write.Prepare(`INSERT INTO recipients(msg, addr) VALUES (?, ?)`); err != nil {
		return fmt.Errorf("prepare recipient insert: %w", err)
	}
	return nil
}

func (s *store) closeDBs() {
	for _, st := range []*sql.Stmt{s.insKey, s.insMsg, s.insRcpt} {
		if st != nil {
			st.Close()
		}
	}
	if s.read != s.write {
		s.read.Close()
	}
	s.write.Close()
	if s.anchor != nil {
		s.anchor.Close()
	}
}

// close stops the writer (arrivals still queued are answered with
// errStoreClosed) and closes the database.
func (s *store) close() {
	close(s.quit)
	<-s.done
	s.closeDBs()
}

// add stores one arrival and returns only once it is committed, so that the
// SMTP 250 that follows is a promise the message is on record.
func (s *store) add(a *arrival) (storeResult, error) {
	req := storeRequest{a: a, res: make(chan storeResult, 1)}
	select {
	case s.reqs <- req:
	case <-s.quit:
		return storeResult{}, errStoreClosed
	}
	select {
	case r := <-req.res:
		return r, r.err
	case <-s.done:
		// The writer may have answered just before it stopped.
		select {
		case r := <-req.res:
			return r, r.err
		default:
			return storeResult{}, errStoreClosed
		}
	}
}

// run is the single writer: it takes whatever arrivals are queued (up to
// maxBatch) and commits them in one transaction.
func (s *store) run() {
	defer close(s.done)
	batch := make([]storeRequest, 0, maxBatch)
	for {
		batch = batch[:0]
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		case <-s.quit:
			s.failQueued()
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		results, err := s.commit(batch)
		for i, r := range batch {
			if err != nil {
				r.res <- storeResult{err: err}
				continue
			}
			r.res <- results[i]
		}
		if err == nil {
			s.notify()
		}
	}
}

func (s *store) failQueued() {
	for {
		select {
		case r := <-s.reqs:
			r.res <- storeResult{err: errStoreClosed}
		default:
			return
		}
	}
}

// commit writes a batch atomically: either every arrival in it is stored or
// none is, so an error never leaves a partial message behind.
func (s *store) commit(batch []storeRequest) ([]storeResult, error) {
	ctx := context.Background()
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin store: %w", err)
	}
	defer tx.Rollback()
	insKey, insMsg, insRcpt := tx.Stmt(s.insKey), tx.Stmt(s.insMsg), tx.Stmt(s.insRcpt)
	results := make([]storeResult, len(batch))
	for i, r := range batch {
		a := r.a
		dup := false
		if a.actionKey != "" {
			res, err := insKey.Exec(a.actionKey)
			if err != nil {
				return nil, fmt.Errorf("record action key: %w", err)
			}
			n, _ := res.RowsAffected()
			dup = n == 0
		}
		rcpts, _ := json.Marshal(a.to)
		res, err := insMsg.Exec(a.receivedAt.UnixNano(), a.from, string(rcpts), a.subject,
			a.messageID, a.actionKey, a.attempt, len(a.raw), dup, a.raw)
		if err != nil {
			return nil, fmt.Errorf("insert message: %w", err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return nil, fmt.Errorf("message id: %w", err)
		}
		for _, to := range a.to {
			if _, err := insRcpt.Exec(id, normAddr(to)); err != nil {
				return nil, fmt.Errorf("insert recipient: %w", err)
			}
		}
		results[i] = storeResult{id: id, duplicate: dup}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit store: %w", err)
	}
	return results, nil
}

// notify wakes every waiter (WaitFor) after the contents changed.
func (s *store) notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// changes returns a channel that is closed at the next change. Take it before
// reading, so that a change between the read and the wait is not missed.
func (s *store) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// where renders a filter as SQL conditions.
func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	if f.To != "" {
		conds = append(conds, `id IN (SELECT msg FROM recipients WHERE addr = ?)`)
		args = append(args, normAddr(f.To))
	}
	if f.ActionKey != "" {
		conds = append(conds, `action_key = ?`)
		args = append(args, f.ActionKey)
	}
	if f.MessageID != "" {
		conds = append(conds, `message_id = ?`)
		args = append(args, normMessageID(f.MessageID))
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// querier is what the read helpers need: a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}

func (s *store) count(ctx context.Context, f Filter) (int, error) { return countIn(ctx, s.read, f) }

func countIn(ctx context.Context, q querier, f Filter) (int, error) {
	w, args := f.where()
	var n int
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages`+w, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count messages: %w", err)
	}
	return n, nil
}

const messageColumns = `id, received_at, mail_from, rcpt_to, subject, message_id, action_key, attempt, size, duplicate`

func (s *store) list(ctx context.Context, f Filter) ([]Message, error) { return listIn(ctx, s.read, f) }

func listIn(ctx context.Context, q querier, f Filter) ([]Message, error) {
	w, args := f.where()
	sq := `SELECT ` + messageColumns + ` FROM messages` + w + ` ORDER BY id`
	if f.Limit > 0 || f.Offset > 0 {
		limit := f.Limit
		if limit <= 0 {
			limit = -1 // SQLite: no limit
		}
		sq += ` LIMIT ? OFFSET ?`
		args = append(args, limit, f.Offset)
	}
	rows, err := q.QueryContext(ctx, sq, args...)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	defer rows.Close()
	msgs := []Message{}
	for rows.Next() {
		m, err := scanMessage(rows.Scan)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return msgs, nil
}

func (s *store) get(ctx context.Context, id int64) (Message, error) {
	var raw []byte
	row := s.read.QueryRowContext(ctx, `SELECT `+messageColumns+`, raw FROM messages WHERE id = ?`, id)
	m, err := scanMessage(func(dest ...any) error { return row.Scan(append(dest, &raw)...) })
	if errors.Is(err, sql.ErrNoRows) {
		return Message{}, fmt.Errorf("message %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Message{}, err
	}
	m.Raw = raw
	return m, nil
}

func scanMessage(scan func(dest ...any) error) (Message, error) {
	var m Message
	var at int64
	var rcpts string
	err := scan(&m.ID, &at, &m.From, &rcpts, &m.Subject, &m.MessageID, &m.ActionKey, &m.Attempt, &m.Size, &m.Duplicate)
	if err != nil {
		return Message{}, fmt.Errorf("read message: %w", err)
	}
	m.ReceivedAt = time.Unix(0, at).UTC()
	if err := json.Unmarshal([]byte(rcpts), &m.To); err != nil {
		return Message{}, fmt.Errorf("read recipients of message %d: %w", m.ID, err)
	}
	return m, nil
}

// clear deletes every message and forgets every action key, so that the next
// arrival of any key is a first arrival again, and begins a new epoch in the
// same transaction: an epoch recorded before the clear no longer matches.
func (s *store) clear(ctx context.Context) (int, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("clear mailbox: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM messages`)
	if err != nil {
		return 0, fmt.Errorf("clear messages: %w", err)
	}
	n, _ := res.RowsAffected()
	for _, q := range []string{`DELETE FROM recipients`, `DELETE FROM action_keys`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("clear mailbox: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE epoch SET epoch = ? WHERE one = 1`, newEpoch()); err != nil {
		return 0, fmt.Errorf("clear mailbox: new epoch: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("clear mailbox: %w", err)
	}
	s.notify()
	return int(n), nil
}

func (s *store) counts(ctx context.Context) (stored, duplicates, dupKeys int64, err error) {
	err = s.read.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(duplicate), 0),
		(SELECT COUNT(DISTINCT action_key) FROM messages WHERE duplicate = 1) FROM messages`).
		Scan(&stored, &duplicates, &dupKeys)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count stored messages: %w", err)
	}
	return stored, duplicates, dupKeys, nil
}

// normAddr is an address as the mailbox files and finds it: no angle
// brackets, then the gate's identity of the address (mailaddr.Key), so
// that every spelling of one mailbox (letter case, an international
// domain as U-label or A-label, NFD, fullwidth forms) is counted and
// queried as one.
func normAddr(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "<")
	s = strings.TrimSuffix(s, ">")
	return mailaddr.Key(s)
}

// normMessageID strips the angle brackets, so that "<x@y>" and "x@y" match.
func normMessageID(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "<")
	return strings.TrimSuffix(s, ">")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
