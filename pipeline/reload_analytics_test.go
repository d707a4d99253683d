package pipeline

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
)

// analyticsBase is a daemon config of two sample cameras, cam0 with a zone and events of
// tracked objects only.
func analyticsBase(t *testing.T) string {
	cams := strings.Replace(sampleCameras(t, 2), "- {id: cam0,",
		"- {id: cam0, events: {detections: tracked}, zones: [{id: lower, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]], classes: [person]}],", 1)
	return fmt.Sprintf("site: test\nhttp: {listen: \"\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams)
}

// Issue 14, item 7: editing a camera's zones, lines, masks, objects or events through the
// file keeps its session: the camera is reported updated and takes the new settings; the
// other camera is kept as it was. A file whose zone names a class the model does not have,
// or whose polygon crosses itself, is rejected with an error naming the camera, the element
// and what is wrong, and changes nothing.
func TestReloadAnalyticsLive(t *testing.T) {
	fd := startFileDaemon(t, analyticsBase(t))
	srcs := fd.online(t, "cam0", "cam1")
	cam0, cam1 := fd.camera("cam0"), fd.camera("cam1")
	before, before1 := cam0.analytics(), cam1.analytics()
	if len(before.Analytics.Zones) != 1 || before.Analytics.Zones[0].ID != "lower" || before.Events.Detections != config.DetectionsTracked {
		t.Fatalf("cam0 starts with %+v", before)
	}
	if !slices.Equal(before.Analytics.Zones[0].Classes, []string{"person"}) || before1.Events.Detections != config.DetectionsAll {
		t.Fatalf("cam0 %+v, cam1 %+v", before, before1)
	}
	body := testutil.ReadFile(t, fd.path)

	// A new zone outline, a line, a mask, filters and no detection events.
	edited := strings.Replace(body, "events: {detections: tracked}, zones: [{id: lower, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]], classes: [person]}]",
		"events: {detections: \"off\"}, zones: [{id: lower, polygon: [[0, 0.6], [1, 0.6], [1, 1], [0, 1]], classes: [person, car]}], "+
			"lines: [{id: middle, points: [[0.5, 0], [0.5, 1]]}], masks: [[[0, 0], [0.2, 0], [0.2, 0.2]]], "+
			"objects: {track: [person, car], filters: [{class: car, min_score: 0.4}]}", 1)
	if edited == body {
		t.Fatal("the edit did not apply to the file")
	}
	fd.save(t, edited)
	ev := nextConfigEvent(t, fd.events)
	if ev.Result != "applied" || !slices.Equal(ev.Updated, []string{"cam0"}) || len(ev.Restarted)+len(ev.Added)+len(ev.Removed) != 0 {
		t.Fatalf("zones edited: config event %+v, want cam0 updated, nothing restarted", ev)
	}
	fd.untouched(t, srcs)
	after := fd.camera("cam0").analytics()
	want := analytics.Config{
		Objects: analytics.Objects{Track: []string{"person", "car"}, Filters: []analytics.ClassFilter{{Class: "car", MinScore: 0.4}}},
		Masks:   []analytics.Points{{{0, 0}, {0.2, 0}, {0.2, 0.2}}},
		Zones:   []analytics.Zone{{ID: "lower", Polygon: analytics.Points{{0, 0.6}, {1, 0.6}, {1, 1}, {0, 1}}, Classes: []string{"person", "car"}}},
		Lines:   []analytics.Line{{ID: "middle", Points: analytics.Points{{0.5, 0}, {0.5, 1}}}},
		// fps 5, the default: the tracker's frame interval
		FrameInterval: 200 * time.Millisecond,
	}
	if fmt.Sprint(after.Analytics) != fmt.Sprint(want) || after.Events.Detections != config.DetectionsOff {
		t.Fatalf("cam0's settings after the reload:\n%+v\nwant\n%+v, events off", after, want)
	}
	if fd.camera("cam1").analytics() != before1 {
		t.Fatal("cam1's settings were replaced, though unchanged")
	}
	if got := fd.Running().Cameras[0]; len(got.Lines) != 1 || got.Events.Detections != config.DetectionsOff {
		t.Fatalf("the config in force: %+v", got)
	}

	// An unknown class: rejected, naming the camera, the zone and the class.
	unknown := strings.Replace(edited, "classes: [person, car]", "classes: [person, unicorn]", 1)
	fd.save(t, unknown)
	ev = nextConfigEvent(t, fd.events)
	if ev.Result != "rejected" || !strings.Contains(ev.Error, `cameras[0].zones[0].classes: "unicorn" is not a class of the model (zone "lower", camera "cam0")`) ||
		!strings.Contains(ev.Error, "model yolov8n does not have (its 80 classes: person, bicycle,") {
		t.Fatalf("unknown class: config event %+v", ev)
	}
	if fd.camera("cam0").analytics() != after || fd.Running().Cameras[0].Zones[0].Classes[1] != "car" {
		t.Fatal("a rejected reload changed cam0's settings")
	}

	// A polygon that crosses itself: rejected by the file's validation, with its line.
	bow := strings.Replace(edited, "polygon: [[0, 0.6], [1, 0.6], [1, 1], [0, 1]]", "polygon: [[0, 0.6], [1, 1], [1, 0.6], [0, 1]]", 1)
	fd.save(t, bow)
	ev = nextConfigEvent(t, fd.events)
	if ev.Result != "rejected" || !strings.Contains(ev.Error, `cameras[0].zones[0].polygon: self-intersects at edges`) || !strings.Contains(ev.Error, `(zone "lower", camera "cam0")`) {
		t.Fatalf("self-intersecting polygon: config event %+v", ev)
	}
	if fd.camera("cam0").analytics() != after || fd.ReloadFailures() != 2 {
		t.Fatalf("a rejected reload changed cam0's settings, or was not counted (%d failures)", fd.ReloadFailures())
	}

	// The same settings written back: the cameras are kept, their settings too.
	fd.save(t, edited)
	ev = nextConfigEvent(t, fd.events)
	if ev.Result != "applied" || len(ev.Updated)+len(ev.Restarted)+len(ev.Added)+len(ev.Removed) != 0 {
		t.Fatalf("the file in force written back: config event %+v, want nothing changed", ev)
	}
	if fd.camera("cam0").analytics() != after {
		t.Fatal("unchanged settings were replaced")
	}
	fd.untouched(t, srcs)
}

// A change of camera_defaults.events reaches the cameras that inherit it; a reload that
// changes only a camera's fps keeps its settings (but the tracker's frame interval, which
// follows the fps); one that changes its source restarts it
// with its new settings.
func TestReloadAnalyticsWithSchedule(t *testing.T) {
	fd := startFileDaemon(t, analyticsBase(t))
	fd.online(t, "cam0", "cam1")
	before := fd.camera("cam0").analytics()
	body := testutil.ReadFile(t, fd.path)

	// camera_defaults.events changed: cam1, which inherits it, takes it; cam0, which sets its
	// own, is kept.
	fd.save(t, strings.Replace(body, "cameras:\n", "camera_defaults: {events: {detections: \"off\"}}\ncameras:\n", 1))
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || !slices.Equal(ev.Updated, []string{"cam1"}) || len(ev.Restarted) != 0 {
		t.Fatalf("camera_defaults.events changed: %+v, want cam1 updated", ev)
	}
	if fd.camera("cam1").analytics().Events.Detections != config.DetectionsOff || fd.camera("cam0").analytics() != before {
		t.Fatalf("after camera_defaults.events: cam1 %+v, cam0's settings replaced: %v", fd.camera("cam1").analytics(), fd.camera("cam0").analytics() != before)
	}

	// cam0's fps changed (and camera_defaults back as it was: cam1 all again).
	fd.save(t, strings.Replace(body, "- {id: cam0,", "- {id: cam0, fps: 2,", 1))
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || !slices.Equal(ev.Updated, []string{"cam0", "cam1"}) {
		t.Fatalf("fps changed: %+v", ev)
	}
	if fd.camera("cam1").analytics().Events.Detections != config.DetectionsAll {
		t.Fatalf("cam1 after camera_defaults restored: %+v", fd.camera("cam1").analytics())
	}
	// Its settings are the same but for the tracker's frame interval, which follows the fps.
	if c, want := fd.camera("cam0"), before.Analytics; c.status().FPS != 2 ||
		fmt.Sprint(c.analytics().Analytics) != fmt.Sprint(withInterval(want, 500*time.Millisecond)) {
		t.Fatalf("cam0 after an fps change: fps %v, settings %+v; want those before (%+v) with a frame interval of 500ms",
			c.status().FPS, c.analytics().Analytics, want)
	}
	moved := strings.Replace(body, "- {id: cam0,", "- {id: cam0, stall_timeout: 7s, zones: [{id: top, polygon: [[0, 0], [1, 0], [1, 0.5]]}], events: {detections: all},", 1)
	moved = strings.Replace(moved, "events: {detections: tracked}, zones: [{id: lower, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]], classes: [person]}],", "", 1)
	fd.save(t, moved)
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || !slices.Equal(ev.Restarted, []string{"cam0"}) {
		t.Fatalf("stall_timeout changed: %+v", ev)
	}
	if a := fd.camera("cam0").analytics(); len(a.Analytics.Zones) != 1 || a.Analytics.Zones[0].ID != "top" || a.Events.Detections != config.DetectionsAll {
		t.Fatalf("cam0 restarted with %+v", a)
	}
}

// A daemon whose config names a class the model does not have does not start, and says
// which.
func TestStartUnknownClass(t *testing.T) {
	body := strings.Replace(analyticsBase(t), "classes: [person]", "classes: [persons]", 1)
	cfg, err := config.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = t.TempDir()
	cfg.NATS.Listen = "127.0.0.1:0"
	d := &Daemon{Config: cfg, Logger: testutil.Logger(t), WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
	err = d.Start()
	d.Close()
	if err == nil || !strings.Contains(err.Error(), `cameras[0].zones[0].classes: "persons" is not a class of the model (zone "lower", camera "cam0")`) {
		t.Fatalf("Start: %v", err)
	}
}

// withoutAnalytics clears every analytics setting, and sameSource ignores them.
func TestWithoutAnalyticsCoversSettings(t *testing.T) {
	zero := 0.0
	cc := config.Camera{ID: "a", Objects: analytics.Objects{Anchor: "center"}, Masks: []analytics.Points{{{0, 0}}},
		Zones: []analytics.Zone{{ID: "z", MinSeconds: &zero}}, Lines: []analytics.Line{{ID: "l"}}, Events: config.Events{Detections: "off"},
		Clips: config.Clips{Enabled: true, Zones: []string{"z"}}}
	if !sameSource(config.Camera{ID: "a"}, cc) || sameSource(config.Camera{ID: "b"}, cc) {
		t.Fatal("sameSource looks at analytics settings, or not at the id")
	}
	got := withoutAnalytics(cc)
	if fmt.Sprint(got) != fmt.Sprint(config.Camera{ID: "a"}) {
		t.Fatalf("withoutAnalytics left %+v", got)
	}
}

// withInterval is a with the tracker's frame interval d.
func withInterval(a analytics.Config, d time.Duration) analytics.Config {
	a.FrameInterval = d
	return a
}
