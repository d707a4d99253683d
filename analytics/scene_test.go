package analytics

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics/track"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
)

func TestSceneWalker(t *testing.T) {
	minSec := 0.5
	settings := Config{
		Zones: []Zone{{ID: "lower", Polygon: Points{{0, 0.5}, {1, 0.5}, {1, 1}, {0, 1}}, MinSeconds: &minSec}},
		Lines: []Line{{ID: "middle", Points: Points{{0.5, 0}, {0.5, 1}}}},
	}
	for _, fps := range []float64{2, 5, 10} {
		s, err := NewScene(settings, 1)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		times, boxes := testutil.WalkerFrames(t0, fps)
		var changes []fmt.Stringer
		var zones []ZoneEventType
		var lines []Direction
		tracked, ids := 0, map[uint64]bool{}
		newInZone := false // the new report lists the zone: entered while tentative
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
			res, err := s.Step(at, 1000, 500, dets)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range res.IDs {
				if id != 0 {
					tracked++
					ids[id] = true
				}
			}
			for _, o := range res.Objects {
				if o.Change == ObjectUpdate {
					for _, w := range o.Why {
						changes = append(changes, w)
					}
				} else {
					changes = append(changes, o.Change)
				}
				if o.Change == ObjectNew && len(o.Zones) == 1 && o.Zones[0].Inside {
					newInZone = true
				}
				if o.Box.X < 0 || o.Box.X+o.Box.W > 1000 {
					t.Errorf("%v fps: %s event with box %+v outside the frame", fps, o.Change, o.Box)
				}
				if o.Change == ObjectEnd && (o.Start.X > 0.2 || o.End.X < 0.9 || o.End.X > 1) {
					t.Errorf("%v fps: end event path %v -> %v, want from near the left edge (where it was confirmed) to the right edge", fps, o.Start, o.End)
				}
			}
			for _, z := range res.Zones {
				zones = append(zones, z.Type)
			}
			for _, l := range res.Lines {
				lines = append(lines, l.Direction)
			}
		}
		t.Logf("%v fps: %d frames, %d with a track id, ids %v; objects %v; zones %v; lines %v", fps, len(times), tracked, ids, changes, zones, lines)
		if len(ids) != 1 {
			t.Errorf("%v fps: track ids %v, want one", fps, ids)
		}
		if changes[0] != ObjectNew || changes[len(changes)-1] != ObjectEnd {
			t.Errorf("%v fps: object events %v, want new first and end last", fps, changes)
		}
		if !slices.Contains(changes, fmt.Stringer(WhyZoneEnter)) && !newInZone {
			t.Errorf("%v fps: object events %v, want an update for entering the zone, or the zone in its new report", fps, changes)
		}
		if !slices.Equal(zones, []ZoneEventType{ZoneEnter, ZoneExit}) {
			t.Errorf("%v fps: zone events %v, want enter, exit", fps, zones)
		}
		// The line is drawn from top to bottom: left to right is `in`.
		if !slices.Equal(lines, []Direction{In}) {
			t.Errorf("%v fps: line events %v, want one crossing in", fps, lines)
		}
	}
}

