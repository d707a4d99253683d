package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/configs"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
)

// eventLog is an EventSink that keeps every event it is given, in order.
type eventLog struct {
	mu      sync.Mutex
	dets    []*sinks.DetectionEvent
	objects []*sinks.ObjectEvent
	zones   []*sinks.ZoneEvent
	lines   []*sinks.LineEvent
	all     []string // each event as JSON, its kind first, without what the wall clock decides
}

func (l *eventLog) add(kind string, ev any) {
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	l.all = append(l.all, kind+" "+string(b))
}

func (l *eventLog) PublishDetections(ev *sinks.DetectionEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dets = append(l.dets, ev)
	c := *ev
	c.PublishedAt, c.LatencyMS = time.Time{}, sinks.Latency{} // the wall clock's
	l.add("detections", &c)
	return nil
}

func (l *eventLog) PublishObject(ev *sinks.ObjectEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.objects = append(l.objects, ev)
	l.add("object", ev)
	return nil
}

func (l *eventLog) PublishZone(ev *sinks.ZoneEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.zones = append(l.zones, ev)
	l.add("zone", ev)
	return nil
}

func (l *eventLog) PublishLine(ev *sinks.LineEvent) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, ev)
	l.add("line", ev)
	return nil
}

// demoConfig is the embedded demo config (its sample camera at 5 fps, a zone over the
// lower half and a line down the middle), with third_party's model and library and one
// worker.
func demoConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg, err := config.Parse(configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workers.Model = testutil.ThirdParty(t, "yolov8n.onnx")
	cfg.Workers.Library = testutil.ThirdParty(t, "libonnxruntime.so.1")
	cfg.Workers.JobTimeout = time.Minute // -race on a loaded machine
	return cfg
}

// replayOptions are the options of a replay of file with cfg, its workers this test binary.
func replayOptions(t *testing.T, cfg *config.Config, file string) ReplayOptions {
	return ReplayOptions{
		Config: cfg, File: file, Log: testutil.Logger(t),
		Start:         time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv},
	}
}

// sampleClip is the first 20 s of the sample video (vtest.h264.ts, 10 frames a second),
// copied without re-encoding.
func sampleClip(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "clip.ts")
	cmd := exec.Command(testutil.LookPath(t, "ffmpeg"), "-v", "error", "-i", testutil.Media(t, "vtest.h264.ts"),
		"-t", "20", "-c", "copy", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cutting the sample: %v: %s", err, b)
	}
	return out
}

