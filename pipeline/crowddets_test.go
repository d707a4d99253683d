package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

// TestCrowdDets is a tool for working on the tracker, not a guard: TestCrowdReplay is. The
// model is the slow part of TestCrowdReplay (a minute for the 600 frames at 10 fps), and
// the tracker is what changes, so with VISIOND_CROWD_DETS naming a file, this test replays
// the crowd once at 10 fps through the real worker and writes the detections of each frame
// (those the camera's filters kept, as the detection events carry them) there, unless the
// file is there already; then it runs only the scene (analytics.Scene.Step on the recorded
// detections and times, every k-th frame for each of crowdRates) and scores each rate with
// groundtruth.ScoreRun and checks crowdBounds as TestCrowdReplay does, in a second or two. A replay analyses every
// frame due, from the first, so the figures are TestCrowdReplay's (the camera's filters
// keep what they kept). Without the variable it is skipped.
//
//	VISIOND_CROWD_DETS=/tmp/crowd-dets.json go test -count=1 -run TestCrowdDets -v ./pipeline/
//
// Delete the file when the model, the scene or the filters change.
func TestCrowdDets(t *testing.T) {
	name := os.Getenv("VISIOND_CROWD_DETS")
	if name == "" {
		t.Skip("VISIOND_CROWD_DETS names no file of the crowd's detections")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	m, err := groundtruth.LoadVTest(ctx, testutil.Media(t, "vtest.avi"))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := groundtruth.Crowd(m, groundtruth.CrowdParams{})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := groundtruth.NewScene(cs.Scenario)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "crowd.ts") // the config names it; written only to record
	cfg := crowdConfig(t, cs, file)
	rec, err := readCrowdDets(name)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := sc.WriteTS(ctx, file); err != nil {
			t.Fatal(err)
		}
		rec = recordCrowdDets(ctx, t, cfg, file)
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %d frames to %s", len(rec.Frames), name)
	} else if err != nil {
		t.Fatal(err)
	}
	if rec.FPS != 10 || len(rec.Frames) == 0 {
		t.Fatalf("%s: %d frames at %g fps: want a recording at 10 fps", name, len(rec.Frames), rec.FPS)
	}
	for _, fps := range crowdRates {
		t.Run(fmt.Sprintf("fps=%g", fps), func(t *testing.T) {
			fig := stepCrowdDets(t, cfg, rec, fps, sc, cs)
			t.Logf("figures: fps %g: %s", fps, fig)
			t.Logf("fps %g: tracks per object %v", fps, fig.Score.Tracks)
			r := crowdRate{FPS: fps, IDF1: fig.ID.IDF1, CountAccuracy: fig.CountAccuracy, IDSwitches: fig.Score.IDSwitches,
				DwellError: fig.DwellError, DwellCountedS: fig.DwellCounted.Seconds(), DwellTrueS: fig.DwellTrue.Seconds()}
			r.check(t) // crowdBounds, as TestCrowdReplay
		})
	}
}

// crowdDets is a recording of the crowd's detections at one rate.
type crowdDets struct {
	FPS    float64         `json:"fps"`
	Start  time.Time       `json:"start"`
	Frames []crowdDetFrame `json:"frames"`
}

type crowdDetFrame struct {
	At   time.Time         `json:"at"`
	W    int               `json:"w"`
	H    int               `json:"h"`
	Dets []infer.Detection `json:"dets"`
}

func readCrowdDets(name string) (crowdDets, error) {
	var rec crowdDets
	b, err := os.ReadFile(name)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", name, err)
	}
	return rec, nil
}

// recordCrowdDets replays file at 10 fps and returns the detections of its events.
func recordCrowdDets(ctx context.Context, t *testing.T, cfg *config.Config, file string) crowdDets {
	log := &eventLog{}
	opt := replayOptions(t, cfg, file)
	opt.FPS = 10
	if _, err := Replay(ctx, opt, log); err != nil {
		t.Fatal(err)
	}
	rec := crowdDets{FPS: opt.FPS, Start: opt.Start}
	for _, ev := range log.dets {
		f := crowdDetFrame{At: ev.CapturedAt, W: ev.Frame.Width, H: ev.Frame.Height}
		for _, d := range ev.Detections {
			f.Dets = append(f.Dets, infer.Detection{ClassID: d.ClassID, Label: d.Label, Score: d.Score,
				Box: geom.Box{X: d.Box.X, Y: d.Box.Y, W: d.Box.W, H: d.Box.H}})
		}
		rec.Frames = append(rec.Frames, f)
	}
	return rec
}

// stepCrowdDets runs the camera's scene at fps over every k-th frame of rec (from the
// first) and scores its events as TestCrowdReplay does.
func stepCrowdDets(t *testing.T, cfg *config.Config, rec crowdDets, fps float64, sc *groundtruth.Scene, cs groundtruth.CrowdScene) groundtruth.Figures {
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
	fig, err := groundtruth.ScoreRun(sc, cs.Line, cs.Zone, crowdObserved(t, log, rec.Start), crowdScoring)
	if err != nil {
		t.Fatal(err)
	}
	return fig
}
