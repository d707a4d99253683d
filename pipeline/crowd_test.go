package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/groundtruth"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
)

// Issue 37: the tracker's accuracy on scenes it was not tuned on, scored as the field
// scores (groundtruth.ScoreRun: TrackEval's HOTA, IDF1 and MOTA against every person that
// shows, crossings one by one, dwell per visit).
//
// Each seed's groundtruth.Crowd scene (people cut out of vtest.avi walking known paths over
// its empty plaza, vans on the road, a counting line and a zone) is made at 10 fps and
// replayed once at 10 fps (Replay: every frame analysed, whatever the machine's speed)
// through a real worker (yolov8n on the CPU) and the daemon's result stage; its events are
// scored. The worker's results of that replay are recorded (ReplayOptions.OnResult) and the
// camera's scene is run again on every k-th of them for each lower rate of crowdRates, as a
// replay at that rate would run it (a replay analyses every frame due from the first, so the
// frames are the same; the 10 fps run checks that the scene on the recording gives the
// daemon's figures), so the model runs once a seed.
//
// Seeds: crowdTuningSeeds are the scenes the tracker may be tuned on, and the test asserts
// crowdBounds on them. The held-out seeds (crowdHeldOut) are scored only by `make bench`
// (VISIOND_CROWD_SEEDS=100-129), whose report gives their mean, worst and spread and names
// the tuning seeds. With VISIOND_CROWD_OUT naming a file, every seed and rate's figures are
// written there as JSON (groundtruth.Summary); with VISIOND_CROWD_SEEDS set, no bound is
// checked.
func TestCrowdReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 60 s videos through a real worker")
	}
	seeds, tuning := crowdTuningSeeds, true
	if v := os.Getenv("VISIOND_CROWD_SEEDS"); v != "" {
		var err error
		if seeds, err = parseSeeds(v); err != nil {
			t.Fatalf("VISIOND_CROWD_SEEDS: %v", err)
		}
		tuning = false
	}
	// About 600 frames through the model a seed: a minute or more on the 2-core box, much
	// longer with every core busy; the test binary's deadline, not a guess, is the limit.
	deadline := time.Now().Add(3 * time.Hour)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	m, err := groundtruth.LoadVTest(ctx, testutil.Media(t, "vtest.avi"))
	if err != nil {
		t.Fatal(err)
	}
	out := groundtruth.CrowdReport{Tuning: crowdTuningSeeds}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			cs, sc, file := makeCrowd(ctx, t, m, seed)
			addCrowdScene(t, &out, cs)
			cfg := crowdConfig(t, cs, file)
			rec, replayed := recordCrowd(ctx, t, cfg, file, sc, cs)
			for _, fps := range crowdRates {
				fig := stepCrowd(t, cfg, rec, fps, sc, cs)
				logCrowd(t, seed, fps, fig)
				s := fig.Summary(seed, fps)
				ceil := perfectTracking(t, rec, fps, sc, cs)
				s.CeilingHOTA, s.CeilingIDF1 = ceil.HOTA.HOTA, ceil.ID.IDF1
				if fps == rec.FPS {
					// The daemon's own run: the scene on the recording must give its figures.
					if got, want := replayed.String(), fig.String(); got != want {
						t.Errorf("seed %d: the replay's figures\n%s\ndiffer from the scene's on its recorded results\n%s", seed, got, want)
					}
					s.ElapsedS = rec.Elapsed.Seconds()
				}
				out.Runs = append(out.Runs, s)
				if tuning {
					checkCrowd(t, s)
				}
			}
		})
	}
	writeCrowdOut(t, out)
}

// addCrowdScene adds cs's parameters (once) and totals to a crowd report.
func addCrowdScene(t *testing.T, out *groundtruth.CrowdReport, cs groundtruth.CrowdScene) {
	t.Helper()
	if out.Params == "" {
		p := cs.Params
		p.Seed = 0
		out.Params = strings.TrimSuffix(p.String(), ", seed 0")
	}
	totals, err := cs.Totals()
	if err != nil {
		t.Fatal(err)
	}
	out.Scenes = append(out.Scenes, totals)
}

