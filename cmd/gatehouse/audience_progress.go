package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gatehouse/ledger"
)

// progressEvery is how often a send not on a terminal prints a progress
// line (a variable so tests can ask for every batch).
var progressEvery = 2 * time.Second

// progressPrinter shows a running audience send on stderr: a bar redrawn in
// place on a terminal, otherwise a line every progressEvery. A run short
// enough to print no periodic line prints nothing, so scripts that send a
// small release see only the result.
type progressPrinter struct {
	w       io.Writer
	tty     bool
	verb    string
	next    time.Duration // elapsed time of the next periodic line
	printed bool
}

func newProgressPrinter(w io.Writer, verb string) *progressPrinter {
	return &progressPrinter{w: w, tty: isTerminal(w), verb: verb, next: progressEvery}
}

// isTerminal reports whether w is a character device (a terminal), not a
// file or a pipe.
func isTerminal(w io.Writer) bool {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// report is the send's Progress callback.
func (p *progressPrinter) report(s ledger.SendProgress) {
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r%s\x1b[K", progressBar(s)) // \x1b[K clears what a longer line left
		if s.Final {
			fmt.Fprintln(p.w)
		}
	case s.Final && p.printed, s.Elapsed >= p.next:
		fmt.Fprintf(p.w, "%s: %s\n", p.verb, progressLine(s))
		p.printed = true
		p.next = s.Elapsed + progressEvery
	}
}

// progressLine is one periodic line: how far, sent, held, denied, rate and
// the time left at that rate.
func progressLine(s ledger.SendProgress) string {
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Done) / s.Elapsed.Seconds()
	}
	eta := "–"
	switch {
	case s.Final:
		eta = "done"
	case rate > 0:
		eta = (time.Duration(float64(s.Eligible-s.Done)/rate*float64(time.Second)) + time.Second/2).Truncate(time.Second).String()
	}
	return fmt.Sprintf("%d/%d recipients, sent %d, held %d, denied %d, %.0f/s, ETA %s",
		s.Done, s.Eligible, s.Sent, s.Held, s.Denied, rate, eta)
}

func progressBar(s ledger.SendProgress) string {
	const width = 24
	filled := width
	if s.Eligible > 0 {
		filled = min(width, s.Done*width/s.Eligible)
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "] " + progressLine(s)
}
