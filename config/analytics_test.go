package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/configs"
	"github.com/visiond/visiond/internal/testutil"
)

// A camera's analytics settings, resolved: objects and events key by key from
// camera_defaults, masks, zones and lines as the camera gives them.
func TestAnalyticsSettings(t *testing.T) {
	cfg, err := config.Parse([]byte(`
camera_defaults:
  objects:
    track: [person, car]
    update_interval: 1m
    filters:
      - {class: car, min_score: 0.5, min_area: 0.001}
  events: {detections: tracked}
cameras:
  - id: plain
    url: rtsp://h/1
  - id: door
    url: rtsp://h/2
    objects:
      anchor: center
      update_interval: 10s
      filters:
        - {class: person, min_score: 0.4, max_area: 0.5}
    events:
      detections: "off"
    masks:
      - [[0, 0], [0.3, 0], [0.3, 0.2]]
    zones:
      - id: lower-half
        polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]
        classes: [person]
        min_seconds: 0
        loiter_seconds: 30
    lines:
      - id: middle
        points: [[0.5, 0], [0.5, 1]]
        band: 0.05
        anchor: center
`))
	if err != nil {
		t.Fatal(err)
	}
	plain, door := cfg.Cameras[0], cfg.Cameras[1]
	wantPlain := analytics.Config{Objects: analytics.Objects{Track: []string{"person", "car"}, UpdateInterval: time.Minute,
		Filters: []analytics.ClassFilter{{Class: "car", MinScore: 0.5, MinArea: 0.001}}},
		FrameInterval: 200 * time.Millisecond} // fps 5, the default
	if !reflect.DeepEqual(plain.Analytics(), wantPlain) || plain.Events.Detections != config.DetectionsTracked {
		t.Errorf("plain inherits: got %+v, events %+v", plain.Analytics(), plain.Events)
	}
	zero := 0.0
	wantDoor := analytics.Config{
		Objects: analytics.Objects{Track: []string{"person", "car"}, Anchor: analytics.AnchorCenter, UpdateInterval: 10 * time.Second,
			Filters: []analytics.ClassFilter{{Class: "person", MinScore: 0.4, MaxArea: 0.5}}},
		Masks: []analytics.Points{{{0, 0}, {0.3, 0}, {0.3, 0.2}}},
		Zones: []analytics.Zone{{ID: "lower-half", Polygon: analytics.Points{{0, 0.5}, {1, 0.5}, {1, 1}, {0, 1}},
			Classes: []string{"person"}, MinSeconds: &zero, LoiterSeconds: 30}},
		Lines:         []analytics.Line{{ID: "middle", Points: analytics.Points{{0.5, 0}, {0.5, 1}}, Band: 0.05, Anchor: analytics.AnchorCenter}},
		FrameInterval: 200 * time.Millisecond,
	}
	if !reflect.DeepEqual(door.Analytics(), wantDoor) || door.Events.Detections != config.DetectionsOff {
		t.Errorf("door:\ngot  %+v\nwant %+v\nevents %+v", door.Analytics(), wantDoor, door.Events)
	}

	// Without analytics settings: nothing, and every detection event.
	cfg, err = config.Parse([]byte("cameras:\n  - {id: a, url: rtsp://h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Cameras[0].Analytics(); !reflect.DeepEqual(a, analytics.Config{FrameInterval: 200 * time.Millisecond}) || cfg.Cameras[0].Events.Detections != config.DetectionsAll {
		t.Errorf("defaults: %+v, events %+v", a, cfg.Cameras[0].Events)
	}
	if m := (config.Events{}).DetectionMode(); m != config.DetectionsAll {
		t.Errorf("an unset mode is %q, want all", m)
	}
}

// objects.class_groups: camera_defaults' groups for a camera that sets none, the camera's
// own (an empty list: none) for one that does; the default groups when neither does;
// CheckClasses checks their classes.
func TestClassGroupsSettings(t *testing.T) {
	cfg, err := config.Parse([]byte(`
camera_defaults:
  objects:
    class_groups: [[car, truck], [bicycle, motorcycle]]
cameras:
  - {id: a, url: rtsp://h/1}
  - {id: b, url: rtsp://h/2, objects: {class_groups: []}}
  - {id: c, url: rtsp://h/3, objects: {class_groups: [[bus, truck]]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := [][][]string{{{"car", "truck"}, {"bicycle", "motorcycle"}}, {}, {{"bus", "truck"}}}
	for i, cam := range cfg.Cameras {
		if g := cam.Analytics().Objects.Groups(); !reflect.DeepEqual(g, want[i]) {
			t.Errorf("camera %s: class groups %v, want %v", cam.ID, g, want[i])
		}
	}
	if err := cfg.CheckClasses(coco); err != nil {
		t.Errorf("CheckClasses: %v", err)
	}
	cfg, err = config.Parse([]byte("cameras:\n  - {id: a, url: rtsp://h, objects: {class_groups: [[car, forklift]]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckClasses(coco); err == nil || !strings.Contains(err.Error(), `cameras[0].objects.class_groups[0]: "forklift" is not a class of the model`) {
		t.Errorf("CheckClasses of a group with forklift: %v", err)
	}
	cfg, err = config.Parse([]byte("cameras:\n  - {id: a, url: rtsp://h}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.Cameras[0].Analytics().Objects.Groups(); !reflect.DeepEqual(g, analytics.DefaultClassGroups()) {
		t.Errorf("default class groups %v", g)
	}
}

func TestParseDetectionEvents(t *testing.T) {
	for _, m := range config.DetectionEventModes() {
		if got, err := config.ParseDetectionEvents(string(m)); err != nil || got != m {
			t.Errorf("ParseDetectionEvents(%q) = %q, %v", m, got, err)
		}
	}
	for _, s := range []string{"", "none", "All"} {
		if _, err := config.ParseDetectionEvents(s); err == nil || !strings.Contains(err.Error(), "want all, tracked or off") {
			t.Errorf("ParseDetectionEvents(%q): %v", s, err)
		}
	}
}

// cam begins a file of one camera; its keys follow from line 4 on.
const cam = "cameras:\n  - id: a\n    url: rtsp://h\n"

// badAnalytics are bad analytics settings, each with the problem it must give: its field,
// line and message. They also seed FuzzParse.
var badAnalytics = []struct {
	name, yaml, field string
	line              int
	msg               string
}{
	{"polygon of 2 points", cam + "    zones:\n      - id: z\n        polygon: [[0, 0], [1, 1]]\n",
		"cameras[0].zones[0].polygon", 6, `(zone "z", camera "a")`},
	{"coordinate 1.5", cam + "    zones:\n      - id: z\n        polygon: [[0, 0], [1.5, 0], [1, 1]]\n",
		"cameras[0].zones[0].polygon", 6, `point 1 [1.5, 0] is outside the frame: coordinates are fractions 0..1 (zone "z", camera "a")`},
	{"negative coordinate in a mask", cam + "    masks:\n      - [[0, 0], [0.5, -0.1], [1, 1]]\n",
		"cameras[0].masks[0]", 5, "point 1 [0.5, -0.1] is outside the frame"},
	{"self-intersecting", cam + "    zones:\n      - id: bow\n        polygon: [[0, 0], [1, 1], [1, 0], [0, 1]]\n",
		"cameras[0].zones[0].polygon", 6, `(zone "bow", camera "a")`},
	{"self-intersecting mask", cam + "    masks:\n      - [[0, 0], [1, 1], [1, 0], [0, 1]]\n",
		"cameras[0].masks[0].polygon", 5, ""},
	{"duplicate zone id", cam + "    zones:\n      - {id: z, polygon: [[0, 0], [1, 0], [1, 1]]}\n      - {id: z, polygon: [[0, 0], [1, 0], [0, 1]]}\n",
		"cameras[0].zones[1].id", 6, `repeats zones[0] (zone "z", camera "a")`},
	{"duplicate line id", cam + "    lines:\n      - {id: l, points: [[0, 0], [1, 1]]}\n      - {id: l, points: [[0, 1], [1, 0]]}\n",
		"cameras[0].lines[1].id", 6, `repeats lines[0] (line "l", camera "a")`},
	{"zone without id", cam + "    zones:\n      - polygon: [[0, 0], [1, 0], [1, 1]]\n",
		"cameras[0].zones[0].id", 5, "is required"},
	{"bad zone id", cam + "    zones:\n      - {id: front door, polygon: [[0, 0], [1, 0], [1, 1]]}\n",
		"cameras[0].zones[0].id", 5, `"front door": want letters, digits`},
	{"line with equal points", cam + "    lines:\n      - id: l\n        points: [[0.5, 0.5], [0.5, 0.5]]\n",
		"cameras[0].lines[0].points", 6, `are the same point: a line needs two distinct ends (line "l", camera "a")`},
	{"line of 3 points", cam + "    lines:\n      - id: l\n        points: [[0, 0], [0.5, 0.5], [1, 1]]\n",
		"cameras[0].lines[0].points", 6, "has 3 points, want 2"},
	{"line band", cam + "    lines:\n      - {id: l, points: [[0, 0], [1, 1]], band: 0.7}\n",
		"cameras[0].lines[0].band", 5, "0.7 is outside 0..0.5"},
	{"bad anchor", cam + "    zones:\n      - id: z\n        polygon: [[0, 0], [1, 0], [1, 1]]\n        anchor: top\n",
		"cameras[0].zones[0].anchor", 7, `unknown anchor "top" (want bottom_center or center)`},
	{"negative min_seconds", cam + "    zones:\n      - id: z\n        polygon: [[0, 0], [1, 0], [1, 1]]\n        min_seconds: -1\n",
		"cameras[0].zones[0].min_seconds", 7, "-1 is not a number of seconds"},
	{"update_interval under a second", cam + "    objects:\n      update_interval: 500ms\n",
		"cameras[0].objects.update_interval", 5, "500ms is under a second"},
	{"min_score 2", cam + "    objects:\n      filters:\n        - {class: person, min_score: 2}\n",
		"cameras[0].objects.filters[0].min_score", 6, `2 is outside 0..1 (filter of "person", camera "a")`},
	{"filter of an untracked class", cam + "    objects:\n      track: [car]\n      filters:\n        - {class: person}\n",
		"cameras[0].objects.filters[0].class", 7, `"person" is not tracked`},
	{"class named twice", cam + "    zones:\n      - {id: z, polygon: [[0, 0], [1, 0], [1, 1]], classes: [car, car]}\n",
		"cameras[0].zones[0].classes", 5, `names "car" twice`},
	{"bad events.detections", cam + "    events:\n      detections: some\n",
		"cameras[0].events.detections", 5, `unknown value "some": want one of all, tracked, off`},
	{"empty events.detections", cam + "    events: {detections: \"\"}\n",
		"cameras[0].events.detections", 4, `unknown value empty: want one of all, tracked, off`},
	{"bad default events.detections", "camera_defaults:\n  events: {detections: tracks}\ncameras: []\n",
		"camera_defaults.events.detections", 2, `unknown value "tracks"`},
	{"bad default filter", "camera_defaults:\n  objects:\n    filters:\n      - {class: person, max_area: 1.5}\n" + cam,
		"camera_defaults.objects.filters[0].max_area", 4, "1.5 is outside 0..1"},
	{"unknown key in a zone", cam + "    zones:\n      - id: z\n        polygon: [[0, 0], [1, 0], [1, 1]]\n        colour: red\n",
		"cameras[0].zones[0].colour", 7, `unknown key "colour" (known here: anchor, classes, id, loiter_seconds, min_seconds, polygon)`},
	{"unknown key in objects", cam + "    objects:\n      min_score: 0.5\n",
		"cameras[0].objects.min_score", 5, `unknown key "min_score" (known here: anchor, class_groups, filters, track, update_interval)`},
	{"unknown key in events", cam + "    events:\n      objects: true\n",
		"cameras[0].events.objects", 5, `unknown key "objects" (known here: detections)`},
	{"zones in camera_defaults", "camera_defaults:\n  zones: []\ncameras: []\n",
		"camera_defaults.zones", 2, `unknown key "zones"`},
	{"class in two groups", cam + "    objects:\n      class_groups: [[car, truck], [truck, bus]]\n",
		"cameras[0].objects.class_groups[1]", 5, `"truck" is in objects.class_groups[0] too: a class is in one group at most (camera "a")`},
	{"class group of one", cam + "    objects:\n      class_groups: [[car]]\n",
		"cameras[0].objects.class_groups[0]", 5, "has 1 classes: a group needs at least two"},
	{"bad default class group", "camera_defaults:\n  objects:\n    class_groups: [[car, car]]\n" + cam,
		"camera_defaults.objects.class_groups[0]", 3, `names "car" twice`},
	{"point not a pair", cam + "    masks:\n      - [[0, 0], [1], [1, 1]]\n",
		"cameras[0].masks[0]", 5, "point 1 has 1 numbers, want [x, y]"},
	{"coordinate not a number", cam + "    masks:\n      - [[0, 0], [1, x], [1, 1]]\n",
		"cameras[0].masks[0][1][1]", 5, `want a number, got "x"`},
	{"polygon not a list", cam + "    zones:\n      - {id: z, polygon: 3}\n",
		"cameras[0].zones[0].polygon", 5, "want a list, got a single value"},
}

// Bad analytics settings, each reported at the camera's path and the line of the key.
func TestBadAnalytics(t *testing.T) {
	for _, tc := range badAnalytics {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			var cerr *config.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("got %v, want an *Error", err)
			}
			for _, p := range cerr.Problems {
				if p.Field == tc.field && p.Line == tc.line && strings.Contains(p.Msg, tc.msg) {
					return
				}
			}
			t.Errorf("want a problem %q at line %d containing %q; got:\n%v", tc.field, tc.line, tc.msg, err)
		})
	}
}

// A problem of camera_defaults.objects is reported once, there, not again at each camera
// that inherits it; a camera whose own key makes an inherited one wrong is told where it
// comes from.
func TestAnalyticsDefaultsReportedOnce(t *testing.T) {
	_, err := config.Parse([]byte(`camera_defaults:
  objects:
    filters:
      - {class: person, min_score: 1.5}
cameras:
  - {id: a, url: rtsp://h/1}
  - {id: b, url: rtsp://h/2}
  - id: c
    url: rtsp://h/3
    objects: {track: [car]}
`))
	want := `line 4: camera_defaults.objects.filters[0].min_score: 1.5 is outside 0..1 (filter of "person")
line 10: cameras[2].objects.filters[0].class: "person" is not tracked (objects.track: car) (filter of "person", camera "c", objects.filters from camera_defaults)`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

var coco = []string{"person", "bicycle", "car", "motorcycle", "bus", "truck"}

// CheckClasses names the camera, the element, the class and its line; it reports only the
// class names (the rest is Validate's), and nothing without labels.
func TestCheckClasses(t *testing.T) {
	cfg, err := config.Parse([]byte(`camera_defaults:
  objects: {track: [person, car, unicorn]}
cameras:
  - id: a
    url: rtsp://h/1
    zones:
      - id: dock
        polygon: [[0, 0], [1, 0], [1, 1]]
        classes: [forklift, car]
    lines:
      - {id: gate, points: [[0, 0], [1, 1]], classes: [person]}
  - id: b
    url: rtsp://h/2
    objects:
      track: [person, dog]
      filters: [{class: person, min_score: 0.3}]
`))
	if err != nil {
		t.Fatal(err) // class names are not known at parse time
	}
	if err := cfg.CheckClasses(nil); err != nil {
		t.Errorf("no labels: %v", err)
	}
	want := `line 2: camera_defaults.objects.track: "unicorn" is not a class of the model
line 9: cameras[0].zones[0].classes: "forklift" is not a class of the model (zone "dock", camera "a")
line 15: cameras[1].objects.track: "dog" is not a class of the model (camera "b")`
	err = cfg.CheckClasses(coco)
	var cerr *config.Error
	if !errors.As(err, &cerr) || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}

	ok, err := config.Parse([]byte("cameras:\n  - id: a\n    url: rtsp://h\n    objects: {track: [person, car]}\n    zones: [{id: z, polygon: [[0, 0], [1, 0], [1, 1]], classes: [car]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.CheckClasses(coco); err != nil {
		t.Errorf("known classes: %v", err)
	}
	// A config built in Go: no lines, the same problems.
	goCfg := *ok
	goCfg.Cameras = slices.Clone(ok.Cameras)
	goCfg.Cameras[0].Lines = []analytics.Line{{ID: "l", Points: analytics.Points{{0, 0}, {1, 1}}, Classes: []string{"bus", "tram"}}}
	if err := goCfg.CheckClasses(coco); err == nil || !strings.Contains(err.Error(), `cameras[0].lines[0].classes: "tram" is not a class of the model (line "l", camera "a")`) {
		t.Errorf("Go config: %v", err)
	}
}

// visiond check with a labels file checks the class names against it (CheckFiles).
func TestCheckFilesLabels(t *testing.T) {
	dir := t.TempDir()
	labels := filepath.Join(dir, "labels.txt")
	testutil.WriteFile(t, labels, strings.Join(coco, "\n")+"\n")
	model := filepath.Join(dir, "m.onnx")
	testutil.WriteFile(t, model, "x")
	doc := "workers: {model: %q, library: %q, labels: %q}\ncameras:\n  - id: a\n    url: rtsp://h\n    zones:\n      - {id: z, polygon: [[0, 0], [1, 0], [1, 1]], classes: [%s]}\n"
	load := func(classes string) *config.Config {
		t.Helper()
		path := testutil.TempFile(t, "visiond.yaml", fmt.Sprintf(doc, model, model, labels, classes))
		cfg, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if err := load("car, bus").CheckFiles(); err != nil {
		t.Errorf("known classes: %v", err)
	}
	err := load("car, tram").CheckFiles()
	if err == nil || err.Error() != `line 6: cameras[0].zones[0].classes: "tram" is not a class of the model (zone "z", camera "a") (workers.labels `+labels+`: 6 classes)` {
		t.Errorf("unknown class: %v", err)
	}
	// A labels file with a hole is reported, not taken for a list of classes.
	testutil.WriteFile(t, labels, "person\n\ncar\n")
	if err := load("car").CheckFiles(); err == nil || !strings.Contains(err.Error(), "workers.labels: labels "+labels+": line 2 is empty") {
		t.Errorf("labels with an empty line: %v", err)
	}
	// An unreadable labels file is reported once, as unreadable.
	if err := os.Remove(labels); err != nil {
		t.Fatal(err)
	}
	if err := load("car").CheckFiles(); err == nil || strings.Count(err.Error(), "workers.labels") != 1 || !strings.Contains(err.Error(), "cannot read") {
		t.Errorf("no labels file: %v", err)
	}
}

// The example documents the analytics settings with classes the COCO models have.
func TestExampleAnalytics(t *testing.T) {
	cfg, err := config.Parse(configs.Example)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckClasses(coco); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(cfg.Cameras, func(c config.Camera) bool { return c.ID == "gate" })
	gate := cfg.Cameras[i]
	if len(gate.Zones) != 1 || len(gate.Lines) != 1 || len(gate.Masks) != 1 || gate.Events.Detections != config.DetectionsTracked ||
		len(gate.Objects.Filters) != 2 || cfg.Cameras[0].Events.Detections != config.DetectionsAll {
		t.Errorf("the example's gate: %+v", gate)
	}
}

// analyticsFile is a file of n cameras, each with 8 zones (hexagons), 8 lines, 2 masks and
// filters.
func analyticsFile(n int) []byte {
	var b strings.Builder
	b.WriteString("cameras:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - id: cam%d\n    url: rtsp://h/%d\n    objects: {track: [person, car], filters: [{class: car, min_score: 0.5}]}\n", i, i)
		b.WriteString("    masks:\n      - [[0, 0], [0.2, 0], [0.2, 0.1]]\n      - [[0.8, 0], [1, 0], [1, 0.1]]\n    zones:\n")
		for z := range 8 {
			x := float64(z) / 8
			fmt.Fprintf(&b, "      - {id: z%d, polygon: [[%g, 0.5], [%g, 0.45], [%g, 0.5], [%g, 0.9], [%g, 0.95], [%g, 0.9]], classes: [person]}\n",
				z, x, x+0.06, x+0.12, x+0.12, x+0.06, x)
		}
		b.WriteString("    lines:\n")
		for l := range 8 {
			fmt.Fprintf(&b, "      - {id: l%d, points: [[%g, 0.1], [%g, 0.9]], classes: [person, car]}\n", l, 0.1+float64(l)/10, 0.1+float64(l)/10)
		}
	}
	return []byte(b.String())
}

// Parsing and validating a file of 100 cameras with 8 zones and 8 lines each, then checking
// its class names: what check, a start and every reload pay.
func BenchmarkParseAnalytics(b *testing.B) {
	data := analyticsFile(100)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		cfg, err := config.Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := cfg.CheckClasses(coco); err != nil {
			b.Fatal(err)
		}
	}
}
