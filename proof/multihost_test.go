package proof_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
	"gatehouse/proof"
	"gatehouse/testmailbox"
)

// testNet is a bridge in this machine's network namespace and one network
// namespace per test host, each with its own address on the bridge: hosts
// as far as the network is concerned.
type testNet struct {
	t      *testing.T
	id     string // a short random tag in every name, so runs never collide
	prefix string // e.g. "10.213.42"
	bridge string
	hosts  []*testHost
}

type testHost struct {
	name, ns, veth, ip string
}

// gatewayIP is the bridge's address: where the hosts reach the ledger's
// server and the mailbox.
func (n *testNet) gatewayIP() string { return n.prefix + ".1" }

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// newTestNet makes hosts test hosts, or skips where network namespaces
// cannot be made (not root, no ip command).
func newTestNet(t *testing.T, hosts int) *testNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING the multi-host proof: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("SKIPPING the multi-host proof: no ip command (iproute2)")
	}
	b := make([]byte, 3)
	rand.Read(b)
	n := &testNet{t: t, id: hex.EncodeToString(b)[:5], prefix: fmt.Sprintf("10.213.%d", 2+int(b[2])%250)}
	n.bridge = "ghb" + n.id
	t.Cleanup(n.remove)
	if err := ipCmd("link", "add", "name", n.bridge, "type", "bridge"); err != nil {
		t.Skipf("SKIPPING the multi-host proof: %v", err)
	}
	for _, args := range [][]string{{"addr", "add", n.gatewayIP() + "/24", "dev", n.bridge}, {"link", "set", n.bridge, "up"}} {
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	for i := range hosts {
		h := &testHost{name: string(rune('a' + i)), ns: fmt.Sprintf("gh%s%c", n.id, 'a'+i),
			veth: fmt.Sprintf("ghv%s%c", n.id, 'a'+i), ip: fmt.Sprintf("%s.%d", n.prefix, 10+i)}
		peer := h.veth + "p"
		for _, args := range [][]string{
			{"netns", "add", h.ns},
			{"link", "add", h.veth, "type", "veth", "peer", "name", peer},
			{"link", "set", peer, "netns", h.ns},
			{"link", "set", h.veth, "master", n.bridge},
			{"link", "set", h.veth, "up"},
			{"netns", "exec", h.ns, "ip", "addr", "add", h.ip + "/24", "dev", peer},
			{"netns", "exec", h.ns, "ip", "link", "set", peer, "up"},
			{"netns", "exec", h.ns, "ip", "link", "set", "lo", "up"},
		} {
			if err := ipCmd(args...); err != nil {
				t.Fatal(err)
			}
		}
		n.hosts = append(n.hosts, h)
	}
	return n
}

// remove deletes every namespace and link the net made.
func (n *testNet) remove() {
	for _, h := range n.hosts {
		ipCmd("netns", "del", h.ns) // takes its end of the veth pair, and so the pair
	}
	ipCmd("link", "del", n.bridge)
}

// partition cuts a host off the network; heal joins it again.
func (n *testNet) partition(h *testHost) error { return ipCmd("link", "set", h.veth, "down") }
func (n *testNet) heal(h *testHost) error      { return ipCmd("link", "set", h.veth, "up") }

