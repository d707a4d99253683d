package model

import (
	"math"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

func det(class int, score float32, x, y, w, h float64) infer.Detection {
	return infer.Detection{ClassID: class, Score: score, Box: geom.Box{X: x, Y: y, W: w, H: h}}
}

// TestMAP50 checks MAP50 on cases small enough to score by hand; each comment works the
// value out.
func TestMAP50(t *testing.T) {
	a := det(0, 1, 0, 0, 10, 10)
	b := det(0, 1, 100, 100, 20, 20)
	for _, tc := range []struct {
		name      string
		ref, cand [][]infer.Detection
		want      float64
	}{
		{"identical", [][]infer.Detection{{a, b}, {a}}, [][]infer.Detection{{a, b}, {a}}, 1},
		{"candidate finds nothing", [][]infer.Detection{{a}}, [][]infer.Detection{{}}, 0},
		{"no reference, no candidate", [][]infer.Detection{{}, nil}, [][]infer.Detection{nil, {}}, 1},
		{"no reference, a candidate", [][]infer.Detection{{}}, [][]infer.Detection{{a}}, 0},
		{
			// Ranks: TP (0.9), FP (0.8), TP (0.7). Precision 1, 1/2, 2/3 at recall 1/2, 1/2, 1.
			// Envelope 1, 2/3, 2/3; AP = 1/2*1 + 1/2*2/3 = 5/6.
			"false positive between two hits",
			[][]infer.Detection{{a, b}},
			[][]infer.Detection{{det(0, 0.9, 0, 0, 10, 10), det(0, 0.8, 50, 50, 10, 10), det(0, 0.7, 100, 100, 20, 20)}},
			5.0 / 6,
		},
		{
			// The false positive ranks first: precision 0, 1/2 at recall 0, 1: AP = 1/2.
			"false positive ranked first",
			[][]infer.Detection{{a}},
			[][]infer.Detection{{det(0, 0.8, 0, 0, 10, 10), det(0, 0.9, 50, 50, 10, 10)}},
			0.5,
		},
		{
			// Class 0 found entirely (AP 1), class 1 half (one of two boxes, no false
			// positive: AP 1/2); mean 3/4.
			"two classes",
			[][]infer.Detection{{a, det(1, 1, 200, 200, 10, 10), det(1, 1, 300, 300, 10, 10)}},
			[][]infer.Detection{{a, det(1, 0.6, 200, 200, 10, 10)}},
			0.75,
		},
		{
			// A class the reference never detects is not scored.
			"extra class ignored",
			[][]infer.Detection{{a}},
			[][]infer.Detection{{a, det(5, 0.99, 0, 0, 10, 10)}},
			1,
		},
		{
			// The wrong class does not match: class 0's AP is 0.
			"wrong class",
			[][]infer.Detection{{a}},
			[][]infer.Detection{{det(1, 0.9, 0, 0, 10, 10)}},
			0,
		},
		{
			// IoU exactly 0.5 (100 / 200) matches.
			"IoU at the threshold",
			[][]infer.Detection{{a}},
			[][]infer.Detection{{det(0, 0.9, 0, 0, 10, 20)}},
			1,
		},
		{
			// IoU 100/210 < 0.5 does not.
			"IoU below the threshold",
			[][]infer.Detection{{a}},
			[][]infer.Detection{{det(0, 0.9, 0, 0, 10, 21)}},
			0,
		},
		{
			// The second detection of one box is a false positive, ranked after the hit:
			// precision 1, 1/2 at recall 1, 1; AP 1.
			"duplicate after the hit",
			[][]infer.Detection{{a}},
			[][]infer.Detection{{det(0, 0.9, 0, 0, 10, 10), det(0, 0.8, 1, 0, 10, 10)}},
			1,
		},
		{
			// A box matching a reference box of another frame is a false positive there;
			// frame 0's box is missed. Ranks FP (0.9, frame 1), TP (0.5, frame 0):
			// precision 0, 1/2 at recall 0, 1/2: AP 1/4.
			"other frame",
			[][]infer.Detection{{a}, {b}},
			[][]infer.Detection{{det(0, 0.5, 0, 0, 10, 10)}, {det(0, 0.9, 0, 0, 10, 10)}},
			0.25,
		},
		{
			// Two overlapping reference boxes A [0,10] and B [2,12] (x). The best detection
			// is B exactly and overlaps A by 80/120; the second overlaps A by 70/130 and B by
			// 50/150. Matching the best overlap gives each its own box (AP 1); matching the
			// first box found above 0.5 would give the first A and leave the second nothing.
			"match the best overlap",
			[][]infer.Detection{{a, det(0, 1, 2, 0, 10, 10)}},
			[][]infer.Detection{{det(0, 0.9, 2, 0, 10, 10), det(0, 0.8, -3, 0, 10, 10)}},
			1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MAP50(tc.ref, tc.cand); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("MAP50 = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMAP50FrameCountMismatch(t *testing.T) {
	defer func() {
		r := recover()
		if s, _ := r.(string); !strings.Contains(s, "2 reference frames, 1 candidate frames") {
			t.Errorf("panic %v, want one naming both frame counts", r)
		}
	}()
	MAP50(make([][]infer.Detection, 2), make([][]infer.Detection, 1))
}
