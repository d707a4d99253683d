package groundtruth

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// idOf runs frames through an Evaluator and returns its identity score.
func idOf(frames [][2][]any) IDScore {
	var e Evaluator
	for _, f := range frames {
		var truth []Truth
		var got []Tracked
		for _, x := range f[0] {
			truth = append(truth, x.(Truth))
		}
		for _, x := range f[1] {
			got = append(got, x.(Tracked))
		}
		e.Add(truth, got)
	}
	return e.IDScore()
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func checkID(t *testing.T, name string, got IDScore, tp, fp, fn int, assigned map[int]uint64) {
	t.Helper()
	idp, idr := float64(tp)/float64(tp+fp), float64(tp)/float64(tp+fn)
	f1 := 2 * float64(tp) / float64(2*tp+fp+fn)
	if got.IDTP != tp || got.IDFP != fp || got.IDFN != fn || !approx(got.IDP, idp) || !approx(got.IDR, idr) || !approx(got.IDF1, f1) ||
		!reflect.DeepEqual(got.Assigned, assigned) {
		t.Errorf("%s: %+v, want IDTP %d IDFP %d IDFN %d (IDP %.3f IDR %.3f IDF1 %.3f), assigned %v", name, got, tp, fp, fn, idp, idr, f1, assigned)
	}
}

// The IDF1 of hand-made tracks, worked out by hand: two people (1 at x 0, 2 at x 50) for
// 10 frames.
func TestIDF1(t *testing.T) {
	frames := func(n int, f func(i int) ([]any, []any)) [][2][]any {
		var out [][2][]any
		for i := range n {
			a, b := f(i)
			out = append(out, [2][]any{a, b})
		}
		return out
	}
	two := []any{tb(1, 0), tb(2, 50)}

	// Perfect: 20 object-frames, all followed by their own track.
	checkID(t, "perfect", idOf(frames(10, func(int) ([]any, []any) { return two, []any{gb(7, 0), gb(9, 50)} })),
		20, 0, 0, map[int]uint64{1: 7, 2: 9})

	// The tracks swap after frame 5 (of 10): 1 is 7 on 6 frames and 9 on 4, 2 the reverse.
	// The best assignment is 1-7, 2-9: IDTP 12; the 8 swapped boxes are both false
	// positives and false negatives. IDF1 = 24 / (24 + 8 + 8) = 0.6, though CLEAR-MOT
	// counts only 2 switches.
	checkID(t, "swap", idOf(frames(10, func(i int) ([]any, []any) {
		if i < 6 {
			return two, []any{gb(7, 0), gb(9, 50)}
		}
		return two, []any{gb(9, 0), gb(7, 50)}
	})), 12, 8, 8, map[int]uint64{1: 7, 2: 9})

	// Fragmented: 1 is followed by 7 for 6 frames, by nobody for 2, by 8 for the last 2;
	// 2 is not there. IDTP 6 (1-7), IDFP 2 (track 8), IDFN 4; IDF1 = 12/18.
	checkID(t, "fragmented", idOf(frames(10, func(i int) ([]any, []any) {
		switch {
		case i < 6:
			return []any{tb(1, 0)}, []any{gb(7, 0)}
		case i < 8:
			return []any{tb(1, 0)}, nil
		}
		return []any{tb(1, 0)}, []any{gb(8, 0)}
	})), 6, 2, 4, map[int]uint64{1: 7})

	// False positives: 1 followed perfectly, and a track 5 on nothing on 5 frames; a
	// hidden person (visible 0.2) followed by track 6 on the other 5 counts for nothing.
	// IDTP 10, IDFP 5, IDFN 0: IDF1 = 20/25.
	hidden := tb(3, 100)
	hidden.Visible = 0.2
	checkID(t, "false positives", idOf(frames(10, func(i int) ([]any, []any) {
		if i%2 == 0 {
			return []any{tb(1, 0)}, []any{gb(7, 0), gb(5, 200)}
		}
		return []any{tb(1, 0), hidden}, []any{gb(7, 0), gb(6, 100)}
	})), 10, 5, 0, map[int]uint64{1: 7})

	// Nothing at all: 1 everywhere.
	if s := idOf(nil); s.IDTP+s.IDFP+s.IDFN != 0 || s.IDF1 != 1 || s.IDP != 1 || s.IDR != 1 {
		t.Errorf("empty: %+v", s)
	}
}

// TestIDF1GlobalAssignment: greedy assignment would give track A to object 1 (10 frames)
// and leave 2 with B (0); the optimum gives 1 B (9) and 2 A (9).
func TestIDF1GlobalAssignment(t *testing.T) {
	var frames [][2][]any
	for i := range 10 {
		frames = append(frames, [2][]any{{tb(1, 0)}, {gb(10, 0)}}) // A on 1
		if i < 9 {
			frames = append(frames, [2][]any{{tb(1, 0), tb(2, 50)}, {gb(11, 0), gb(10, 50)}}) // B on 1, A on 2
		}
	}
	// 28 object-frames, 28 boxes; IDTP 18.
	checkID(t, "global", idOf(frames), 18, 10, 10, map[int]uint64{1: 11, 2: 10})
}

// TestMaxAssignment checks the Hungarian method against every permutation on random
// small matrices, square and not.
func TestMaxAssignment(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n, m := 1+r.IntN(5), 1+r.IntN(5)
		w := make([][]float64, n)
		for i := range w {
			w[i] = make([]float64, m)
			for j := range w[i] {
				w[i][j] = float64(r.IntN(20))
			}
		}
		got := maxAssignment(w)
		sum, used := 0.0, map[int]bool{}
		for i, j := range got {
			if j >= 0 {
				if used[j] {
					t.Fatalf("%v: column %d assigned twice: %v", w, j, got)
				}
				used[j] = true
				sum += w[i][j]
			}
		}
		if want := bruteBest(w, 0, map[int]bool{}); sum != want {
			t.Fatalf("%v: assignment %v sums to %v, best %v", w, got, sum, want)
		}
		if assigned := len(used); assigned != min(n, m) {
			t.Fatalf("%v: %d assigned, want %d", w, assigned, min(n, m))
		}
	}
}

