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

	"github.com/visiond/visiond/internal/groundtruth"
	"github.com/visiond/visiond/internal/testutil"
)

// TestCrowdDets is a tool for working on the tracker, not a guard: TestCrowdReplay is. The
// model is the slow part of TestCrowdReplay (a minute or two a seed), and the tracker is
// what changes, so with VISIOND_CROWD_DETS naming a directory, this test keeps each seed's
// recording of the worker's results there (seed-N.json, made by a replay at 10 fps when it
// is missing), then runs only the camera's scene on them at every rate and scores it as
// TestCrowdReplay does, checking crowdBounds on the tuning seeds, in seconds. Seeds are
// crowdTuningSeeds, or VISIOND_CROWD_SEEDS. Without VISIOND_CROWD_DETS it is skipped.
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
	for _, seed := range seeds {
		cs, err := groundtruth.Crowd(m, groundtruth.CrowdParams{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		sc, err := groundtruth.NewScene(cs.Scenario)
		if err != nil {
			t.Fatal(err)
		}
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
		for _, fps := range crowdRates {
			fig := stepCrowd(t, cfg, rec, fps, sc, cs)
			logCrowd(t, seed, fps, fig)
			s := fig.Summary(seed, fps)
			sums[fps] = append(sums[fps], s)
			if tuning {
				checkCrowd(t, s)
			}
		}
	}
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
		t.Logf("mean of %d seeds at %g fps: HOTA %.3f, IDF1 %.3f (worst %.3f), crossing precision %.3f recall %.3f", len(sums[fps]), fps, hota/n, idf1/n, worst, prec/n, rec/n)
	}
}
