package proof_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/internal/testids"
	"gatehouse/ledger"
)

var benchSend = flag.Bool("proof.bench", false, "run the send benchmarks at full size (5,000 gated vs blind, 100,000 recipients end to end); also PROOF_BENCH=1")

func fullBench() bool { return *benchSend || os.Getenv("PROOF_BENCH") == "1" }

// benchConcurrency is the concurrency of both the gated send and the blind
// blasts it is compared with: the default of `audience send`.
const benchConcurrency = ledger.DefaultConcurrency

// sendReport is what a measured executor process prints as its last line.
type sendReport struct {
	Sent       int     `json:"sent"`
	ReconcileS float64 `json:"reconcile_s,omitempty"`
	SendS      float64 `json:"send_s"`
	RerunSent  int     `json:"rerun_sent"`
	Eligible   int     `json:"eligible,omitempty"`
	HeapSysMiB uint64  `json:"heap_sys_mib"` // the Go heap's share of the process's memory at the end
	// PeakRSSKiB is the process's own peak resident set (VmHWM). Not
	// getrusage's ru_maxrss of the child: exec keeps the high-water mark of
	// the memory it replaces, which for a child started by os/exec (vfork)
	// is the parent's, here the test process with the mailbox.
	PeakRSSKiB int64 `json:"peak_rss_kib"`
}

// TestPipelinedSendVersusBlast measures, against one mailbox, two blind
// SMTP blasts (no ledger: one connection per message, as a plain load
// generator sends, and smtpdest's pooled sessions) and the gated audience
// send of as many eligible recipients at the same concurrency, each in its
// own process, in interleaved rounds (a new release each round) so that the
// machine's changing load falls on all three alike; the medians are
// compared. Every arrival must be there once and a re-run must send
// nothing. The ratio is logged; it is asserted only at full size
// (-proof.bench: 3 rounds of 5,000), where the runs are long enough to mean
// something.
func TestPipelinedSendVersusBlast(t *testing.T) {
	n, rounds := 300, 1
	if fullBench() {
		n, rounds = 5000, 3
	}
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	t.Cleanup(cancel)
	w.ctx = ctx
	w.audienceRelease(n) // round 0's release; later rounds send new releases to the same customers
	w.keys = nil         // the roles here read the release, not a key list (which would not fit an environment variable)
	var perConnRates, blindRates, gatedRates []float64
	for round := range rounds {
		if round > 0 {
			w.releas = fmt.Sprintf("spring-%d", round)
			sameCustomers(t, w, n)
		}
		env := w.env("PROOF_ACTOR="+w.owner, fmt.Sprintf("PROOF_CONCURRENCY=%d", benchConcurrency), fmt.Sprintf("PROOF_N=%d", n),
			fmt.Sprintf("PROOF_ROUND=%d", round), "PROOF_LEASE="+benchLease.String())
		perConn := measured(t, proc{Role: "blast", Env: append(env, "PROOF_POOL=0"), KillAt: -1, Bound: 15 * time.Minute})
		blind := measured(t, proc{Role: "blast", Env: env, KillAt: -1, Bound: 15 * time.Minute})
		gated := measured(t, proc{Role: "bench-send", Env: env, KillAt: -1, Bound: 15 * time.Minute})
		l := w.open()
		s, err := l.AudienceSummary(w.ctx, w.releas)
		l.Close()
		must(t, err)
		perConnRate, blindRate, gatedRate := float64(n)/perConn.SendS, float64(n)/blind.SendS, float64(n)/gated.SendS
		t.Logf("send benchmark round %d, %d messages at concurrency %d: blind blast, a connection per message %.2f s (%.0f msg/s); blind blast, pooled sessions %.2f s (%.0f msg/s); gated audience send %.2f s (%.0f msg/s): gated = %.0f%% of the per-connection blast, %.0f%% of the pooled blast; re-run sent %d; gated peak RSS %d MiB (Go heap %d MiB)",
			round, n, benchConcurrency, perConn.SendS, perConnRate, blind.SendS, blindRate, gated.SendS, gatedRate,
			100*gatedRate/perConnRate, 100*gatedRate/blindRate, gated.RerunSent, gated.PeakRSSKiB/1024, gated.HeapSysMiB)
		if perConn.Sent != n || blind.Sent != n || gated.Sent != n || s.Confirmed != n {
			t.Fatalf("blind sent %d and %d, gated sent %d, confirmed %d; want %d each", perConn.Sent, blind.Sent, gated.Sent, s.Confirmed, n)
		}
		if gated.RerunSent != 0 {
			t.Fatalf("a re-run sent %d", gated.RerunSent)
		}
		perConnRates, blindRates, gatedRates = append(perConnRates, perConnRate), append(blindRates, blindRate), append(gatedRates, gatedRate)
	}
	st, err := w.mb.Stats(w.ctx)
	must(t, err)
	if st.Stored != int64(3*n*rounds) || st.DuplicateActionKeys != 0 || st.Duplicates != 0 {
		t.Fatalf("mailbox: stored %d (want %d), duplicates %d, duplicate keys %d", st.Stored, 3*n*rounds, st.Duplicates, st.DuplicateActionKeys)
	}
	pc, bl, ga := median(perConnRates), median(blindRates), median(gatedRates)
	t.Logf("send benchmark, medians of %d round(s): per-connection blast %.0f msg/s, pooled blast %.0f msg/s, gated %.0f msg/s: gated = %.0f%% of the per-connection blast, %.0f%% of the pooled blast; mailbox stored %d, duplicates %d",
		rounds, pc, bl, ga, 100*ga/pc, 100*ga/bl, st.Stored, st.Duplicates)
	if fullBench() && ga < 0.5*pc {
		t.Fatalf("gated %.0f msg/s is below half the per-connection blast's %.0f msg/s", ga, pc)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// sameCustomers records and approves release w.releas for the n customers
// audienceRelease mirrored.
func sameCustomers(t *testing.T, w *world, n int) {
	t.Helper()
	var b strings.Builder
	b.WriteString("customer_id\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "r%d\n", i)
	}
	l := w.open()
	defer l.Close()
	_, err := l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: w.releas, SourceName: w.releas + ".csv",
		Source: strings.NewReader(b.String()), ActionType: "notice", Subject: "Opening hours change",
		Body: "Our opening hours change on 1 April.", Actor: "ops"}, l.Customers())
	must(t, err)
	must(t, l.ApproveAudienceAt(w.ctx, w.releas, "lead", w.destination(), ""))
}

