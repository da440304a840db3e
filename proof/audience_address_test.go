package proof_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"

	"gatehouse/destination"
	smtpdest "gatehouse/destination/smtp"
	"gatehouse/ledger"
	"gatehouse/proof"
)

// The audience search: each seed draws an audience whose customers share
// addresses (the address in other letter case, with space around it, an
// international domain as U-label, NFD or A-label in any case, fullwidth
// letters and full stops, under several ids, in a release that folds local
// parts or keeps them case-sensitive; now and then a domain that cannot be
// mapped at all) and turns nemeses on it between approval and the end of
// the send: consent withdrawn (the carrier is denied at send), customers
// removed by a person, a fresh export that lacks some (or is declared
// partial), duplicate rows by id, several connections at once, and a
// process SIGKILLed at a random mark with a fresh one finishing the run.
// The checker counts arrivals per address against a model that knows only
// the rule: an address must receive the notice exactly once when at least
// one customer with it can still receive it, and never otherwise.

// addressScenario is one seed's draw.
type addressScenario struct {
	seed        int
	local       destination.LocalPart
	customers   []ledger.Customer // as the older export left the mirror, in file order
	file        string            // the audience CSV
	dupRows     int               // rows naming a customer again (duplicates by id)
	withdrawn   map[string]bool   // consent withdrawn after approval
	removed     []string          // removed by a person before the send
	export      bool              // a fresh export comes with the send
	missing     map[string]bool   // customers the fresh export lacks
	keepMissing bool              // the fresh export is declared partial
	concurrency int
	kill        bool // the send runs in a process SIGKILLed at killAt
	killAt      int
}

// addressLease is the lease of the search's executor processes.
const addressLease = 2 * time.Second

// markOf places a kill: a send's marks are at least the consent re-read,
// the intent and the hand-over of each address's final carrier, then the
// run's end, so a kill drawn among the first ones is reached unless an
// attempt's budget runs out before its hand-over (see play).
func markOf(frac float64, expected int) int { return int(frac * float64(3*expected)) }

// drawAddressScenario draws seed's audience and nemeses, with every choice
// from one generator, so that a seed is its scenario.
func drawAddressScenario(seed int) addressScenario {
	rng := rand.New(rand.NewPCG(uint64(seed), 0xadd7e55))
	sc := addressScenario{seed: seed, withdrawn: map[string]bool{}, missing: map[string]bool{}}
	if rng.IntN(4) == 0 {
		sc.local = destination.CaseSensitiveLocalPart
	}
	people := 2 + rng.IntN(6)
	n := people + rng.IntN(3*people)
	var rows []string
	for i := range n {
		id := fmt.Sprintf("c%d", i+1)
		consent := "yes"
		if rng.IntN(7) == 0 {
			consent = "no"
		}
		p := rng.IntN(people)
		domain := searchDomains[p%len(searchDomains)]
		if p == people-1 && rng.IntN(3) == 0 {
			domain = unmappableDomain
		}
		sc.customers = append(sc.customers, ledger.Customer{ID: id, Email: variant(rng, fmt.Sprintf("p%d", p), domain), Consent: consent})
		rows = append(rows, id)
		if rng.IntN(10) == 0 {
			rows = append(rows, id)
			sc.dupRows++
		}
	}
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	sc.file = "customer_id\n" + strings.Join(rows, "\n") + "\n"
	for _, c := range sc.customers {
		switch {
		case rng.IntN(5) == 0:
			sc.withdrawn[c.ID] = true
		case rng.IntN(10) == 0:
			sc.removed = append(sc.removed, c.ID)
		}
	}
	if sc.export = rng.IntN(2) == 0; sc.export {
		sc.keepMissing = rng.IntN(3) == 0
		for _, c := range sc.customers {
			if rng.IntN(6) == 0 {
				sc.missing[c.ID] = true
			}
		}
	}
	sc.concurrency = []int{1, 2, 4, 8}[rng.IntN(4)]
	frac := rng.Float64()
	if sc.kill = rng.IntN(3) == 0 && len(sc.expected()) > 0; sc.kill {
		sc.killAt = markOf(frac, len(sc.expected()))
	}
	return sc
}

// searchDomains are the people's domains: ASCII, and international ones
// (a two-label and a three-label name).
var searchDomains = []string{"example.org", "exämple.org", "bücher.example.net"}

// unmappableDomain is a domain UTS #46 cannot map (an underscore): its
// customers can be told apart from nobody and must receive nothing.
const unmappableDomain = "exa_mple.org"

