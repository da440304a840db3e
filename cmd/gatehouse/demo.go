package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	smtpdest "gatehouse/destination/smtp"
	"gatehouse/fakes"
	"gatehouse/ledger"
	"gatehouse/testmailbox"
	"gatehouse/tui"
)

func init() { subcommands = append(subcommands, newDemoCmd) }

func newDemoCmd() *cobra.Command {
	demo := &cobra.Command{
		Use:   "demo",
		Short: "Demonstrations for trainers",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	demo.AddCommand(&cobra.Command{
		Use:   "takeover",
		Short: "Show an ownership takeover step by step, with a real mailbox",
		Long: `takeover shows the workflow's pane and two staff panes on one task. Space
advances the story, b steps back and r starts again; v and t act for the
focused staff member, and the story follows what the ledger then shows. The
mailbox is a real SMTP mailbox: it proves what arrived. Times are on the
story's clock, a minute a beat.`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			var c cleanups
			defer c.run()
			th := tui.NewTheme(tui.NoColor())
			d, err := newDemoScreen(context.Background(), th, &c)
			if err != nil {
				return err
			}
			return tui.Run(tui.NewApp(th, d))
		},
	})
	return demo
}

// cleanups collects what to release when the app has quit. The app adds
// to it from its commands (opening the demo), so it is locked.
type cleanups struct {
	mu sync.Mutex
	fs []func()
}

func (c *cleanups) add(f func()) {
	c.mu.Lock()
	c.fs = append(c.fs, f)
	c.mu.Unlock()
}

func (c *cleanups) run() {
	c.mu.Lock()
	fs := c.fs
	c.fs = nil
	c.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// demoStart is the pretend time the takeover demo's story begins at.
var demoStart = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// newDemoScreen returns the takeover demo. Each of its worlds (the first, and
// one per step back or restart) is a temporary ledger, an embedded test
// mailbox and the SMTP destination that sends to it, on a pretend clock.
func newDemoScreen(_ context.Context, th tui.Theme, c *cleanups) (tui.Screen, error) {
	return tui.NewDemo(th, tui.DemoConfig{Open: func(ctx context.Context) (tui.DemoWorld, error) {
		return openDemoWorld(ctx, c)
	}}), nil
}

// openDemoWorld starts one world of the demo. What it starts is released
// when the demo leaves the world, or when the app quits, whichever is first.
func openDemoWorld(ctx context.Context, c *cleanups) (w tui.DemoWorld, err error) {
	var undo []func()
	var once sync.Once
	release := func() {
		once.Do(func() {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		})
	}
	defer func() {
		if err != nil {
			release()
		}
	}()
	dir, err := os.MkdirTemp("", "gatehouse-demo-")
	if err != nil {
		return w, fmt.Errorf("demo: %w", err)
	}
	undo = append(undo, func() { os.RemoveAll(dir) })
	clk := fakes.NewClock(demoStart)
	l, err := ledger.Open(filepath.Join(dir, "ledger.db"), ledger.WithClock(clk))
	if err != nil {
		return w, fmt.Errorf("demo: %w", err)
	}
	undo = append(undo, func() { l.Close() })
	mb, err := testmailbox.Start(ctx, testmailbox.Config{Clock: clk})
	if err != nil {
		return w, fmt.Errorf("demo: start mailbox: %w", err)
	}
	undo = append(undo, func() { mb.Close() })
	dest, err := smtpdest.New(mb.Target())
	if err != nil {
		return w, fmt.Errorf("demo: %w", err)
	}
	c.add(release)
	return tui.DemoWorld{Ledger: l, Dest: dest.Gate(), Mailbox: tui.MailboxArrivals{Mailbox: mb}, Clock: clk, Close: release}, nil
}
