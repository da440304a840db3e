package testmailbox

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkIngest measures messages stored per second over loopback, one
// SMTP connection per message (dial, EHLO, MAIL, RCPT, DATA, QUIT), with 1
// and 16 concurrent senders, into a file store and an in-memory one.
func BenchmarkIngest(b *testing.B) {
	for _, store := range []string{"File", "Memory"} {
		for _, conns := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/Conns%d", store, conns), func(b *testing.B) {
				cfg := Config{}
				if store == "File" {
					cfg.DBPath = filepath.Join(b.TempDir(), "mbox.db")
				}
				m := start(b, cfg)
				raw := message("bench", "benchmark")
				var next, failed atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				began := time.Now()
				for range conns {
					wg.Go(func() {
						for next.Add(1) <= int64(b.N) {
							if err := send(m.SMTPAddr(), []string{"ann@example.com"}, raw); err != nil {
								failed.Add(1)
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(began)
				b.StopTimer()
				if n := failed.Load(); n > 0 {
					b.Fatalf("%d of %d sends failed", n, b.N)
				}
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
			})
		}
	}
}