// gate runs `gatehouse gate ARGS` on host h.
func (h *testHost) gate(bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.ns, bin, "gate"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

func exitOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestMultiHost runs real gatehouse executors on two hosts (network
// namespaces with their own addresses) against one PostgreSQL ledger and one
// mailbox reached over that network, with short leases:
//   - both hosts race to send the same keys: each key is sent once;
//   - a host is cut off after the mailbox stored its message (its reply held
//     back), so its attempt can only end unknown once its lease lapses by
//     the server's clock; the other host reconciles it as sent;
//   - a host's executor is killed at the same point; the other host
//     reconciles it.
//
// The checker (arrivals by the Message-IDs the attempts recorded) must find
// no duplicate, no loss and no contradiction.
func TestMultiHost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts PostgreSQL")
	}
	n := newTestNet(t, 2)
	a, b := n.hosts[0], n.hosts[1]
	gw := n.gatewayIP()
	cluster := pgtest.StartCluster(t, pgtest.Options{Listen: gw, TrustNet: n.prefix + ".0/24"})
	loc := cluster.CreateDatabase(t, gw)
	ctx := context.Background()
	mb, err := testmailbox.Start(ctx, testmailbox.Config{SMTPAddr: gw + ":0", HTTPAddr: gw + ":0", AllowRemote: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	// The test mailbox stores a message before it answers: nothing lands
	// late, so a short settle time serves.
	sd, err := smtpdest.New(mb.Target() + "&settle=500ms")
	if err != nil {
		t.Fatal(err)
	}
	dest := sd.Gate()
	bin := buildGatehouse(t)
	env := []string{"GATEHOUSE_LEDGER=" + loc, "GATEHOUSE_LEASE=4s"}

	l, err := ledger.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Claim(ctx, ledger.TaskRef{ID: "task-1", Customer: "c"}, "wf"); err != nil {
		t.Fatal(err)
	}
	approve := func(event string) string {
		ep := destination.EndpointOf(dest)
		p := ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c", Event: event, ActionType: "reply_ack",
			Target: "task-1", Recipient: event + "@example.org", Subject: "Hello", Body: "We are on it.", Actor: "wf",
			Destination: ep.Destination, Lookup: ep.Lookup, DestinationSettings: ep.Settings, Settle: &ep.Settle}
		act, err := l.Propose(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Approve(ctx, act.Key, "lead", consentYes); err != nil {
			t.Fatal(err)
		}
		return act.Key
	}
	send := []string{"send", "--as", "wf", "--material", "crm.consent=yes", "--key"}

	// Both hosts race on the same keys.
	const raced = 6
	for i := range raced {
		key := approve(fmt.Sprintf("race-%d", i))
		var wg sync.WaitGroup
		codes := make([]int, 2)
		for j, h := range []*testHost{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := h.gate(bin, env, append(send, key)...).CombinedOutput()
				codes[j] = exitOf(err)
				if codes[j] != 0 && codes[j] != 10 && codes[j] != 11 {
					t.Errorf("host %s: exit %d: %s", h.name, codes[j], out)
				}
			}()
		}
		wg.Wait()
		if (codes[0] == 0) == (codes[1] == 0) {
			t.Errorf("key %s: exits %v, want exactly one host to send", key, codes)
		}
	}

	// A host is cut off, or its executor killed, after the mailbox stored
	// its message; the other host reconciles once the lease lapses.
	for _, how := range []string{"partition", "kill"} {
		key := approve(how)
		if err := mb.AddFault(testmailbox.Fault{Kind: testmailbox.FaultDelayReply, Duration: 30 * time.Second, Count: 1}); err != nil {
			t.Fatal(err)
		}
		cmd := a.gate(bin, env, append(send, key)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, err := mb.WaitFor(waitCtx, testmailbox.Filter{ActionKey: key}, 1)
		cancel()
		if err != nil {
			t.Fatalf("%s: the mailbox never stored host a's message: %v", how, err)
		}
		if how == "partition" {
			if err := n.partition(a); err != nil {
				t.Fatal(err)
			}
		} else {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		state := reconcileUntilSettled(t, b, bin, env, key)
		if state != "sent" {
			t.Fatalf("%s: host b left %s %s, want sent", how, key, state)
		}
		if how == "partition" {
			if err := n.heal(a); err != nil {
				t.Fatal(err)
			}
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		cmd.Wait()
		mb.ClearFaults()
	}

	// Kills at the send's other step boundaries on host a; host b finishes.
	boundaryKills := killAtStepBoundaries(t, ctx, loc, mb, a, b, bin, env, l)

	v, err := proof.CheckByMessageID(ctx, l, mb)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("multi-host proof: hosts %d, keys raced %d (each by both hosts), partitions 1, kills %d (after the mailbox stored, %s); %s",
		len(n.hosts), raced, 1+len(boundaryKills), strings.Join(boundaryKills, ", "), v)
	if want := raced + 2 + len(boundaryKills); !v.OK() || v.Sent != want || v.Arrivals != want {
		t.Fatalf("%s\n%s", v, v.Summary())
	}
}

// reconcileUntilSettled asks host h to reconcile key until the action is
// settled (its lease and the destination's settle time must lapse first,
// by the server's clock), and returns its state; it gives up after a
// bound.
func reconcileUntilSettled(t *testing.T, h *testHost, bin string, env []string, key string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		h.gate(bin, env, "reconcile", "--key", key, "--as", "ops").Run()
		out, err := h.gate(bin, env, "show", "--key", key, "--json").Output()
		if err != nil {
			t.Fatalf("show on host %s: %v", h.name, err)
		}
		var v struct {
			Action struct {
				State string `json:"state"`
				Cause string `json:"hold_cause"`
			} `json:"action"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("show: %v: %s", err, out)
		}
		if v.Action.State != "executing" && v.Action.State != "unknown" && v.Action.Cause != string(ledger.HoldNotFoundYet) {
			return v.Action.State
		}
		if time.Now().After(deadline) {
			return v.Action.State
		}
		time.Sleep(300 * time.Millisecond) // the lease runs by the server's clock: poll it
	}
}

// killAtStepBoundaries kills host a's executor at the step boundaries of a
// send that the mailbox-stored kill above does not reach, and has host b
// finish each action:
//   - before the intent: the test holds the ledger's decision lock, so a's
//     send waits to record its attempt; a is killed while it waits, nothing
//     of it is recorded, and b sends;
//   - intent recorded, nothing handed over: the destination is a relay the
//     test freezes, so a's attempt is durable and its SMTP session open but
//     silent; a is killed, b's recovery finds its executor gone, b's
//     reconcile finds no such message (held as safe to retry), a person
//     releases the hold and b sends.
//
// It returns the names of the boundaries it killed at.
func killAtStepBoundaries(t *testing.T, ctx context.Context, loc string, mb *testmailbox.Mailbox, a, b *testHost,
	bin string, env []string, l *ledger.Ledger) []string {
	t.Helper()
	db, err := sql.Open("pgx", loc)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	relay := newFreezingRelay(t, mb.SMTPAddr())
	sd, err := smtpdest.New(strings.Replace(mb.Target(), mb.SMTPAddr(), relay.addr(), 1) + "&settle=500ms")
	if err != nil {
		t.Fatal(err)
	}
	ep := destination.EndpointOf(sd.Gate())
	send := []string{"send", "--as", "wf", "--material", "crm.consent=yes", "--key"}
	var done []string
	for _, boundary := range []string{"before the intent", "intent recorded"} {
		event := strings.ReplaceAll(boundary, " ", "-")
		act, err := l.Propose(ctx, ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c", Event: event, ActionType: "reply_ack",
			Target: "task-1", Recipient: event + "@example.org", Subject: "Hello", Body: "We are on it.", Actor: "wf",
			Destination: ep.Destination, Lookup: ep.Lookup, DestinationSettings: ep.Settings, Settle: &ep.Settle})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Approve(ctx, act.Key, "lead", consentYes); err != nil {
			t.Fatal(err)
		}
		var lock *sql.Conn
		if boundary == "before the intent" {
			if lock, err = db.Conn(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := lock.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, decisionLockKey); err != nil {
				t.Fatal(err)
			}
		} else {
			relay.freeze()
		}
		cmd := a.gate(bin, env, append(send, act.Key)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if boundary == "before the intent" {
			awaitCount(t, db, boundary, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)
		} else {
			awaitCount(t, db, boundary, `SELECT count(*) FROM attempts WHERE action_key = '`+act.Key+`' AND outcome = ''`)
			for relay.held() == 0 {
				awaitCount(t, db, boundary, `SELECT 1`) // a's session reaches the relay just after its intent
			}
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if lock != nil {
			if _, err := lock.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, decisionLockKey); err != nil {
				t.Fatal(err)
			}
			lock.Close()
			var attempts int
			if err := db.QueryRowContext(ctx, `SELECT count(*) FROM attempts WHERE action_key = $1`, act.Key).Scan(&attempts); err != nil || attempts != 0 {
				t.Fatalf("%s: %d attempts recorded by the killed host (%v), want 0", boundary, attempts, err)
			}
		} else {
			relay.thaw()
			// Nothing arrived: the gate holds the action as safe to retry,
			// and a person on host b lets it go.
			if state := reconcileUntilSettled(t, b, bin, env, act.Key); state != "held" {
				out, _ := b.gate(bin, env, "show", "--key", act.Key).CombinedOutput()
				t.Fatalf("%s: after host b's reconcile %s is %s, want held as safe to retry (nothing was handed over)\n%s", boundary, act.Key, state, out)
			}
			if out, err := b.gate(bin, env, "release-hold", "--key", act.Key, "--as", "lead",
				"--reason", "the mailbox has no such message").CombinedOutput(); err != nil {
				t.Fatalf("%s: host b's release-hold: %v: %s", boundary, err, out)
			}
		}
		if out, err := b.gate(bin, env, append(send, act.Key)...).CombinedOutput(); err != nil {
			t.Fatalf("%s: host b's send: %v: %s", boundary, err, out)
		}
		done = append(done, boundary)
	}
	return done
}

// decisionLockKey is the advisory lock every deciding write on a
// PostgreSQL ledger takes (the ledger's application id, "GHLD").
const decisionLockKey = int64(0x47484C44)

// awaitCount waits until query counts at least one row, polling the server
// (the state awaited is another process's, seen only there).
func awaitCount(t *testing.T, db *sql.DB, what, query string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		if err := db.QueryRow(query).Scan(&n); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q still counts 0 after 30 s", what, query)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freezingRelay forwards SMTP connections to the mailbox; frozen, it takes
// new connections and says nothing on them, as a server that accepted the
// connection but hangs before its greeting.
type freezingRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	quiet  []net.Conn
}

func newFreezingRelay(t *testing.T, target string) *freezingRelay {
	t.Helper()
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	r := &freezingRelay{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); r.thaw() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			if r.frozen {
				r.quiet = append(r.quiet, c)
				r.mu.Unlock()
				continue
			}
			r.mu.Unlock()
			go relayConn(c, target)
		}
	}()
	return r
}

func (r *freezingRelay) addr() string { return r.ln.Addr().String() }

func (r *freezingRelay) freeze() { r.mu.Lock(); r.frozen = true; r.mu.Unlock() }

func (r *freezingRelay) held() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.quiet) }

// thaw forwards new connections again and closes the silent ones.
func (r *freezingRelay) thaw() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = false
	for _, c := range r.quiet {
		c.Close()
	}
	r.quiet = nil
}

func relayConn(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go io.Copy(up, c)
	io.Copy(c, up)
}
