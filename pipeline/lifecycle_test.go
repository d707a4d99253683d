package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
	"github.com/visiond/visiond/sources/samplecam"
)

// Issue 22, item 2: every object ends, with a reason; a camera, zone or line gone leaves no
// key in the state bucket.

// lifeConfig is a daemon config (site test, no HTTP) of cams, YAML camera entries.
func lifeConfig(t *testing.T, cams string) string {
	return fmt.Sprintf("site: test\nhttp: {listen: \"\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams)
}

// withZone gives camera id of the YAML camera entries cams a zone over the lower half of the
// frame, for people.
func withZone(cams, id string) string {
	return strings.Replace(cams, "- {id: "+id+",", "- {id: "+id+", zones: [{id: lower, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]], classes: [person], min_seconds: 0.2}],", 1)
}

// open returns the track ids of the objects reported new and not ended.
func (e *sceneEvents) open() map[uint64]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	open := map[uint64]bool{}
	for _, o := range e.objects {
		switch o.Type {
		case sinks.ObjectNew:
			open[o.TrackID] = true
		case sinks.ObjectEnd:
			delete(open, o.TrackID)
		}
	}
	return open
}

// ends returns each ended object's end event, by track id.
func (e *sceneEvents) ends() map[uint64]sinks.ObjectEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[uint64]sinks.ObjectEvent{}
	for _, o := range e.objects {
		if o.Type == sinks.ObjectEnd {
			out[o.TrackID] = o
		}
	}
	return out
}

// inZone returns the track ids inside zone (entered, not left) after the zone events so far,
// and the occupancy the latest event of the zone gave.
func (e *sceneEvents) inZone(zone string) (members map[uint64]bool, occupancy map[string]int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	members = map[uint64]bool{}
	for _, z := range e.zones {
		if z.Zone != zone {
			continue
		}
		switch z.Type {
		case sinks.ZoneEnter:
			members[z.TrackID] = true
		case sinks.ZoneExit:
			delete(members, z.TrackID)
		}
		occupancy = z.Occupancy
	}
	return members, occupancy
}

