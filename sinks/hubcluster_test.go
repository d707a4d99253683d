package sinks

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// A hub that is a cluster of three nats-server processes (Debian's), its stream sourcing the
// box's with 3 replicas, and a box whose leaf URL lists all three servers: the server that
// holds the box's leaf link is killed (SIGKILL) while 4 cameras publish, and started again
// later. The link moves to another server within seconds; every event the box's publisher
// accepted reaches the hub stream exactly once (count and ids); the hub's 3-replica mirror
// of the state bucket catches up with the box's.
func TestHubCluster(t *testing.T) {
	hub := natstest.StartHubCluster(t, 3)
	// waitFor is testutil.WaitFor that stops at once, with the server's log, when a hub
	// server dies unasked.
	waitFor := func(timeout time.Duration, what string, cond func() bool) {
		t.Helper()
		testutil.WaitFor(t, timeout, what, func() bool {
			if err := hub.Err(); err != nil {
				t.Fatal(err)
			}
			return cond()
		})
	}

	box := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab",
		Leaf: Leaf{URL: hub.LeafURLs()}, Logger: testutil.Logger(t)}
	if err := box.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(box.Close)
	p := startPublisher(t, &Publisher{Server: box, JetStream: true, Stream: testStream()})
	st := startState(t, &State{Publisher: p})
	waitFor(time.Minute, "the leaf node link", func() bool { return box.LeafConnected() && hub.LeafServer() != nil })

	hubJS := hub.Connect(t)
	hubStream := hub.SourceStream(t, "ALL", "lab", "visiond-lab", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var mirror jetstream.KeyValue
	natstest.Retry(t, time.Minute, "create the hub's mirror of the state bucket", func(ctx context.Context) error {
		var err error
		mirror, err = hubJS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "visiond-lab-state", Replicas: 3,
			Mirror: &jetstream.StreamSource{Name: "visiond-lab-state", External: &jetstream.ExternalStream{APIPrefix: "$JS.lab.API"}}})
		return err
	})
	hubMsgs := func() uint64 {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		info, err := hubStream.Info(ctx)
		if err != nil {
			return 0 // a server down, a leader being elected: asked again
		}
		return info.State.Msgs
	}

	// 4 cameras publish an object event every 20 ms each, and their line counts every 10th.
	const cameras = 4
	var (
		accepted  [cameras][]string // the ids of the events the publisher accepted, per camera
		lastCount [cameras]uint64   // the last line count put, per camera
		published atomic.Int64
		wg        sync.WaitGroup
	)
	camCtx, stopCameras := context.WithCancel(ctx)
	stop := sync.OnceFunc(func() { stopCameras(); wg.Wait() })
	defer stop()
	for i := range cameras {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cam := fmt.Sprintf("cam%d", i+1)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for seq := uint64(1); ; seq++ {
				select {
				case <-camCtx.Done():
					return
				case <-tick.C:
				}
				obj := sampleObject(ObjectUpdate)
				obj.Camera, obj.TrackID, obj.Seq, obj.Snapshot = cam, 1, seq, SnapshotName(cam, 1, seen)
				if err := p.PublishObject(obj); err != nil {
					t.Errorf("camera %s, event %d: %v", cam, seq, err)
					return
				}
				accepted[i] = append(accepted[i], obj.ID)
				published.Add(1)
				if seq%10 == 0 {
					err := st.PutLineCounts(cam, []analytics.Count{{Line: "gate", Fingerprint: "f1", Direction: "in", Class: "person", N: seq}})
					if err != nil {
						t.Errorf("camera %s, line counts %d: %v", cam, seq, err)
						return
					}
					lastCount[i] = seq
				}
			}
		}()
	}
	waitFor(2*time.Minute, "the hub stream to hold 200 events", func() bool { return hubMsgs() >= 200 })

	// Kill -9 the server that holds the box's link, twice: once while the hub stream's leader
	// is on another server, once with the leader on it too (both die at once).
	for _, leaderThere := range []bool{false, true} {
		leaf := hub.LeafServer()
		if leaf == nil {
			t.Fatal("no hub server (or more than one) holds the leaf link")
		}
		placeLeader(t, ctx, hubJS, hubStream, leaf.Name, leaderThere)
		info, err := hubStream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("killing %s (the leaf's server); the hub stream's leader is %s, %d events in it, %d accepted by the box",
			leaf.Name, info.Cluster.Leader, info.State.Msgs, published.Load())
		atKill := uint64(published.Load())
		killed := time.Now()
		leaf.Kill(t)
		var moved *natstest.ClusterServer
		waitFor(2*time.Minute, "the leaf link on another server", func() bool {
			moved = hub.LeafServer()
			return moved != nil && moved != leaf && box.LeafConnected()
		})
		took := time.Since(killed)
		t.Logf("the leaf link moved from %s to %s in %v", leaf.Name, moved.Name, took.Round(time.Millisecond))
		if took > 30*time.Second {
			t.Errorf("the leaf link took %v to move to another server; want within 30 s", took)
		}

		// Events keep reaching the hub stream, now on two servers of three: as many as the box
		// had accepted at the kill, then 200 more.
		waitFor(3*time.Minute, fmt.Sprintf("the %d events accepted before the kill in the hub stream", atKill),
			func() bool { return hubMsgs() >= atKill })
		t.Logf("the hub stream held the %d events accepted before the kill %v after it", atKill, time.Since(killed).Round(time.Millisecond))
		since := hubMsgs()
		waitFor(3*time.Minute, "200 more events in the hub stream with one server down", func() bool { return hubMsgs() >= since+200 })

		// The killed server comes back with its config and store, and catches up.
		leaf.Restart(t, 3*time.Minute)
		waitFor(3*time.Minute, "the hub stream's 3 replicas current", func() bool {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			info, err := hubStream.Info(ctx)
			return err == nil && replicasCurrent(info, 3)
		})
		t.Logf("%s rejoined %v after the kill", leaf.Name, time.Since(killed).Round(time.Millisecond))
		since = hubMsgs()
		waitFor(3*time.Minute, "200 more events in the hub stream after the restart", func() bool { return hubMsgs() >= since+200 })
	}
	stop()

	var ids []string
	for _, c := range accepted {
		ids = append(ids, c...)
	}
	n := uint64(len(ids))
	waitFor(2*time.Minute, "the box to store every accepted event", func() bool {
		s := p.Stats()
		return s.Published == n && s.Pending == 0
	})
	if s := p.Stats(); s.Dropped != 0 || s.Failed != 0 {
		t.Errorf("box publisher: %+v; want none dropped or failed", s)
	}
	waitFor(5*time.Minute, fmt.Sprintf("the hub stream to hold the %d events accepted", n), func() bool {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		info, err := hubStream.Info(ctx)
		return err == nil && info.State.Msgs >= n && len(info.Sources) == 1 && info.Sources[0].Lag == 0
	})

	// Exactly once: the same count and the same ids, none twice, none missing.
	got := natstest.StreamIDs(t, hubJS, "ALL")
	t.Logf("%d events accepted by the box, %d in the hub stream", n, len(got))
	if uint64(len(got)) != n {
		t.Errorf("the hub stream holds %d events; the box accepted %d", len(got), n)
	}
	want := map[string]bool{}
	for _, id := range ids {
		if want[id] {
			t.Fatalf("the box accepted id %s twice", id)
		}
		want[id] = true
	}
	held := map[string]int{}
	for _, id := range got {
		held[id]++
		if held[id] == 2 {
			t.Errorf("the hub stream holds %s more than once", id)
		}
		if !want[id] {
			t.Errorf("the hub stream holds %s, which the box did not accept", id)
		}
	}
	missing := 0
	for _, id := range ids {
		if held[id] == 0 {
			if missing < 10 {
				t.Errorf("event %s is missing from the hub stream", id)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d events missing from the hub stream", missing, n)
	}

	// The mirror catches up: the box's bucket's last value is the mirror's, key by key.
	waitFor(2*time.Minute, "the box to write its line counts", func() bool { return st.Stats().Pending == 0 })
	boxLast, err := st.kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(5*time.Minute, "the hub's mirror of the state bucket to catch up", func() bool {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := mirror.Status(ctx)
		return err == nil && s.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq >=
			boxLast.(*jetstream.KeyValueBucketStatus).StreamInfo().State.LastSeq
	})
	for i := range cameras {
		key := lineKey(fmt.Sprintf("cam%d", i+1), "gate")
		b, err := st.kv.Get(ctx, key)
		if err != nil {
			t.Fatalf("box bucket %s: %v", key, err)
		}
		m, err := mirror.Get(ctx, key)
		if err != nil {
			t.Fatalf("hub mirror %s: %v", key, err)
		}
		if !bytes.Equal(b.Value(), m.Value()) || b.Revision() != m.Revision() {
			t.Errorf("%s: the hub's mirror holds revision %d %s; the box's bucket revision %d %s",
				key, m.Revision(), m.Value(), b.Revision(), b.Value())
		}
		if !bytes.Contains(b.Value(), []byte(fmt.Sprintf(`"person":%d}`, lastCount[i]))) {
			t.Errorf("%s: the box's bucket holds %s; want the last count put, %d", key, b.Value(), lastCount[i])
		}
	}
}

// replicasCurrent reports whether the stream has a leader and its n-1 other replicas are
// online and current with it.
func replicasCurrent(info *jetstream.StreamInfo, n int) bool {
	if info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != n-1 {
		return false
	}
	for _, r := range info.Cluster.Replicas {
		if !r.Current || r.Offline {
			return false
		}
	}
	return true
}

// placeLeader asks the stream's leader to step down until the leader is on server name
// (there true) or is not (there false), every replica current.
func placeLeader(t *testing.T, ctx context.Context, js jetstream.JetStream, s jetstream.Stream, name string, there bool) {
	t.Helper()
	stream := s.CachedInfo().Config.Name
	testutil.WaitFor(t, 3*time.Minute, fmt.Sprintf("the leader of stream %s on %s: %v", stream, name, there), func() bool {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		info, err := s.Info(ctx)
		if err != nil || !replicasCurrent(info, info.Config.Replicas) {
			return false
		}
		if (info.Cluster.Leader == name) == there {
			return true
		}
		// nats-server picks the new leader among the current replicas; ask again until it is
		// the one wanted.
		_, _ = js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
		return false
	})
}
