package sinks

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// Blocks of track ids reserved in the bucket follow each other, take a floor given by the
// caller, never overlap when reserved concurrently, outlast a restart of the server and its
// state (they are written before ReserveTrackIDs returns, not queued), and a forgotten camera
// starts again at 1. An unreachable server fails the reservation within its context.
func TestReserveTrackIDs(t *testing.T) {
	dir := t.TempDir()
	s := startServerIn(t, dir)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	st := startState(t, &State{Publisher: p})
	ctx := ctxMinute(t)

	reserve := func(st *State, atLeast, n uint64) uint64 {
		t.Helper()
		first, err := st.ReserveTrackIDs(ctx, "door", atLeast, n)
		if err != nil {
			t.Fatal(err)
		}
		return first
	}
	if got := reserve(st, 0, 100); got != 1 {
		t.Fatalf("first block of a new camera starts at %d, want 1", got)
	}
	if got := reserve(st, 0, 100); got != 101 {
		t.Fatalf("second block starts at %d, want 101", got)
	}
	if got := reserve(st, 5000, 10); got != 5000 {
		t.Fatalf("a block with a floor above the stored next id starts at %d, want 5000", got)
	}
	if got := reserve(st, 0, 10); got != 5010 {
		t.Fatalf("the block after it starts at %d, want 5010", got)
	}

	// Concurrent reservations (as two scenes of one camera id, one restarting) never overlap.
	var mu sync.Mutex
	firsts := map[uint64]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			first, err := st.ReserveTrackIDs(ctx, "door", 0, 10)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			firsts[first] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	for f := uint64(5020); f < 5100; f += 10 {
		if !firsts[f] {
			t.Fatalf("concurrent blocks start at %v, want each of 5020..5090 once", firsts)
		}
	}

	// A new server and state on the same store: the next block follows the last one.
	st.Close(5 * time.Second)
	p.Close(5 * time.Second)
	s.Close()
	s2 := startServerIn(t, dir)
	p2 := startPublisher(t, &Publisher{Server: s2, JetStream: true, Stream: testStream()})
	st2 := startState(t, &State{Publisher: p2})
	if got := reserve(st2, 0, 10); got != 5100 {
		t.Fatalf("after a restart the next block starts at %d, want 5100", got)
	}
	if err := st2.ForgetCamera(ctx, "door"); err != nil {
		t.Fatal(err)
	}
	if got := reserve(st2, 0, 10); got != 1 {
		t.Fatalf("a forgotten camera's block starts at %d, want 1", got)
	}
	if _, err := st2.ReserveTrackIDs(ctx, "front door", 0, 10); err == nil || !strings.Contains(err.Error(), `camera id "front door"`) {
		t.Fatalf("a bad camera id: %v", err)
	}

	// The server gone: the reservation fails within its context.
	s2.Close()
	testutil.WaitFor(t, time.Minute, "the publisher to notice the outage", func() bool { return !p2.nc.IsConnected() })
	short, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := st2.ReserveTrackIDs(short, "door", 0, 10); err == nil {
		t.Fatal("a reservation with the server down succeeded")
	} else if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "reserve track ids") {
		t.Fatalf("a reservation with the server down: %v", err)
	}
}

// BenchmarkReserveTrackIDs is the cost of reserving a block of track ids on an embedded
// server with its store on disk: what a camera's scene waits for at its start.
func BenchmarkReserveTrackIDs(b *testing.B) {
	s := &Server{Listen: "127.0.0.1:0", StoreDir: b.TempDir()}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := &Publisher{Server: s, JetStream: true, Stream: testStream(), Prefix: "visiond", Site: "lab", Instance: "inst"}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	defer p.Close(time.Second)
	st := &State{Publisher: p}
	if err := st.Start(); err != nil {
		b.Fatal(err)
	}
	defer st.Close(time.Second)
	ctx := context.Background()
	for b.Loop() {
		if _, err := st.ReserveTrackIDs(ctx, "door", 0, 1024); err != nil {
			b.Fatal(err)
		}
	}
}
