// Package pgtest gives tests a real PostgreSQL server, started by the
// project itself: the server named by $GATEHOUSE_TEST_PG_URL when set,
// otherwise a throwaway cluster made from the machine's PostgreSQL binaries
// (initdb and pg_ctl, run as the postgres user when the tests run as root,
// since initdb refuses root) in a temporary directory on a free loopback
// port, stopped when the test binary ends. Each call to Database returns a
// new, empty database on that server.
//
// Where no PostgreSQL binaries exist the tests skip, saying so; under
// CI=true that is a failure instead, so a CI machine without them cannot
// pass silently.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URLEnv names an existing server to use instead of a throwaway cluster.
const URLEnv = "GATEHOUSE_TEST_PG_URL"

var (
	once    sync.Once
	cluster *Cluster
	errNone error // why no server could be had
)

// Cluster is a throwaway PostgreSQL cluster (or an existing server).
type Cluster struct {
	URL  string // postgres://… of the maintenance database
	Port int    // the port it listens on (0 for an existing server)
	dir  string // the data directory, "" for an existing server
	bin  string // the directory of pg_ctl
	cred *syscall.Credential
}

// Main runs the tests and stops the throwaway cluster afterwards. Use it
// from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if cluster != nil {
		cluster.Stop()
	}
	for _, c := range extra {
		c.Stop()
	}
	return code
}

// extra are the clusters StartClusterForProcess started.
var extra []*Cluster

// Database returns the URL of a new, empty database, or skips the test
// (fails it under CI=true) when no PostgreSQL server can be had.
func Database(t testing.TB) string {
	t.Helper()
	once.Do(func() { cluster, errNone = start() })
	if errNone != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL tests cannot run: %v", errNone)
		}
		t.Skipf("SKIPPING PostgreSQL tests: %v (set %s or install Debian's postgresql)", errNone, URLEnv)
	}
	name := "gh_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, cluster.URL)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	u, err := withDatabase(cluster.URL, name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Options shape a cluster of one's own (StartCluster).
type Options struct {
	// Listen is an extra address to listen on besides 127.0.0.1 (a test
	// host's network), and TrustNet the network whose clients may connect
	// without a password (e.g. 10.213.7.0/24).
	Listen   string
	TrustNet string
	// Durable keeps fsync on, as a production server runs, for benchmarks
	// whose figures must include the commit's flush (tests run without).
	Durable bool
}

// StartCluster starts a throwaway cluster of the caller's own (stopped with
// its Stop), for tests that need more than Database gives: the server
// reachable from test hosts in network namespaces, say. It never uses
// $GATEHOUSE_TEST_PG_URL. A test with no PostgreSQL binaries skips (fails
// under CI=true).
func StartCluster(t testing.TB, o Options) *Cluster {
	t.Helper()
	c := mustStart(t, o)
	t.Cleanup(c.Stop)
	return c
}

// StartClusterForProcess is StartCluster for a cluster shared by the
// whole test binary (stopped by Main), e.g. by several benchmarks.
func StartClusterForProcess(t testing.TB, o Options) *Cluster {
	t.Helper()
	c := mustStart(t, o)
	extra = append(extra, c)
	return c
}

// mustStart starts a cluster or ends the test: skipped where no server can
// be had, failed under CI=true, where a skip would hide the suite.
func mustStart(t testing.TB, o Options) *Cluster {
	t.Helper()
	c, err := startWith(o)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL cluster: %v", err)
		}
		t.Skipf("SKIPPING: PostgreSQL cluster: %v", err)
	}
	return c
}

// start finds or makes the server.
func start() (*Cluster, error) {
	if u := os.Getenv(URLEnv); u != "" {
		return &Cluster{URL: u}, nil
	}
	return startWith(Options{})
}

func startWith(o Options) (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin}
	if os.Geteuid() == 0 {
		if c.cred, err = postgresUser(); err != nil {
			return nil, err
		}
	}
	if c.dir, err = os.MkdirTemp("", "gatehouse-pg-"); err != nil {
		return nil, err
	}
	if c.cred != nil {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return nil, fmt.Errorf("give the cluster directory to postgres: %w", err)
		}
	}
	data := filepath.Join(c.dir, "data")
	if out, err := c.run("initdb", "-D", data, "-U", "gatehouse", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(c.dir)
		return nil, err
	}
	listen := "127.0.0.1"
	if o.Listen != "" {
		listen += "," + o.Listen
	}
	if o.TrustNet != "" {
		hba := filepath.Join(data, "pg_hba.conf")
		f, err := os.OpenFile(hba, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = fmt.Fprintf(f, "host all all %s trust\n", o.TrustNet)
			f.Close()
		}
		if err != nil {
			os.RemoveAll(c.dir)
			return nil, fmt.Errorf("allow %s: %w", o.TrustNet, err)
		}
	}
	fsync := "off"
	if o.Durable {
		fsync = "on"
	}
	opts := fmt.Sprintf("-c listen_addresses=%s -p %d -k %s -c fsync=%s -c max_connections=200", listen, port, c.dir, fsync)
	if out, err := c.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		os.RemoveAll(c.dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	c.URL = fmt.Sprintf("postgres://gatehouse@127.0.0.1:%d/postgres?sslmode=disable", port)
	c.Port = port
	return c, nil
}

// CreateDatabase makes a new, empty database on the cluster and returns
// its URL with host as the address clients reach the server by.
func (c *Cluster) CreateDatabase(t testing.TB, host string) string {
	t.Helper()
	name := "gh_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL)
	if err != nil {
		t.Fatalf("connect to the test cluster: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	return fmt.Sprintf("postgres://gatehouse@%s/%s?sslmode=disable", net.JoinHostPort(host, strconv.Itoa(c.Port)), name)
}

// Stop stops a throwaway cluster and removes its files.
func (c *Cluster) Stop() {
	if c.dir == "" {
		return
	}
	c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(c.dir)
}

func (c *Cluster) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd.CombinedOutput()
}

// binDir finds the directory holding initdb and pg_ctl.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	for i := len(dirs) - 1; i >= 0; i-- { // the newest version first
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i], nil
		}
	}
	return "", errors.New("no PostgreSQL binaries (pg_ctl) on this machine")
}

func postgresUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root needs the postgres user for initdb: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func withDatabase(raw, name string) (string, error) {
	cfg, err := pgx.ParseConfig(raw)
	if err != nil {
		return "", fmt.Errorf("test server URL: %w", err)
	}
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), name), nil
}
