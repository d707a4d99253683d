package track

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// Issue 22, item 6: two people walking through each other, one hiding the other for about
// a second (60 px wide, 50 px/s each way: the one behind is under 30% visible, so not
// detected, for 0.84 s, and cut by the other's box for 1.2 s), at 2 and 5 fps, with the
// detector's noise and misses, 20 passes each: each leaves with the id it came with, in
// every pass, and has no other on the way. Before the tracker measured a cut box from its
// edge in view (Tracker.measured) and kept a lost track's size, the hidden walker's box
// shrank to a pixel and its prediction stopped where they met: every pass lost its id, at
// 2 fps and at 5. By motion alone, at 5 fps the one detection of the frame where they
// coincide went to the hidden one's track (a swap, and back at the next frame: 12 switches
// in 20 passes); issue 37: dressed differently (their detections carry appearance
// descriptors), none. Without descriptors (motion only) the bound is what motion does.
func TestWalkThrough(t *testing.T) {
	for _, tc := range []struct {
		fps         float64
		dressed     bool
		maxSwitches int
	}{{2, true, 0}, {5, true, 0}, {2, false, 0}, {5, false, 12}} {
		t.Run(fmt.Sprintf("%gfps/dressed=%v", tc.fps, tc.dressed), func(t *testing.T) {
			var all simStats
			lost := 0
			for seed := uint64(1); seed <= 20; seed++ {
				objs := []object{
					{class: 0, w: 60, h: 160, x: 400, y: 400, vx: 50, enter: 0, leave: 10},
					{class: 0, w: 56, h: 150, x: 880, y: 392, vx: -50, enter: 0, leave: 10, behind: 1},
				}
				if tc.dressed {
					objs[0].wears = &[2][3]uint8{{200, 40, 40}, {40, 40, 60}}    // red top, dark trousers
					objs[1].wears = &[2][3]uint8{{230, 230, 220}, {60, 90, 160}} // white top, jeans
				}
				cfg := Config{FrameInterval: time.Duration(float64(time.Second) / tc.fps)}
				st := simulate(t, cfg, objs, detector{noise: 0.04, miss: 0.05, low: 0.1, classes: []int{0}}, tc.fps, 10, seed)
				if st.changed > 0 || len(st.idsPerObj[0]) != 1 || len(st.idsPerObj[1]) != 1 {
					lost++
				}
				all.add(st)
			}
			t.Logf("walk-through at %g fps, dressed %v: %v", tc.fps, tc.dressed, all)
			// Motion alone at 5 fps: the transient swaps give the walkers a second id.
			if motionSwaps := !tc.dressed && tc.fps == 5; lost > 0 && !motionSwaps || all.switches > tc.maxSwitches || all.changed > 0 {
				t.Errorf("%d of 20 passes gave a walker another id (%d switches, %d walkers left with another id than they came with); want none, and at most %d switches",
					lost, all.switches, all.changed, tc.maxSwitches)
			}
		})
	}
}

