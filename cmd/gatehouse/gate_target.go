package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"gatehouse/fakes"
	"gatehouse/ledger"
	"gatehouse/ledger/filedest"
	"gatehouse/ledger/smtpdest"
)

// fakeOutcomes are the answers a fake:// target can be told to give, so a
// workflow can rehearse every exit code of send without a server.
var fakeOutcomes = map[string]ledger.Outcome{
	"accept":             ledger.OutcomeAccepted,
	"unknown":            ledger.OutcomeUnknown,
	"not-delivered":      ledger.OutcomeNotDelivered,
	"rejected-temporary": ledger.OutcomeRejectedTemporary,
	"rejected-permanent": ledger.OutcomeRejectedPermanent,
}

// openDestination resolves a --target URL to the destination that delivers
// there:
//
//	file://DIR                       one .eml file per attempt in DIR (a Looker)
//	smtp://host:port[?api=http://…]  an SMTP server (a Looker with ?api=)
//	fake://OUTCOME                   keeps nothing, answers OUTCOME (accept when empty)
func openDestination(target string) (ledger.Destination, error) {
	scheme, rest, ok := strings.Cut(target, "://")
	if !ok {
		return nil, usageErr("--target %q: want file://DIR, smtp://host:port or fake://OUTCOME", target)
	}
	switch scheme {
	case "file":
		dir, err := fileDir(target, rest)
		if err != nil {
			return nil, err
		}
		d, err := filedest.New(dir)
		if err != nil {
			return nil, fmt.Errorf("--target %s: %w", target, err)
		}
		return d, nil
	case "smtp":
		d, err := smtpdest.New(target)
		if err != nil {
			return nil, usageErr("--target %q: %v", target, err)
		}
		return d, nil
	case "fake":
		return openFakeTarget(target, rest)
	}
	return nil, usageErr("--target %q: unknown scheme %q (want file, smtp or fake)", target, scheme)
}

// openLooker returns the target's lookup capability, or nil when the target
// keeps no records the gate may consult (reconcile then holds the action).
func openLooker(target string) (ledger.Looker, error) {
	if target == "" {
		return nil, nil
	}
	if rest, ok := strings.CutPrefix(target, "file://"); ok {
		// Searching must not create the directory: a mistyped path would
		// then look like a destination that provably holds nothing.
		dir, err := fileDir(target, rest)
		if err != nil {
			return nil, err
		}
		return &filedest.Destination{Dir: dir}, nil
	}
	d, err := openDestination(target)
	if err != nil {
		return nil, err
	}
	if _, fake := d.(*fakes.Destination); fake {
		// A fake's records die with the process that sent, so "not found"
		// would be a lie.
		return nil, nil
	}
	lk, _ := d.(ledger.Looker)
	return lk, nil
}

// fileDir is the directory of a file:// target: file:///abs and file://rel
// both work, the text after // being the path.
func fileDir(target, rest string) (string, error) {
	u, err := url.Parse(target)
	if err != nil || rest == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", usageErr("--target %q: want file://DIR (an absolute or relative directory path)", target)
	}
	return filepath.Clean(rest), nil
}

func openFakeTarget(target, rest string) (ledger.Destination, error) {
	if rest == "" {
		rest = "accept"
	}
	o, ok := fakeOutcomes[rest]
	if !ok {
		return nil, usageErr("--target %q: fake outcome %q unknown (want %s)", target, rest, strings.Join(fakeOutcomeNames(), ", "))
	}
	d := fakes.NewDestination()
	d.Script(o)
	return d, nil
}

func fakeOutcomeNames() []string {
	return []string{"accept", "unknown", "not-delivered", "rejected-temporary", "rejected-permanent"}
}
