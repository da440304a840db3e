package tui

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"gatehouse/ledger"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// TestWrapWordsKeepsStyles: the screens' wrapper (internal/wrap) counts
// a styled line by its cells.
func TestWrapWordsKeepsStyles(t *testing.T) {
	styled := NewTheme(false).Bad.Render("stopped by lead") + " for T-4711"
	for _, l := range wrapWords(styled, 12) {
		if w := ansi.StringWidth(l); w > 12 {
			t.Errorf("styled line %q is %d cells wide", l, w)
		}
	}
}

// TestDocumentScrollsAndSaysWhatIsBelow: a long document shows how many
// lines are below and how to reach them; the movement keys scroll it to
// its last line, and a narrower screen lays it out again.
func TestDocumentScrollsAndSaysWhatIsBelow(t *testing.T) {
	doc := newDoc(NewTheme(true), "doc", func(context.Context) (renderFunc, *ledger.Action, error) {
		return func(_ Theme, w int) []string {
			var out []string
			for i := 1; i <= 40; i++ {
				out = append(out, para("", fmt.Sprintf("line %d of the document, wrapped at the width", i), w)...)
			}
			return out
		}, nil, nil
	})
	a := newDriven(doc, 80, 24) // 21 body lines
	s := screenText(a)
	if !strings.Contains(s, "line 1 of") || !strings.Contains(s, "↓ 20 more lines: ↓/j or pgdn") {
		t.Fatalf("top of the document:\n%s", s)
	}
	typeKeys(a, "down")
	if s := screenText(a); strings.Contains(s, "line 1 of") || !strings.Contains(s, "↓ 19 more lines") {
		t.Fatalf("after one line down:\n%s", s)
	}
	typeKeys(a, "G")
	s = screenText(a)
	if !strings.Contains(s, "line 40 of") || strings.Contains(s, "more lines") {
		t.Fatalf("bottom of the document:\n%s", s)
	}
	a.Update(tea.WindowSizeMsg{Width: 40, Height: 24})
	typeKeys(a, "G")
	lines := strings.Split(screenText(a), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "line 40 of the document, wrapped at the" && i+1 < len(lines) && strings.TrimSpace(lines[i+1]) == "width" {
			return
		}
	}
	t.Fatalf("at 40 columns the document is not laid out again:\n%s", strings.Join(lines, "\n"))
}
