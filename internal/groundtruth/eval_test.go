package groundtruth

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/geom"
)

// tb is a truth object of class person, fully visible, with a 10x10 box at x.
func tb(id int, x float64) Truth {
	return Truth{ID: id, Class: "person", Box: geom.Box{X: x, Y: 0, W: 10, H: 10}, Visible: 1}
}

// gb is a tracked 10x10 box at x.
func gb(track uint64, x float64) Tracked {
	return Tracked{TrackID: track, Class: "person", Box: geom.Box{X: x, Y: 0, W: 10, H: 10}}
}

// addFrames adds frames to e, each its truth (Truth values) and its tracked boxes (Tracked).
func addFrames(e *Evaluator, frames ...[2][]any) {
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
}

// clearOf runs frames through e and returns its CLEAR figures, less the ratios (checked
// apart).
func clearOf(e *Evaluator, frames ...[2][]any) CLEAR {
	addFrames(e, frames...)
	c := e.CLEAR()
	c.MOTA, c.MODA, c.MOTP, c.Recall, c.Precision = 0, 0, 0, 0, 0
	return c
}

func fr(truth []any, got ...any) [2][]any { return [2][]any{truth, got} }

func TestCLEARPerfect(t *testing.T) {
	var e Evaluator
	for i := range 5 {
		x := float64(i)
		e.Add([]Truth{tb(1, x), tb(2, 50+x)}, []Tracked{gb(7, x+1), gb(9, 50+x)})
	}
	c := e.CLEAR()
	if c.TP != 10 || c.FN+c.FP+c.IDSW+c.Frag != 0 || c.MT != 2 || c.MOTA != 1 || !reflect.DeepEqual(c.Tracks, map[int][]uint64{1: {7}, 2: {9}}) {
		t.Errorf("%+v, want 10 matches and nothing else", c)
	}
	// MOTP: 5 frames of IoU 90/110 for object 1, 5 of IoU 1 for object 2.
	if want := (5*90.0/110 + 5) / 10; !approx(c.MOTP, want) {
		t.Errorf("MOTP %v, want %v", c.MOTP, want)
	}
}

// The case: two people overlapping, each tracked, but the box with the most overlap
// with person 1 is person 2's track. Matching greedily by IoU pairs person 1 with track 9
// (IoU 0.82) and leaves person 2 and track 7 unmatched (IoU under 0.5 with the other): a
// miss and a false positive a frame, MOTA 0. The Hungarian method pairs 1-7 and 2-9 (IoU
// 0.54 and 0.67): two matches, MOTA 1.
func TestCLEARHungarianOnOverlappingPeople(t *testing.T) {
	var e Evaluator
	p1, p2 := tb(1, 0), tb(2, 3)
	got := []Tracked{gb(7, -3), gb(9, 1)}
	if v := IoU(p1.Box, got[1].Box); !(v > IoU(p1.Box, got[0].Box) && v > 0.8) || IoU(p2.Box, got[0].Box) >= 0.5 {
		t.Fatalf("bad case: IoUs %v %v %v %v", IoU(p1.Box, got[0].Box), v, IoU(p2.Box, got[0].Box), IoU(p2.Box, got[1].Box))
	}
	for range 4 {
		e.Add([]Truth{p1, p2}, got)
	}
	c := e.CLEAR()
	if c.TP != 8 || c.FN != 0 || c.FP != 0 || c.MOTA != 1 || !reflect.DeepEqual(c.Tracks, map[int][]uint64{1: {7}, 2: {9}}) {
		t.Errorf("%+v: want every frame's two matched", c)
	}
}

