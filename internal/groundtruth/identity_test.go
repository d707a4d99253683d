package groundtruth

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// idOf runs frames through an Evaluator and returns its identity score.
func idOf(frames [][2][]any) IDScore {
	var e Evaluator
	addFrames(&e, frames...)
	return e.Identity()
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
	// hidden person (visible 0, a distractor) followed by track 6 on the other 5 counts
	// for nothing. IDTP 10, IDFP 5, IDFN 0: IDF1 = 20/25.
	hidden := tb(3, 100)
	hidden.Visible = 0
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
