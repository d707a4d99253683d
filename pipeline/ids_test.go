package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
)

// Issue 22, item 3: a camera's track ids come in blocks reserved in the state bucket before
// use, the next one while half of the one in use is left; when the bucket does not answer,
// the scene goes on with a block from the clock, above every earlier id, and the bucket
// learns of it when it answers again; a scene started while it does not answer starts from
// the clock too.
func TestTrackIDBlocks(t *testing.T) {
	srv := &sinks.Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	proxy := natstest.StartProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	pub, st := startState(t, "nats://"+proxy.Addr, time.Second)
	rs := &results{pub: pub, state: st, log: testutil.Logger(t)}
	t.Cleanup(rs.close)
	stored := func() uint64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		next, err := st.NextTrackID(ctx, "door")
		if err != nil {
			t.Fatal(err)
		}
		return next
	}
	ahead := func(ids *trackIDs) uint64 {
		ids.mu.Lock()
		defer ids.mu.Unlock()
		return ids.ahead
	}
	settings := analytics.Config{FrameInterval: 200 * time.Millisecond}

	sc, ids, err := rs.newScene("door", settings, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sc.NextID() != 1 || stored() != 1+idBlock {
		t.Fatalf("a new camera's scene starts at id %d with %d stored, want 1 and %d", sc.NextID(), stored(), 1+idBlock)
	}
	// Half the block used: the next one is reserved ahead, while the scene goes on.
	sc.SetNextID(1 + idBlock/2)
	ids.prepare(sc, 3, time.Now())
	testutil.WaitFor(t, time.Minute, "the block ahead reserved", func() bool { return ahead(ids) != 0 })
	if ahead(ids) != 1+idBlock || stored() != 1+2*idBlock || sc.NextID() != 1+idBlock/2 {
		t.Fatalf("block ahead at %d, %d stored, scene at %d; want %d, %d and %d", ahead(ids), stored(), sc.NextID(), 1+idBlock, 1+2*idBlock, 1+idBlock/2)
	}
	// Too few ids left for a frame's detections: the scene moves to the block ahead.
	sc.SetNextID(idBlock)
	ids.prepare(sc, 2, time.Now())
	if sc.NextID() != 1+idBlock || ahead(ids) != 0 {
		t.Fatalf("scene at %d (block ahead %d) once its block ran out, want %d", sc.NextID(), ahead(ids), 1+idBlock)
	}

	// The bucket unreachable: the reservation ahead fails, and the ids come from the clock.
	proxy.Cut()
	sc.SetNextID(1 + idBlock + idBlock/2)
	ids.prepare(sc, 0, time.Now())
	testutil.WaitFor(t, time.Minute, "the reservation ahead to fail", func() bool {
		ids.mu.Lock()
		defer ids.mu.Unlock()
		return !ids.reserving && !ids.failedAt.IsZero()
	})
	floor := clockFloor(time.Now())
	sc.SetNextID(2 * idBlock)
	ids.prepare(sc, 5, time.Now())
	clock := sc.NextID()
	if clock < floor || ids.clockBlocks() != 1 {
		t.Fatalf("with the bucket unreachable the scene went on at %d (%d clock blocks), want a clock block from %d", clock, ids.clockBlocks(), floor)
	}

	// Back: the next block is reserved past the clock block, so the bucket knows of it.
	proxy.Restore()
	sc.SetNextID(clock + idBlock/2)
	testutil.WaitFor(t, 2*time.Minute, "a block reserved past the clock block", func() bool {
		ids.prepare(sc, 0, time.Now())
		return ahead(ids) != 0
	})
	if a := ahead(ids); a != clock+idBlock || stored() != clock+2*idBlock {
		t.Fatalf("after the outage the block ahead starts at %d with %d stored, want %d and %d", a, stored(), clock+idBlock, clock+2*idBlock)
	}

	// A scene started while the bucket does not answer starts from the clock.
	proxy.Cut()
	floor = clockFloor(time.Now())
	sc2, ids2, err := rs.newScene("yard", settings, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if sc2.NextID() < floor || ids2.clockBlocks() != 1 {
		t.Fatalf("a scene started with the bucket unreachable starts at %d (%d clock blocks), want from the clock, %d", sc2.NextID(), ids2.clockBlocks(), floor)
	}
}

// startState starts a publisher (site lab, JetStream) on the server at url and the site's
// state bucket, both closed when the test ends.
func startState(t *testing.T, url string, ackTimeout time.Duration) (*sinks.Publisher, *sinks.State) {
	t.Helper()
	pub := &sinks.Publisher{URL: url, JetStream: true, AckTimeout: ackTimeout,
		Stream: sinks.StreamConfig{Name: "visiond-lab", MaxAge: time.Hour, MaxBytes: 64 << 20, Duplicates: 2 * time.Minute},
		Prefix: "visiond", Site: "lab", Instance: "inst", Logger: testutil.Logger(t)}
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close(time.Second) })
	st := &sinks.State{Publisher: pub, Logger: testutil.Logger(t)}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(time.Second) })
	return pub, st
}
