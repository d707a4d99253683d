// Package workertest makes a test binary act as an inference worker process, so that the
// tests of the daemon side (infer/pool, pipeline) start real workers running the real
// worker code, with the test hooks of worker.Hooks set from the environment. It is imported
// by tests only:
//
//	func TestMain(m *testing.M) {
//		workertest.Main() // returns unless this process was started as a worker
//		os.Exit(m.Run())
//	}
//
// and a pool of such workers runs Command []string{os.Args[0]} with Env
// []string{workertest.Enable} (plus HangEnv, SlowEnv or OverlapEnv to set a hook).
package workertest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/visiond/visiond/infer/worker"
)

// Enable is the environment entry under which Main turns the test binary into a worker.
const Enable = enableVar + "=1"

const enableVar = "VISIOND_TEST_WORKER"

// Environment variables of a worker started with Enable that set its worker.Hooks.
const (
	// HangEnv=<n> sets Hooks.HangAt: the worker hangs in the session run of its n-th job.
	HangEnv = "VISIOND_TEST_WORKER_HANG"
	// SlowEnv=<Go duration> sets Hooks.Slow: added to each session run.
	SlowEnv = "VISIOND_TEST_WORKER_SLOW"
	// OverlapEnv=<n> sets Hooks.Overlap: the first n session runs wait until all n are
	// running at once.
	OverlapEnv = "VISIOND_TEST_WORKER_OVERLAP"
)

// Main returns at once unless the environment has Enable. Then the process is a worker:
// Main serves with the hooks HangEnv, SlowEnv and OverlapEnv ask for until the daemon (the test) stops
// it, and exits: status 0 after an orderly stop, 1 after an error, 2 for a bad hook value. It
// ignores SIGINT and SIGTERM, as `visiond worker` does (worker.IgnoreStopSignals).
func Main() {
	if os.Getenv(enableVar) != "1" {
		return
	}
	worker.IgnoreStopSignals() // as `visiond worker` does
	hooks, err := hooksFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	if err := worker.Serve(context.Background(), os.Args[1:], hooks); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func hooksFromEnv() (worker.Hooks, error) {
	var h worker.Hooks
	if v := os.Getenv(HangEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return h, fmt.Errorf("%s=%q: want a job number (from 1)", HangEnv, v)
		}
		h.HangAt = n
	}
	if v := os.Getenv(OverlapEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return h, fmt.Errorf("%s=%q: want a number of runs", OverlapEnv, v)
		}
		h.Overlap = n
	}
	if v := os.Getenv(SlowEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return h, fmt.Errorf("%s=%q: want a Go duration", SlowEnv, v)
		}
		h.Slow = d
	}
	return h, nil
}
