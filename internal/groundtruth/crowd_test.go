package groundtruth

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCrowdTruth checks that Crowd's truth is what it claims, on the real sprites (their
// silhouettes decide how hidden a walker is): at least 20 people of varied size and speed
// and vans, entering and leaving at the edges, standers, full occlusions of about a second,
// many crossings of the line both ways by both classes, and visits of the zone; the same
// scene for the same seed.
func TestCrowdTruth(t *testing.T) {
	m := loadMedia(t)
	cs, err := Crowd(m, CrowdParams{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Crowd(m, CrowdParams{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cs, again) {
		t.Error("Crowd made two scenes from the same parameters")
	}
	other, err := Crowd(m, CrowdParams{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(cs.Scenario.Objects, other.Scenario.Objects) {
		t.Error("seeds 0 and 7 gave the same scene")
	}
	checkCrowdTruth(t, cs)
}

func checkCrowdTruth(t *testing.T, cs CrowdScene) {
	s := cs.Scenario
	p := cs.Params
	sc, err := NewScene(s)
	if err != nil {
		t.Fatal(err)
	}
	// Sizes and speeds vary; every path ends a second before the video.
	classes := map[string]int{}
	minH, maxH, minV, maxV := math.Inf(1), 0.0, math.Inf(1), 0.0
	for _, o := range s.Objects {
		classes[o.class()]++
		h := float64(o.Sprite.Image.Rect.Dy()) * o.scale()
		minH, maxH = min(minH, h), max(maxH, h)
		for i := 1; i < len(o.Path); i++ {
			a, b := o.Path[i-1], o.Path[i]
			if v := math.Hypot(b.X-a.X, b.Y-a.Y) / (b.T - a.T).Seconds(); v > 0 {
				minV, maxV = min(minV, v), max(maxV, v)
			}
		}
		if end := o.Path[len(o.Path)-1].T; end > s.Duration-time.Second {
			t.Errorf("object %d's path ends at %v, later than a second before the end", o.ID, end)
		}
	}
	t.Logf("%s: %v; heights %.0f-%.0f px, speeds %.3f-%.3f widths/s", p, classes, minH, maxH, minV, maxV)
	if classes["person"] != p.People || classes["person"] < 20 || classes["car"] != p.Vehicles || len(classes) != 2 {
		t.Errorf("classes %v, want %d people (at least 20) and %d cars", classes, p.People, p.Vehicles)
	}
	if maxH < 1.8*minH || maxV < 2*minV {
		t.Errorf("heights %.0f-%.0f px, speeds %.3f-%.3f: want varied sizes and speeds", minH, maxH, minV, maxV)
	}

	// Per object over the frames: seen wholly off the frame at its first and last frames
	// (it enters and leaves at an edge), and, for the hidden walkers, the stretch of
	// frames around the occlusion's time with it hidden (Visible < 0.25) while inside the
	// frame's width.
	first, last := map[int]Truth{}, map[int]Truth{}
	hidden := map[int][]bool{} // per object, per frame
	for i := range s.Frames() {
		for _, o := range sc.Truth(i).Objects {
			if _, ok := first[o.ID]; !ok {
				first[o.ID] = o
				hidden[o.ID] = make([]bool, s.Frames())
			}
			last[o.ID] = o
			hidden[o.ID][i] = o.Box.X > 0 && o.Box.X+o.Box.W < float64(s.W) && o.Visible < 0.25
		}
	}
	for _, o := range s.Objects {
		if f, l := first[o.ID], last[o.ID]; f.ID == 0 || f.Visible != 0 || l.Visible != 0 {
			t.Errorf("object %d: first and last truth %+v, %+v: want it off the frame (entering and leaving at an edge)", o.ID, f, l)
		}
	}
	if len(cs.Occlusions) != p.Occlusions {
		t.Errorf("%d occlusions, want %d", len(cs.Occlusions), p.Occlusions)
	}
	for _, oc := range cs.Occlusions {
		h := hidden[oc.Hidden]
		at := int(math.Round(oc.T.Seconds() * float64(s.FPS)))
		from, to := at, at
		for from > 0 && h[from-1] {
			from--
		}
		for to < len(h) && h[to] {
			to++
		}
		run := s.FrameTime(to) - s.FrameTime(from)
		total := 0
		for _, x := range h {
			if x {
				total++
			}
		}
		t.Logf("occlusion of %d behind %d at %v: hidden (visible < 0.25) for %v from %v (%v in all)", oc.Hidden, oc.Front, oc.T, run, s.FrameTime(from), s.FrameTime(total))
		// The pair part after the occlusion: the hidden walker is not hidden again for
		// long (by its occluder or anyone else).
		if all := s.FrameTime(total); all > run+time.Second {
			t.Errorf("object %d: hidden for %v in all, %v of it around the occlusion", oc.Hidden, all, run)
		}
		if !h[at] || run < 700*time.Millisecond || run > 2*time.Second {
			t.Errorf("object %d behind %d: hidden for %v around %v, want about a second (0.7-2 s)", oc.Hidden, oc.Front, run, oc.T)
		}
	}
	// Standers stand: their anchor stays put for 2 s or more.
	if len(cs.Standers) != p.Standers+p.Occlusions {
		t.Errorf("standers %v, want %d", cs.Standers, p.Standers+p.Occlusions)
	}
	for _, id := range cs.Standers {
		o := s.Objects[id-1]
		longest := time.Duration(0)
		for i := 1; i < len(o.Path); i++ {
			if a, b := o.Path[i-1], o.Path[i]; a.X == b.X && a.Y == b.Y {
				longest = max(longest, b.T-a.T)
			}
		}
		if longest < 2*time.Second {
			t.Errorf("stander %d stands for %v at most", id, longest)
		}
	}

	// Every walker and van crosses the line once; both ways, both classes.
	cr, err := s.Crossings(cs.Line)
	if err != nil {
		t.Fatal(err)
	}
	count := Count(cr)
	t.Logf("crossings %v", count)
	if len(cr) != len(s.Objects) {
		t.Errorf("%d crossings by %d objects, want one each", len(cr), len(s.Objects))
	}
	for _, k := range []CountKey{{In, "person"}, {Out, "person"}} {
		if count[k] < 5 {
			t.Errorf("%d crossings %v, want at least 5", count[k], k)
		}
	}
	if count[CountKey{In, "car"}]+count[CountKey{Out, "car"}] != p.Vehicles {
		t.Errorf("car crossings %v, want %d", count, p.Vehicles)
	}
	vs, err := s.Visits(cs.Zone)
	if err != nil {
		t.Fatal(err)
	}
	var dwell time.Duration
	for _, v := range vs {
		dwell += v.Dwell()
		if v.Open || v.Class != "person" {
			t.Errorf("visit %+v: want closed, by a person", v)
		}
	}
	t.Logf("%d visits of the zone, %.1f s in all", len(vs), dwell.Seconds())
	if len(vs) < 5 {
		t.Errorf("%d visits of the zone, want at least 5", len(vs))
	}
}

func TestCrowdParams(t *testing.T) {
	m := blockMedia()
	m.Vehicles = []*Sprite{block("van", 70, 58, blue)}
	m.Vehicles[0].Class = "car"
	for _, tc := range []struct {
		p    CrowdParams
		want string
	}{
		{CrowdParams{People: 5, Occlusions: 3}, "occlusions 3 and standers 4: want 2 x occlusions + standers <= people (5)"},
		{CrowdParams{MinSpeed: 0.2, MaxSpeed: 0.1}, "speeds 0.2..0.1"},
		{CrowdParams{MinScale: 3, MaxScale: 4}, "scales 3..4"},
		{CrowdParams{Duration: 10 * time.Second}, "duration 10s: want at least 31s"},
	} {
		if _, err := Crowd(m, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.p, err, tc.want)
		}
	}
	if _, err := Crowd(&Media{People: m.People}, CrowdParams{}); err == nil || !strings.Contains(err.Error(), "0 vehicles") {
		t.Errorf("no vehicles: %v", err)
	}
	// Other sizes of crowd are valid scenes, their paths on time.
	for _, p := range []CrowdParams{{People: 40, Vehicles: 6, Seed: 3}, {People: 8, Occlusions: 1, Standers: 1, Vehicles: 1, Duration: 40 * time.Second}} {
		cs, err := Crowd(m, p)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if n := len(cs.Scenario.Objects); n != cs.Params.People+cs.Params.Vehicles {
			t.Errorf("%+v: %d objects", p, n)
		}
		for _, o := range cs.Scenario.Objects {
			if o.Path[0].T < 0 || o.Path[len(o.Path)-1].T > cs.Scenario.Duration-time.Second {
				t.Errorf("%+v: object %d's path %v..%v", p, o.ID, o.Path[0].T, o.Path[len(o.Path)-1].T)
			}
		}
	}
}

// TestCrowdSpritesDetected draws each object of Crowd's scene alone, at its scale, at two
// places on its path (a third and two thirds of the way), on the empty plaza, and runs the
// real detector: each must be found as its class (a van as a car or a truck) with IoU >=
// 0.7, as TestLoadVTest requires of the people at scale 1.
func TestCrowdSpritesDetected(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the detector on 54 frames")
	}
	m := loadMedia(t)
	cs, err := Crowd(m, CrowdParams{})
	if err != nil {
		t.Fatal(err)
	}
	d := newDetector(t)
	pix := make([]byte, 640*640*3)
	for _, o := range cs.Scenario.Objects {
		worst, worstScore := 1.0, float32(1)
		for _, u := range []float64{1.0 / 3, 2.0 / 3} {
			a, b := o.Path[0], o.Path[len(o.Path)-1]
			at := a.T + time.Duration(u*float64(b.T-a.T))
			p, _ := o.AnchorAt(at)
			alone := o
			alone.Path = []Waypoint{{0, p.X, p.Y}, {time.Second, p.X, p.Y}}
			sc, err := NewScene(Scenario{W: 768, H: 576, FPS: 1, Duration: time.Second, Background: m.Background, Objects: []Object{alone}})
			if err != nil {
				t.Fatal(err)
			}
			img, f := sc.Render(0, nil)
			dets, _, err := d.Detect(pix, letterbox(t, img, pix), nil)
			if err != nil {
				t.Fatal(err)
			}
			best, score := 0.0, float32(0)
			for _, det := range dets {
				same := det.Label == o.class() || (o.class() == "car" && det.Label == "truck")
				if v := IoU(det.Box, f.Objects[0].Box); same && v > best {
					best, score = v, det.Score
				}
			}
			if best < 0.7 {
				t.Errorf("object %d (%s at scale %.2f) at (%.2f, %.2f): best %s IoU %.2f, want >= 0.7; detections %+v",
					o.ID, o.Sprite.Name, o.scale(), p.X, p.Y, o.class(), best, dets)
			}
			worst, worstScore = min(worst, best), min(worstScore, score)
		}
		t.Logf("object %d (%s at scale %.2f): worst IoU %.2f, score %.2f", o.ID, o.Sprite.Name, o.scale(), worst, worstScore)
	}
}
