package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/groundtruth"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
)

// Issue 37, item 5: a real recording scored against a truth made by hand. vtest.avi (real
// pedestrians, 79.5 s) is replayed at 10 fps through a real worker and the daemon's result
// stage, with the lines and the zone of its truth (internal/groundtruth/testdata/
// vtest-truth.yaml: every crossing and visit annotated by eye on the frames; vtest-truth.md
// says how); the lower rates run the camera's scene on the replay's recorded results, as
// TestCrowdReplay does. Each line's crossings are scored one by one (ScoreCrossings:
// precision and recall, a crossing matched within max(1 s, the analysed interval)), the
// zone's dwell per visit (ScoreStays: no boxes in this truth, a stay goes to the visit of
// its class it overlaps most in time).
//
// Nothing was tuned on this recording: it is held out, and the test asserts only what any
// working daemon must do on it (vtestFloor). The aims (crossing recall 0.95 and
// precision 0.97 at 5 fps, 0.9 and 0.95 at 2 fps) are `make bench`'s report to judge
// (VISIOND_VTEST_OUT: the figures as JSON).
func TestVTestReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("replays an 80 s video through a real worker")
	}
	deadline := time.Now().Add(time.Hour)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	truth, err := groundtruth.LoadVTestTruth(filepath.Join(testutil.ModuleRoot(t), "internal", "groundtruth", "testdata", "vtest-truth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := testutil.Media(t, "vtest.avi")
	cfg := vtestConfig(t, truth, file)
	rec, log, opt := record(ctx, t, cfg, file, vtestRates[len(vtestRates)-1], truth.Duration())
	lines := slices.Sorted(func(yield func(string) bool) {
		for l := range truth.Lines {
			if !yield(l) {
				return
			}
		}
	})
	zones := slices.Sorted(func(yield func(string) bool) {
		for z := range truth.Zones {
			if !yield(z) {
				return
			}
		}
	})
	out := groundtruth.RecordingReport{Video: truth.Video}
	for _, l := range lines {
		out.Crossings += len(truth.LineCrossings(l))
	}
	for _, z := range zones {
		out.Visits += len(truth.ZoneVisits(z))
	}
	class := func(label string) string {
		if label == "person" {
			return label
		}
		return "" // the truth counts people only
	}
	for _, fps := range vtestRates {
		ev := log
		if fps != rec.FPS {
			ev = stepScene(t, cfg, rec, fps)
		}
		r := groundtruth.RecordingRate{FPS: fps}
		var notes []string
		for _, l := range lines {
			var got []groundtruth.ObservedCrossing
			for _, e := range ev.lines {
				if e.Line == l {
					got = append(got, groundtruth.ObservedCrossing{TrackID: e.TrackID, Class: e.Label, Direction: groundtruth.Direction(e.Direction), T: e.CrossedAt.Sub(opt.Start)})
				}
			}
			cs := groundtruth.ScoreCrossings(truth.LineCrossings(l), got, groundtruth.CrossingTolerance(time.Duration(float64(time.Second)/fps)), class)
			r.Lines = append(r.Lines, cs.Summary(l))
			r.All = r.All.Add(cs.Summary(l))
			for _, c := range cs.Missed {
				notes = append(notes, fmt.Sprintf("%s: missed person %d %s at %.1f s", l, c.ObjectID, c.Direction, c.T.Seconds()))
			}
			for _, c := range cs.Extra {
				notes = append(notes, fmt.Sprintf("%s: extra t%d %s at %.1f s", l, c.TrackID, c.Direction, c.T.Seconds()))
			}
		}
		for _, z := range zones {
			var stays []groundtruth.ObservedStay
			for _, e := range ev.zones {
				if e.Zone != z || e.Type != sinks.ZoneExit {
					continue
				}
				enter := e.Since.Sub(opt.Start)
				exit := min(enter+time.Duration(e.DwellS*float64(time.Second)), truth.Duration()) // ended by the video's end
				stays = append(stays, groundtruth.ObservedStay{TrackID: e.TrackID, Class: e.Label, Enter: enter, Exit: exit})
			}
			r.Zones = append(r.Zones, groundtruth.ScoreStays(truth.ZoneVisits(z), stays, nil, class).Summary(z))
		}
		t.Logf("figures: vtest.avi at %g fps: crossings precision %.3f recall %.3f (%d matched, %d true, %d reported) %+v; zones %+v",
			fps, r.All.Precision, r.All.Recall, r.All.Matched, r.All.True, r.All.Reported, r.Lines, r.Zones)
		t.Logf("vtest.avi at %g fps: %s", fps, strings.Join(notes, "; "))
		out.Rates = append(out.Rates, r)
		if f := vtestFloor; fps >= 2 && (r.All.Precision < f || r.All.Recall < f) {
			t.Errorf("at %g fps: crossing precision %.3f, recall %.3f: want both >= %g", fps, r.All.Precision, r.All.Recall, f)
		}
	}
	if name := os.Getenv("VISIOND_VTEST_OUT"); name != "" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// vtestRates are the analysed rates of the real recording's figures; the recording is at
// the last, the video's own rate.
var vtestRates = []float64{1, 2, 5, 10}

// vtestFloor is what any working daemon does on the real recording from 2 fps, crossing
// precision and recall: not a tuned bound (nothing may be tuned on this recording), a guard
// against a daemon that counts nothing or everything. (Measured on 2026-12-05: 0.81 / 0.73
// at 2 fps, 0.89 / 0.80 at 5, with the first pass of the truth; at 1 fps 0.56 / 0.48, which
// no floor is asked of.)
const vtestFloor = 0.5

// vtestConfig is a config with one CPU worker and a file camera with the truth's lines and
// zones.
func vtestConfig(t *testing.T, truth groundtruth.RecordedTruth, file string) *config.Config {
	t.Helper()
	var zones, lines []string
	for name, z := range truth.Zones {
		var poly []string
		for _, p := range z {
			poly = append(poly, fmt.Sprintf("[%g, %g]", p.X, p.Y))
		}
		zones = append(zones, fmt.Sprintf("{id: %s, polygon: [%s]}", name, strings.Join(poly, ", ")))
	}
	for name, l := range truth.Lines {
		lines = append(lines, fmt.Sprintf("{id: %s, points: [[%g, %g], [%g, %g]]}", name, l.P1.X, l.P1.Y, l.P2.X, l.P2.Y))
	}
	slices.Sort(zones)
	slices.Sort(lines)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
site: test
http: {listen: ""}
workers: {model: %q, library: %q, job_timeout: 1m, pools: [{count: 1, provider: cpu}]}
cameras:
  - id: vtest
    kind: file
    file: %q
    fps: 10
    zones: [%s]
    lines: [%s]
`, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), file, strings.Join(zones, ", "), strings.Join(lines, ", "))))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
