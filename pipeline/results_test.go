package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	stdjpeg "image/jpeg"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
)

// sceneEvents gathers what a daemon publishes for one camera: detection, object, zone and
// line events, in the order they arrive.
type sceneEvents struct {
	mu      sync.Mutex
	dets    []sinks.DetectionEvent
	objects []sinks.ObjectEvent
	zones   []sinks.ZoneEvent
	lines   []sinks.LineEvent
}

func subscribeScene(t *testing.T, url, subjectPrefix string) *sceneEvents {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e := &sceneEvents{}
	sub := func(kind string, f func(data []byte) error) {
		if _, err := nc.Subscribe(subjectPrefix+"."+kind, func(m *nats.Msg) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if err := f(m.Data); err != nil {
				t.Errorf("%s event: %v: %s", kind, err, m.Data)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	sub("detections", func(b []byte) error {
		var ev sinks.DetectionEvent
		err := json.Unmarshal(b, &ev)
		e.dets = append(e.dets, ev)
		return err
	})
	sub("objects", func(b []byte) error {
		var ev sinks.ObjectEvent
		err := json.Unmarshal(b, &ev)
		e.objects = append(e.objects, ev)
		return err
	})
	sub("zones", func(b []byte) error {
		var ev sinks.ZoneEvent
		err := json.Unmarshal(b, &ev)
		e.zones = append(e.zones, ev)
		return err
	})
	sub("lines", func(b []byte) error {
		var ev sinks.LineEvent
		err := json.Unmarshal(b, &ev)
		e.lines = append(e.lines, ev)
		return err
	})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return e
}

// snapshot returns the snapshot named by the latest object event that names one, or "".
func (e *sceneEvents) snapshot() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.objects) - 1; i >= 0; i-- {
		if e.objects[i].Snapshot != "" {
			return e.objects[i].Snapshot
		}
	}
	return ""
}

// counts returns how many events of each kind arrived so far.
func (e *sceneEvents) counts() (dets, objects, zones, lines int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.dets), len(e.objects), len(e.zones), len(e.lines)
}