// TrackEval's switch rule: a switch is a match to another track than the object's last
// one, on any earlier frame; the previous frame's pairs are kept first while they overlap
// by MinIoU, even where another pairing overlaps more.
func TestCLEARSwitches(t *testing.T) {
	two := []any{tb(1, 0), tb(2, 50)}
	got := clearOf(&Evaluator{}, fr(two, gb(7, 0), gb(9, 50)), fr(two, gb(9, 0), gb(7, 50)), fr(two, gb(9, 0), gb(7, 50)))
	if want := (CLEAR{Frames: 3, TP: 6, IDSW: 2, Objects: 2, MT: 2, Tracks: map[int][]uint64{1: {7, 9}, 2: {9, 7}}}); !reflect.DeepEqual(got, want) {
		t.Errorf("swap: %+v, want %+v", got, want)
	}
	// 1 and 2 pass close: by IoU alone track 7 (1's) would go to 2 (IoU 1) and 9 to 1; the
	// previous frame's pairs still overlap by 0.5 and are kept.
	got = clearOf(&Evaluator{}, fr([]any{tb(1, 0), tb(2, 20)}, gb(7, 0), gb(9, 20)), fr([]any{tb(1, 0), tb(2, 2)}, gb(7, 2), gb(9, 0.5)))
	if got.IDSW != 0 || got.TP != 4 || !reflect.DeepEqual(got.Tracks, map[int][]uint64{1: {7}, 2: {9}}) {
		t.Errorf("passing: %+v, want the pairs kept", got)
	}
	// Without the previous frame, the same frame is matched by IoU.
	got = clearOf(&Evaluator{}, fr([]any{tb(1, 0), tb(2, 2)}, gb(7, 2), gb(9, 0.5)))
	if !reflect.DeepEqual(got.Tracks, map[int][]uint64{1: {9}, 2: {7}}) {
		t.Errorf("fresh tracks %v, want by IoU", got.Tracks)
	}
	// An object lost and found again by its track is no switch, however long the gap; by
	// another track, one. Frames with no tracked box at all leave the previous frame's
	// pairs as they were (TrackEval's loop skips them), so this gap is no fragmentation;
	// a gap with some other box on the frame is.
	one := []any{tb(1, 0)}
	got = clearOf(&Evaluator{}, fr(one, gb(7, 0)), fr(one), fr(one), fr(one, gb(7, 0)), fr(one, gb(8, 0)))
	if got.IDSW != 1 || got.Frag != 0 || got.FN != 2 {
		t.Errorf("gap: %+v, want 1 switch, no fragmentation", got)
	}
	got = clearOf(&Evaluator{}, fr(one, gb(7, 0)), fr(one, gb(5, 50)), fr(one, gb(7, 0)))
	if got.IDSW != 0 || got.Frag != 1 {
		t.Errorf("gap with another box: %+v, want 1 fragmentation", got)
	}
}