// TestHundredThousandRecipients runs a release end to end in one executor
// process: customers mirrored, the file reconciled (rows streamed), the
// release approved, sent to the mailbox and sent again (0). Arrivals must
// equal the eligible count, once each; wall time and the process's peak RSS
// are logged. 2,000 recipients in make test, 100,000 with -proof.bench.
// benchLease is the lease of the runs that measure rather than kill.
const benchLease = 20 * time.Second

func TestHundredThousandRecipients(t *testing.T) {
	n := 2000
	if fullBench() {
		n = 100000
	}
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	t.Cleanup(cancel)
	w.ctx = ctx
	w.releas, w.owner = "hundred-k", "wf-notice"
	dir := t.TempDir()
	file := filepath.Join(dir, "audience.csv")
	writeAudience(t, file, n)
	// A lease long enough that a loaded machine never spends a send's
	// budget before its hand-over: nothing here is killed or recovered,
	// and a recipient left for the re-run would read as the gate's fault.
	env := w.env("PROOF_ACTOR="+w.owner, fmt.Sprintf("PROOF_CONCURRENCY=%d", benchConcurrency), fmt.Sprintf("PROOF_N=%d", n),
		"PROOF_FILE="+file, "PROOF_LEASE="+benchLease.String())
	start := time.Now()
	rep := measured(t, proc{Role: "end-to-end", Env: env, KillAt: -1, Bound: 55 * time.Minute})
	wall := time.Since(start)
	eligible := n - n/50 // every 50th customer has no consent
	st, err := w.mb.Stats(w.ctx)
	must(t, err)
	t.Logf("end to end, %d rows (%d eligible) at concurrency %d: wall %.1f s (reconcile %.1f s, send %.1f s, %.0f msg/s); peak RSS %d MiB; arrivals %d, duplicate keys %d; re-run sent %d",
		n, eligible, benchConcurrency, wall.Seconds(), rep.ReconcileS, rep.SendS, float64(rep.Sent)/rep.SendS, rep.PeakRSSKiB/1024,
		st.Stored, st.DuplicateActionKeys, rep.RerunSent)
	if rep.Eligible != eligible || rep.Sent != eligible || st.Stored != int64(eligible) || st.DuplicateActionKeys != 0 || rep.RerunSent != 0 {
		t.Fatalf("eligible %d (want %d), sent %d, arrivals %d, duplicate keys %d, re-run sent %d",
			rep.Eligible, eligible, rep.Sent, st.Stored, st.DuplicateActionKeys, rep.RerunSent)
	}
}

// writeAudience writes an audience file of n customer ids, one a line.
func writeAudience(t *testing.T, path string, n int) {
	f, err := os.Create(path)
	must(t, err)
	b := bufio.NewWriter(f)
	b.WriteString("customer_id\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(b, "r%d\n", i)
	}
	must(t, b.Flush())
	must(t, f.Close())
}

