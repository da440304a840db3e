// Package wrap is the one word-wrapper of the screens and the reports: it
// breaks at spaces only, so a key such as gh1:cust-42 or T-4711 stays
// whole, keeps styles and wide characters, and cuts a word wider than the
// line hard.
package wrap

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// nbHyphen stands in for "-" while ansi.Wrap runs: it always breaks after
// a hyphen, and a key must stay whole.
const nbHyphen = "\u2011"

// Words breaks text into lines of at most width columns at spaces, runs of
// white space counting as one.
func Words(text string, width int) []string {
	flat := strings.ReplaceAll(strings.Join(strings.Fields(text), " "), "-", nbHyphen)
	return strings.Split(strings.ReplaceAll(ansi.Wrap(flat, max(width, 1), ""), nbHyphen, "-"), "\n")
}

// Hanging wraps text at width after prefix, indenting the lines after the
// first under the text, so a long sentence stays readable instead of being
// cut.
func Hanging(prefix, text string, width int) []string {
	pw := ansi.StringWidth(prefix)
	lines := Words(text, max(width-pw, 10))
	out := make([]string, len(lines))
	for i, l := range lines {
		if i == 0 {
			out[i] = prefix + l
			continue
		}
		out[i] = strings.Repeat(" ", pw) + l
	}
	return out
}
