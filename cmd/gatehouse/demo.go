package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"

	smtpdest "gatehouse/destination/smtp"
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
advances the story; v and t act for the focused staff member. The mailbox
column is a real SMTP mailbox: it proves what arrived.`,
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

// newDemoScreen starts what the demo needs on this machine: a temporary
// ledger, an embedded test mailbox and the SMTP destination that sends to it.
func newDemoScreen(ctx context.Context, th tui.Theme, c *cleanups) (tui.Screen, error) {
	dir, err := os.MkdirTemp("", "gatehouse-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	c.add(func() { os.RemoveAll(dir) })
	l, err := ledger.Open(filepath.Join(dir, "ledger.db"))
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	c.add(func() { l.Close() })
	if err := tui.RegisterDemoCast(ctx, l); err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	mb, err := testmailbox.Start(ctx, testmailbox.Config{})
	if err != nil {
		return nil, fmt.Errorf("demo: start mailbox: %w", err)
	}
	c.add(func() { mb.Close() })
	dest, err := smtpdest.New(mb.Target())
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	return tui.NewDemo(th, tui.DemoConfig{Ledger: l, Dest: dest.Gate(), Mailbox: tui.MailboxArrivals{Mailbox: mb}}), nil
}
