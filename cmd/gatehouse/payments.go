package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"gatehouse/fakes"
)

func init() { subcommands = append(subcommands, newPaymentsCmd) }

// defaultPaymentsHTTP is where `payments serve` listens unless told
// otherwise: next to the mailbox's API, fixed so a README example and a
// second terminal agree.
const defaultPaymentsHTTP = "127.0.0.1:8026"

func newPaymentsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "payments <serve>",
		Short: "Run the payments fake: refunds with idempotency keys, a lagging search and faults",
		Long: `payments runs a fictional payment provider's refunds API on loopback, to
rehearse a refund against: Idempotency-Key honoured for a window (or ignored
with --keys none), a metadata search that lags behind creation, and the
faults a provider shows (see docs/payments.md). It keeps every refund it
made; GET /_fake/records counts them per action key.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("payments: missing verb (serve)")
			}
			return usageErr("payments: unknown verb %q (want serve)", args[0])
		},
	}
	cmd.AddCommand(newPaymentsServeCmd())
	return cmd
}

func newPaymentsServeCmd() *cobra.Command {
	var (
		addr   string
		opts   fakes.PaymentsOptions
		faults []string
	)
	cmd := &cobra.Command{
		Use:   "serve [--http ADDR] [--keys keys|none] [--window D] [--search-lag D] [--store-5xx] [--fault SPEC]…",
		Short: "Run the payments fake until interrupted",
		Long: `serve listens on loopback, prints its URL and runs until SIGINT or SIGTERM.
Refunds are kept in memory: a restart forgets them (a new epoch). Windows
and lags run on the real clock here.

Fault specs (repeat --fault for several), each for the next requests it
applies to:
  commit_then_drop[:count=N]    create, then close without a response
  delay[=DURATION][:count=N]    create, answer late (no duration: until POST /_fake/release)
  error_500[:count=N]           500 without creating (stored under the key with --store-5xx)
  error_429[:count=N]           429 with Retry-After
  drop_before_commit[:count=N]  read the request, close without creating
  down                          every call answers 503 until POST /_fake/up`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var fs []fakes.PaymentsFault
			for _, s := range faults {
				f, err := fakes.ParsePaymentsFault(s)
				if err != nil {
					return usageErr("--fault: %v", err)
				}
				fs = append(fs, f)
			}
			if opts.Keys != fakes.PaymentsKeys && opts.Keys != fakes.PaymentsNoKeys {
				return usageErr("--keys %q: want %s or %s", opts.Keys, fakes.PaymentsKeys, fakes.PaymentsNoKeys)
			}
			if opts.Window <= 0 {
				return usageErr("--window %s: must be positive", opts.Window)
			}
			if opts.SearchLag < 0 {
				return usageErr("--search-lag %s: must not be negative", opts.SearchLag)
			}
			return servePayments(cmd.Context(), cmd.OutOrStdout(), addr, opts, fs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "http", defaultPaymentsHTTP, "listen `address`, loopback only (port 0: any free port)")
	f.StringVar(&opts.Keys, "keys", fakes.PaymentsKeys, "honour Idempotency-Key (keys) or ignore it (none)")
	f.DurationVar(&opts.Window, "window", fakes.DefaultPaymentsWindow, "how long a key is remembered (`duration`)")
	f.DurationVar(&opts.SearchLag, "search-lag", 0, "how long a refund takes to show in the metadata search (`duration`)")
	f.BoolVar(&opts.Store5xx, "store-5xx", false, "store an injected 500 under the request's key, as Stripe does")
	f.StringArrayVar(&faults, "fault", nil, "inject a fault, e.g. commit_then_drop:count=1 (repeatable)")
	return cmd
}

// servePayments runs the fake on addr until ctx ends or SIGINT/SIGTERM
// arrives. Only loopback addresses are taken: the control API has no token.
func servePayments(ctx context.Context, out io.Writer, addr string, opts fakes.PaymentsOptions, faults []fakes.PaymentsFault) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := paymentsLoopback(addr); err != nil {
		return usageErr("payments serve: --http %s: %v", addr, err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := fakes.NewPayments(nil, opts)
	for _, f := range faults {
		if err := p.QueueFault(f); err != nil {
			return usageErr("--fault: %v", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("payments serve: %w", err)
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	o := p.Options()
	fmt.Fprintf(out, "http    http://%s\n", ln.Addr())
	if o.Keys == fakes.PaymentsKeys {
		fmt.Fprintf(out, "keys    Idempotency-Key honoured for %s (at most %d characters)\n", o.Window, fakes.MaxIdempotencyKey)
	} else {
		fmt.Fprintf(out, "keys    none: Idempotency-Key ignored, every request a new refund\n")
	}
	fmt.Fprintf(out, "search  GET /v1/refunds?metadata[%s]=KEY, lag %s\n", fakes.GatehouseKeyField, o.SearchLag)
	if o.Store5xx {
		fmt.Fprintln(out, "5xx     an injected 500 is stored under the key")
	}
	for _, f := range faults {
		fmt.Fprintf(out, "fault   %s\n", f)
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("payments serve: %w", err)
	}
	fmt.Fprintln(out, "stopping")
	p.Close() // held responses go out rather than hang the shutdown
	if err := srv.Close(); err != nil {
		return fmt.Errorf("payments serve: %w", err)
	}
	return nil
}

// paymentsLoopback refuses a listen address that is not loopback before
// anything is bound.
func paymentsLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad listen address: %w", err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("not a loopback address (the fake's control API has no token): want 127.0.0.1:PORT")
	}
	return nil
}