// writeCrowdOut writes a crowd report to the file VISIOND_CROWD_OUT names, if it names one.
func writeCrowdOut(t *testing.T, out groundtruth.CrowdReport) {
	t.Helper()
	name := os.Getenv("VISIOND_CROWD_OUT")
	if name == "" {
		return
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// crowdRates are the analysed rates of the figures; the recording is at the last.
var crowdRates = []float64{0.5, 1, 2, 5, 10}

// crowdTuningSeeds are the scenes the tracker is tuned on, and the tests assert on. No rule
// of the tracker may name a scene.
var crowdTuningSeeds = []uint64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}

// crowdHeldOut are the seeds only `make bench` scores (scripts/bench/run.sh, part crowd).
const crowdHeldOut = "100-129"

// parseSeeds reads "0-9", "100,101,105-107".
func parseSeeds(v string) ([]uint64, error) {
	var seeds []uint64
	for _, part := range strings.Split(v, ",") {
		lo, hi, ok := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseUint(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		b := a
		if ok {
			if b, err = strconv.ParseUint(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("%q: want a range low-high", part)
			}
		}
		for s := a; s <= b; s++ {
			seeds = append(seeds, s)
		}
	}
	return seeds, nil
}

func TestParseSeeds(t *testing.T) {
	got, err := parseSeeds("0-2, 100,105-106")
	if err != nil || fmt.Sprint(got) != "[0 1 2 100 105 106]" {
		t.Errorf("%v, %v", got, err)
	}
	for _, bad := range []string{"", "a", "3-1", "1-", "-1"} {
		if _, err := parseSeeds(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if s, err := parseSeeds(crowdHeldOut); err != nil || len(s) != 30 {
		t.Errorf("held out %v, %v: want 30 seeds", s, err)
	}
}

// crowdBound is the least (or, for the dwell error, the most) a rate must score.
type crowdBound struct {
	HOTA, IDF1, Precision, Recall float64 // crossings' precision and recall
	MaxDwellError                 float64 // relative
}

// crowdBounds per rate, on every tuning seed. Interim (issue 37 is open): the worst of the
// ten tuning seeds on 2026-12-05 (groundtruth's generator of f07f7fa, the tracker with
// appearance of c039adf, crossings timed by crossed_at), less a margin of 0.03 (HOTA, IDF1),
// about one crossing of the thirty (0.035) and 0.1 of the dwell error. The aims are
// higher (held-out means: IDF1 0.93 at 2 fps and 0.96 at 5; crossing precision and recall
// 0.98 from 2 fps, 0.95 at 1 fps): these scenes measured a mean IDF1 of 0.708 at 2 fps and
// 0.742 at 5, crossings 0.990 / 0.884 and 0.978 / 0.939. The detector is most of the gap:
// against a truth of every person that shows, 15% of the object-frames had no detection at
// IoU 0.5 at all (TestCrowdDets logs it), most of them people less than half in view. Raise
// these as the tracker (and what it reports) gains; never lower them to pass.
var crowdBounds = map[float64]crowdBound{
	0.5: {HOTA: 0.26, IDF1: 0.30, Precision: 0.75, Recall: 0.45, MaxDwellError: 1.05},
	1:   {HOTA: 0.39, IDF1: 0.48, Precision: 0.92, Recall: 0.66, MaxDwellError: 0.75},
	2:   {HOTA: 0.49, IDF1: 0.58, Precision: 0.90, Recall: 0.68, MaxDwellError: 0.47},
	5:   {HOTA: 0.55, IDF1: 0.61, Precision: 0.87, Recall: 0.70, MaxDwellError: 0.28},
	10:  {HOTA: 0.56, IDF1: 0.62, Precision: 0.84, Recall: 0.64, MaxDwellError: 0.32},
}

// checkCrowd asserts a run's bounds.
func checkCrowd(t *testing.T, s groundtruth.Summary) {
	t.Helper()
	b, ok := crowdBounds[s.FPS]
	if !ok {
		t.Fatalf("no bounds for %g fps", s.FPS)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"HOTA", s.HOTA, b.HOTA}, {"IDF1", s.IDF1, b.IDF1}, {"crossing precision", s.CrossingPrecision, b.Precision}, {"crossing recall", s.CrossingRecall, b.Recall}} {
		if c.got < c.want {
			t.Errorf("seed %d at %g fps: %s %.3f, want >= %.3f", s.Seed, s.FPS, c.name, c.got, c.want)
		}
	}
	if s.DwellError > b.MaxDwellError {
		t.Errorf("seed %d at %g fps: dwell error %.3f, want <= %.3f (%.1f s reported, %.1f s true)", s.Seed, s.FPS, s.DwellError, b.MaxDwellError, s.DwellReportedS, s.DwellTrueS)
	}
}

// crowdScoring is how a run is compared with the truth: the van (class car) is seen as a
// car or a truck; the vehicles parked in the background are no one's truth.
func crowdScoring(fps float64) groundtruth.ScoreOptions {
	return groundtruth.ScoreOptions{Ignore: groundtruth.VTestParked(), Classes: map[string]string{"truck": "car"},
		Interval: time.Duration(float64(time.Second) / fps)}
}

// crowdOf makes seed's scene.
func crowdOf(t *testing.T, m *groundtruth.Media, seed uint64) (groundtruth.CrowdScene, *groundtruth.Scene) {
	t.Helper()
	cs, err := groundtruth.Crowd(m, groundtruth.CrowdParams{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := groundtruth.NewScene(cs.Scenario)
	if err != nil {
		t.Fatal(err)
	}
	return cs, sc
}

// makeCrowd makes seed's scene and its video.
func makeCrowd(ctx context.Context, t *testing.T, m *groundtruth.Media, seed uint64) (groundtruth.CrowdScene, *groundtruth.Scene, string) {
	t.Helper()
	cs, sc := crowdOf(t, m, seed)
	file := filepath.Join(t.TempDir(), "crowd.ts")
	began := time.Now()
	if _, err := sc.WriteTS(ctx, file); err != nil {
		t.Fatal(err)
	}
	t.Logf("crowd: %s; video written in %v", cs.Params, time.Since(began).Round(time.Millisecond))
	return cs, sc, file
}

// crowdConfig is a config with one CPU worker and a camera with Crowd's line and zone.
func crowdConfig(t *testing.T, cs groundtruth.CrowdScene, file string) *config.Config {
	t.Helper()
	var poly []string
	for _, p := range cs.Zone {
		poly = append(poly, fmt.Sprintf("[%g, %g]", p.X, p.Y))
	}
	l := cs.Line
	yaml := fmt.Sprintf(`
site: test
http: {listen: ""}
workers: {model: %q, library: %q, job_timeout: 1m, pools: [{count: 1, provider: cpu}]}
cameras:
  - id: crowd
    kind: file
    file: %q
    fps: 10
    zones: [{id: grass, polygon: [%s]}]
    lines: [{id: middle, points: [[%g, %g], [%g, %g]]}]
`, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), file,
		strings.Join(poly, ", "), l.P1.X, l.P1.Y, l.P2.X, l.P2.Y)
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// crowdRecording is the worker's results of a replay at one rate.
type crowdRecording struct {
	FPS     float64           `json:"fps"`
	Start   time.Time         `json:"start"`
	Elapsed time.Duration     `json:"elapsed"`
	Frames  []crowdRecording1 `json:"frames"`
}

// crowdRecording1 is one analysed frame: its capture time, size and the model's detections.
type crowdRecording1 struct {
	At   time.Time         `json:"at"`
	W    int               `json:"w"`
	H    int               `json:"h"`
	Dets []infer.Detection `json:"dets"`
}

// recordCrowd replays file at 10 fps, records the worker's results and scores the replay's
// events.
func recordCrowd(ctx context.Context, t *testing.T, cfg *config.Config, file string, sc *groundtruth.Scene, cs groundtruth.CrowdScene) (crowdRecording, groundtruth.Figures) {
	t.Helper()
	rec, log, opt := record(ctx, t, cfg, file, crowdRates[len(crowdRates)-1], cs.Scenario.Duration)
	fig, err := groundtruth.ScoreRun(sc, cs.Line, cs.Zone, crowdObserved(t, log, opt.Start), crowdScoring(opt.FPS))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: replayed at %g fps in %v", cs.Params.Seed, opt.FPS, rec.Elapsed.Round(time.Millisecond))
	return rec, fig
}

// record replays file (of length video) at fps through a real worker and the daemon's
// result stage, and returns the worker's results, the events and the replay's options.
func record(ctx context.Context, t *testing.T, cfg *config.Config, file string, fps float64, video time.Duration) (crowdRecording, *eventLog, ReplayOptions) {
	t.Helper()
	log := &eventLog{}
	opt := replayOptions(t, cfg, file)
	opt.FPS = fps
	rec := crowdRecording{FPS: opt.FPS, Start: opt.Start}
	opt.OnResult = func(r infer.Result) {
		rec.Frames = append(rec.Frames, crowdRecording1{At: r.Job.Captured, W: r.Job.Letterbox.SrcW, H: r.Job.Letterbox.SrcH,
			Dets: append([]infer.Detection(nil), r.Detections...)})
	}
	st, err := Replay(ctx, opt, log)
	if err != nil {
		t.Fatal(err)
	}
	rec.Elapsed = st.Elapsed
	if want := int(video.Seconds() * opt.FPS); st.Analysed < want-1 || st.Analysed > want+1 || len(log.dets) != st.Analysed || len(rec.Frames) != st.Analysed {
		t.Fatalf("%+v, %d detection events, %d results: want %d frames analysed", st, len(log.dets), len(rec.Frames), want)
	}
	return rec, log, opt
}

// stepCrowd runs the camera's scene at fps over every k-th frame of rec (from the first),
// as a replay at fps would, and scores its events.
func stepCrowd(t *testing.T, cfg *config.Config, rec crowdRecording, fps float64, sc *groundtruth.Scene, cs groundtruth.CrowdScene) groundtruth.Figures {
	t.Helper()
	log := stepScene(t, cfg, rec, fps)
	fig, err := groundtruth.ScoreRun(sc, cs.Line, cs.Zone, crowdObserved(t, log, rec.Start), crowdScoring(fps))
	if err != nil {
		t.Fatal(err)
	}
	return fig
}

// stepScene runs the first camera's scene of cfg at fps over every k-th frame of rec (from
// the first), as a replay at fps would, and returns its events.
func stepScene(t *testing.T, cfg *config.Config, rec crowdRecording, fps float64) *eventLog {
	t.Helper()
	k := int(rec.FPS/fps + 0.5)
	if k < 1 || float64(k)*fps != rec.FPS {
		t.Fatalf("%g fps is not the recording's %g divided by a whole number", fps, rec.FPS)
	}
	cc := cfg.Cameras[0]
	cc.FPS = fps
	scene, err := analytics.NewScene(cc.Analytics(), 1)
	if err != nil {
		t.Fatal(err)
	}
	log := &eventLog{}
	add := func(step analytics.StepResult) {
		for _, z := range step.Zones {
			log.zones = append(log.zones, sinks.NewZoneEvent(cc.ID, z, nil))
		}
		for _, l := range step.Lines {
			log.lines = append(log.lines, sinks.NewLineEvent(cc.ID, l, nil))
		}
	}
	for i := 0; i < len(rec.Frames); i += k {
		f := rec.Frames[i]
		step, err := scene.Step(f.At, f.W, f.H, f.Dets)
		if err != nil {
			t.Fatal(err)
		}
		r := infer.Result{Job: infer.Job{Captured: f.At}}
		r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH = f.W, f.H
		log.dets = append(log.dets, sinks.NewDetectionEvent(cc.ID, "", r, step.Dets, step.IDs, time.Time{}, sinks.Latency{}))
		add(step)
	}
	add(scene.End(analytics.WhyVideoEnd))
	return log
}

// logCrowd logs a run's figures and what went wrong in it.
func logCrowd(t *testing.T, seed uint64, fps float64, fig groundtruth.Figures) {
	t.Helper()
	t.Logf("figures: seed %d fps %g: %s", seed, fps, fig)
	var missed, extra []string
	for _, c := range fig.Crossings.Missed {
		missed = append(missed, fmt.Sprintf("%d %s %s at %.1f s", c.ObjectID, c.Class, c.Direction, c.T.Seconds()))
	}
	for _, c := range fig.Crossings.Extra {
		extra = append(extra, fmt.Sprintf("t%d %s %s at %.1f s", c.TrackID, c.Class, c.Direction, c.T.Seconds()))
	}
	var dwells []string
	for _, d := range fig.Zone.Dwells {
		dwells = append(dwells, fmt.Sprintf("%d at %.1f s: %.1f of %.1f s", d.ObjectID, d.Enter.Seconds(), d.Reported.Seconds(), d.True.Seconds()))
	}
	t.Logf("seed %d fps %g: crossings missed [%s], extra [%s]; zone visits [%s], stays of no visit %.1f s; tracks per object %v",
		seed, fps, strings.Join(missed, ", "), strings.Join(extra, ", "), strings.Join(dwells, ", "), fig.Zone.StrayDwell.Seconds(), fig.Tracking.CLEAR.Tracks)
}

// crowdObserved turns a run's events into what ScoreRun reads, in the video's time.
func crowdObserved(t *testing.T, log *eventLog, start time.Time) groundtruth.Observed {
	var obs groundtruth.Observed
	for _, ev := range log.dets {
		f := groundtruth.ObservedFrame{T: ev.CapturedAt.Sub(start)}
		for _, d := range ev.Detections {
			if d.TrackID != 0 {
				f.Tracked = append(f.Tracked, groundtruth.Tracked{TrackID: d.TrackID, Class: d.Label, Box: geom.Box{X: d.Box.X, Y: d.Box.Y, W: d.Box.W, H: d.Box.H}})
			}
		}
		obs.Frames = append(obs.Frames, f)
	}
	for _, ev := range log.lines {
		if ev.Line != "middle" {
			t.Errorf("line event of line %q", ev.Line)
		}
		obs.Crossings = append(obs.Crossings, groundtruth.ObservedCrossing{TrackID: ev.TrackID, Class: ev.Label,
			Direction: groundtruth.Direction(ev.Direction), T: ev.CrossedAt.Sub(start)})
	}
	for _, ev := range log.zones {
		if ev.Type != sinks.ZoneExit {
			continue
		}
		enter := ev.Since.Sub(start)
		obs.Stays = append(obs.Stays, groundtruth.ObservedStay{TrackID: ev.TrackID, Class: ev.Label,
			Enter: enter, Exit: enter + time.Duration(ev.DwellS*float64(time.Second))})
	}
	return obs
}