// A reload's new settings keep the tracks and the counts of an unchanged line.
func TestSceneApplyKeepsTracks(t *testing.T) {
	line := Line{ID: "middle", Points: Points{{0.5, 0}, {0.5, 1}}}
	s, err := NewScene(Config{Lines: []Line{line}}, 100)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	times, boxes := testutil.WalkerFrames(t0, 5)
	var ids []uint64
	crossings := 0
	for i, at := range times {
		if i == len(times)/3 {
			// Add a zone and a class filter; the line stays as it was.
			if err := s.Apply(Config{
				Objects: Objects{Track: []string{"person"}},
				Zones:   []Zone{{ID: "all", Polygon: Points{{0, 0}, {1, 0}, {1, 1}, {0, 1}}}},
				Lines:   []Line{line},
			}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := s.Step(at, 1000, 500, []infer.Detection{
			{Label: "person", Score: 0.9, Box: boxes[i]},
			{Label: "car", ClassID: 2, Score: 0.9, Box: geom.Box{X: 100, Y: 50, W: 80, H: 40}},
		})
		if err != nil {
			t.Fatal(err)
		}
		for j, id := range res.IDs {
			if res.Dets[j].Label == "person" && id != 0 {
				ids = append(ids, id)
			}
		}
		crossings += len(res.Lines)
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
	if got := s.Counts(); len(got) != 1 || got[0].N != 1 {
		t.Errorf("line counts %+v, want one crossing counted", got)
	}
}

// A camera whose capture clock goes back by more than the slack (a reconnect to a camera
// whose clock was reset) ends its tracks and starts again, instead of failing every frame.
func TestSceneClockBack(t *testing.T) {
	s, err := NewScene(Config{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	det := []infer.Detection{{Label: "person", Score: 0.9, Box: geom.Box{X: 100, Y: 100, W: 40, H: 100}}}
	var first uint64
	for i := range 5 {
		res, err := s.Step(t0.Add(time.Duration(i)*200*time.Millisecond), 1000, 500, slices.Clone(det))
		if err != nil {
			t.Fatal(err)
		}
		first = max(first, res.IDs[0])
	}
	// The same time again: nudged forward, the track goes on.
	res, err := s.Step(t0.Add(800*time.Millisecond), 1000, 500, slices.Clone(det))
	if err != nil || res.IDs[0] != first {
		t.Fatalf("a repeated time: ids %v, err %v; want track %d to go on", res.IDs, err, first)
	}
	// An hour back: the track ends, a new one starts.
	res, err = s.Step(t0.Add(-time.Hour), 1000, 500, slices.Clone(det))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1 || res.Objects[0].Change != ObjectEnd || res.Objects[0].Track.ID != first {
		t.Fatalf("after the clock went back an hour: objects %+v, want the end of track %d", res.Objects, first)
	}
}

// An object nothing happens to gets an `interval` update every objects.update_interval.
func TestSceneUpdateInterval(t *testing.T) {
	s, err := NewScene(Config{Objects: Objects{UpdateInterval: 5 * time.Second}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	car := infer.Detection{Label: "car", ClassID: 2, Score: 0.9, Box: geom.Box{X: 300, Y: 200, W: 120, H: 60}}
	var why []Why
	for i := range 5 * 60 { // a minute at 5 fps
		res, err := s.Step(t0.Add(time.Duration(i)*200*time.Millisecond), 1000, 500, []infer.Detection{car})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			if o.Change == ObjectUpdate {
				why = append(why, o.Why...)
			}
		}
	}
	intervals := 0
	for _, w := range why {
		if w == WhyInterval {
			intervals++
		}
	}
	// Confirmed at 0.4 s, stationary some seconds later (an update of its own, which starts
	// the interval again): about one interval update per 5 s of the minute.
	if intervals < 9 || intervals > 12 {
		t.Errorf("%d interval updates in a minute with update_interval 5s (updates %v), want about 11", intervals, why)
	}
}

// Evidence: an object is wanted as soon as it is confirmed inside the frame; once taken, again
// only for a detection better by EvidenceBetter, at most once per EvidenceEvery; never where
// its box touches the frame's edge. Its later reports name what was taken.
func TestSceneEvidence(t *testing.T) {
	s, err := NewScene(Config{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	step := func(i int, score float32, box geom.Box) StepResult {
		t.Helper()
		res, err := s.Step(t0.Add(time.Duration(i)*200*time.Millisecond), 1000, 500,
			[]infer.Detection{{Label: "person", Score: score, Box: box}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	inside := geom.Box{X: 100, Y: 100, W: 40, H: 100}
	var wanted []track.Track
	i := 0
	for ; len(wanted) == 0 && i < 10; i++ {
		step(i, 0.7, inside)
		wanted = s.EvidenceWanted(wanted[:0], 1000, 500)
	}
	if len(wanted) != 1 || wanted[0].ID == 0 {
		t.Fatalf("no evidence wanted of a confirmed person within %d frames: %+v", i, wanted)
	}
	s.Evidenced(wanted[0], "cam/t1.jpg")
	if res := step(i, 0.9, inside); len(s.EvidenceWanted(nil, 1000, 500)) != 0 {
		t.Errorf("a better detection %v after taking evidence: wanted again before %v", res.Dets, EvidenceEvery)
	}
	i++
	for ; i < 40; i++ { // 6 s on, a detection only slightly better
		step(i, 0.72, inside)
	}
	if got := s.EvidenceWanted(nil, 1000, 500); len(got) != 0 {
		t.Errorf("a detection better by 0.02 wanted as evidence: %+v", got)
	}
	step(i, 0.9, geom.Box{X: 0, Y: 100, W: 40, H: 100})
	if got := s.EvidenceWanted(nil, 1000, 500); len(got) != 0 {
		t.Errorf("a detection at the frame's edge wanted as evidence: %+v", got)
	}
	i++
	step(i, 0.9, inside)
	if got := s.EvidenceWanted(nil, 1000, 500); len(got) != 1 {
		t.Errorf("a detection better by 0.2, 6 s later, not wanted as evidence: %+v", got)
	}
	var ended []ObjectReport
	for i++; len(ended) == 0 && i < 100; i++ { // nobody: the track ends
		r, err := s.Step(t0.Add(time.Duration(i)*200*time.Millisecond), 1000, 500, nil)
		if err != nil {
			t.Fatal(err)
		}
		ended = r.Objects
	}
	if len(ended) != 1 || ended[0].Change != ObjectEnd || ended[0].Evidence != "cam/t1.jpg" {
		t.Errorf("the reports when the person left: %+v, want its end naming its evidence cam/t1.jpg", ended)
	}
}