// The sample's first 20 s replayed with the demo's camera, twice: every frame due at 5 fps
// analysed, on the video's timestamps; the events the daemon publishes (detections with
// track ids, object new/update/end, zone and line events); every object ended at the end;
// and the same events, track ids and counts both times.
func TestReplaySample(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 20 s of video through a real worker twice")
	}
	cfg := demoConfig(t)
	file := sampleClip(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // -race on a loaded 2-core machine
	defer cancel()
	var logs [2]*eventLog
	var stats [2]ReplayStats
	for i := range logs {
		logs[i] = &eventLog{}
		opt := replayOptions(t, cfg, file)
		var err error
		if stats[i], err = Replay(ctx, opt, logs[i]); err != nil {
			t.Fatal(err)
		}
		t.Logf("replay %d: %+v: %.1f frames analysed a second, %.2f x real time", i+1, stats[i],
			float64(stats[i].Analysed)/stats[i].Elapsed.Seconds(), stats[i].Video.Seconds()/stats[i].Elapsed.Seconds())
	}
	st, log := stats[0], logs[0]
	opt := replayOptions(t, cfg, file)

	// Every frame due analysed: at 5 fps on a 10 fps video, every other frame, from the first.
	const fps = 5
	if st.Frames < 190 || st.Video < 19*time.Second || st.Video > 21*time.Second {
		t.Fatalf("stats %+v: want about 200 frames, 20 s", st)
	}
	want := int(math.Ceil(st.Video.Seconds()*fps - 1e-6))
	if st.Analysed != want || len(log.dets) != want {
		t.Errorf("%d frames analysed, %d detection events; want %d (%v at %d fps)", st.Analysed, len(log.dets), want, st.Video, fps)
	}
	tracked := map[uint64]bool{}
	for i, ev := range log.dets {
		// Frame seq counts the decoded frames from 1; captured_at is Start + the frame's pts.
		seq := uint64(2*i + 1)
		at := opt.Start.Add(time.Duration(seq-1) * 100 * time.Millisecond)
		if ev.Frame.Seq != seq || !ev.CapturedAt.Equal(at) || ev.Camera != "sample" || ev.Model != "yolov8n" {
			t.Fatalf("detection event %d: frame %+v captured %v camera %q model %q; want seq %d at %v", i, ev.Frame, ev.CapturedAt, ev.Camera, ev.Model, seq, at)
		}
		for _, d := range ev.Detections {
			if d.TrackID != 0 {
				tracked[d.TrackID] = true
			}
		}
	}
	if len(tracked) == 0 {
		t.Error("no detection carries a track id")
	}

	// Each track's object events: new first, end last, and none after its end; tracks
	// with detection ids have object events.
	types := map[uint64][]string{}
	reasons := map[string]int{}
	for _, ev := range log.objects {
		if ev.Type == sinks.ObjectEnd {
			reasons[ev.Reason]++
		}
		if n := len(types[ev.TrackID]); n > 0 && types[ev.TrackID][n-1] == sinks.ObjectEnd {
			t.Errorf("track %d: object event %s after its end", ev.TrackID, ev.Type)
		}
		types[ev.TrackID] = append(types[ev.TrackID], ev.Type)
	}
	// The parked cars are followed to the end of the video, which ends them; walkers who
	// leave the view are lost before it.
	if reasons[sinks.EndVideoEnd] == 0 || len(reasons) > 2 || len(reasons) == 2 && reasons[sinks.EndLost] == 0 {
		t.Errorf("end reasons %v: want video_end for the objects followed at the video's end, lost for the others", reasons)
	}
	updates := 0
	for id, ty := range types {
		if ty[0] != sinks.ObjectNew || ty[len(ty)-1] != sinks.ObjectEnd {
			t.Errorf("track %d: object events %v, want new first and end last (every object ends with the video)", id, ty)
		}
		updates += len(ty) - 2
	}
	for id := range tracked {
		if types[id] == nil {
			t.Errorf("track %d: detections carry its id but it has no object event", id)
		}
	}
	if updates == 0 {
		t.Error("no object update")
	}
	// The demo's zone (the lower half) and line (down the middle).
	enters, exits := 0, 0
	for _, ev := range log.zones {
		switch {
		case ev.Zone != "lower":
			t.Errorf("zone event %+v", ev)
		case ev.Type == sinks.ZoneEnter:
			enters++
		case ev.Type == sinks.ZoneExit:
			exits++
		}
	}
	if enters == 0 || exits != enters {
		t.Errorf("%d zone entries, %d exits: want some, each visit exited by the end of the video", enters, exits)
	}
	if len(log.lines) == 0 {
		t.Error("no line crossing")
	}
	for _, ev := range log.lines {
		if ev.Line != "middle" || ev.TrackID == 0 || types[ev.TrackID] == nil {
			t.Errorf("line event %+v", ev)
		}
	}
	t.Logf("%d tracks, %d object updates, %d zone entries, %d line crossings", len(types), updates, enters, len(log.lines))

	// Deterministic: the second replay gave the same events (but for their publish times).
	if st2 := stats[1]; st2.Frames != st.Frames || st2.Analysed != st.Analysed || st2.Video != st.Video {
		t.Errorf("stats %+v, then %+v", st, st2)
	}
	if a, b := logs[0].all, logs[1].all; strings.Join(a, "\n") != strings.Join(b, "\n") {
		n := 0
		for n < min(len(a), len(b)) && a[n] == b[n] {
			n++
		}
		first, second := "(none)", "(none)"
		if n < len(a) {
			first = a[n]
		}
		if n < len(b) {
			second = b[n]
		}
		t.Errorf("the replays differ: %d and %d events, the same up to %d:\n%s\nthen\n%s", len(a), len(b), n, first, second)
	}
}