func TestCLEARMissesAndFragments(t *testing.T) {
	one := []any{tb(1, 0)}
	got := clearOf(&Evaluator{},
		fr(one, gb(7, 0)),
		fr(one),            // missed; no tracked box at all: TrackEval keeps the previous frame's pairs
		fr(one, gb(7, 40)), // missed, and a false positive: now 1 is untracked
		fr(one, gb(7, 1)),  // tracked again: a fragmentation
		fr(one, gb(5, 30)), // missed
		fr(one, gb(8, 0)),  // a new track: a fragmentation and a switch
		fr(nil, Tracked{TrackID: 8, Box: geom.Box{W: 10, H: 10}}), // object gone: a false positive
	)
	want := CLEAR{Frames: 7, TP: 3, FN: 3, FP: 3, IDSW: 1, Objects: 1, PT: 1, Frag: 2, Tracks: map[int][]uint64{1: {7, 8}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%+v, want %+v", got, want)
	}
	// Tracked on 2 of 6 frames: partly tracked (20% to 80%).
	e := Evaluator{}
	clearOf(&e, fr(one, gb(7, 0)), fr(one, gb(7, 0)), fr(one), fr(one), fr(one), fr(one))
	if c := e.CLEAR(); c.PT != 1 || !approx(c.MOTA, 2.0/6) || !approx(c.Recall, 2.0/6) || c.Precision != 1 {
		t.Errorf("%+v", c)
	}
}

// Truth is every object that shows; less visible objects (MinVisible) and Ignore boxes are
// distractors: a box matched to one is removed with it.
func TestEvaluatorVisibilityDistractorsAndClass(t *testing.T) {
	faint := tb(1, 0)
	faint.Visible = 0.1
	hidden := tb(2, 50)
	hidden.Visible = 0
	parked := geom.Box{X: 100, Y: 0, W: 10, H: 10}
	frames := []([2][]any){
		fr([]any{faint, hidden}),                                                  // faint is truth: a miss; hidden is not
		fr([]any{faint, hidden}, gb(3, 0), gb(4, 50)),                             // faint matched; the box on hidden removed
		fr([]any{faint}, gb(3, 0), gb(6, 100)),                                    // the box on the parked thing removed
		fr([]any{tb(1, 0)}, Tracked{TrackID: 3, Class: "car", Box: tb(1, 0).Box}), // another class: a miss and a false positive
		fr([]any{tb(1, 0)}, Tracked{TrackID: 3, Box: tb(1, 0).Box}),               // no class: matches
	}
	got := clearOf(&Evaluator{Ignore: []geom.Box{parked}}, frames...)
	if want := (CLEAR{Frames: 5, TP: 3, FN: 2, FP: 1, Objects: 1, PT: 1, Frag: 1, Tracks: map[int][]uint64{1: {3}}}); !reflect.DeepEqual(got, want) {
		t.Errorf("any part visible: %+v, want %+v", got, want)
	}
	// At least half visible: faint is a distractor too, its box on frames 2 and 3 removed.
	got = clearOf(&Evaluator{MinVisible: 0.5, Ignore: []geom.Box{parked}}, frames...)
	if want := (CLEAR{Frames: 5, TP: 1, FN: 1, FP: 1, Objects: 1, PT: 1, Tracks: map[int][]uint64{1: {3}}}); !reflect.DeepEqual(got, want) {
		t.Errorf("half visible: %+v, want %+v", got, want)
	}
	// Without Ignore, the box on the parked thing is a false positive.
	if got = clearOf(&Evaluator{}, frames...); got.FP != 2 {
		t.Errorf("no ignore: %+v, want 2 false positives", got)
	}
	// A box on a real person who stands in front of a distractor stays (one to one, the
	// most overlap).
	e := Evaluator{Ignore: []geom.Box{{X: 2, Y: 0, W: 10, H: 10}}}
	if got := clearOf(&e, fr([]any{tb(1, 0)}, gb(3, 0))); got.TP != 1 || got.FP != 0 {
		t.Errorf("person on an ignored place: %+v, want matched", got)
	}
}

// TestTrackEvalReference scores testdata/trackeval's sequence (3 people, 6 tracks, 12
// frames: a swap where two people meet, a track missing a frame, a person lost and found
// under a new id, a second box on one person, boxes sliding off their person, a false
// positive) and compares every figure with TrackEval's own for it. The values below are what
// testdata/trackeval/make_and_score.py printed (trackeval-output.txt), which wrote the
// sequence and ran TrackEval's CLEAR, Identity and HOTA classes (commit 12c8791, numpy
// 1.24.2, scipy 1.10.1 from Debian 12) on it.
func TestTrackEvalReference(t *testing.T) {
	gt := readMOT(t, "gt.txt")
	tr := readMOT(t, "tracker.txt")
	var e Evaluator
	for f := 1; f <= 12; f++ {
		var truth []Truth
		var got []Tracked
		for _, r := range gt[f] {
			truth = append(truth, Truth{ID: int(r.id), Class: "person", Box: r.box, Visible: 1})
		}
		for _, r := range tr[f] {
			got = append(got, Tracked{TrackID: r.id, Class: "person", Box: r.box})
		}
		e.Add(truth, got)
	}
	c, id, h := e.CLEAR(), e.Identity(), e.HOTA()
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"CLR_TP", float64(c.TP), 29}, {"CLR_FN", float64(c.FN), 3}, {"CLR_FP", float64(c.FP), 4}, {"IDSW", float64(c.IDSW), 3},
		{"MT", float64(c.MT), 2}, {"PT", float64(c.PT), 1}, {"ML", float64(c.ML), 0}, {"Frag", float64(c.Frag), 2},
		{"MOTA", c.MOTA, 0.6875}, {"MODA", c.MODA, 0.78125}, {"MOTP", c.MOTP, 0.838742432435027},
		{"CLR_Re", c.Recall, 0.90625}, {"CLR_Pr", c.Precision, 0.8787878787878788},
		{"IDTP", float64(id.IDTP), 16}, {"IDFN", float64(id.IDFN), 16}, {"IDFP", float64(id.IDFP), 17},
		{"IDF1", id.IDF1, 0.49230769230769234}, {"IDP", id.IDP, 0.48484848484848486}, {"IDR", id.IDR, 0.5},
		{"HOTA", h.HOTA, 0.4500032859914639}, {"DetA", h.DetA, 0.6589269452602539}, {"AssA", h.AssA, 0.3087375519800237},
		{"DetRe", h.DetRe, 0.7845394736842105}, {"DetPr", h.DetPr, 0.7607655502392344},
		{"AssRe", h.AssRe, 0.4326931279899022}, {"AssPr", h.AssPr, 0.5361980091794385}, {"LocA", h.LocA, 0.8704113191772911},
		{"HOTA(0)", h.HOTA0, 0.5258505903817245}, {"LocA(0)", h.LocA0, 0.838742432435027},
	} {
		if math.Abs(x.got-x.want) > 1e-9 {
			t.Errorf("%s %v, TrackEval %v", x.name, x.got, x.want)
		}
	}
}

