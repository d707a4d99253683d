package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/groundtruth"
	"github.com/visiond/visiond/internal/testutil"
)

// TestCrowdDets is a tool for working on the tracker, not a guard: TestCrowdReplay is. The
// model is the slow part of TestCrowdReplay (a minute or two a seed), and the tracker is
// what changes, so with VISIOND_CROWD_DETS naming a directory, this test keeps each seed's
// recording of the worker's results there (seed-N.json, made by a replay at 10 fps when it
// is missing), then runs only the camera's scene on them at every rate and scores it as
// TestCrowdReplay does, checking crowdBounds on the tuning seeds, in seconds. Seeds are
// crowdTuningSeeds, or VISIOND_CROWD_SEEDS. Without VISIOND_CROWD_DETS it is skipped. With
// VISIOND_CROWD_OUT, it writes TestCrowdReplay's report (the same figures: the replay at
// the recording's rate is checked to give the scene's on its results).
//
//	VISIOND_CROWD_DETS=/tmp/crowd go test -count=1 -run TestCrowdDets -v ./pipeline/
//
// Delete the files when the model, the scene generator or the worker's output change.
func TestCrowdDets(t *testing.T) {
	dir := os.Getenv("VISIOND_CROWD_DETS")
	if dir == "" {
		t.Skip("VISIOND_CROWD_DETS names no directory of the crowd's recordings")
	}
	seeds, tuning := crowdTuningSeeds, true
	if v := os.Getenv("VISIOND_CROWD_SEEDS"); v != "" {
		var err error
		if seeds, err = parseSeeds(v); err != nil {
			t.Fatal(err)
		}
		tuning = false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	m, err := groundtruth.LoadVTest(ctx, testutil.Media(t, "vtest.avi"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sums := map[float64][]groundtruth.Summary{}
	out := groundtruth.CrowdReport{Tuning: crowdTuningSeeds}
	var same, other []float64
	var seen, detected [len(visibleBands)]int
	for _, seed := range seeds {
		cs, sc := crowdOf(t, m, seed)
		file := filepath.Join(t.TempDir(), "crowd.ts") // the config names it; written only to record
		cfg := crowdConfig(t, cs, file)
		name := filepath.Join(dir, fmt.Sprintf("seed-%d.json", seed))
		var rec crowdRecording
		b, err := os.ReadFile(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if _, err := sc.WriteTS(ctx, file); err != nil {
				t.Fatal(err)
			}
			rec, _ = recordCrowd(ctx, t, cfg, file, sc, cs)
			if b, err = json.Marshal(rec); err == nil {
				err = os.WriteFile(name, b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		case err != nil:
			t.Fatal(err)
		default:
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		addCrowdScene(t, &out, cs)
		s, o := appearanceSpread(t, rec, sc)
		same, other = append(same, s...), append(other, o...)
		for k, n := range detectorCeiling(rec, sc) {
			seen[k], detected[k] = seen[k]+n[0], detected[k]+n[1]
		}
		for _, fps := range crowdRates {
			fig := stepCrowd(t, cfg, rec, fps, sc, cs)
			logCrowd(t, seed, fps, fig)
			s := fig.Summary(seed, fps)
			ceil := perfectTracking(t, rec, fps, sc, cs)
			s.CeilingHOTA, s.CeilingIDF1 = ceil.HOTA.HOTA, ceil.ID.IDF1
			if fps == rec.FPS {
				s.ElapsedS = rec.Elapsed.Seconds() // the recording's replay
			}
			sums[fps] = append(sums[fps], s)
			out.Runs = append(out.Runs, s)
			if tuning {
				checkCrowd(t, s)
			}
		}
	}
	var all, found int
	for k := range seen {
		all, found = all+seen[k], found+detected[k]
	}
	t.Logf("the detector's ceiling: %d of %d object-frames showing (%.3f) have a detection at IoU 0.5; by visible fraction from %v: %v of %v",
		found, all, float64(found)/float64(max(all, 1)), visibleBands, detected, seen)
	qs := []float64{0.05, 0.25, 0.5, 0.75, 0.95, 0.99}
	t.Logf("appearance distance at quantiles %v: one person's looks 0.5-3 s apart (%d pairs) %.3f; two people's on a frame (%d pairs) %.3f",
		qs, len(same), quantiles(same, qs...), len(other), quantiles(other, qs...))
	for _, fps := range crowdRates {
		var hota, idf1, prec, rec float64
		worst := 1.0
		for _, s := range sums[fps] {
			hota += s.HOTA
			idf1 += s.IDF1
			prec += s.CrossingPrecision
			rec += s.CrossingRecall
			worst = min(worst, s.IDF1)
		}
		n := float64(len(sums[fps]))
		var phota, pidf1 float64
		for _, s := range sums[fps] {
			phota += s.CeilingHOTA
			pidf1 += s.CeilingIDF1
		}
		t.Logf("mean of %d seeds at %g fps: HOTA %.3f, IDF1 %.3f (worst %.3f), crossing precision %.3f recall %.3f; a perfect association of the same detections: HOTA %.3f, IDF1 %.3f",
			len(sums[fps]), fps, hota/n, idf1/n, worst, prec/n, rec/n, phota/n, pidf1/n)
	}
	writeCrowdOut(t, out)
}

// perfectTracking scores what a tracker that reports only the detector's boxes could reach
// at best on a seed's recording at fps: every detection (score >= 0.1, the tracker's
// LowScore) that overlaps a true object by IoU 0.5 given that object's id, one detection to
// an object (the largest overlaps first), from the object's first frame, and nothing else
// reported. The gap between it and the tracker is the tracker's; the gap between it and 1
// is the detector's (objects it missed, boxes too loose).
func perfectTracking(t *testing.T, rec crowdRecording, fps float64, sc *groundtruth.Scene, cs groundtruth.CrowdScene) groundtruth.Tracking {
	t.Helper()
	type pair struct {
		d, o int
		iou  float64
	}
	var obs groundtruth.Observed
	k := int(rec.FPS/fps + 0.5)
	for i := 0; i < len(rec.Frames); i += k {
		f := rec.Frames[i]
		at := f.At.Sub(rec.Start)
		truth := sc.At(at)
		var pairs []pair
		for o, tr := range truth {
			for d, det := range f.Dets {
				if v := groundtruth.IoU(det.Box, tr.Box); tr.Visible > 0 && det.Score >= 0.1 && v >= 0.5 {
					pairs = append(pairs, pair{d, o, v})
				}
			}
		}
		slices.SortFunc(pairs, func(a, b pair) int { return cmp.Compare(b.iou, a.iou) })
		usedD, usedO := map[int]bool{}, map[int]bool{}
		of := groundtruth.ObservedFrame{T: at}
		for _, p := range pairs {
			if usedD[p.d] || usedO[p.o] {
				continue
			}
			usedD[p.d], usedO[p.o] = true, true
			d := f.Dets[p.d]
			of.Tracked = append(of.Tracked, groundtruth.Tracked{TrackID: uint64(truth[p.o].ID), Class: d.Label,
				Box: geom.Box{X: d.Box.X, Y: d.Box.Y, W: d.Box.W, H: d.Box.H}})
		}
		obs.Frames = append(obs.Frames, of)
	}
	fig, err := groundtruth.ScoreRun(sc, cs.Line, cs.Zone, obs, crowdScoring(fps))
	if err != nil {
		t.Fatal(err)
	}
	return fig.Tracking
}

// appearanceSpread logs how far apart the appearance descriptors of one person's detections
// are (0.5 to 3 s apart) and of two people's (on the same frame), over a seed's recording:
// what the tracker's appearance gate (track.Config.AppearanceGate) must separate. A
// detection is a person's where it overlaps the person's true box by IoU 0.5 and the person
// shows whole (Visible 0.9) and overlaps no other detection.
func appearanceSpread(t *testing.T, rec crowdRecording, sc *groundtruth.Scene) (same, other []float64) {
	type look struct {
		at  time.Duration
		obj int
		d   appearance.Descriptor
	}
	var looks []look
	for _, f := range rec.Frames {
		at := f.At.Sub(rec.Start)
		truth := sc.At(at)
	dets:
		for i, d := range f.Dets {
			if d.Appearance.IsZero() || d.Label != "person" {
				continue
			}
			for j, o := range f.Dets {
				if j != i && groundtruth.IoU(d.Box, o.Box) > 0 {
					continue dets
				}
			}
			for _, tr := range truth {
				if tr.Visible >= 0.9 && groundtruth.IoU(tr.Box, d.Box) >= 0.5 {
					looks = append(looks, look{at, tr.ID, d.Appearance})
					break
				}
			}
		}
	}
	for a, x := range looks {
		for _, y := range looks[a+1:] {
			gap := (y.at - x.at).Abs()
			switch {
			case x.obj == y.obj && gap >= 500*time.Millisecond && gap <= 3*time.Second:
				same = append(same, appearance.Distance(x.d, y.d))
			case x.obj != y.obj && gap == 0:
				other = append(other, appearance.Distance(x.d, y.d))
			}
		}
	}
	return same, other
}

// quantiles returns v's values at fractions qs (sorting v).
func quantiles(v []float64, qs ...float64) []float64 {
	slices.Sort(v)
	out := make([]float64, len(qs))
	for k, q := range qs {
		if len(v) > 0 {
			out[k] = v[min(len(v)-1, int(q*float64(len(v))))]
		}
	}
	return out
}

// visibleBands are the lower bounds of the visible fractions detectorCeiling counts by.
var visibleBands = [...]float64{0, 0.1, 0.3, 0.5, 0.7, 0.9}

// detectorCeiling counts, per band of visibleBands, the truth's object-frames that show
// (Visible > 0) on the recording's frames and those of them that some detection (of any
// class, score 0.1 or more) overlaps by IoU 0.5: what no tracker that reports the
// detector's boxes can do better than.
func detectorCeiling(rec crowdRecording, sc *groundtruth.Scene) [len(visibleBands)][2]int {
	var n [len(visibleBands)][2]int
	for _, f := range rec.Frames {
		for _, tr := range sc.At(f.At.Sub(rec.Start)) {
			if tr.Visible <= 0 {
				continue
			}
			k := len(visibleBands) - 1
			for k > 0 && tr.Visible < visibleBands[k] {
				k--
			}
			n[k][0]++
			for _, d := range f.Dets {
				if d.Score >= 0.1 && groundtruth.IoU(d.Box, tr.Box) >= 0.5 {
					n[k][1]++
					break
				}
			}
		}
	}
	return n
}
