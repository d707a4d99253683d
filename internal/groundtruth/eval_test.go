package groundtruth

import (
	"reflect"
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

func TestEvaluatorPerfect(t *testing.T) {
	var e Evaluator
	for i := range 5 {
		x := float64(i)
		e.Add([]Truth{tb(1, x), tb(2, 50+x)}, []Tracked{gb(7, x+1), gb(9, 50+x)})
	}
	want := Score{Frames: 5, Required: 10, Matched: 10, Tracks: map[int][]uint64{1: {7}, 2: {9}}}
	if got := e.Score(); !reflect.DeepEqual(got, want) {
		t.Errorf("score %+v, want %+v", got, want)
	}
}

func TestEvaluatorSwitches(t *testing.T) {
	var e Evaluator
	e.Add([]Truth{tb(1, 0), tb(2, 50)}, []Tracked{gb(7, 0), gb(9, 50)})
	e.Add([]Truth{tb(1, 0), tb(2, 50)}, []Tracked{gb(9, 0), gb(7, 50)}) // the ids swap
	e.Add([]Truth{tb(1, 0), tb(2, 50)}, []Tracked{gb(9, 0), gb(7, 50)})
	got := e.Score()
	if got.IDSwitches != 2 || got.Fragmentations != 0 || got.Matched != 6 || !reflect.DeepEqual(got.Tracks, map[int][]uint64{1: {7, 9}, 2: {9, 7}}) {
		t.Errorf("score %+v, want 2 switches", got)
	}
}

func TestEvaluatorKeepsMatchesThroughACrossing(t *testing.T) {
	// Objects 1 and 2 pass close: greedy matching by IoU alone would pair track 7 (object
	// 1's) with object 2 (IoU 1) and track 9 with object 1; the matches of the previous
	// frame are kept while they overlap by MinIoU, so no identity switches.
	var e Evaluator
	e.Add([]Truth{tb(1, 0), tb(2, 20)}, []Tracked{gb(7, 0), gb(9, 20)})
	e.Add([]Truth{tb(1, 0), tb(2, 2)}, []Tracked{gb(7, 2), gb(9, 0.5)})
	if got := e.Score(); got.IDSwitches != 0 || got.Matched != 4 || got.FalsePositives != 0 {
		t.Errorf("score %+v, want the matches kept", got)
	}
	// Without the previous frame, the same frame is matched by IoU.
	var fresh Evaluator
	fresh.Add([]Truth{tb(1, 0), tb(2, 2)}, []Tracked{gb(7, 2), gb(9, 0.5)})
	if got := fresh.Score(); !reflect.DeepEqual(got.Tracks, map[int][]uint64{1: {9}, 2: {7}}) {
		t.Errorf("fresh tracks %v, want by IoU", got.Tracks)
	}
}

func TestEvaluatorMissesAndFragments(t *testing.T) {
	var e Evaluator
	e.Add([]Truth{tb(1, 0)}, []Tracked{gb(7, 0)})
	e.Add([]Truth{tb(1, 0)}, nil)                                    // missed
	e.Add([]Truth{tb(1, 0)}, []Tracked{gb(7, 40)})                   // missed, and a false positive
	e.Add([]Truth{tb(1, 0)}, []Tracked{gb(7, 1)})                    // the same track again: a fragmentation
	e.Add([]Truth{tb(1, 0)}, nil)                                    // missed
	e.Add([]Truth{tb(1, 0)}, []Tracked{gb(8, 0)})                    // a new track: fragmentation and switch
	e.Add(nil, []Tracked{{TrackID: 8, Box: geom.Box{W: 10, H: 10}}}) // object gone: false positive
	got := e.Score()
	want := Score{Frames: 7, Required: 6, Matched: 3, Missed: 3, FalsePositives: 2, IDSwitches: 1, Fragmentations: 2,
		Tracks: map[int][]uint64{1: {7, 8}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("score %+v, want %+v", got, want)
	}
}

func TestEvaluatorVisibilityAndClass(t *testing.T) {
	e := Evaluator{MinIoU: 0.8, MinVisible: 0.9}
	hidden := tb(1, 0)
	hidden.Visible = 0.5
	e.Add([]Truth{hidden}, nil)                                                        // not required: no miss
	e.Add([]Truth{hidden}, []Tracked{gb(3, 0)})                                        // matched anyway
	e.Add([]Truth{tb(1, 0)}, []Tracked{gb(3, 3)})                                      // IoU 0.54 < 0.8: missed, false positive
	e.Add([]Truth{tb(1, 0)}, []Tracked{{TrackID: 3, Class: "car", Box: tb(1, 0).Box}}) // another class
	e.Add([]Truth{tb(1, 0)}, []Tracked{{TrackID: 3, Box: tb(1, 0).Box}})               // no class: matches
	got := e.Score()
	want := Score{Frames: 5, Required: 3, Matched: 2, Missed: 2, FalsePositives: 2, Fragmentations: 1,
		Tracks: map[int][]uint64{1: {3}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("score %+v, want %+v", got, want)
	}
}
