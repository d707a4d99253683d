package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

func startState(t *testing.T, st *State) *State {
	t.Helper()
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(5 * time.Second) })
	return st
}

func ctxMinute(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

var sampleCounts = []analytics.Count{
	{Line: "gate", Fingerprint: "f1", Direction: "in", Class: "person", N: 17},
	{Line: "gate", Fingerprint: "f1", Direction: "in", Class: "traffic light", N: 1},
	{Line: "gate", Fingerprint: "f1", Direction: "out", Class: "person", N: 12},
	{Line: "road", Fingerprint: "f2", Direction: "out", Class: "car", N: 3},
}

// What is put lands in the bucket under the documented keys, one value per key, and a
// daemon started again on the same store reads its line counts and track ids back.
func TestStateBucket(t *testing.T) {
	dir := t.TempDir()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "lab"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Publisher{Server: s, JetStream: true, Stream: testStream(), Prefix: "visiond", Site: "lab", Instance: "inst"}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	st := &State{Publisher: p}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		st.PutOccupancy("door", "entrance", map[string]int{"person": 2, "car": 0, "traffic light": 1}),
		st.PutOccupancy("door", "lobby", map[string]int{}),
		st.PutLineCounts("door", sampleCounts),
		st.PutNextTrackID("door", 1043),
		st.PutNextTrackID("yard", 7),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "6 values written", func() bool { return st.Stats().Written == 6 })

	// The bucket as a dashboard sees it.
	js := natstest.ConnectJS(t, s.ClientURL())
	ctx := ctxMinute(t)
	kv, err := js.KeyValue(ctx, "visiond-lab-state")
	if err != nil {
		t.Fatal(err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status.History() != 1 || status.TTL() != 0 {
		t.Errorf("bucket history %d, TTL %v; want 1 and none", status.History(), status.TTL())
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	want := []string{"lines.door.gate", "lines.door.road", "occupancy.door.entrance", "occupancy.door.lobby", "tracks.door", "tracks.yard"}
	if strings.Join(slices.Sorted(slices.Values(keys)), " ") != strings.Join(want, " ") {
		t.Errorf("keys %v, want %v", keys, want)
	}
	e, err := kv.Get(ctx, "occupancy.door.entrance")
	if err != nil {
		t.Fatal(err)
	}
	var occ map[string]any
	if err := json.Unmarshal(e.Value(), &occ); err != nil {
		t.Fatal(err)
	}
	if occ["total"] != 3.0 || !reflect.DeepEqual(occ["by_class"], map[string]any{"person": 2.0, "traffic light": 1.0}) || occ["zone"] != "entrance" {
		t.Errorf("occupancy value %s", e.Value())
	}
	e, err = kv.Get(ctx, "lines.door.gate")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(e.Value()), `"fingerprint":"f1","counts":{"in":{"person":17,"traffic light":1},"out":{"person":12}}`) {
		t.Errorf("line value %s", e.Value())
	}

	// Restart the daemon: a new server on the same store, a new publisher and state.
	st.Close(5 * time.Second)
	p.Close(5 * time.Second)
	s.Close()
	s2 := startServerIn(t, dir)
	p2 := startPublisher(t, &Publisher{Server: s2, JetStream: true, Stream: testStream()})
	st2 := startState(t, &State{Publisher: p2})
	got, err := st2.LineCounts(ctx, "door")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleCounts) {
		t.Errorf("line counts after a restart:\n%v\nwant\n%v", got, sampleCounts)
	}
	if next, err := st2.NextTrackID(ctx, "door"); err != nil || next != 1043 {
		t.Errorf("next track id of door after a restart: %d, %v; want 1043", next, err)
	}
	if next, err := st2.NextTrackID(ctx, "hall"); err != nil || next != 0 {
		t.Errorf("next track id of a camera never tracked: %d, %v; want 0", next, err)
	}
	o, err := st2.Occupancy(ctx, "door")
	if err != nil || len(o) != 2 || o["entrance"].Total != 3 || o["lobby"].Total != 0 {
		t.Errorf("occupancy after a restart: %+v, %v", o, err)
	}
	if got, err := st2.LineCounts(ctx, "yard"); err != nil || len(got) != 0 {
		t.Errorf("line counts of a camera without lines: %v, %v", got, err)
	}

	// A line removed from the config is deleted; the other keeps its counts.
	if err := st2.DeleteLine("door", "road"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the delete", func() bool { return st2.Stats().Written == 1 })
	got, err = st2.LineCounts(ctx, "door")
	if err != nil || !reflect.DeepEqual(got, sampleCounts[:3]) {
		t.Errorf("line counts after deleting road: %v, %v", got, err)
	}

	// A camera removed from the config: its counts, occupancy and next track id go; another
	// camera keeps everything.
	if err := st2.PutOccupancy("yard", "gate", map[string]int{"car": 1}); err != nil {
		t.Fatal(err)
	}
	if err := st2.ForgetCamera(ctx, "door"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the camera forgotten", func() bool { return st2.Stats().Pending == 0 && st2.Stats().Written >= 5 })
	if got, err := st2.LineCounts(ctx, "door"); err != nil || len(got) != 0 {
		t.Errorf("line counts of a forgotten camera: %v, %v", got, err)
	}
	if o, err := st2.Occupancy(ctx, "door"); err != nil || len(o) != 0 {
		t.Errorf("occupancy of a forgotten camera: %v, %v", o, err)
	}
	if next, err := st2.NextTrackID(ctx, "door"); err != nil || next != 0 {
		t.Errorf("next track id of a forgotten camera: %d, %v; want none (0)", next, err)
	}
	if o, err := st2.Occupancy(ctx, "yard"); err != nil || o["gate"].Total != 1 {
		t.Errorf("occupancy of another camera: %v, %v", o, err)
	}
}

func startServerIn(t *testing.T, dir string) *Server {
	t.Helper()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "lab"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// While the server is unreachable, values wait and coalesce (the latest per key wins);
// reads see them; they are written when it returns; puts never block.
func TestStateCoalescesDuringOutage(t *testing.T) {
	dir := t.TempDir()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "ext"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	p := startPublisher(t, &Publisher{URL: s.ClientURL(), JetStream: true, Stream: testStream(), AckTimeout: time.Second})
	st := startState(t, &State{Publisher: p, MaxPending: 3})
	s.Close()
	testutil.WaitFor(t, time.Minute, "publisher to notice the outage", func() bool { return !p.nc.IsConnected() })
	for i := 1; i <= 100; i++ {
		if err := st.PutOccupancy("door", "entrance", map[string]int{"person": i}); err != nil {
			t.Fatal(err)
		}
		if err := st.PutNextTrackID("door", uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutLineCounts("door", sampleCounts[:1]); err != nil {
		t.Fatal(err)
	}
	// A fourth key finds MaxPending keys waiting: dropped, counted, said.
	err := st.PutOccupancy("door", "lobby", map[string]int{"person": 1})
	if err == nil || !errors.Is(err, errDropped) || !strings.Contains(err.Error(), "occupancy.door.lobby") {
		t.Errorf("a fourth key with 3 waiting: %v", err)
	}
	if stats := st.Stats(); stats.Pending != 3 || stats.Dropped != 1 {
		t.Errorf("during the outage: %+v, want 3 keys pending and 1 dropped", stats)
	}
	ctx := ctxMinute(t)
	if next, err := st.NextTrackID(ctx, "door"); err != nil || next != 100 {
		t.Errorf("next track id read during the outage: %d, %v; want the pending 100", next, err)
	}

	s2 := &Server{Listen: addr, StoreDir: dir, Domain: "ext"}
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Close)
	testutil.WaitFor(t, time.Minute, "the pending keys written", func() bool { return st.Stats().Pending == 0 && st.Stats().Written >= 3 })
	kv, err := natstest.ConnectJS(t, s2.ClientURL()).KeyValue(ctx, "visiond-lab-state")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "occupancy.door.entrance")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(e.Value()), `"by_class":{"person":100}`) {
		t.Errorf("occupancy after the outage: %s, want the latest (100 persons)", e.Value())
	}
	if e.Revision() > 4 { // one write per key, not one per put
		t.Errorf("the bucket's revision %d: the 201 puts were not coalesced", e.Revision())
	}
}

// Bad names and counts are refused with errors that say what is wrong; nothing is queued.
func TestStateBadInput(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	st := startState(t, &State{Publisher: p})
	ctx := ctxMinute(t)
	_, lineErr := st.LineCounts(ctx, "front.door")
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"camera with a space", st.PutOccupancy("front door", "z", nil), `camera id "front door": ' ' is not allowed`},
		{"zone with a dot", st.PutOccupancy("door", "a.b", nil), `zone id "a.b": '.' is not allowed`},
		{"empty zone", st.DeleteZone("door", ""), "zone id is empty"},
		{"line with a wildcard", st.PutLineCounts("door", []analytics.Count{{Line: "gate*", Direction: "in", Class: "car"}}), `line counts[0]: line id "gate*": '*' is not allowed`},
		{"long camera", st.PutNextTrackID(strings.Repeat("c", 65), 1), "65 characters, at most 64"},
		{"direction", st.PutLineCounts("door", []analytics.Count{{Line: "gate", Direction: "up", Class: "car"}}), `direction "up", want "in" or "out"`},
		{"no class", st.PutLineCounts("door", []analytics.Count{{Line: "gate", Direction: "in"}}), "line gate): no class"},
		{"two fingerprints", st.PutLineCounts("door", []analytics.Count{{Line: "g", Fingerprint: "a", Direction: "in", Class: "car"},
			{Line: "g", Fingerprint: "b", Direction: "out", Class: "car"}}), `fingerprint "b", but "a" before it`},
		{"read with a dot", lineErr, `camera id "front.door"`},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, tc.err, tc.want)
		}
	}
	if stats := st.Stats(); stats.Pending != 0 || stats.Written != 0 {
		t.Errorf("after bad input: %+v, want nothing queued", stats)
	}
	if err := (&State{}).Start(); err == nil || !strings.Contains(err.Error(), "needs a started publisher with JetStream") {
		t.Errorf("state without a publisher: %v", err)
	}
	st.Close(time.Second)
	if err := st.PutNextTrackID("door", 2); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("put after Close: %v", err)
	}
}