// Issue 14 on the sample camera: detections carry track ids, objects are reported new,
// updated and ended, a zone over the lower half sees people enter and leave, and a line down
// the middle counts crossings with a direction; /api/cameras/<id>/objects lists the objects
// followed. After a restart on the same state directory, the line's counts go on from where
// they were and track ids are not given again.
func TestAnalyticsOnSampleCamera(t *testing.T) {
	cams := strings.Replace(sampleCameras(t, 1), "- {id: cam0,",
		"- {id: cam0, zones: [{id: lower, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]], min_seconds: 0.2}], lines: [{id: middle, points: [[0.5, 0], [0.5, 1]]}], "+
			"objects: {filters: [{class: person, min_score: 0.3}]},", 1) // the workers' confidence is 0.25: the filter drops some for their score
	body := fmt.Sprintf("site: test\nnats: {listen: \"127.0.0.1:0\"}\nhttp: {listen: \"127.0.0.1:0\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams)
	stateDir := t.TempDir()
	start := func() *Daemon { return startTestDaemonIn(t, body, stateDir) }

	d := start()
	ev := subscribeScene(t, d.NATSURL(), "visiond.test.cam0")
	testutil.WaitFor(t, 3*time.Minute, "an object event naming its snapshot, a zone event and a line crossing", func() bool {
		_, o, z, l := ev.counts()
		return o > 0 && z > 0 && l > 0 && ev.snapshot() != ""
	})
	// The evidence named is in the site's object store, a JPEG.
	js := natstest.ConnectJS(t, d.NATSURL())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := js.ObjectStore(ctx, sinks.SnapshotBucket("visiond", "test"))
	if err != nil {
		t.Fatal(err)
	}
	name := ev.snapshot()
	var jpeg []byte
	testutil.WaitFor(t, time.Minute, "the snapshot "+name+" in the object store", func() bool {
		jpeg, err = store.GetBytes(ctx, name)
		return err == nil
	})
	if img, err := stdjpeg.Decode(bytes.NewReader(jpeg)); err != nil || img.Bounds().Dx() < 100 {
		t.Errorf("snapshot %s: %d bytes, %v", name, len(jpeg), err)
	}

	ev.mu.Lock()
	var tracked, all int
	ids := map[uint64]bool{}
	for _, de := range ev.dets {
		for _, det := range de.Detections {
			all++
			if det.TrackID != 0 {
				tracked++
				ids[det.TrackID] = true
			}
		}
	}
	types := map[string]int{}
	for _, o := range ev.objects {
		types[o.Type]++
		if o.TrackID == 0 || o.Label == "" || o.Best.Score <= 0 || o.ID == "" {
			t.Errorf("object event %+v: want a track id, a label, a best score and an id", o)
		}
	}
	z, l := ev.zones[0], ev.lines[0]
	lastLine := ev.lines[len(ev.lines)-1]
	ev.mu.Unlock()
	t.Logf("%d of %d detections with a track id (%d ids); object events %v; first zone event %+v; first line event %+v", tracked, all, len(ids), types, z, l)
	if all == 0 || tracked*2 < all {
		t.Errorf("%d of %d detections carry a track id, want most", tracked, all)
	}
	if types[sinks.ObjectNew] == 0 {
		t.Errorf("object events %v: want new ones", types)
	}
	if z.Zone != "lower" || z.TrackID == 0 || !ids[z.TrackID] {
		t.Errorf("zone event %+v: want zone lower and a track id seen in the detections", z)
	}
	if l.Line != "middle" || (l.Direction != sinks.DirectionIn && l.Direction != sinks.DirectionOut) || l.Counts[l.Direction][l.Label] == 0 {
		t.Errorf("line event %+v: want line middle, a direction and its count", l)
	}

	code, ctype, objs := request(t, "GET", fmt.Sprintf("http://%s/api/cameras/cam0/objects", d.HTTPAddr()))
	var live []liveObject
	if code != 200 || ctype != "application/json" || json.Unmarshal([]byte(objs), &live) != nil {
		t.Fatalf("/api/cameras/cam0/objects: %d %s %s", code, ctype, objs)
	}
	for _, o := range live {
		if o.TrackID == 0 || o.Label == "" || (o.State != "confirmed" && o.State != "lost") {
			t.Errorf("live object %+v", o)
		}
	}
	if code, _, _ := request(t, "GET", fmt.Sprintf("http://%s/api/cameras/nope/objects", d.HTTPAddr())); code != 404 {
		t.Errorf("objects of an unknown camera: %d, want 404", code)
	}

	m := scrape(t, fmt.Sprintf("http://%s/metrics", d.HTTPAddr()))
	m.mustHave(t, `visiond_camera_tracked_objects{camera="cam0"}`)
	m.mustHave(t, `visiond_zone_objects{camera="cam0",zone="lower"}`)
	if n := m.get(fmt.Sprintf(`visiond_line_crossings_total{camera="cam0",class=%q,direction=%q,line="middle"}`, l.Label, l.Direction)); !(n >= 1) {
		t.Errorf("visiond_line_crossings_total for the first crossing (%s, %s): %v, want at least 1", l.Label, l.Direction, n)
	}
	for _, reason := range []string{"class", "score", "area", "mask"} {
		m.mustHave(t, fmt.Sprintf(`visiond_filtered_detections_total{camera="cam0",reason=%q}`, reason))
	}
	// The camera's min_score, 0.3, drops some of what the workers keep (down to 0.25): how
	// soon depends on how many frames a loaded machine analysed by now.
	testutil.WaitFor(t, 3*time.Minute, "visiond_filtered_detections_total for score above 0", func() bool {
		return scrape(t, fmt.Sprintf("http://%s/metrics", d.HTTPAddr())).get(`visiond_filtered_detections_total{camera="cam0",reason="score"}`) > 0
	})
	ev.mu.Lock()
	for _, de := range ev.dets {
		for _, det := range de.Detections {
			if det.Label == "person" && det.Score < 0.3 {
				t.Errorf("a person of score %v was published, below the camera's min_score 0.3", det.Score)
			}
		}
	}
	ev.mu.Unlock()

	// Restart on the same state directory: counts and ids carry on.
	maxID := uint64(0)
	for id := range ids {
		maxID = max(maxID, id)
	}
	d.Close()
	d = start()
	ev2 := subscribeScene(t, d.NATSURL(), "visiond.test.cam0")
	testutil.WaitFor(t, 3*time.Minute, "a line crossing after the restart", func() bool {
		_, _, _, l := ev2.counts()
		return l > 0
	})
	ev2.mu.Lock()
	l2 := ev2.lines[0]
	var firstID uint64
	for _, de := range ev2.dets {
		for _, det := range de.Detections {
			if det.TrackID != 0 && (firstID == 0 || det.TrackID < firstID) {
				firstID = det.TrackID
			}
		}
	}
	ev2.mu.Unlock()
	// Crossings may have been counted after the last event this test saw before the
	// restart, so the counts go on from at least where that event left them.
	total := func(c map[string]map[string]uint64) (n uint64) {
		for _, byClass := range c {
			for _, v := range byClass {
				n += v
			}
		}
		return n
	}
	if before, after := total(lastLine.Counts), total(l2.Counts); after <= before {
		t.Errorf("first crossing after the restart: the line's counts add up to %d (%v), want more than the %d counted before the restart (%v)",
			after, l2.Counts, before, lastLine.Counts)
	}
	if firstID <= maxID {
		t.Errorf("track ids after the restart start at %d, want above the %d given before", firstID, maxID)
	}
	// The blocks' ends are on the disk beside the store, past every id given (idfloor.go).
	data, err := os.ReadFile(filepath.Join(stateDir, idFloorDir, "cam0"))
	if floor, perr := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64); err != nil || perr != nil || floor <= firstID {
		t.Errorf("the camera's floor of track ids: %q (%v); want a number above %d", data, err, firstID)
	}
}