// Issue 22, item 5: at a doorway, a lost track goes to a detection only when its size, and
// its distance from the prediction for the time lost, make it the same object. A person
// walks right at 100 px/s for 3 s and vanishes through a doorway; 1, 2 or 3 s later someone
// else, of another size (40x110 against 50x150), appears where the first was last seen,
// standing there or walking back: a new id, never the first's. The first stepping back out
// after 1 s, of its size: its id. At 2 and 5 fps.
func TestDoorway(t *testing.T) {
	box := func(x, w, h float64) geom.Box { return geom.Box{X: x - w/2, Y: 450 - h, W: w, H: h} } // bottom centre at (x, 450)
	for _, fps := range []float64{2, 5} {
		for _, tc := range []struct {
			name   string
			gap    float64 // seconds gone
			w, h   float64 // the one who comes out
			vx     float64 // its speed, px/s
			sameID bool
		}{
			{"another standing, 1 s", 1, 40, 110, 0, false},
			{"another standing, 2 s", 2, 40, 110, 0, false},
			{"another standing, 3 s", 3, 40, 110, 0, false},
			{"another walking back, 1 s", 1, 40, 110, -100, false},
			{"another walking back, 3 s", 3, 40, 110, -100, false},
			{"a taller one walking back, 2 s", 2, 60, 190, -100, false},
			{"the same walking back, 1 s", 1, 50, 150, -100, true},
			{"the same standing, 1 s", 1, 50, 150, 0, true},
		} {
			t.Run(fmt.Sprintf("%gfps/%s", fps, tc.name), func(t *testing.T) {
				tr := mustNew(t, Config{FrameInterval: time.Duration(float64(time.Second) / fps)}, 1)
				dt := 1 / fps
				var first uint64
				sec := 0.0
				for ; sec <= 3+1e-9; sec += dt {
					res := mustUpdate(t, tr, sec, infer.Detection{Label: "person", Score: 0.85, Box: box(200+100*sec, 50, 150)})
					first = res.IDs[0]
				}
				if first == 0 {
					t.Fatal("the walker was not confirmed")
				}
				last := sec - dt
				for ; sec < last+tc.gap-1e-9; sec += dt {
					mustUpdate(t, tr, sec)
				}
				door := 200 + 100*last
				ids := map[uint64]bool{}
				for k := 0; k < 8; k++ {
					res := mustUpdate(t, tr, sec, infer.Detection{Label: "person", Score: 0.85, Box: box(door+tc.vx*float64(k)*dt, tc.w, tc.h)})
					ids[res.IDs[0]] = true
					sec += dt
				}
				switch {
				case tc.sameID && (!ids[first] || len(ids) != 1):
					t.Errorf("ids %v, want only %d (the walker's) from its first detection", ids, first)
				case !tc.sameID && ids[first]:
					t.Errorf("ids %v: the newcomer took the walker's id %d", ids, first)
				case !tc.sameID && len(ids) < 2:
					t.Errorf("ids %v: the newcomer got no id of its own", ids)
				}
			})
		}
	}
}

// Issue 22, item 4: a car seen as a truck every 4th frame is one track, labelled car, where
// the config groups them; a person and a car never share a track.
func TestClassGroups(t *testing.T) {
	groups := [][]string{{"car", "truck", "bus", "motorcycle"}}
	if _, err := New(Config{ClassGroups: [][]string{{"car", "truck"}, {"bus", "truck"}}}, 1); err == nil || !strings.Contains(err.Error(), `"truck"`) {
		t.Errorf("a class in two groups: %v, want an error naming it", err)
	}
	for _, grouped := range []bool{true, false} {
		cfg := Config{}
		if grouped {
			cfg.ClassGroups = groups
		}
		tr := mustNew(t, cfg, 1)
		ids := map[uint64]bool{}
		for i := range 40 {
			d := infer.Detection{ClassID: 2, Label: "car", Score: 0.8, Box: geom.Box{X: 100 + 15*float64(i), Y: 300, W: 160, H: 90}}
			if i%4 == 3 {
				d.ClassID, d.Label = 7, "truck"
			}
			res := mustUpdate(t, tr, float64(i)*0.2, d)
			if res.IDs[0] != 0 {
				ids[res.IDs[0]] = true
			}
			for _, tk := range res.Tracks {
				if grouped && tk.ID != 0 && (tk.Label != "car" || tk.ClassID != 2) {
					t.Fatalf("frame %d: track %d labelled %s (class %d), want car, seen as most", i, tk.ID, tk.Label, tk.ClassID)
				}
			}
		}
		if grouped && len(ids) != 1 {
			t.Errorf("grouped: ids %v, want one", ids)
		}
		if !grouped && len(ids) < 2 {
			t.Errorf("not grouped: ids %v, want the flips to split it (or this test shows nothing)", ids)
		}
	}
	// A person and a car on the same box, alternating: two tracks.
	tr := mustNew(t, Config{ClassGroups: groups}, 1)
	owner := map[uint64]string{}
	for i := range 40 {
		d := person(300+10*float64(i), 300, 0.9)
		if i%2 == 1 {
			d.ClassID, d.Label = 2, "car"
		}
		res := mustUpdate(t, tr, float64(i)*0.2, d)
		if id := res.IDs[0]; id != 0 {
			if l, ok := owner[id]; ok && l != d.Label {
				t.Fatalf("frame %d: a %s got the id %d of a %s", i, d.Label, id, l)
			}
			owner[id] = d.Label
		}
	}
	if len(owner) != 2 {
		t.Errorf("ids %v, want one for the person, one for the car", owner)
	}
}
