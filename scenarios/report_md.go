package scenarios

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes the reports as Markdown, for a ticket or a pull
// request: per scenario its verdict, steps, actions (what was intended,
// attempted and arrived, per action key), counts and every expectation
// with its expected and actual values.
func WriteMarkdown(w io.Writer, reps []Report) error {
	var b strings.Builder
	for _, rep := range reps {
		writeMarkdown(&b, rep)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMarkdown(b *strings.Builder, rep Report) {
	fmt.Fprintf(b, "# %s — %s: %s\n\n", rep.Name, mdText(rep.Title), passWord(rep.Passed))
	if rep.Description != "" {
		fmt.Fprintf(b, "%s\n\n", mdText(rep.Description))
	}
	if rep.Error != "" {
		fmt.Fprintf(b, "The rehearsal broke: %s\n\n", mdText(rep.Error))
		return
	}
	b.WriteString("## Steps\n\n| # | at | step | result |\n| --- | --- | --- | --- |\n")
	for _, s := range rep.Steps {
		res := s.Class
		if s.Detail != "" {
			res += ": " + s.Detail
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s |\n", s.Index, s.Clock.Format("15:04:05"), mdCell(s.Label), mdCell(res))
	}
	b.WriteString("\n## Actions\n\n| action | key | state | owner | attempts | arrived |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, row := range rep.Rows {
		var atts, arr []string
		for _, a := range row.Attempts {
			atts = append(atts, fmt.Sprintf("#%d %s", a.Number, a.Outcome))
		}
		for _, m := range row.Arrivals {
			s := fmt.Sprintf("%s to %s at %s", localPart(m.MessageID), m.To, m.At.Format("15:04:05"))
			if m.Duplicate {
				s += " DUPLICATE"
			}
			if m.Unmatched {
				s += " UNMATCHED"
			}
			arr = append(arr, s)
		}
		fmt.Fprintf(b, "| %s | `%s` | %s | %s | %s | %s |\n", mdCell(or(row.Name, "?")), row.Key, or(row.State, "not in the ledger"),
			mdCell(or(row.Owner, "—")), mdCell(strings.Join(atts, "; ")), mdCell(strings.Join(arr, "; ")))
	}
	c := rep.Counts
	fmt.Fprintf(b, "\n## Counts\n\nintended %d · attempts %d · confirmed %d · arrived %d · denials %d · duplicate blocks %d · holds %d · conflicts %d · unknown %d\n",
		c.Intended, c.Attempts, c.Confirmed, c.Arrived, c.Denials, c.DuplicateBlocks, c.Holds, c.Conflicts, c.Unknown)
	b.WriteString("\n## Expectations\n\n| | expectation | expected | actual | where |\n| --- | --- | --- | --- | --- |\n")
	for _, v := range rep.Verdicts {
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s:%d:%d |\n", passWord(v.Pass), mdCell(v.Name), mdCell(v.Expected), mdCell(v.Actual),
			rep.File, v.Pos.Line, v.Pos.Col)
	}
	b.WriteString("\n")
}

// mdCell keeps a value inside its table cell: a pipe would end it, a line
// break the row.
func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(mdText(s), "|", `\|`), "\n", " ")
}

// mdText keeps text from being read as markup it is not.
func mdText(s string) string {
	return strings.NewReplacer("<", "&lt;", ">", "&gt;").Replace(s)
}