func bruteBest(w [][]float64, i int, used map[int]bool) float64 {
	if i == len(w) {
		return 0
	}
	best := bruteBest(w, i+1, used) // row i unassigned
	for j := range w[i] {
		if !used[j] {
			used[j] = true
			best = max(best, w[i][j]+bruteBest(w, i+1, used))
			used[j] = false
		}
	}
	return best
}

// TestScoreRun scores hand-made events on a small scene of blocks: two people crossing a
// vertical line in opposite directions, one of them through a zone, and a car.
func TestScoreRun(t *testing.T) {
	person := block("p", 20, 40, red)
	car := block("c", 60, 30, blue)
	car.Class = "car"
	s := Scenario{W: 200, H: 100, FPS: 10, Duration: 10 * time.Second, Objects: []Object{
		{ID: 1, Sprite: person, Path: []Waypoint{{0, 0.1, 0.8}, {8 * time.Second, 0.9, 0.8}}}, // in at 4 s; zone 2..3 s
		{ID: 2, Sprite: person, Path: []Waypoint{{0, 0.9, 0.5}, {8 * time.Second, 0.1, 0.5}}}, // out at 4 s
		{ID: 3, Sprite: car, Path: []Waypoint{{time.Second, 0.2, 0.3}, {5 * time.Second, 0.8, 0.3}}},
	}}
	sc, err := NewScene(s)
	if err != nil {
		t.Fatal(err)
	}
	line := Line{Point{0.5, 0.1}, Point{0.5, 0.95}}
	zone := Zone{{0.3, 0.7}, {0.4, 0.7}, {0.4, 0.9}, {0.3, 0.9}}
	// Every frame: 1 is track 9 until 3.2 s, then 7; 2 is track 8 until 4.5 s, then 9 (on
	// more frames than 9 followed 1); the car is track 20, seen as a truck on the last
	// frames; a parked thing at (150, 0) is seen as a car (ignored).
	var obs Observed
	parked := geom.Box{X: 150, Y: 0, W: 40, H: 20}
	for i := range s.Frames() {
		f := sc.Truth(i)
		of := ObservedFrame{T: f.T, Tracked: []Tracked{{TrackID: 30, Class: "car", Box: parked}, {TrackID: 31, Class: "dog", Box: geom.Box{X: 1, Y: 1, W: 5, H: 5}}}}
		for _, o := range f.Objects {
			id, class := uint64(7), "person"
			switch {
			case o.ID == 1 && f.T <= 3200*time.Millisecond:
				id = 9
			case o.ID == 2 && f.T < 4500*time.Millisecond:
				id = 8
			case o.ID == 2:
				id = 9
			case o.ID == 3:
				id, class = 20, "car"
				if f.T > 4*time.Second {
					class = "truck"
				}
			}
			if o.Visible >= 0.5 {
				of.Tracked = append(of.Tracked, Tracked{TrackID: id, Class: class, Box: o.Box})
			}
		}
		obs.Frames = append(obs.Frames, of)
	}
	obs.Crossings = []ObservedCrossing{
		{TrackID: 7, Class: "person", Direction: In, T: 4 * time.Second},
		{TrackID: 8, Class: "person", Direction: Out, T: 4 * time.Second},
		{TrackID: 9, Class: "person", Direction: Out, T: 6 * time.Second}, // counted twice
		// The car's crossing was missed.
	}
	// Track 9's stay, while it followed 1 (though it followed 2 on more frames).
	obs.Stays = []ObservedStay{{TrackID: 9, Class: "person", Enter: 2200 * time.Millisecond, Exit: 3100 * time.Millisecond}}
	fig, err := ScoreRun(sc, line, zone, obs, ScoreOptions{Ignore: []geom.Box{parked}, Classes: map[string]string{"truck": "car"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(fig)
	// Truth: 1 and 2 on frames 0..80, the car on frames 10..50. 1 and 2 switch tracks once
	// each; track 9 is assigned to no one (7 follows 1 on more frames, 8 follows 2 on
	// more), so its frames are IDFP and the same frames of 1 and 2 IDFN.
	if fig.Score.IDSwitches != 2 || fig.Score.FalsePositives != 0 || fig.Tracks != 5 || fig.Objects != 3 {
		t.Errorf("score %+v", fig.Score)
	}
	id := fig.ID
	if id.Assigned[2] != 8 || id.Assigned[1] != 7 || id.Assigned[3] != 20 || id.IDFP != id.IDFN || id.IDFP == 0 || !approx(id.IDP, id.IDR) {
		t.Errorf("identity %+v", id)
	}
	want := map[CountKey]LineCount{{In, "person"}: {1, 1}, {Out, "person"}: {2, 1}, {In, "car"}: {0, 1}}
	if !reflect.DeepEqual(fig.Lines, want) || !approx(fig.CountAccuracy, 1-2.0/3) {
		t.Errorf("lines %v, accuracy %v; want %v, 1/3", fig.Lines, fig.CountAccuracy, want)
	}
	if acc := fig.Lines[CountKey{Out, "person"}].Accuracy(); acc != 0 {
		t.Errorf("out accuracy %v, want 0", acc)
	}
	// Person 1 is in the zone from 2 s to 3 s (x 0.3..0.4 at 0.1 a second): 1 s true, 0.9
	// reported: error 0.1.
	if fig.Visits != 1 || fig.Stays != 1 || (fig.DwellTrue-time.Second).Abs() > time.Millisecond ||
		math.Abs(fig.DwellError-0.1) > 1e-3 || (fig.MeanDwellError-100*time.Millisecond).Abs() > time.Millisecond {
		t.Errorf("zone: %d visits, %d stays, dwell %v true, error %v (mean %v)", fig.Visits, fig.Stays, fig.DwellTrue, fig.DwellError, fig.MeanDwellError)
	}
	if _, err := ScoreRun(sc, line, zone, Observed{Frames: []ObservedFrame{{T: 11 * time.Second}}}, ScoreOptions{}); err == nil {
		t.Error("a frame after the video's end was scored")
	}
}