type motRow struct {
	id  uint64
	box geom.Box
}

// readMOT reads a MOTChallenge text file (frame, id, x, y, w, h, ...) of testdata/trackeval
// into its rows by frame.
func readMOT(t *testing.T, name string) map[int][]motRow {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "trackeval", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[int][]motRow{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var v [6]float64
		fields := strings.Split(sc.Text(), ",")
		for i := range v {
			if v[i], err = strconv.ParseFloat(fields[i], 64); err != nil {
				t.Fatalf("%s: %q: %v", name, sc.Text(), err)
			}
		}
		rows[int(v[0])] = append(rows[int(v[0])], motRow{uint64(v[1]), geom.Box{X: v[2], Y: v[3], W: v[4], H: v[5]}})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// HOTA of hand-worked cases: perfect tracking is 1; one track for two people one after the
// other halves the association.
func TestHOTAHandWorked(t *testing.T) {
	var e Evaluator
	for i := range 4 {
		e.Add([]Truth{tb(1, float64(i)), tb(2, 50)}, []Tracked{gb(7, float64(i)), gb(9, 50)})
	}
	if h := e.HOTA(); !approx(h.HOTA, 1) || !approx(h.DetA, 1) || !approx(h.AssA, 1) || !approx(h.LocA, 1) {
		t.Errorf("perfect: %+v", h)
	}
	// Person 1 on frames 0-3, person 2 on frames 4-7, both followed by track 7 at IoU 1:
	// every frame a match (DetA 1); each match's Jaccard of ids is 4 / (4 + 8 - 4) = 0.5,
	// so AssA 0.5 and HOTA sqrt(0.5).
	e = Evaluator{}
	for i := range 8 {
		id := 1 + i/4
		e.Add([]Truth{tb(id, 0)}, []Tracked{gb(7, 0)})
	}
	if h := e.HOTA(); !approx(h.DetA, 1) || !approx(h.AssA, 0.5) || !approx(h.HOTA, math.Sqrt(0.5)) || !approx(h.AssRe, 1) || !approx(h.AssPr, 0.5) {
		t.Errorf("one track for two: %+v", h)
	}
	// A box at IoU 0.62 is matched at the thresholds up to 0.6 (12 of 19): DetA 12/19.
	e = Evaluator{}
	e.Add([]Truth{tb(1, 0)}, []Tracked{{TrackID: 7, Class: "person", Box: geom.Box{W: 10, H: 6.2}}})
	if h := e.HOTA(); !approx(h.DetA, 12.0/19) || !approx(h.AssA, 12.0/19) {
		t.Errorf("IoU 0.6: %+v", h)
	}
	// Nothing tracked: 0.
	e = Evaluator{}
	e.Add([]Truth{tb(1, 0)}, nil)
	if h := e.HOTA(); h.HOTA != 0 || h.LocA != 1 {
		t.Errorf("nothing tracked: %+v", h)
	}
}
