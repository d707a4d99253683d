package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeSystemd listens on a unixgram socket in a temp dir and points $NOTIFY_SOCKET at it.
func fakeSystemd(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

// recv returns the next notification, or "" when none comes within wait.
func recv(t *testing.T, conn *net.UnixConn, wait time.Duration) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotifierStates(t *testing.T) {
	conn := fakeSystemd(t)
	n := newNotifier(nil)

	n.Ready()
	if got := recv(t, conn, 5*time.Second); got != "READY=1" {
		t.Fatalf("Ready sent %q, want READY=1", got)
	}

	before := monotonicUsec()
	n.Reloading()
	after := monotonicUsec()
	got := recv(t, conn, 5*time.Second)
	lines := strings.Split(got, "\n")
	if len(lines) != 2 || lines[0] != "RELOADING=1" || !strings.HasPrefix(lines[1], "MONOTONIC_USEC=") {
		t.Fatalf("Reloading sent %q, want RELOADING=1 and MONOTONIC_USEC=...", got)
	}
	usec, err := strconv.ParseInt(strings.TrimPrefix(lines[1], "MONOTONIC_USEC="), 10, 64)
	if err != nil || usec < before || usec > after {
		t.Fatalf("Reloading sent %q: MONOTONIC_USEC not within [%d, %d], the CLOCK_MONOTONIC time of the call", got, before, after)
	}
	n.Ready()
	if got := recv(t, conn, 5*time.Second); got != "READY=1" {
		t.Fatalf("Ready after reload sent %q, want READY=1", got)
	}

	n.Status("reload rejected:\ncameras[0].fps: must be positive")
	if got, want := recv(t, conn, 5*time.Second), "STATUS=reload rejected: cameras[0].fps: must be positive"; got != want {
		t.Fatalf("Status sent %q, want %q (one line)", got, want)
	}

	n.Stopping()
	if got := recv(t, conn, 5*time.Second); got != "STOPPING=1" {
		t.Fatalf("Stopping sent %q, want STOPPING=1", got)
	}
}

// The watchdog pings at half of WATCHDOG_USEC while healthy, withholds its pings while
// unhealthy, resumes when healthy again, and returns when its context ends.
func TestNotifierWatchdog(t *testing.T) {
	conn := fakeSystemd(t)
	const interval = 100 * time.Millisecond // pings every 50 ms
	t.Setenv("WATCHDOG_USEC", strconv.Itoa(int(interval/time.Microsecond)))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))

	// health is what healthy() returns; calls gets each answer it gave, so the test knows
	// when the watchdog has acted on a change without guessing with sleeps.
	health := make(chan bool, 1)
	health <- true
	calls := make(chan bool, 1000)
	healthy := func() bool {
		h := <-health
		health <- h
		calls <- h
		return h
	}
	setHealth := func(h bool) { <-health; health <- h }

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	started := time.Now()
	go func() {
		defer close(done)
		newNotifier(nil).watchdog(ctx, healthy)
	}()

	for range 4 {
		if got := recv(t, conn, 5*time.Second); got != "WATCHDOG=1" {
			t.Fatalf("watchdog sent %q, want WATCHDOG=1", got)
		}
	}
	// The first ping is at once; the next three take 3 periods of 50 ms, or more on a loaded
	// machine, never less. Measured from the watchdog's start, not from the first ping's
	// arrival: this test may read that one late, with the next ones already waiting.
	if d := time.Since(started); d < 3*interval/2 {
		t.Fatalf("4 pings %v after the watchdog started, want at least 3 periods, %v (half of WATCHDOG_USEC each)", d, 3*interval/2)
	}

	// Unhealthy: once the watchdog has seen it, pings already sent are drained, and none
	// may follow over the next three checks.
	setHealth(false)
	for h := true; h; h = <-calls {
	}
	for recv(t, conn, 10*time.Millisecond) != "" {
	}
	for seen := 0; seen < 3; {
		if !<-calls {
			seen++
		}
	}
	if got := recv(t, conn, 20*time.Millisecond); got != "" {
		t.Fatalf("watchdog sent %q while unhealthy", got)
	}

	// Healthy again: pings resume.
	setHealth(true)
	if got := recv(t, conn, 5*time.Second); got != "WATCHDOG=1" {
		t.Fatalf("watchdog sent %q after recovering, want WATCHDOG=1", got)
	}

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("watchdog did not return after its context ended")
	}
}

// Without a notify socket, or without a watchdog for this process, nothing is sent and the
// watchdog returns at once.
func TestNotifierOff(t *testing.T) {
	healthy := func() bool { return true }
	returnsAtOnce := func(t *testing.T) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			newNotifier(nil).watchdog(context.Background(), healthy) // never cancelled
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("watchdog kept running while off")
		}
	}

	t.Run("no NOTIFY_SOCKET", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", "")
		t.Setenv("WATCHDOG_USEC", "100000")
		n := newNotifier(nil)
		n.Ready()
		n.Reloading()
		n.Status("x")
		n.Stopping()
		returnsAtOnce(t)
	})
	t.Run("no WATCHDOG_USEC", func(t *testing.T) {
		conn := fakeSystemd(t)
		t.Setenv("WATCHDOG_USEC", "")
		returnsAtOnce(t)
		if got := recv(t, conn, 20*time.Millisecond); got != "" {
			t.Fatalf("sent %q without a watchdog", got)
		}
	})
	t.Run("watchdog of another process", func(t *testing.T) {
		conn := fakeSystemd(t)
		t.Setenv("WATCHDOG_USEC", "100000")
		t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()+1))
		returnsAtOnce(t)
		if got := recv(t, conn, 20*time.Millisecond); got != "" {
			t.Fatalf("sent %q for another process's watchdog", got)
		}
	})
}
