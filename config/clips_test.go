package config_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
)

// Clips resolve key by key: a camera that sets a key of clips replaces the default's value of
// that key, whole, and keeps the others; clip_store takes its defaults and its values.
func TestClipsSettings(t *testing.T) {
	cfg, err := config.Parse([]byte(`
clip_store: {max_bytes_mib: 512, max_age: 24h, dir: /var/lib/visiond/clips}
camera_defaults:
  objects: {track: [person, car]}
  clips:
    enabled: true
    pre_capture: 8s
    classes: [person, car]
cameras:
  - id: plain
    url: rtsp://h/1
  - id: door
    url: rtsp://h/2
    zones:
      - {id: door, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]]}
    clips:
      post_capture: 0s
      max_length: 30m
      classes: [person]
      zones: [door]
  - id: quiet
    url: rtsp://h/3
    clips: {enabled: false, classes: []}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Clips{
		{Enabled: true, PreCapture: 8 * time.Second, PostCapture: 5 * time.Second, MaxLength: 2 * time.Minute, Classes: []string{"person", "car"}},
		{Enabled: true, PreCapture: 8 * time.Second, PostCapture: 0, MaxLength: 30 * time.Minute, Classes: []string{"person"}, Zones: []string{"door"}},
		{Enabled: false, PreCapture: 8 * time.Second, PostCapture: 5 * time.Second, MaxLength: 2 * time.Minute, Classes: []string{}},
	}
	for i, w := range want {
		if got := cfg.Cameras[i].Clips; !reflect.DeepEqual(got, w) {
			t.Errorf("%s: clips %+v, want %+v", cfg.Cameras[i].ID, got, w)
		}
	}
	if cs := cfg.ClipStore; cs != (config.ClipStore{MaxBytesMiB: 512, MaxAge: 24 * time.Hour, Dir: "/var/lib/visiond/clips"}) {
		t.Errorf("clip_store %+v", cs)
	}
	if dir, err := cfg.ClipDir(); err != nil || dir != "/var/lib/visiond/clips" {
		t.Errorf("ClipDir: %q, %v", dir, err)
	}
	if !cfg.ClipsEnabled() {
		t.Error("ClipsEnabled: false with two cameras making clips")
	}

	// The defaults: clips off with 5s, 5s and 2m; a store of 2 GiB and 7 days under the
	// state directory.
	def, err := config.Parse([]byte("state_dir: /srv/state\ncameras: [{id: a, url: rtsp://h}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := def.Cameras[0].Clips; !reflect.DeepEqual(got, config.Clips{PreCapture: 5 * time.Second, PostCapture: 5 * time.Second, MaxLength: 2 * time.Minute}) ||
		!reflect.DeepEqual(got, config.DefaultClips()) {
		t.Errorf("default clips %+v", got)
	}
	if cs := def.ClipStore; cs != (config.ClipStore{MaxBytesMiB: 2048, MaxAge: 168 * time.Hour}) {
		t.Errorf("default clip_store %+v", cs)
	}
	if dir, err := def.ClipDir(); err != nil || dir != filepath.Join("/srv/state", "clips") {
		t.Errorf("default ClipDir: %q, %v", dir, err)
	}
	if def.ClipsEnabled() {
		t.Error("ClipsEnabled: true with clips off")
	}
	// A Config built in Go: a zero Clips is clips off, valid, its length the default.
	if (config.Clips{}).Length() != 2*time.Minute || (config.Clips{MaxLength: time.Minute}).Length() != time.Minute {
		t.Error("Length: not MaxLength, or not the default for 0")
	}
}

// badClips are bad clips and clip_store settings, each with the problem it must give: its
// field, line and message.
var badClips = []struct {
	name, yaml, field string
	line              int
	msg               string
}{
	{"negative pre_capture", cam + "    clips: {pre_capture: -1s}\n",
		"cameras[0].clips.pre_capture", 4, `-1s is outside 0s..60s (camera "a")`},
	{"pre_capture over a minute", cam + "    clips:\n      pre_capture: 61s\n",
		"cameras[0].clips.pre_capture", 5, `1m1s is outside 0s..60s (camera "a")`},
	{"post_capture over a minute", cam + "    clips:\n      post_capture: 2m\n",
		"cameras[0].clips.post_capture", 5, `2m0s is outside 0s..60s`},
	{"max_length under 10s", cam + "    clips:\n      max_length: 9s\n",
		"cameras[0].clips.max_length", 5, `9s is outside 10s..30m (camera "a")`},
	{"max_length over 30m", cam + "    clips:\n      max_length: 31m\n",
		"cameras[0].clips.max_length", 5, `31m0s is outside 10s..30m`},
	{"max_length within the captures", cam + "    clips:\n      pre_capture: 30s\n      post_capture: 30s\n      max_length: 1m\n",
		"cameras[0].clips.max_length", 7, `1m0s is not more than pre_capture + post_capture (30s + 30s)`},
	{"max_length made short by a camera's captures", "camera_defaults:\n  clips: {max_length: 20s}\n" + cam + "    clips: {pre_capture: 15s}\n",
		"cameras[0].clips.max_length", 6, `20s is not more than pre_capture + post_capture (15s + 5s): a clip would be all capture (camera "a", clips.max_length from camera_defaults)`},
	{"bad duration", cam + "    clips: {pre_capture: soon}\n",
		"cameras[0].clips.pre_capture", 4, `invalid duration "soon"`},
	{"enabled not a bool", cam + "    clips:\n      enabled: sometimes\n",
		"cameras[0].clips.enabled", 5, `want true or false, got "sometimes"`},
	{"classes not a list", cam + "    clips:\n      classes: person\n",
		"cameras[0].clips.classes", 5, "want a list, got a single value"},
	{"unknown key", cam + "    clips:\n      pre_roll: 5s\n",
		"cameras[0].clips.pre_roll", 5, `unknown key "pre_roll" (known here: classes, enabled, max_length, post_capture, pre_capture, zones)`},
	{"empty class", cam + "    clips:\n      classes: [person, \"\"]\n",
		"cameras[0].clips.classes", 5, "has an empty class name"},
	{"class twice", cam + "    clips:\n      classes: [person, person]\n",
		"cameras[0].clips.classes", 5, `names "person" twice`},
	{"untracked class", cam + "    objects: {track: [car]}\n    clips:\n      classes: [person]\n",
		"cameras[0].clips.classes", 6, `"person" is not tracked (objects.track: car) (camera "a")`},
	{"class untracked by the camera's own track", "camera_defaults:\n  clips: {classes: [person]}\n" + cam + "    objects: {track: [car]}\n",
		"cameras[0].clips.classes", 4, `"person" is not tracked (objects.track: car) (camera "a", clips.classes from camera_defaults)`},
	{"unknown zone", cam + "    zones:\n      - {id: door, polygon: [[0, 0], [1, 0], [1, 1]]}\n    clips:\n      zones: [gate]\n",
		"cameras[0].clips.zones", 7, `"gate" is not a zone of the camera (zones: door) (camera "a")`},
	{"zone of a camera without zones", cam + "    clips: {zones: [door]}\n",
		"cameras[0].clips.zones", 4, `"door" is not a zone of the camera (zones: none)`},
	{"zone twice", cam + "    zones:\n      - {id: door, polygon: [[0, 0], [1, 0], [1, 1]]}\n    clips:\n      zones: [door, door]\n",
		"cameras[0].clips.zones", 7, `names "door" twice`},
	{"zones in camera_defaults", "camera_defaults:\n  clips:\n    zones: [door]\n" + cam,
		"camera_defaults.clips.zones", 3, "zones are a camera's own: set clips.zones per camera"},
	{"bad default pre_capture", "camera_defaults:\n  clips:\n    pre_capture: 90s\n" + cam,
		"camera_defaults.clips.pre_capture", 3, "1m30s is outside 0s..60s"},
	{"clips without JetStream", "nats:\n  jetstream: false\n" + cam + "    clips:\n      enabled: true\n",
		"cameras[0].clips.enabled", 7, `clips need nats.jetstream: true (the clip store is a JetStream object store); nats.jetstream is false (line 2) (camera "a")`},
	{"default clips without JetStream", "nats: {jetstream: false}\ncamera_defaults:\n  clips: {enabled: true}\n" + cam,
		"camera_defaults.clips.enabled", 3, `clips need nats.jetstream: true (the clip store is a JetStream object store); nats.jetstream is false (line 1)`},
	{"clips on a gstreamer camera", "cameras:\n  - id: g\n    kind: gstreamer\n    pipeline: videotestsrc ! appsink\n    clips: {enabled: true}\n",
		"cameras[0].clips.enabled", 5, `a camera of kind gstreamer makes no clips`},
	{"clip_store.max_bytes_mib 0", "clip_store:\n  max_bytes_mib: 0\ncameras: []\n",
		"clip_store.max_bytes_mib", 2, "must be in 1..1073741824 (1 PiB), got 0"},
	{"clip_store.max_bytes_mib over a PiB", "clip_store: {max_bytes_mib: 1073741825}\ncameras: []\n",
		"clip_store.max_bytes_mib", 1, "must be in 1..1073741824 (1 PiB), got 1073741825"},
	{"clip_store.max_age 0", "clip_store:\n  max_age: 0s\ncameras: []\n",
		"clip_store.max_age", 2, "must be > 0, got 0s"},
	{"clip_store.max_age negative", "clip_store: {max_age: -1h}\ncameras: []\n",
		"clip_store.max_age", 1, "must be > 0, got -1h0m0s"},
	{"clip_store unknown key", "clip_store:\n  bucket: mine\ncameras: []\n",
		"clip_store.bucket", 2, `unknown key "bucket" (known here: dir, max_age, max_bytes_mib)`},
	{"clip_store.max_bytes_mib not whole", "clip_store:\n  max_bytes_mib: 1.5\ncameras: []\n",
		"clip_store.max_bytes_mib", 2, `want a whole number, got "1.5"`},
}

// Bad clips settings, each reported at its field and the line of the key.
func TestBadClips(t *testing.T) {
	for _, tc := range badClips {
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

// A problem of camera_defaults.clips is reported once, there, not again at each camera that
// inherits it; clips off with JetStream off is no problem, nor clips on a camera that is off.
func TestClipsDefaultsReportedOnce(t *testing.T) {
	_, err := config.Parse([]byte(`nats: {jetstream: false}
camera_defaults:
  clips:
    enabled: true
    max_length: 5s
cameras:
  - {id: a, url: rtsp://h/1}
  - {id: b, url: rtsp://h/2}
`))
	want := `line 4: camera_defaults.clips.enabled: clips need nats.jetstream: true (the clip store is a JetStream object store); nats.jetstream is false (line 1)
line 5: camera_defaults.clips.max_length: 5s is outside 10s..30m`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	for _, doc := range []string{
		"nats: {jetstream: false}\ncameras: [{id: a, url: rtsp://h}]\n",
		"nats: {jetstream: false}\ncameras: [{id: a, url: rtsp://h, enabled: false, clips: {enabled: true}}]\n",
		"cameras: [{id: g, kind: gstreamer, pipeline: videotestsrc ! appsink}]\ncamera_defaults: {clips: {enabled: true}}\n",
	} {
		if _, err := config.Parse([]byte(doc)); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

// CheckClasses checks clips.classes against the model's labels, in camera_defaults and in
// each camera, once for a class inherited.
func TestClipsCheckClasses(t *testing.T) {
	cfg, err := config.Parse([]byte(`camera_defaults:
  clips: {classes: [person, unicorn]}
cameras:
  - {id: a, url: rtsp://h/1}
  - id: b
    url: rtsp://h/2
    clips:
      classes: [car, dragon]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := `line 2: camera_defaults.clips.classes: "unicorn" is not a class of the model
line 8: cameras[1].clips.classes: "dragon" is not a class of the model (camera "b")`
	if err := cfg.CheckClasses(coco); err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	if err := cfg.CheckClasses(nil); err != nil {
		t.Errorf("no labels: %v", err)
	}
}

// A Config built in Go: a camera's zero Clips is valid; one whose classes are untracked is
// reported without a line.
func TestClipsGoConfig(t *testing.T) {
	cfg := config.Default()
	c := config.Camera{ID: "a", Kind: "rtsp", URL: "rtsp://h", FPS: 5, Transport: "tcp", Decode: "all", Decoder: "cpu", StallTimeout: time.Second, Weight: 1}
	cfg.Cameras = []config.Camera{c}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("zero clips: %v", err)
	}
	cfg.Cameras[0].Objects.Track = []string{"car"}
	cfg.Cameras[0].Clips = config.Clips{Enabled: true, Classes: []string{"person"}}
	want := `cameras[0].clips.classes: "person" is not tracked (objects.track: car) (camera "a")`
	if err := cfg.Validate(); err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}