// stateKeys lists the keys of site test's state bucket on the NATS server at url.
func stateKeys(t *testing.T, url string) []string {
	t.Helper()
	nc, err := nats.Connect(url) // closed on return: tests poll it
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.KeyValue(ctx, sinks.StateBucket("visiond", "test"))
	if err != nil {
		t.Fatal(err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// keysOf returns the keys among keys of camera.
func keysOf(keys []string, camera string) []string {
	var out []string
	for _, k := range keys {
		if strings.Contains(k, "."+camera+".") || strings.HasSuffix(k, "."+camera) {
			out = append(out, k)
		}
	}
	return out
}

// checkEnds fails unless each of the objects open (track ids) ended with reason want, or
// with lost; at least one with want.
func checkEnds(t *testing.T, e *sceneEvents, open map[uint64]bool, want string) {
	t.Helper()
	testutil.WaitFor(t, time.Minute, fmt.Sprintf("the %d objects open to end", len(open)), func() bool {
		ends := e.ends()
		for id := range open {
			if _, ok := ends[id]; !ok {
				return false
			}
		}
		return true
	})
	ends, n := e.ends(), 0
	for id := range open {
		switch r := ends[id].Reason; r {
		case want:
			n++
		case sinks.EndLost: // lost just before
		default:
			t.Errorf("object %d ended with reason %q, want %s", id, r, want)
		}
	}
	if n == 0 {
		t.Errorf("none of the %d objects open ended with reason %s: %v", len(open), want, ends)
	}
	for _, o := range ends {
		if o.Reason == "" {
			t.Errorf("an end without a reason: %+v", o)
		}
	}
}

// A camera removed by a reload ends each of its objects (camera_removed), its zone's members
// leave (occupancy to zero), and no key of it is left in the state bucket; a camera restarted
// on another source by the same reload ends its objects with source_changed, one disabled
// with camera_disabled, and both keep their track ids.
func TestReloadEndsObjectsOfCamerasStopped(t *testing.T) {
	fd := startFileDaemon(t, lifeConfig(t, withZone(sampleCameras(t, 3), "cam0")))
	ev0 := subscribeScene(t, fd.NATSURL(), "visiond.test.cam0")
	ev1 := subscribeScene(t, fd.NATSURL(), "visiond.test.cam1")
	ev2 := subscribeScene(t, fd.NATSURL(), "visiond.test.cam2")
	testutil.WaitFor(t, 3*time.Minute, "objects open on every camera, people in cam0's zone, its keys in the bucket", func() bool {
		members, _ := ev0.inZone("lower")
		return len(ev0.open()) > 0 && len(ev1.open()) > 0 && len(ev2.open()) > 0 && len(members) > 0 &&
			len(keysOf(stateKeys(t, fd.NATSURL()), "cam0")) >= 2 // occupancy.cam0.lower, tracks.cam0
	})
	open0, open1, open2 := ev0.open(), ev1.open(), ev2.open()
	body := testutil.ReadFile(t, fd.path)
	var kept []string
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "  - {id: cam0,") {
			kept = append(kept, line)
		}
	}
	edited := strings.Replace(strings.Join(kept, "\n"), "- {id: cam1,", "- {id: cam1, stall_timeout: 7s,", 1)
	edited = strings.Replace(edited, "- {id: cam2,", "- {id: cam2, enabled: false,", 1)
	fd.save(t, edited)
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || !slices.Equal(ev.Removed, []string{"cam0", "cam2"}) || !slices.Equal(ev.Restarted, []string{"cam1"}) {
		t.Fatalf("cam0 removed, cam1's source changed, cam2 disabled: config event %+v", ev)
	}
	checkEnds(t, ev0, open0, sinks.EndCameraRemoved)
	checkEnds(t, ev1, open1, sinks.EndSourceChanged)
	checkEnds(t, ev2, open2, sinks.EndCameraDisabled)
	testutil.WaitFor(t, time.Minute, "cam0's zone empty", func() bool {
		members, occ := ev0.inZone("lower")
		return len(members) == 0 && len(occ) == 0
	})
	testutil.WaitFor(t, time.Minute, "no key of cam0 in the state bucket", func() bool {
		return len(keysOf(stateKeys(t, fd.NATSURL()), "cam0")) == 0
	})
	keys := stateKeys(t, fd.NATSURL())
	for _, cam := range []string{"cam1", "cam2"} {
		if !slices.Contains(keys, "tracks."+cam) {
			t.Errorf("%s, restarted or disabled, lost its next track id: the keys %v", cam, keys)
		}
	}

	// cam0 added again: its counter in the bucket is gone, but its ids go on past those its
	// objects had (ids from 1 again would repeat their track ids and event ids).
	var before uint64
	for id := range ev0.ends() {
		before = max(before, id)
	}
	fd.save(t, body)
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || !slices.Contains(ev.Added, "cam0") {
		t.Fatalf("cam0 added again (cam1 and cam2 as they were): config event %+v", ev)
	}
	testutil.WaitFor(t, 3*time.Minute, "new objects on cam0", func() bool { return len(ev0.open()) > 0 }) // the old all ended
	for id := range ev0.open() {
		if id <= before {
			t.Errorf("cam0, added again, gave track id %d: its objects before its removal had ids up to %d", id, before)
		}
	}
}

// A zone removed by a reload gives its members their exits (occupancy to zero, their
// objects an update saying so) and leaves no key; a zone that stays starts again from
// what is seen.
func TestReloadRemovedZoneExits(t *testing.T) {
	cams := strings.Replace(withZone(sampleCameras(t, 1), "cam0"), "zones: [", "zones: [{id: all, polygon: [[0, 0], [1, 0], [1, 1], [0, 1]]}, ", 1)
	fd := startFileDaemon(t, lifeConfig(t, cams))
	ev := subscribeScene(t, fd.NATSURL(), "visiond.test.cam0")
	testutil.WaitFor(t, 3*time.Minute, "people in zone lower, its key in the bucket", func() bool {
		members, _ := ev.inZone("lower")
		return len(members) > 0 && slices.Contains(stateKeys(t, fd.NATSURL()), "occupancy.cam0.lower")
	})
	members, _ := ev.inZone("lower")
	ev.mu.Lock()
	seen := len(ev.objects)
	ev.mu.Unlock()
	body := testutil.ReadFile(t, fd.path)
	edited := strings.Replace(body, ", {id: lower, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]], classes: [person], min_seconds: 0.2}", "", 1)
	if edited == body {
		t.Fatal("the edit did not apply")
	}
	fd.save(t, edited)
	if ce := nextConfigEvent(t, fd.events); ce.Result != "applied" || !slices.Equal(ce.Updated, []string{"cam0"}) {
		t.Fatalf("zone lower removed: config event %+v", ce)
	}
	testutil.WaitFor(t, time.Minute, "every member of lower gone out, occupancy empty", func() bool {
		members, occ := ev.inZone("lower")
		return len(members) == 0 && len(occ) == 0
	})
	testutil.WaitFor(t, time.Minute, "the key of zone lower gone", func() bool {
		keys := stateKeys(t, fd.NATSURL())
		return !slices.Contains(keys, "occupancy.cam0.lower") && slices.Contains(keys, "occupancy.cam0.all")
	})
	ev.mu.Lock()
	defer ev.mu.Unlock()
	told := map[uint64]bool{}
	for _, o := range ev.objects[seen:] {
		if o.Type == sinks.ObjectEnd || o.Type == sinks.ObjectUpdate && slices.Contains(o.Why, sinks.WhyZoneExit) && !slices.Contains(o.Zones, "lower") {
			told[o.TrackID] = true
		}
	}
	for id := range members {
		if !told[id] {
			t.Errorf("object %d, in zone lower when it was removed, had no update saying it left (nor an end)", id)
		}
	}
}

// A camera whose stream stops (its RTSP server gone) has its objects ended, camera_offline,
// once the tracker's lost buffer has passed without a frame.
func TestOfflineCameraEndsObjects(t *testing.T) {
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam0": testutil.Media(t, "vtest.h264.ts")}, Logger: testutil.Logger(t)}
	if err := rtsp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rtsp.Close)
	d := startTestDaemon(t, lifeConfig(t, fmt.Sprintf("  - {id: cam0, url: %q}\n", rtsp.URL("cam0"))))
	ev := subscribeScene(t, d.NATSURL(), "visiond.test.cam0")
	testutil.WaitFor(t, 3*time.Minute, "objects open", func() bool { return len(ev.open()) > 0 })
	open := ev.open()
	rtsp.Close()
	checkEnds(t, ev, open, sinks.EndCameraOffline)
	if c := d.camera("cam0"); c != nil && len(*c.objects.Load()) != 0 {
		t.Errorf("objects still listed for the offline camera: %+v", *c.objects.Load())
	}
}

