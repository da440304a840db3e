// Package keyname is the one naming rule for action keys on every screen
// and report: a key is shown by the shortest part of it that tells it apart
// from the other keys in view, never cutting the segment that differs, and
// by more of it where the width allows.
//
// A key gh1:customer:event:type:target:rN has five segments after its
// prefix. Two actions of one customer differ in their event, a retry under
// a new event in its suffix ("enquiry-3301" and "enquiry-3301-retry"), a
// correction in its revision: the name keeps the segments where a key
// differs from its neighbours, adds the others (customer first) while they
// fit, and drops the prefix, a revision r0 and a target equal to the task
// the screen shows beside it.
package keyname

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"gatehouse/ledger"
)

// Ellipsis marks a segment cut to fit: only where even the segments that
// tell a key apart are wider than the room, and then at the end the keys
// share, never at the part that differs.
const Ellipsis = "…"

// Names names each of keys in at most width columns (0: no limit). tasks,
// when not nil, gives each key's task, so a target equal to it is left
// out. A name is never cut inside the part of a segment that differs from
// another key's; when that part alone is wider than width, the name is the
// part, wider than asked. The names of one call are made of the same
// segments where they can be, so a column of them reads alike.
func Names(keys, tasks []string, width int) []string {
	segs, quiet, chosen := split(keys, tasks)
	fits := func(i int) bool { return width <= 0 || ansi.StringWidth(join(segs[i], chosen[i])) <= width }
	// The other segments join every name, in the keys' order, while all
	// the names still fit.
	for s := range maxLen(segs) {
		var added []int
		for i := range keys {
			if s < len(segs[i]) && !chosen[i][s] && !quiet[i][s] {
				chosen[i][s] = true
				added = append(added, i)
			}
		}
		if !slices.ContainsFunc(added, func(i int) bool { return !fits(i) }) {
			continue
		}
		for _, i := range added {
			chosen[i][s] = false
		}
		break // a later segment alone would read as if it followed this one
	}
	out := make([]string, len(keys))
	for i := range keys {
		if out[i] = join(segs[i], chosen[i]); !fits(i) {
			out[i] = shorten(segs, i, chosen[i])
		}
	}
	return out
}

// Telling is, for each key, only the segments that tell it apart from
// the others, whole: the least room its name needs.
func Telling(keys, tasks []string) []string {
	segs, _, chosen := split(keys, tasks)
	out := make([]string, len(keys))
	for i := range keys {
		out[i] = join(segs[i], chosen[i])
	}
	return out
}

// split parses every key into its segments, which go without saying and
// which tell it apart.
func split(keys, tasks []string) (segs [][]string, quiet, chosen [][]bool) {
	segs, quiet, chosen = make([][]string, len(keys)), make([][]bool, len(keys)), make([][]bool, len(keys))
	for i, k := range keys {
		task := ""
		if i < len(tasks) {
			task = tasks[i]
		}
		segs[i], quiet[i] = segments(k, task)
	}
	for i := range keys {
		chosen[i] = telling(segs, i)
	}
	return segs, quiet, chosen
}

// Name is one key's name when no other is in view: its segments, as many
// as fit from the customer on.
func Name(key, task string, width int) string { return Names([]string{key}, []string{task}, width)[0] }

// segments splits a key into the segments a name is made of, and says
// which go without saying: a revision r0, a target equal to the task. A
// key that is not gatehouse's is one segment.
func segments(key, task string) ([]string, []bool) {
	p, err := ledger.ParseKey(key)
	if err != nil {
		return []string{key}, []bool{false}
	}
	return []string{p.Customer, p.Event, p.ActionType, p.Target, "r" + strconv.Itoa(p.Revision)},
		[]bool{false, false, false, p.Target == task, p.Revision == 0}
}

// telling is which of key i's segments tell it apart from every other
// key: fewest first, the key's order breaking ties. A key alone (or shown
// twice) is told by its customer and event, which say most.
func telling(all [][]string, i int) []bool {
	own := all[i]
	chosen := make([]bool, len(own))
	var rivals []int
	for j := range all {
		if j != i && !slices.Equal(all[j], own) {
			rivals = append(rivals, j)
		}
	}
	for len(rivals) > 0 {
		best, bestN := -1, 0
		for s := range own {
			if chosen[s] {
				continue
			}
			n := 0
			for _, j := range rivals {
				if seg(all[j], s) != own[s] {
					n++
				}
			}
			if n > bestN {
				best, bestN = s, n
			}
		}
		if best < 0 {
			break
		}
		chosen[best] = true
		left := rivals[:0]
		for _, j := range rivals {
			if seg(all[j], best) == own[best] {
				left = append(left, j)
			}
		}
		rivals = left
	}
	if !slices.Contains(chosen, true) {
		for s := 0; s < len(own) && s < 2; s++ {
			chosen[s] = true
		}
	}
	return chosen
}

func maxLen(segs [][]string) int {
	n := 0
	for _, s := range segs {
		n = max(n, len(s))
	}
	return n
}

// shorten cuts the kept segments that are wider than the room at their
// shared beginning: "enquiry-3301-retry" beside "enquiry-3301" keeps
// "…-retry"; a segment that differs from its first character stays whole.
func shorten(all [][]string, i int, chosen []bool) string {
	own := all[i]
	parts := make([]string, len(own))
	copy(parts, own)
	for s := range own {
		if !chosen[s] {
			continue
		}
		shared := 0
		for j := range all {
			if j == i || seg(all[j], s) == own[s] {
				continue
			}
			shared = max(shared, commonPrefix(own[s], seg(all[j], s)))
		}
		// Cut at a word's start before the difference, so what stays
		// reads as a word ("-retry", not "etry").
		cut := strings.LastIndexAny(own[s][:min(shared+1, len(own[s]))], "-_.") // the separator stays
		if cut > 0 {
			parts[s] = Ellipsis + own[s][cut:]
		}
	}
	return join(parts, chosen)
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	for n > 0 && !utf8.RuneStart(a[n-1]) {
		n-- // never inside a character
	}
	return n
}

func seg(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

func join(s []string, chosen []bool) string {
	var parts []string
	for i, v := range s {
		if chosen[i] && v != "" {
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, ":")
}