// variant writes an address as a CRM might: letters in other case, space
// around it, and the domain in any spelling of it (spellDomain).
func variant(rng *rand.Rand, local, domain string) string {
	b := []byte(local)
	for i := range b {
		if rng.IntN(4) == 0 && b[i] >= 'a' && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	s := string(b) + "@" + spellDomain(rng, domain)
	switch rng.IntN(6) {
	case 0:
		s += " "
	case 1:
		s = " " + s
	}
	return s
}

// spellDomain writes a domain in one of the spellings a resolver reads as
// the same name: as it is (a U-label where it has one), decomposed (NFD),
// as A-labels, then with letters in other case and some letters and full
// stops in their fullwidth forms.
func spellDomain(rng *rand.Rand, domain string) string {
	if domain == unmappableDomain {
		return domain
	}
	switch rng.IntN(3) {
	case 1:
		domain = norm.NFD.String(domain)
	case 2:
		a, err := idna.Lookup.ToASCII(domain)
		if err != nil {
			panic(fmt.Sprintf("search domain %q: %v", domain, err))
		}
		domain = a
	}
	fullwidth := rng.IntN(3) == 0
	var out strings.Builder
	for _, r := range domain {
		if rng.IntN(4) == 0 {
			r = unicode.ToUpper(r)
		}
		switch {
		case fullwidth && r == '.' && rng.IntN(2) == 0:
			r = []rune{'\uff0e', '\u3002', '\uff61'}[rng.IntN(3)]
		case fullwidth && r < 0x80 && unicode.IsLetter(r) && rng.IntN(2) == 0:
			r += 0xfee0 // the letter's fullwidth form
		}
		out.WriteRune(r)
	}
	return out.String()
}

// spelling names the kind of spelling an address was drawn in, for the
// search's tally of what it tried.
func spelling(addr string) string {
	_, domain, _ := strings.Cut(strings.TrimSpace(addr), "@")
	switch {
	case domain == unmappableDomain:
		return "unmappable domains"
	case strings.ContainsFunc(domain, func(r rune) bool { return r >= 0xff00 && r <= 0xffef || r == '\u3002' }):
		return "fullwidth spellings"
	case strings.Contains(strings.ToLower(domain), "xn--"):
		return "A-label spellings"
	case !norm.NFC.IsNormalString(domain):
		return "NFD spellings"
	case strings.ContainsFunc(domain, func(r rune) bool { return r >= 0x80 }):
		return "U-label spellings"
	}
	return "ASCII spellings"
}

// expected is the model: the addresses that must receive the notice once.
func (sc addressScenario) expected() map[string]bool {
	removed := map[string]bool{}
	for _, id := range sc.removed {
		removed[id] = true
	}
	out := map[string]bool{}
	for _, c := range sc.customers {
		gone := sc.missing[c.ID] && !sc.keepMissing
		key, ok := proof.AddressKey(c.Email, sc.local)
		if ok && c.Consent == "yes" && !sc.withdrawn[c.ID] && !removed[c.ID] && !gone {
			out[key] = true
		}
	}
	return out
}

// shared counts the addresses more than one customer has.
func (sc addressScenario) shared() int {
	n := map[string]int{}
	for _, c := range sc.customers {
		key, _ := proof.AddressKey(c.Email, sc.local)
		n[key]++
	}
	shared := 0
	for _, k := range n {
		if k > 1 {
			shared++
		}
	}
	return shared
}

// addressRun is what one seed did and found.
type addressRun struct {
	fired   map[string]int
	verdict proof.AddressVerdict
	actions proof.EvidenceVerdict
}

// play runs the scenario against a real mailbox: reconcile, approve, the
// nemeses, the send (in a process it kills, or in this one) and a re-run.
// send, when set, replaces the destination of an in-process send (the
// doubles the checker must catch).
func (sc addressScenario) play(t *testing.T, send func(destination.Destination) destination.Destination) addressRun {
	w := newWorld(t)
	w.releas, w.owner = "spring", "wf-notice"
	found := addressRun{fired: map[string]int{"customers": len(sc.customers), "shared addresses": sc.shared(), "duplicate rows by id": sc.dupRows}}
	for _, c := range sc.customers {
		found.fired[spelling(c.Email)]++
	}
	l := w.open()
	must(t, l.UpsertCustomers(w.ctx, sc.customers))
	s, err := l.ImportAudience(w.ctx, ledger.AudienceImport{ReleaseID: w.releas, SourceName: "spring.csv", Source: strings.NewReader(sc.file),
		ActionType: "notice", Subject: "Opening hours change", Body: "Our opening hours change on 1 April.", Actor: "ops",
		LocalPart: sc.local}, l.Customers())
	must(t, err)
	if s.Duplicates != sc.dupRows {
		t.Fatalf("seed %d: %d duplicates by id, the file has %d", sc.seed, s.Duplicates, sc.dupRows)
	}
	found.fired["covered at reconciliation"] = s.Covered
	if sc.local == destination.CaseSensitiveLocalPart {
		found.fired["case-sensitive releases"]++
	}
	must(t, l.ApproveAudienceAt(w.ctx, w.releas, "lead", w.destination(), ""))
	sc.turnNemeses(t, w, l, found.fired)
	l.Close()

	if sc.kill {
		// A lease longer than the other proofs' leaves an attempt its
		// budget on a loaded machine; should the budget run out all the
		// same, the attempt is not delivered, and the marks after it that
		// the kill point was drawn among never come: the run just ends.
		env := w.env("PROOF_ACTOR="+w.owner, fmt.Sprintf("PROOF_CONCURRENCY=%d", sc.concurrency), "PROOF_LEASE="+addressLease.String())
		if run(t, proc{Role: "audience", Env: env, KillAt: sc.killAt, MayFinish: true}).Killed {
			found.fired["killed sends"]++
		} else {
			found.fired["kill points not reached"]++
		}
		run(t, proc{Role: "finish-audience", Env: env, KillAt: -1})
	} else {
		l = w.open()
		sd, err := smtpdest.New(w.target())
		must(t, err)
		var dest destination.Destination = sd.Gate()
		if send != nil {
			dest = send(dest)
		}
		for range 2 { // a re-run sends nothing new
			if _, err := l.SendAudience(w.ctx, ledger.AudienceSend{ReleaseID: w.releas, Actor: w.owner, Concurrency: sc.concurrency},
				dest, l.Customers()); err != nil && !errors.Is(err, ledger.ErrUnknownOutcome) {
				t.Fatalf("seed %d: send: %v", sc.seed, err)
			}
		}
		l.Close()
	}

	l, err = ledger.Open(w.path, ledger.WithoutRecovery())
	must(t, err)
	defer l.Close()
	if found.verdict, err = proof.CheckAddresses(w.ctx, w.mb, sc.expected(), sc.local); err != nil {
		t.Fatal(err)
	}
	if found.actions, err = proof.CheckByMessageID(w.ctx, l, w.mb); err != nil {
		t.Fatal(err)
	}
	s, err = l.AudienceSummary(w.ctx, w.releas)
	must(t, err)
	if err := s.Check(); err != nil {
		t.Fatalf("seed %d: %v", sc.seed, err)
	}
	vs, err := l.Check(w.ctx)
	must(t, err)
	if len(vs) != 0 {
		t.Fatalf("seed %d: ledger check: %v", sc.seed, vs)
	}
	evs, err := l.History(w.ctx, ledger.HistoryFilter{})
	must(t, err)
	for _, e := range evs {
		switch e.Kind {
		case ledger.EvAudienceCarrier:
			found.fired["addresses handed on"]++
		case ledger.EvDenied:
			found.fired["denied at send"]++
		}
	}
	return found
}

// turnNemeses changes the world between approval and the send.
func (sc addressScenario) turnNemeses(t *testing.T, w *world, l *ledger.Ledger, fired map[string]int) {
	var changed []ledger.Customer
	for _, c := range sc.customers {
		if sc.withdrawn[c.ID] {
			c.Consent = "no"
			changed = append(changed, c)
		}
	}
	must(t, l.UpsertCustomers(w.ctx, changed))
	fired["consent withdrawn"] += len(changed)
	for _, id := range sc.removed {
		err := l.RemoveRecipient(w.ctx, w.releas, id, "ops", "asked not to be written to")
		switch {
		case err == nil:
			fired["removed"]++
		case !errors.Is(err, ledger.ErrNotFound): // excluded ones cannot be removed
			t.Fatalf("seed %d: remove %s: %v", sc.seed, id, err)
		}
	}
	if !sc.export {
		return
	}
	var recs []ledger.CustomerRecord
	for i, c := range sc.customers {
		if sc.missing[c.ID] {
			continue
		}
		if sc.withdrawn[c.ID] {
			c.Consent = "no"
		}
		recs = append(recs, ledger.CustomerRecord{Customer: c, File: "fresh.csv", Line: i + 2})
	}
	rep, err := l.ImportCustomers(w.ctx, ledger.CustomerImport{Source: "fresh.csv", Actor: "ops", Records: recs,
		Release: w.releas, KeepMissing: sc.keepMissing})
	must(t, err)
	if sc.keepMissing {
		fired["kept by a partial export"] += len(rep.Missing)
	} else {
		fired["missing from the export"] += len(rep.Missing)
	}
}

// TestAudienceSharedAddressSearch: over seeds of audiences whose customers
// share addresses, with the nemeses above, every address receives at most
// one notice and every address that had a customer able to receive it
// exactly one, at a real SMTP mailbox; the per-action checker finds no
// duplicate, loss or contradiction, the counts add up and ledger check is
// clean.
func TestAudienceSharedAddressSearch(t *testing.T) {
	seeds := 48
	if *long || os.Getenv("PROOF_LONG") == "1" {
		seeds = 500
	}
	var mu sync.Mutex
	fired := map[string]int{}
	var twice, missed, unexpected, dups, losses, contradictions, arrivals int
	start := time.Now()
	for seed := range seeds {
		t.Run(fmt.Sprintf("Seed%03d", seed), func(t *testing.T) {
			t.Parallel()
			sc := drawAddressScenario(seed)
			r := sc.play(t, nil)
			mu.Lock()
			for k, n := range r.fired {
				fired[k] += n
			}
			twice, missed, unexpected = twice+len(r.verdict.Twice), missed+len(r.verdict.Missed), unexpected+len(r.verdict.Unexpected)
			dups, losses, contradictions = dups+len(r.actions.Duplicates), losses+len(r.actions.Losses), contradictions+len(r.actions.Contradictions)
			arrivals += r.verdict.Arrivals
			mu.Unlock()
			if !r.verdict.OK() || !r.actions.OK() {
				t.Fatalf("seed %d (local parts %v, concurrency %d, kill %v at %d): %s\n%s", seed, sc.local, sc.concurrency, sc.kill, sc.killAt,
					r.verdict, r.actions)
			}
		})
	}
	t.Cleanup(func() {
		var parts []string
		for k, n := range fired {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
		sort.Strings(parts)
		t.Logf("audience shared-address search: %d seeds in %s, %d arrivals; nemeses: %s; %d addresses twice, %d missed, %d unexpected; %d duplicates, %d losses, %d contradictions",
			seeds, time.Since(start).Round(time.Second), arrivals, strings.Join(parts, ", "), twice, missed, unexpected, dups, losses, contradictions)
	})
}

// TestAddressCheckerCatches proves the address checker can fail: the same
// scenario, sent through a destination that delivers each notice twice, or
// that delivers none to one address while claiming it did, must be
// reported, and the real destination must not.
func TestAddressCheckerCatches(t *testing.T) {
	sc := drawAddressScenario(0)
	sc.kill, sc.export, sc.removed, sc.withdrawn = false, false, nil, map[string]bool{}
	tests := []struct {
		Name   string
		Send   func(destination.Destination) destination.Destination
		Twice  bool
		Missed bool
	}{
		{"RealDestination", nil, false, false},
		{"DestinationThatSendsTwice", func(d destination.Destination) destination.Destination {
			return &addressDouble{Destination: d, twice: true}
		}, true, false},
		{"DestinationThatDropsOneAddress", func(d destination.Destination) destination.Destination {
			return &addressDouble{Destination: d, drop: 1}
		}, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			v := sc.play(t, tc.Send).verdict
			t.Logf("%s: %s", tc.Name, v)
			if (len(v.Twice) > 0) != tc.Twice || (len(v.Missed) > 0) != tc.Missed || len(v.Unexpected) != 0 {
				t.Fatalf("checker: %s; want twice %v, missed %v", v, tc.Twice, tc.Missed)
			}
		})
	}
}

// addressDouble breaks the promise for the checker to catch: twice sends
// every message two times; drop claims the first drop messages accepted and
// sends nothing. It keeps the wrapped destination's records and settings.
type addressDouble struct {
	destination.Destination
	twice bool
	mu    sync.Mutex
	drop  int
}

func (d *addressDouble) Send(ctx context.Context, m destination.Message) (destination.Receipt, error) {
	d.mu.Lock()
	drop := d.drop > 0
	d.drop--
	d.mu.Unlock()
	if drop {
		return destination.Receipt{TransportID: m.TransportID, Response: "250 pretended"}, nil
	}
	if d.twice {
		if _, err := d.Destination.Send(ctx, m); err != nil {
			return destination.Receipt{}, err
		}
	}
	return d.Destination.Send(ctx, m)
}

func (d *addressDouble) LookupEndpoint() string { return destination.EndpointOf(d.Destination).Lookup }

func (d *addressDouble) Lookup(ctx context.Context, q destination.LookupQuery) (destination.LookupResult, error) {
	if lk, ok := d.Destination.(destination.Records); ok {
		return lk.Lookup(ctx, q)
	}
	return destination.LookupResult{}, destination.ErrLookupUnavailable
}

func (d *addressDouble) SettleTime() time.Duration { return destination.SettleTimeOf(d.Destination) }

func (d *addressDouble) Settings() string { return destination.EndpointOf(d.Destination).Settings }

func (d *addressDouble) Epoch(ctx context.Context) (string, error) {
	if er, ok := d.Destination.(destination.EpochReporter); ok {
		return er.Epoch(ctx)
	}
	return "", nil
}
