package sinks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// The new events, the state bucket and the snapshot store reach a hub over the leaf link:
// the events in the hub's stream that sources the box's (exactly once, those made while the
// link was cut too); the bucket and the store read live through the box's JetStream domain;
// and the bucket mirrored into a hub bucket that catches up after a cut.
func TestObjectsStateSnapshotsReachHub(t *testing.T) {
	hub := natstest.StartHub(t, t.TempDir())
	link := natstest.StartProxy(t, strings.TrimPrefix(hub.LeafURL, "nats-leaf://"))
	box := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab",
		Leaf: Leaf{URL: "nats-leaf://" + link.Addr}}
	if err := box.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(box.Close)
	p := startPublisher(t, &Publisher{Server: box, JetStream: true, Stream: testStream()})
	st := startState(t, &State{Publisher: p})
	sn := startSnapshots(t, &Snapshots{Publisher: p})
	testutil.WaitFor(t, time.Minute, "the leaf node link", box.LeafConnected)
	hubStream := hub.SourceStream(t, "ALL", "lab", "visiond-lab")
	ctx := ctxMinute(t)

	// The hub mirrors the box's bucket (hub side: nats kv add visiond-lab-state --mirror
	// visiond-lab-state --mirror-domain lab, or this config).
	hubJS := hub.Connect(t)
	mirror, err := hubJS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "visiond-lab-state",
		Mirror: &jetstream.StreamSource{Name: "visiond-lab-state", External: &jetstream.ExternalStream{APIPrefix: "$JS.lab.API"}}})
	if err != nil {
		t.Fatal(err)
	}

	publish := func(track uint64) {
		t.Helper()
		obj := sampleObject(ObjectNew)
		obj.Seq, obj.TrackID, obj.Why, obj.Snapshot = 1, track, nil, ""
		zone := sampleZone(ZoneEnter)
		zone.TrackID = track
		line := sampleLine()
		line.TrackID = track
		for _, err := range []error{p.PublishObject(obj), p.PublishZone(zone), p.PublishLine(line),
			st.PutLineCounts("door", []analytics.Count{{Line: "gate", Fingerprint: "f1", Direction: "in", Class: "person", N: track}}),
			sn.PutSnapshot(SnapshotName("door", track, seen), fakeJPEG(200<<10, track))} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(1)
	testutil.WaitFor(t, time.Minute, "the hub to hold the first 3 events", func() bool {
		info, err := hubStream.Info(context.Background())
		return err == nil && info.State.Msgs == 3
	})
	link.Cut()
	testutil.WaitFor(t, time.Minute, "the link to drop", func() bool { return !box.LeafConnected() })
	publish(2)
	testutil.WaitFor(t, time.Minute, "the box to store 6 events, 2 snapshots, the counts", func() bool {
		return p.Stats().Published == 6 && sn.Stats().Stored == 2 && st.Stats().Written == 2
	})
	link.Restore()
	testutil.WaitFor(t, time.Minute, "the link back", box.LeafConnected)
	testutil.WaitFor(t, 2*time.Minute, "the hub to hold 6 events", func() bool {
		info, err := hubStream.Info(context.Background())
		return err == nil && info.State.Msgs >= 6
	})
	ids := map[string]int{}
	for _, m := range streamMsgs(t, hubJS, "ALL") {
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
		if !strings.HasSuffix(m.Subject, ".objects") && !strings.HasSuffix(m.Subject, ".zones") && !strings.HasSuffix(m.Subject, ".lines") {
			t.Errorf("hub stream: subject %s", m.Subject)
		}
	}
	if len(ids) != 6 {
		t.Errorf("hub stream ids %v, want 6 distinct", ids)
	}
	for id, n := range ids {
		if n != 1 {
			t.Errorf("hub stream holds %s %d times", id, n)
		}
	}

	// Live reads through the box's domain, from a client of the hub.
	nc, err := nats.Connect(hub.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	boxJS, err := jetstream.NewWithDomain(nc, "lab")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := boxJS.KeyValue(ctx, "visiond-lab-state")
	if err != nil {
		t.Fatal(err)
	}
	lineValue := func(kv jetstream.KeyValue) (uint64, error) {
		e, err := kv.Get(ctx, "lines.door.gate")
		if err != nil {
			return 0, err
		}
		var ls LineState
		if err := json.Unmarshal(e.Value(), &ls); err != nil {
			return 0, err
		}
		return ls.Counts["in"]["person"], nil
	}
	if n, err := lineValue(kv); err != nil || n != 2 {
		t.Errorf("hub reading the box's bucket: %d, %v; want 2", n, err)
	}
	obs, err := boxJS.ObjectStore(ctx, "visiond-lab-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	for track := uint64(1); track <= 2; track++ {
		data, err := obs.GetBytes(ctx, SnapshotName("door", track, seen))
		if err != nil || !bytes.Equal(data, fakeJPEG(200<<10, track)) {
			t.Errorf("hub reading snapshot %d from the box: %d bytes, %v", track, len(data), err)
		}
	}
	// The mirror catches up with what changed while the link was cut.
	testutil.WaitFor(t, 2*time.Minute, "the hub's mirror to catch up", func() bool {
		n, err := lineValue(mirror)
		return err == nil && n == 2
	})
}

// A hub lists and reads the box's clips through the box's JetStream domain, a clip stored
// while the leaf link was cut among them, once the link is back.
func TestClipsReachHub(t *testing.T) {
	hub := natstest.StartHub(t, t.TempDir())
	link := natstest.StartProxy(t, strings.TrimPrefix(hub.LeafURL, "nats-leaf://"))
	box := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab",
		Leaf: Leaf{URL: "nats-leaf://" + link.Addr}}
	if err := box.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(box.Close)
	p := startPublisher(t, &Publisher{Server: box, JetStream: true, Stream: testStream()})
	c := startClips(t, &Clips{Publisher: p})
	testutil.WaitFor(t, time.Minute, "the leaf node link", box.LeafConnected)
	mp4s := [][]byte{testutil.SampleMP4(t, 1), testutil.SampleMP4(t, 2)}

	// How a hub reads a box's clips: its JetStream through the box's domain.
	nc, err := nats.Connect(hub.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	boxJS, err := jetstream.NewWithDomain(nc, "lab")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxMinute(t)
	read := func(i int) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		obs, err := boxJS.ObjectStore(ctx, ClipBucket("visiond", "lab"))
		if err != nil {
			return err
		}
		data, err := obs.GetBytes(ctx, ClipName("door", clipAt(i)))
		if err != nil {
			return err
		}
		if !bytes.Equal(data, mp4s[i]) {
			return fmt.Errorf("clip %d: read %d bytes, not the %d stored", i, len(data), len(mp4s[i]))
		}
		return nil
	}

	if err := c.PutClip(clipInfo("door", clipAt(0)), nil, clipFile(t, t.TempDir(), mp4s[0])); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the first clip stored", func() bool { return c.Stats().Stored == 1 })
	if err := read(0); err != nil {
		t.Errorf("hub reading the first clip: %v", err)
	}
	link.Cut()
	testutil.WaitFor(t, time.Minute, "the link to drop", func() bool { return !box.LeafConnected() })
	if err := c.PutClip(clipInfo("door", clipAt(1)), nil, clipFile(t, t.TempDir(), mp4s[1])); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the box to store the second clip", func() bool { return c.Stats().Stored == 2 })
	link.Restore()
	testutil.WaitFor(t, time.Minute, "the link back", box.LeafConnected)
	testutil.WaitFor(t, 2*time.Minute, "the hub to read the clip stored during the cut", func() bool { return read(1) == nil })
	if err := read(0); err != nil {
		t.Errorf("hub reading the first clip after the cut: %v", err)
	}
	obs, err := boxJS.ObjectStore(ctx, ClipBucket("visiond", "lab"))
	if err != nil {
		t.Fatal(err)
	}
	clips, err := ListClips(ctx, obs, "door", 0)
	if err != nil || len(clips) != 2 || clips[0].Name != ClipName("door", clipAt(1)) || clips[1].Bytes != int64(len(mp4s[0])) ||
		len(clips[0].Objects) != 1 || clips[0].Objects[0].Label != "person" {
		t.Errorf("hub listing the box's clips: %+v, %v; want both, newest first, with their objects", clips, err)
	}
}
