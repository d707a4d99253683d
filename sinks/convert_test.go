package sinks

import (
	"errors"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/analytics/track"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// The detection event of a result names the camera, the model and the frame, with its boxes
// in source pixels and normalized and each detection's track id.
func TestNewDetectionEvent(t *testing.T) {
	captured := time.Unix(1_000_000, 0)
	r := infer.Result{
		Job: infer.Job{Camera: "door", Seq: 7, Captured: captured, Letterbox: geom.NewLetterbox(800, 400, 640, 640)},
		Detections: []infer.Detection{
			{ClassID: 0, Label: "person", Score: 0.9, Box: geom.Box{X: 200, Y: 100, W: 80, H: 200}},
			{ClassID: 2, Label: "car", Score: 0.7, Box: geom.Box{X: 0, Y: 0, W: 400, H: 200}},
		},
	}
	lat := Latency{Queue: 2, Total: 10}
	ev := NewDetectionEvent("door", "yolov8n", r, r.Detections, []uint64{42}, captured.Add(time.Second), lat)
	if ev.Camera != "door" || ev.Model != "yolov8n" || ev.LatencyMS != lat || !ev.PublishedAt.Equal(captured.Add(time.Second)) {
		t.Errorf("event %+v: want camera door, model yolov8n, latency %+v, published a second after capture", ev, lat)
	}
	if ev.Frame != (FrameInfo{Seq: 7, Width: 800, Height: 400}) || !ev.CapturedAt.Equal(captured) {
		t.Errorf("frame %+v captured %v: want seq 7, 800x400, captured %v", ev.Frame, ev.CapturedAt, captured)
	}
	want := []Detection{
		{Label: "person", ClassID: 0, Score: 0.9, TrackID: 42, Box: Box{X: 200, Y: 100, W: 80, H: 200}, BoxNorm: Box{X: 0.25, Y: 0.25, W: 0.1, H: 0.5}},
		{Label: "car", ClassID: 2, Score: 0.7, Box: Box{X: 0, Y: 0, W: 400, H: 200}, BoxNorm: Box{X: 0, Y: 0, W: 0.5, H: 0.5}},
	}
	if len(ev.Detections) != len(want) || ev.Detections[0] != want[0] || ev.Detections[1] != want[1] {
		t.Errorf("detections %+v, want %+v", ev.Detections, want)
	}
}

// Every kind of package analytics has its own wire name, the one docs/events.md lists.
func TestAnalyticsKindsOnTheWire(t *testing.T) {
	changes := map[analytics.Change]string{analytics.ObjectNew: "new", analytics.ObjectUpdate: "update", analytics.ObjectEnd: "end"}
	for c, want := range changes {
		if got := objectType(c); got != want {
			t.Errorf("object change %v: %q on the wire, want %q", c, got, want)
		}
	}
	whys := map[analytics.Why]string{analytics.WhyZoneEnter: "zone_enter", analytics.WhyZoneExit: "zone_exit",
		analytics.WhyStationary: "stationary", analytics.WhyMoving: "moving", analytics.WhyInterval: "interval"}
	for w, want := range whys {
		if got := whyOf([]analytics.Why{w}); len(got) != 1 || got[0] != want {
			t.Errorf("update reason %v: %q on the wire, want %q", w, got, want)
		}
	}
	if whyOf(nil) != nil {
		t.Error("no reasons: want none on the wire (omitted)")
	}
	ends := map[analytics.Why]string{analytics.WhyLost: "lost", analytics.WhyCameraOffline: "camera_offline",
		analytics.WhyCameraRemoved: "camera_removed", analytics.WhyCameraDisabled: "camera_disabled",
		analytics.WhySourceChanged: "source_changed", analytics.WhyShutdown: "shutdown", analytics.WhyClockBack: "clock_back", analytics.WhyVideoEnd: "video_end"}
	for w, want := range ends {
		if got := endReason(w); got != want || w.String() != want || !w.IsEnd() {
			t.Errorf("end reason %v: %q on the wire, want %q", w, got, want)
		}
		ev := NewObjectEvent("door", analytics.ObjectReport{Change: analytics.ObjectEnd, Why: []analytics.Why{w}, Seq: 2}, 640, 480)
		if ev.Reason != want || ev.Why != nil {
			t.Errorf("end for %v: reason %q why %v, want reason %q and no why", w, ev.Reason, ev.Why, want)
		}
	}
	if ev := NewObjectEvent("door", analytics.ObjectReport{Change: analytics.ObjectEnd, Seq: 2}, 640, 480); ev.Reason != EndLost {
		t.Errorf("an end without a reason: %q, want lost", ev.Reason)
	}
	if ev := NewObjectEvent("door", analytics.ObjectReport{Change: analytics.ObjectNew, Seq: 1}, 640, 480); ev.Reason != "" {
		t.Errorf("a new object with reason %q", ev.Reason)
	}
	zones := map[analytics.ZoneEventType]string{analytics.ZoneEnter: "enter", analytics.ZoneExit: "exit", analytics.ZoneLoiter: "loiter"}
	for z, want := range zones {
		if got := zoneType(z); got != want {
			t.Errorf("zone event %v: %q on the wire, want %q", z, got, want)
		}
	}
	for d, want := range map[analytics.Direction]string{analytics.In: "in", analytics.Out: "out"} {
		if got, ok := direction(d); !ok || got != want {
			t.Errorf("direction %v: %q on the wire, want %q", d, got, want)
		}
		if back, ok := fromDirection(want); !ok || back != d {
			t.Errorf("wire direction %q: %v, want %v", want, back, d)
		}
	}
	if _, ok := direction("up"); ok {
		t.Error(`direction "up" has a wire name`)
	}
	defer func() {
		if recover() == nil {
			t.Error("an object change without a wire type did not panic")
		}
	}()
	objectType(analytics.Change(99))
}

// An object report becomes an event with its zones, path and evidence; a zone event carries
// its zone's occupancy, a line event its line's counts only.
func TestNewObjectZoneLineEvents(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rep := analytics.ObjectReport{
		Change: analytics.ObjectUpdate, Why: []analytics.Why{analytics.WhyZoneEnter}, Seq: 3,
		Track: track.Track{ID: 9, Label: "person", Score: 0.8, FirstSeen: t0, LastSeen: t0.Add(time.Second)},
		Zones: []analytics.Presence{{Zone: "door", Inside: true, Total: 2 * time.Second}, {Zone: "yard", Total: time.Second}},
		Box:   geom.Box{X: 100, Y: 100, W: 50, H: 100}, Start: geom.Point{X: 0.1, Y: 0.5}, End: geom.Point{X: 0.2, Y: 0.5},
		Evidence: "door/t9.jpg",
	}
	ev := NewObjectEvent("cam", rep, 1000, 500)
	if ev.Type != ObjectUpdate || len(ev.Why) != 1 || ev.Why[0] != WhyZoneEnter || ev.TrackID != 9 || ev.Seq != 3 || ev.Snapshot != "door/t9.jpg" {
		t.Errorf("object event %+v", ev)
	}
	if len(ev.Zones) != 1 || ev.Zones[0] != "door" || ev.ZoneSeconds["door"] != 2 || ev.ZoneSeconds["yard"] != 1 {
		t.Errorf("zones %v, seconds %v: want in door, 2 s in door and 1 s in yard", ev.Zones, ev.ZoneSeconds)
	}
	if ev.BoxNorm != (Box{X: 0.1, Y: 0.2, W: 0.05, H: 0.2}) || ev.Path.Start != (Point{X: 0.1, Y: 0.5}) || ev.Path.Direction != 0 {
		t.Errorf("box %+v, path %+v", ev.BoxNorm, ev.Path)
	}

	z := NewZoneEvent("cam", analytics.ZoneEvent{Type: analytics.ZoneExit, Zone: "door", TrackID: 9, Dwell: 1500 * time.Millisecond}, nil)
	if z.Type != ZoneExit || z.DwellS != 1.5 || z.Occupancy == nil || len(z.Occupancy) != 0 {
		t.Errorf("zone event %+v: want an exit after 1.5 s from an empty zone", z)
	}
	counts := []analytics.Count{
		{Line: "gate", Direction: analytics.In, Class: "person", N: 4},
		{Line: "gate", Direction: analytics.Out, Class: "car", N: 1},
		{Line: "other", Direction: analytics.In, Class: "person", N: 7},
	}
	l := NewLineEvent("cam", analytics.LineEvent{Line: "gate", TrackID: 9, Direction: analytics.In, At: geom.Point{X: 0.5, Y: 0.5}}, counts)
	if l.Direction != DirectionIn || l.Counts[DirectionIn]["person"] != 4 || l.Counts[DirectionOut]["car"] != 1 || len(l.Counts) != 2 {
		t.Errorf("line event %+v: want in, with gate's counts only", l)
	}
}

// The events of the daemon's own life carry what their constructors are given, times in UTC.
func TestNewStatusConfigHealthGapEvents(t *testing.T) {
	at := time.Date(2026, 11, 30, 11, 0, 0, 0, time.FixedZone("CET", 3600))
	st := NewStatusEvent("door", "online", "offline", "", at, 12430500*time.Microsecond)
	if *st != (StatusEvent{Camera: "door", State: "online", Previous: "offline", At: at.UTC(), GapMS: 12430.5}) {
		t.Errorf("status event %+v", st)
	}
	ch := ConfigChanges{Added: []string{"yard"}, Updated: []string{"door"}, WorkersReplaced: true, NeedsRestart: []string{"nats"}}
	if ev := NewConfigEvent(at, ch, nil); ev.Result != ConfigApplied || ev.Error != "" || !ev.At.Equal(at) || ev.At.Location() != time.UTC ||
		len(ev.Added) != 1 || len(ev.Updated) != 1 || !ev.WorkersReplaced || len(ev.NeedsRestart) != 1 {
		t.Errorf("applied config event %+v", ev)
	}
	if ev := NewConfigEvent(at, ConfigChanges{}, errors.New("line 3: cameras[0].url: missing")); ev.Result != ConfigRejected ||
		ev.Error != "line 3: cameras[0].url: missing" || ev.Added != nil {
		t.Errorf("rejected config event %+v", ev)
	}
	cams := []CameraHealth{{Camera: "door", State: "online", FPS: 5, Decoded: 250, Analysed: 49, Dropped: 1}}
	h := NewHealthEvent(at, 10*time.Second, time.Minute, cams, 2)
	if h.Interval != 10 || h.UptimeS != 60 || h.Workers != 2 || len(h.Cameras) != 1 || h.Cameras[0].FPSAchieved != 4.9 || h.At.Location() != time.UTC {
		t.Errorf("health event %+v", h)
	}
	if h := NewHealthEvent(at, 0, 0, nil, 0); h.Cameras == nil || len(h.Cameras) != 0 {
		t.Errorf("health event of no camera: cameras %#v, want empty, not nil", h.Cameras)
	}
	g := NewGapEvent(GapStoreFull, 12, at.Add(-time.Hour), at, 1, 12, at)
	if *g != (GapEvent{Reason: "store_full", Events: 12, From: at.Add(-time.Hour).UTC(), To: at.UTC(), FirstSeq: 1, LastSeq: 12, At: at.UTC()}) {
		t.Errorf("gap event %+v", g)
	}
}
