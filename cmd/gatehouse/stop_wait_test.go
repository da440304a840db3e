package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"
)

// holdWriteLock is a process that takes the ledger's write lock (BEGIN
// IMMEDIATE) and keeps it until its stdin closes: another workflow's long
// transaction, a process paused inside one.
func holdWriteLock(path string) int {
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec("BEGIN IMMEDIATE"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	db.Exec("ROLLBACK")
	return 0
}

// startLocker starts holdWriteLock in a child and returns its pid and a
// function that releases the lock and waits for the child.
func startLocker(t *testing.T, path string) (int, func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GATEHOUSE_TEST_LOCK="+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("locker: %q %v %s", line, err, stderr.String())
	}
	var once sync.Once
	release := func() { once.Do(func() { stdin.Close(); cmd.Wait() }) }
	t.Cleanup(release)
	return cmd.Process.Pid, release
}

// stopProcess runs `gatehouse gate stop` as a child and sends each line it
// prints on stderr to lines.
func stopProcess(t *testing.T, bin, ledger string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(bin, "gate", "stop", "--ledger", ledger, "--as", "ops", "--reason", "incident 42")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

// TestStopSaysWhatItWaitsFor: with another process holding the ledger's
// write lock, gate stop names the holder within 2 s, records the stop as
// soon as the lock frees, and a SIGTERM ends a waiting stop within 1 s with
// nothing recorded and exit 20.
func TestStopSaysWhatItWaitsFor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := gatehouseBinary(t)
	e := newGateEnv(t)
	e.approved("enq-1", "alice", "crm.consent=yes")

	pid, release := startLocker(t, e.ledger)
	start := time.Now()
	cmd, lines := stopProcess(t, bin, e.ledger)
	select {
	case line := <-lines:
		if !strings.Contains(line, fmt.Sprintf("held by pid %d", pid)) || time.Since(start) > 2*time.Second {
			t.Fatalf("after %v: %q, want the holder (pid %d) named within 2s", time.Since(start), line, pid)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no line naming the holder within 5 s")
	}
	freed := time.Now()
	release()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stop after the lock freed: %v", err)
	}
	if d := time.Since(freed); d > 3*time.Second {
		t.Errorf("the stop took %v after the lock freed", d)
	}
	if out := e.must("history").stdout; !strings.Contains(out, "incident 42") {
		t.Fatalf("the stop is not recorded:\n%s", out)
	}
	e.must("resume", "--as", "ops", "--reason", "over")

	// Interrupted while it waits: ends at once, nothing recorded.
	_, release = startLocker(t, e.ledger)
	before := e.must("history").stdout
	cmd, lines = stopProcess(t, bin, e.ledger)
	<-lines // it waits, and says for whom
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if d := time.Since(sent); d > time.Second {
		t.Errorf("SIGTERM ended the waiting stop after %v, want within 1s", d)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("interrupted stop: %v, want exit %d", err, exitInterrupted)
	}
	release()
	if after := e.must("history").stdout; after != before {
		t.Errorf("an interrupted stop recorded something:\n%s", after)
	}
}
