package analytics

import (
	"fmt"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// Issue 22, item 1: a line crossed or a zone entered while the track was tentative counts
// once it is confirmed, from where it was seen. At 1 fps and 0.5 fps a walker (a 40x80 box,
// 200 px a frame) crosses the middle line and enters the right half's zone at its second
// detection; the tracker confirms it at its third. The crossing counts once, `in`, at the
// time of the frame that saw it past the line, and the zone's enter is dated by its frames
// too; before the scene played the tentative sightings through, the line and the zone first
// saw the walker past the line, and counted nothing.
func TestTentativeCrossing(t *testing.T) {
	zero := 0.0
	settings := Config{
		Zones: []Zone{{ID: "right", Polygon: Points{{0.5, 0}, {1, 0}, {1, 1}, {0.5, 1}}, MinSeconds: &zero}},
		Lines: []Line{{ID: "middle", Points: Points{{0.5, 0}, {0.5, 1}}}}, // top to bottom: left to right is in
	}
	for _, fps := range []float64{1, 0.5} {
		t.Run(fmt.Sprintf("%gfps", fps), func(t *testing.T) {
			interval := time.Duration(float64(time.Second) / fps)
			settings.FrameInterval = interval
			s, err := NewScene(settings, 1)
			if err != nil {
				t.Fatal(err)
			}
			frameAt := func(i int) time.Time { return t0.Add(time.Duration(i) * interval) }
			var lines []LineEvent
			var zones []ZoneEvent
			var news []ObjectReport
			for i := range 12 {
				var dets []infer.Detection
				if x := 0.36 + 0.2*float64(i); x < 0.95 {
					dets = []infer.Detection{{Label: "person", Score: 0.9, Box: boxAt(x, 0.8)}}
				}
				res, err := s.Step(frameAt(i), frameW, frameH, dets)
				if err != nil {
					t.Fatal(err)
				}
				lines, zones = append(lines, res.Lines...), append(zones, res.Zones...)
				for _, o := range res.Objects {
					if o.Change == ObjectNew {
						news = append(news, o)
					}
				}
			}
			if len(news) != 1 {
				t.Fatalf("new reports %+v, want one", news)
			}
			id := news[0].Track.ID
			if len(lines) != 1 || lines[0].Direction != In || lines[0].TrackID != id || !lines[0].Time.Equal(frameAt(1)) || lines[0].Count != 1 {
				t.Errorf("line events %+v, want one crossing in by track %d at the second frame (%v), count 1", lines, id, frameAt(1).Sub(t0))
			}
			if c := s.Counts(); len(c) != 1 || c[0].N != 1 {
				t.Errorf("counts %+v, want 1 in", c)
			}
			if len(zones) < 1 || zones[0].Type != ZoneEnter || zones[0].TrackID != id || !zones[0].Since.Equal(frameAt(1)) || !zones[0].Time.Equal(frameAt(1)) {
				t.Errorf("zone events %+v, want track %d entering at the second frame", zones, id)
			}
			if z := news[0].Zones; len(z) != 1 || !z[0].Inside {
				t.Errorf("new report's zones %+v, want it inside the zone", z)
			}
		})
	}
}

// A track that never confirms (seen twice, crossing the line and entering the zone, then
// gone) counts nothing and enters nothing.
func TestTentativeNeverConfirmed(t *testing.T) {
	zero := 0.0
	s, err := NewScene(Config{
		Zones:         []Zone{{ID: "right", Polygon: Points{{0.5, 0}, {1, 0}, {1, 1}, {0.5, 1}}, MinSeconds: &zero}},
		Lines:         []Line{{ID: "middle", Points: Points{{0.5, 0}, {0.5, 1}}}},
		FrameInterval: time.Second,
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		var dets []infer.Detection
		if i < 2 {
			dets = []infer.Detection{{Label: "person", Score: 0.9, Box: boxAt(0.36+0.2*float64(i), 0.8)}}
		}
		res, err := s.Step(t0.Add(time.Duration(i)*time.Second), frameW, frameH, dets)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Lines)+len(res.Zones)+len(res.Objects) > 0 {
			t.Fatalf("frame %d: lines %+v, zones %+v, objects %+v; want nothing from a track never confirmed", i, res.Lines, res.Zones, res.Objects)
		}
	}
	if c := s.Counts(); len(c) != 0 {
		t.Errorf("counts %+v, want none", c)
	}
}

// The class a car/truck object is labelled with, in the scene's reports and its zones'
// events, is the one it was seen as most; the default groups make it one object.
func TestSceneClassGroups(t *testing.T) {
	s, err := NewScene(Config{FrameInterval: 200 * time.Millisecond}, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]bool{}
	for i := range 30 {
		d := infer.Detection{ClassID: 2, Label: "car", Score: 0.8, Box: geom.Box{X: 100 + 10*float64(i), Y: 200, W: 160, H: 90}}
		if i%4 == 3 {
			d.ClassID, d.Label = 7, "truck"
		}
		res, err := s.Step(at(200*i), frameW, frameH, []infer.Detection{d})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			ids[o.Track.ID] = true
			if o.Track.Label != "car" {
				t.Errorf("frame %d: %s report labelled %s, want car", i, o.Change, o.Track.Label)
			}
		}
	}
	if len(ids) != 1 {
		t.Errorf("objects %v, want one", ids)
	}
	// class_groups: [] groups nothing.
	if err := s.Apply(Config{Objects: Objects{ClassGroups: [][]string{}}}); err != nil {
		t.Fatal(err)
	}
	if g := s.tracker.Config().ClassGroups; len(g) != 0 {
		t.Errorf("after class_groups [], the tracker's groups are %v", g)
	}
}