// The decimator chooses frames at the camera's fps on the video's timestamps, as the
// slicer does: the first frame due (less the slack, at most half a frame), one interval
// after the last frame taken was due, never in a burst after a gap.
func TestReplayDecimator(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tenFPS := func(n int) []time.Duration { // a 10 fps video
		var out []time.Duration
		for i := range n {
			out = append(out, time.Duration(i)*100*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		fps    float64
		slice  time.Duration // 0: 100 ms
		frames []time.Duration
		want   []time.Duration
	}{
		{"every frame", 10, 0, tenFPS(5), ms(0, 100, 200, 300, 400)},
		{"half", 5, 0, tenFPS(7), ms(0, 200, 400, 600)},
		{"2 fps", 2, 0, tenFPS(12), ms(0, 500, 1000)},
		{"3 fps: a frame within the slack of its due time, the schedule kept", 3, 0, tenFPS(11), ms(0, 300, 700, 1000)},
		{"faster than the video: every frame", 25, 0, tenFPS(3), ms(0, 100, 200)},
		{"jitter within the slack", 5, 0, ms(0, 99, 199, 301, 398, 502, 601), ms(0, 199, 398, 601)},
		{"a gap: no burst after it", 5, 0, ms(0, 200, 1500, 1600, 1700, 1800), ms(0, 200, 1500, 1700)},
		{"a slack of half a frame at most: the frame nearest its due time", 2, 200 * time.Millisecond, tenFPS(21), ms(0, 500, 1000, 1500, 2000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slice := cmp.Or(tc.slice, 100*time.Millisecond)
			c := newCamera(config.Camera{ID: "x", FPS: tc.fps}, slice, func() {})
			d := decimator{interval: c.sched.interval, slack: min(c.sched.slack, 50*time.Millisecond)} // as Replay sets it for a 10 fps video
			var got []time.Duration
			for _, at := range tc.frames {
				if d.take(at) {
					got = append(got, at)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("frames %v taken at %v fps, want %v", got, tc.fps, tc.want)
			}
		})
	}
}

// Bad input fails with an error that names the problem, before any worker is started.
func TestReplayBadInput(t *testing.T) {
	cfg := demoConfig(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a video\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.ts")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	two := *cfg
	two.Cameras = append([]config.Camera{}, cfg.Cameras...)
	second := cfg.Cameras[0]
	second.ID = "door"
	two.Cameras = append(two.Cameras, second)
	video := testutil.Media(t, "vtest.avi")
	for _, tc := range []struct {
		name string
		opt  func(*ReplayOptions)
		want string
	}{
		{"missing file", func(o *ReplayOptions) { o.File = filepath.Join(dir, "nope.ts") }, "cannot read " + filepath.Join(dir, "nope.ts") + ": no such file or directory"},
		{"a directory", func(o *ReplayOptions) { o.File = dir }, dir + " is a directory, not a video file"},
		{"empty file", func(o *ReplayOptions) { o.File = empty }, empty + " is empty, not a video file"},
		{"not a video", func(o *ReplayOptions) { o.File = text }, text + " is not a video that FFmpeg can open"},
		{"unknown camera", func(o *ReplayOptions) { o.Camera = "gate" }, `no camera "gate" in the config (its cameras: sample)`},
		{"several cameras, none named", func(o *ReplayOptions) { o.Config = &two }, "the config has 2 cameras (sample, door): name the one"},
		{"negative fps", func(o *ReplayOptions) { o.FPS = -1 }, "fps -1: want 0 (the camera's) or more"},
		{"no config", func(o *ReplayOptions) { o.Config = nil }, "no config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt := replayOptions(t, cfg, video)
			tc.opt(&opt)
			log := &eventLog{}
			_, err := Replay(context.Background(), opt, log)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if len(log.all) > 0 {
				t.Errorf("%d events published", len(log.all))
			}
		})
	}
}