// Stopping the daemon ends every object (shutdown), and the events are in the stream.
func TestShutdownEndsObjects(t *testing.T) {
	body := lifeConfig(t, withZone(sampleCameras(t, 1), "cam0"))
	stateDir := t.TempDir()
	d := startTestDaemonIn(t, body, stateDir)
	ev := subscribeScene(t, d.NATSURL(), "visiond.test.cam0")
	testutil.WaitFor(t, 3*time.Minute, "objects open", func() bool { return len(ev.open()) > 0 })
	d.Close()

	// The stream, read from the store with the daemon stopped.
	cfg, err := config.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir, cfg.NATS.Listen = stateDir, "127.0.0.1:0"
	srv, err := cfg.NATSServer()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	events := natstest.ReadStream[sinks.ObjectEvent](t, srv.ClientURL(), cfg.NATS.StreamName(cfg.Site), "visiond.test.cam0.objects")
	open := map[uint64]bool{}
	for _, o := range events {
		switch o.Type {
		case sinks.ObjectNew:
			open[o.TrackID] = true
		case sinks.ObjectEnd:
			delete(open, o.TrackID)
			if o.Reason == "" {
				t.Errorf("an end without a reason: %+v", o)
			}
		}
	}
	if len(open) != 0 {
		t.Errorf("objects never ended after the daemon stopped: %v", open)
	}
	var shutdown int
	for _, o := range events {
		if o.Type == sinks.ObjectEnd && o.Reason == sinks.EndShutdown {
			shutdown++
		}
	}
	if shutdown == 0 {
		t.Errorf("no object ended with reason shutdown among %d events", len(events))
	}
}

// A daemon that starts on a store holding the state of an earlier run that did not end its
// objects (killed) has no ghost occupants: each configured zone's occupancy starts empty and
// is rebuilt from what is seen, and the keys of zones and lines no longer configured go;
// the line counts of a configured line are kept.
func TestRestartWithoutGhosts(t *testing.T) {
	cams := strings.Replace(withZone(sampleCameras(t, 1), "cam0"), "- {id: cam0,", "- {id: cam0, lines: [{id: middle, points: [[0.5, 0], [0.5, 1]]}],", 1)
	body := lifeConfig(t, cams)
	stateDir := t.TempDir()
	cfg, err := config.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir, cfg.NATS.Listen = stateDir, "127.0.0.1:0"

	// The earlier run's state, written as the daemon writes it.
	srv, err := cfg.NATSServer()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	pub := cfg.NATSPublisher()
	pub.Server = srv
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	st := &sinks.State{Publisher: pub}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	middle := cfg.Cameras[0].Lines[0].Fingerprint()
	for _, err := range []error{
		st.PutOccupancy("cam0", "lower", map[string]int{"person": 99}),
		st.PutOccupancy("cam0", "gone", map[string]int{"person": 1}),
		st.PutLineCounts("cam0", []analytics.Count{{Line: "middle", Fingerprint: middle, Direction: analytics.In, Class: "person", N: 1000}}),
		st.PutLineCounts("cam0", []analytics.Count{{Line: "old", Fingerprint: "f", Direction: analytics.In, Class: "person", N: 3}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	st.Close(time.Minute)
	pub.Close(time.Minute)
	srv.Close()

	d := startTestDaemonIn(t, body, stateDir)
	testutil.WaitFor(t, 3*time.Minute, "cam0 analysed, the keys of zone gone and line old deleted", func() bool {
		keys := stateKeys(t, d.NATSURL())
		return d.camera("cam0").status().Analysed > 0 && slices.Contains(keys, "lines.cam0.middle") &&
			!slices.Contains(keys, "occupancy.cam0.gone") && !slices.Contains(keys, "lines.cam0.old")
	})
	js := natstest.ConnectJS(t, d.NATSURL())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.KeyValue(ctx, sinks.StateBucket("visiond", "test"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "occupancy.cam0.lower")
	if err != nil {
		t.Fatal(err)
	}
	var occ sinks.Occupancy
	if err := json.Unmarshal(e.Value(), &occ); err != nil || occ.Total >= 99 {
		t.Fatalf("zone lower after the restart: %s (%v), want its ghosts gone", e.Value(), err)
	}
	if e, err = kv.Get(ctx, "lines.cam0.middle"); err != nil || !strings.Contains(string(e.Value()), `"person":10`) {
		t.Fatalf("line middle's counts after the restart: %v, want its 1000 crossings kept", err)
	}
}
