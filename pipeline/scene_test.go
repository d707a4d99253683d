package pipeline

import (
	"slices"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/sinks"
)

// walker is a person box walking from left to right across a 1000x500 frame at 5 fps, its
// feet at y = 400: through the lower-half zone (which covers the whole width) and across
// the vertical line at x = 0.5, then out of the frame.
func walkerFrames(t0 time.Time, fps float64) (times []time.Time, boxes []geom.Box) {
	for i := 0; ; i++ {
		x := float64(i) * 150 / fps // 150 px/s
		if x > 960 {                // the box leaves the frame
			return times, boxes
		}
		times = append(times, t0.Add(time.Duration(float64(i)/fps*float64(time.Second))))
		boxes = append(boxes, geom.Box{X: x, Y: 300, W: 40, H: 100})
	}
}

func TestSceneWalker(t *testing.T) {
	minSec := 0.5
	settings := analytics.Config{
		Zones: []analytics.Zone{{ID: "lower", Polygon: analytics.Points{{0, 0.5}, {1, 0.5}, {1, 1}, {0, 1}}, MinSeconds: &minSec}},
		Lines: []analytics.Line{{ID: "middle", Points: analytics.Points{{0.5, 0}, {0.5, 1}}}},
	}
	for _, fps := range []float64{2, 5, 10} {
		s, err := newScene(settings, 1)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		times, boxes := walkerFrames(t0, fps)
		var changes []string
		var zones []analytics.ZoneEventType
		var lines []analytics.Direction
		tracked, ids := 0, map[uint64]bool{}
		last := times[len(times)-1]
		// Frames go on with nobody for longer than the tracker's lost buffer.
		for i := 1; i <= int(10*fps); i++ {
			times = append(times, last.Add(time.Duration(float64(i)/fps*float64(time.Second))))
			boxes = append(boxes, geom.Box{})
		}
		for i, at := range times {
			var dets []infer.Detection
			if boxes[i].W > 0 {
				dets = []infer.Detection{{ClassID: 0, Label: "person", Score: 0.9, Box: boxes[i]}}
			}
			res, err := s.step(at, 1000, 500, dets)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range res.ids {
				if id != 0 {
					tracked++
					ids[id] = true
				}
			}
			for _, o := range res.objects {
				if o.change == sinks.ObjectUpdate {
					changes = append(changes, o.why...)
				} else {
					changes = append(changes, o.change)
				}
				if o.box.X < 0 || o.box.X+o.box.W > 1000 {
					t.Errorf("%v fps: %s event with box %+v outside the frame", fps, o.change, o.box)
				}
				if o.change == sinks.ObjectEnd && (o.start.X > 0.2 || o.end.X < 0.9 || o.end.X > 1) {
					t.Errorf("%v fps: end event path %v -> %v, want from near the left edge (where it was confirmed) to the right edge", fps, o.start, o.end)
				}
			}
			for _, z := range res.zones {
				zones = append(zones, z.Type)
			}
			for _, l := range res.lines {
				lines = append(lines, l.Direction)
			}
		}
		t.Logf("%v fps: %d frames, %d with a track id, ids %v; objects %v; zones %v; lines %v", fps, len(times), tracked, ids, changes, zones, lines)
		if len(ids) != 1 {
			t.Errorf("%v fps: track ids %v, want one", fps, ids)
		}
		if changes[0] != sinks.ObjectNew || changes[len(changes)-1] != sinks.ObjectEnd {
			t.Errorf("%v fps: object events %v, want new first and end last", fps, changes)
		}
		if !slices.Contains(changes, sinks.WhyZoneEnter) {
			t.Errorf("%v fps: object events %v, want an update for entering the zone", fps, changes)
		}
		if !slices.Equal(zones, []analytics.ZoneEventType{analytics.ZoneEnter, analytics.ZoneExit}) {
			t.Errorf("%v fps: zone events %v, want enter, exit", fps, zones)
		}
		// The line is drawn from top to bottom: left to right is `in`.
		if !slices.Equal(lines, []analytics.Direction{analytics.In}) {
			t.Errorf("%v fps: line events %v, want one crossing in", fps, lines)
		}
	}
}

