package analytics

import (
	"errors"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

func TestFilterTest(t *testing.T) {
	f, err := NewFilter(Objects{
		Track: []string{"person", "car"},
		Filters: []ClassFilter{
			{Class: "person", MinScore: 0.5},
			{Class: "car", MinArea: 0.01, MaxArea: 0.25},
		},
	}, []Points{
		square(0, 0, 1, 0.2),                 // the sky
		{{0.5, 0.5}, {0.9, 0.5}, {0.5, 0.9}}, // a triangle: a parking lot
	})
	if err != nil {
		t.Fatal(err)
	}
	// Frame 1000x500: area 500000; 1% = 5000 px², 25% = 125000 px².
	for _, tc := range []struct {
		name  string
		label string
		score float32
		box   geom.Box
		want  Drop
	}{
		{"person kept", "person", 0.9, boxAt(0.3, 0.6), Keep},
		{"person at min score", "person", 0.5, boxAt(0.3, 0.6), Keep},
		{"person unsure", "person", 0.49, boxAt(0.3, 0.6), DropScore},
		{"dog not tracked", "dog", 0.99, boxAt(0.3, 0.6), DropClass},
		{"car small", "car", 0.9, geom.Box{X: 100, Y: 300, W: 49, H: 100}, DropArea},
		{"car at min area", "car", 0.9, geom.Box{X: 100, Y: 300, W: 50, H: 100}, Keep},
		{"car at max area", "car", 0.9, geom.Box{X: 0, Y: 250, W: 500, H: 250}, Keep},
		{"car huge", "car", 0.9, geom.Box{X: 0, Y: 249, W: 501, H: 251}, DropArea},
		{"car with any score", "car", 0.01, geom.Box{X: 100, Y: 300, W: 100, H: 100}, Keep},
		// Masks test the bottom centre: a person whose head is in the sky band is kept.
		{"head in sky mask", "person", 0.9, geom.Box{X: 100, Y: 50, W: 40, H: 100}, Keep},
		{"feet in sky mask", "person", 0.9, geom.Box{X: 100, Y: 0, W: 40, H: 99}, DropMask},
		{"feet on sky mask's edge", "person", 0.9, geom.Box{X: 100, Y: 0, W: 40, H: 100}, DropMask},
		{"in the triangle", "person", 0.9, boxAt(0.55, 0.6), DropMask},
		{"beside the triangle's slope", "person", 0.9, boxAt(0.75, 0.8), Keep},
		{"on the triangle's slope", "person", 0.9, boxAt(0.7, 0.7), DropMask},
	} {
		if got := f.Test(tc.label, tc.score, tc.box, frameW, frameH); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFilterAnchorAndDefaults(t *testing.T) {
	// No settings: every detection is kept.
	f, err := NewFilter(Objects{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Test("anything", 0, geom.Box{}, frameW, frameH); got != Keep {
		t.Errorf("empty filter: %v", got)
	}
	// With the centre as anchor, a box whose centre is in the mask is dropped even though
	// its bottom is not.
	f, err = NewFilter(Objects{Anchor: AnchorCenter}, []Points{square(0, 0, 1, 0.2)})
	if err != nil {
		t.Fatal(err)
	}
	b := geom.Box{X: 100, Y: 0, W: 40, H: 180} // centre y 90 (0.18), bottom 180 (0.36)
	if got := f.Test("person", 1, b, frameW, frameH); got != DropMask {
		t.Errorf("centre anchor: %v, want mask", got)
	}
	// The mask is normalized: on a frame twice the size, the same place is masked.
	b2 := geom.Box{X: 200, Y: 0, W: 80, H: 360}
	if got := f.Test("person", 1, b2, 2*frameW, 2*frameH); got != DropMask {
		t.Errorf("larger frame: %v, want mask", got)
	}
}

func TestFilterApply(t *testing.T) {
	f, err := NewFilter(Objects{Track: []string{"person"}, Filters: []ClassFilter{{Class: "person", MinScore: 0.4}}},
		[]Points{square(0.9, 0, 1, 1)})
	if err != nil {
		t.Fatal(err)
	}
	dets := []infer.Detection{
		{Label: "person", Score: 0.9, Box: boxAt(0.1, 0.5)},
		{Label: "car", Score: 0.9, Box: boxAt(0.2, 0.5)},
		{Label: "person", Score: 0.3, Box: boxAt(0.3, 0.5)},
		{Label: "person", Score: 0.8, Box: boxAt(0.95, 0.5)},
		{Label: "person", Score: 0.7, Box: boxAt(0.5, 0.5)},
	}
	kept, dropped := f.Apply(dets, frameW, frameH)
	if len(kept) != 2 || kept[0].Score != 0.9 || kept[1].Score != 0.7 {
		t.Errorf("kept %+v", kept)
	}
	if want := (Dropped{Keep: 2, DropClass: 1, DropScore: 1, DropMask: 1}); dropped != want {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	if &kept[0] != &dets[0] {
		t.Error("Apply did not filter in place")
	}
	if DropArea.String() != "area" || Drop(9).String() != "Drop(9)" {
		t.Error("Drop names")
	}
}

func TestNewFilterBad(t *testing.T) {
	_, err := NewFilter(Objects{Filters: []ClassFilter{{Class: "car", MinScore: 2}}}, []Points{{{0, 0}, {1, 1}}})
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 2 ||
		ps[0].Error() != "objects.filters[0] (car): min_score 2 is outside 0..1" ||
		ps[1].Error() != "masks[0]: polygon has 2 points, want at least 3" {
		t.Errorf("err %v", err)
	}
}