// measured runs p to its end and reads its report and peak RSS.
func measured(t *testing.T, p proc) sendReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), p.Bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "PROOF_ROLE="+p.Role, "PROOF_KILL_AT=-1"), p.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", p.Role, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var rep sendReport
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("%s: report %q: %v", p.Role, lines[len(lines)-1], err)
	}
	return rep
}

// playBlast sends PROOF_N messages straight to the destination with
// PROOF_CONCURRENCY workers sharing one pooled destination: no ledger, no
// checks, the fastest a sender can go.
func playBlast(ctx context.Context, target string) error {
	n, _ := strconv.Atoi(os.Getenv("PROOF_N"))
	var opts []smtpdest.Option
	if os.Getenv("PROOF_POOL") == "0" {
		opts = append(opts, smtpdest.WithPoolSize(0))
	}
	d, err := smtpdest.New(target, opts...)
	if err != nil {
		return err
	}
	defer d.Close()
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var sent int
	var firstErr error
	start := time.Now()
	tag := "b" + os.Getenv("PROOF_ROUND") + "p" + os.Getenv("PROOF_POOL")
	for range concurrency() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				key := ledger.Key(fmt.Sprintf("%s-%d", tag, i), "blast", "notice", "audience", 0)
				_, err := d.Send(ctx, destination.Message{ActionKey: key, Attempt: 1, TransportID: testids.Fixed(key, 1),
					To: fmt.Sprintf("%s-%d@example.org", tag, i), Subject: "Opening hours change", Body: "Our opening hours change on 1 April."})
				mu.Lock()
				if err == nil {
					sent++
				} else if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := 1; i <= n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return report(sendReport{Sent: sent, SendS: time.Since(start).Seconds()}, firstErr)
}

// playBenchSend sends the approved release with PROOF_CONCURRENCY, then
// once more (which must send nothing).
func playBenchSend(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor, release string) error {
	req := ledger.AudienceSend{ReleaseID: release, Actor: actor, Concurrency: concurrency()}
	start := time.Now()
	s, err := l.SendAudience(ctx, req, dest, l.Customers())
	if err != nil {
		return err
	}
	rep := sendReport{Sent: s.Confirmed, SendS: time.Since(start).Seconds()}
	again, err := l.SendAudience(ctx, req, dest, l.Customers())
	rep.RerunSent = again.Confirmed - s.Confirmed
	return report(rep, err)
}

// playEndToEnd is a release from nothing: PROOF_N customers mirrored a
// thousand at a time (every 50th without consent), PROOF_FILE reconciled,
// approved, sent, and sent again.
func playEndToEnd(ctx context.Context, l *ledger.Ledger, dest destination.Destination, actor, release string) error {
	n, _ := strconv.Atoi(os.Getenv("PROOF_N"))
	start := time.Now()
	cs := make([]ledger.Customer, 0, 1000)
	for i := 1; i <= n; i++ {
		consent := "yes"
		if i%50 == 0 {
			consent = "no"
		}
		id := fmt.Sprintf("r%d", i)
		cs = append(cs, ledger.Customer{ID: id, Email: id + "@example.org", Consent: consent})
		if len(cs) == cap(cs) || i == n {
			if err := l.UpsertCustomers(ctx, cs); err != nil {
				return err
			}
			cs = cs[:0]
		}
	}
	f, err := os.Open(os.Getenv("PROOF_FILE"))
	if err != nil {
		return err
	}
	defer f.Close()
	sum, err := l.ImportAudience(ctx, ledger.AudienceImport{ReleaseID: release, SourceName: filepath.Base(f.Name()), Source: f,
		ActionType: "notice", Subject: "Opening hours change", Body: "Our opening hours change on 1 April.", Actor: "ops"}, l.Customers())
	if err != nil {
		return err
	}
	if err := l.ApproveAudienceAt(ctx, release, "lead", destination.EndpointOf(dest), ""); err != nil {
		return err
	}
	rep := sendReport{ReconcileS: time.Since(start).Seconds(), Eligible: sum.Eligible}
	req := ledger.AudienceSend{ReleaseID: release, Actor: actor, Concurrency: concurrency()}
	start = time.Now()
	s, err := l.SendAudience(ctx, req, dest, l.Customers())
	if err != nil {
		return err
	}
	rep.Sent, rep.SendS = s.Confirmed, time.Since(start).Seconds()
	again, err := l.SendAudience(ctx, req, dest, l.Customers())
	rep.RerunSent = again.Confirmed - s.Confirmed
	return report(rep, err)
}

func report(rep sendReport, err error) error {
	if err != nil {
		return err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.HeapSysMiB = ms.HeapSys >> 20
	rep.PeakRSSKiB = peakRSS()
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

// peakRSS is this process's peak resident set size in KiB (VmHWM in
// /proc/self/status), or -1 where that is not available.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(ln, "VmHWM:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}