// A reload's new settings keep the tracks and the counts of an unchanged line.
func TestSceneApplyKeepsTracks(t *testing.T) {
	line := analytics.Line{ID: "middle", Points: analytics.Points{{0.5, 0}, {0.5, 1}}}
	s, err := newScene(analytics.Config{Lines: []analytics.Line{line}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	times, boxes := walkerFrames(t0, 5)
	var ids []uint64
	crossings := 0
	for i, at := range times {
		if i == len(times)/3 {
			// Add a zone and a class filter; the line stays as it was.
			if err := s.apply(analytics.Config{
				Objects: analytics.Objects{Track: []string{"person"}},
				Zones:   []analytics.Zone{{ID: "all", Polygon: analytics.Points{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}},
				Lines:   []analytics.Line{line},
			}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.step(at, 1000, 500, []infer.Detection{
			{Label: "person", Score: 0.9, Box: boxes[i]},
			{Label: "car", ClassID: 2, Score: 0.9, Box: geom.Box{X: 100, Y: 50, W: 80, H: 40}},
		})
		if err != nil {
			t.Fatal(err)
		}
		for j, id := range res.ids {
			if res.dets[j].Label == "person" && id != 0 {
				ids = append(ids, id)
			}
		}
		crossings += len(res.lines)
	}
	if ids[0] < 100 {
		t.Errorf("first track id %d, want at least the first id given, 100", ids[0])
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("the person's track id changed from %d to %d", ids[0], id)
		}
	}
	if crossings != 1 {
		t.Errorf("%d crossings, want 1", crossings)
	}
	if got := s.lines.Counts(); len(got) != 1 || got[0].N != 1 {
		t.Errorf("line counts %+v, want one crossing counted", got)
	}
}

// A camera whose capture clock goes back by more than the slack (a reconnect to a camera
// whose clock was reset) ends its tracks and starts again, instead of failing every frame.
func TestSceneClockBack(t *testing.T) {
	s, err := newScene(analytics.Config{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	det := []infer.Detection{{Label: "person", Score: 0.9, Box: geom.Box{X: 100, Y: 100, W: 40, H: 100}}}
	var first uint64
	for i := range 5 {
		res, err := s.step(t0.Add(time.Duration(i)*200*time.Millisecond), 1000, 500, slices.Clone(det))
		if err != nil {
			t.Fatal(err)
		}
		first = max(first, res.ids[0])
	}
	// The same time again: nudged forward, the track goes on.
	res, err := s.step(t0.Add(800*time.Millisecond), 1000, 500, slices.Clone(det))
	if err != nil || res.ids[0] != first {
		t.Fatalf("a repeated time: ids %v, err %v; want track %d to go on", res.ids, err, first)
	}
	// An hour back: the track ends, a new one starts.
	res, err = s.step(t0.Add(-time.Hour), 1000, 500, slices.Clone(det))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.objects) != 1 || res.objects[0].change != sinks.ObjectEnd || res.objects[0].track.ID != first {
		t.Fatalf("after the clock went back an hour: objects %+v, want the end of track %d", res.objects, first)
	}
}

// An object nothing happens to gets an `interval` update every objects.update_interval.
func TestSceneUpdateInterval(t *testing.T) {
	s, err := newScene(analytics.Config{Objects: analytics.Objects{UpdateInterval: 5 * time.Second}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	car := infer.Detection{Label: "car", ClassID: 2, Score: 0.9, Box: geom.Box{X: 300, Y: 200, W: 120, H: 60}}
	var why []string
	for i := range 5 * 60 { // a minute at 5 fps
		res, err := s.step(t0.Add(time.Duration(i)*200*time.Millisecond), 1000, 500, []infer.Detection{car})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.objects {
			if o.change == sinks.ObjectUpdate {
				why = append(why, o.why...)
			}
		}
	}
	intervals := 0
	for _, w := range why {
		if w == sinks.WhyInterval {
			intervals++
		}
	}
	// Confirmed at 0.4 s, stationary some seconds later (an update of its own, which starts
	// the interval again): about one interval update per 5 s of the minute.
	if intervals < 9 || intervals > 12 {
		t.Errorf("%d interval updates in a minute with update_interval 5s (updates %v), want about 11", intervals, why)
	}
}
