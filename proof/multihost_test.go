package proof_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/pgtest"
	"gatehouse/ledger"
	"gatehouse/ledger/smtpdest"
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
	sd, err := smtpdest.New(mb.Target())
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
		ep := ledger.EndpointOf(dest)
		p := ledger.Proposal{Task: ledger.TaskRef{ID: "task-1"}, Customer: "c", Event: event, ActionType: "reply_ack",
			Target: "task-1", Recipient: event + "@example.org", Subject: "Hello", Body: "We are on it.", Actor: "wf",
			Destination: ep.Destination, Lookup: ep.Lookup}
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

	v, err := proof.CheckByMessageID(ctx, l, mb)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("multi-host proof: hosts %d, keys raced %d (each by both hosts), partitions 1, kills 1; %s", len(n.hosts), raced, v)
	if !v.OK() || v.Sent != raced+2 || v.Arrivals != raced+2 {
		t.Fatalf("%s\n%s", v, v.Summary())
	}
}

// reconcileUntilSettled asks host h to reconcile key until the action is
// settled (its lease must lapse first, by the server's clock), and returns
// its state; it gives up after a bound.
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
			} `json:"action"`
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("show: %v: %s", err, out)
		}
		if v.Action.State != "executing" && v.Action.State != "unknown" {
			return v.Action.State
		}
		if time.Now().After(deadline) {
			return v.Action.State
		}
		time.Sleep(300 * time.Millisecond) // the lease runs by the server's clock: poll it
	}
}