// events.detections: all publishes every kept detection, tracked only those of confirmed
// tracks, off no detection event.
func TestForMode(t *testing.T) {
	dets := func() []sinks.Detection {
		return []sinks.Detection{{Label: "person", TrackID: 3}, {Label: "car"}, {Label: "person", TrackID: 9}}
	}
	if got, ok := forMode(config.DetectionsAll, dets()); !ok || len(got) != 3 {
		t.Errorf("all: %v %v", got, ok)
	}
	if got, ok := forMode("", dets()); !ok || len(got) != 3 {
		t.Errorf("the default: %v %v", got, ok)
	}
	if got, ok := forMode(config.DetectionsTracked, dets()); !ok || len(got) != 2 || got[0].TrackID != 3 || got[1].TrackID != 9 {
		t.Errorf("tracked: %v %v", got, ok)
	}
	if got, ok := forMode(config.DetectionsOff, dets()); ok || got != nil {
		t.Errorf("off: %v %v", got, ok)
	}
}

// Issue 22, item 1: a camera analysed at 0.5 fps gets tracks and object events: the parked
// car and truck at the top right of the sample video are confirmed at their third frame.
// Before, the tracker's 2 s confirmation window passed before that frame came, and nothing
// seen at 1 fps or slower ever got an id.
func TestSlowCameraObjects(t *testing.T) {
	cams := strings.Replace(sampleCameras(t, 1), "- {id: cam0,", "- {id: cam0, fps: 0.5,", 1)
	body := fmt.Sprintf("site: test\nnats: {listen: \"127.0.0.1:0\"}\nhttp: {listen: \"\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams)
	d := startTestDaemon(t, body)
	ev := subscribeScene(t, d.NATSURL(), "visiond.test.cam0")
	var vehicle sinks.ObjectEvent
	testutil.WaitFor(t, 3*time.Minute, "the new object event of a parked vehicle", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		for _, o := range ev.objects {
			if o.Type == sinks.ObjectNew && (o.Label == "car" || o.Label == "truck") {
				vehicle = o
				return true
			}
		}
		return false
	})
	if first, confirmed := vehicle.FirstSeen, vehicle.LastSeen; confirmed.Sub(first) < 3*time.Second {
		t.Errorf("%s %d: first seen %v, confirmed %v: want its third frame, 4 s after its first at 0.5 fps", vehicle.Label, vehicle.TrackID, first, confirmed)
	}
}
