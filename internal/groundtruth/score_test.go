package groundtruth

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// TestScoreRun scores hand-made events on a small scene of blocks: two people crossing a
// vertical line in opposite directions, one of them through a zone, and a car.
func TestScoreRun(t *testing.T) {
	person := block("p", 20, 40, red)
	car := block("c", 60, 30, blue)
	car.Class = "car"
	s := Scenario{W: 200, H: 100, FPS: 10, Duration: 10 * time.Second, Objects: []Object{
		{ID: 1, Sprite: person, Path: []Waypoint{{0, 0.1, 0.8}, {8 * time.Second, 0.9, 0.8}}}, // in at 4 s; zone 2..3 s
		{ID: 2, Sprite: person, Path: []Waypoint{{0, 0.9, 0.5}, {8 * time.Second, 0.1, 0.5}}}, // out at 4 s
		{ID: 3, Sprite: car, Path: []Waypoint{{time.Second, 0.2, 0.3}, {5 * time.Second, 0.8, 0.3}}},
	}}
	sc, err := NewScene(s)
	if err != nil {
		t.Fatal(err)
	}
	line := Line{Point{0.5, 0.1}, Point{0.5, 0.95}}
	zone := Zone{{0.3, 0.7}, {0.4, 0.7}, {0.4, 0.9}, {0.3, 0.9}}
	// Every frame: 1 is track 9 until 3.2 s, then 7; 2 is track 8 until 4.5 s, then 9 (on
	// more frames than 9 followed 1); the car is track 20, seen as a truck on the last
	// frames; a parked thing at (150, 0) is seen as a car (ignored).
	var obs Observed
	parked := geom.Box{X: 150, Y: 0, W: 40, H: 20}
	for i := range s.Frames() {
		f := sc.Truth(i)
		of := ObservedFrame{T: f.T, Tracked: []Tracked{{TrackID: 30, Class: "car", Box: parked}, {TrackID: 31, Class: "dog", Box: geom.Box{X: 1, Y: 1, W: 5, H: 5}}}}
		for _, o := range f.Objects {
			id, class := uint64(7), "person"
			switch {
			case o.ID == 1 && f.T <= 3200*time.Millisecond:
				id = 9
			case o.ID == 2 && f.T < 4500*time.Millisecond:
				id = 8
			case o.ID == 2:
				id = 9
			case o.ID == 3:
				id, class = 20, "car"
				if f.T > 4*time.Second {
					class = "truck"
				}
			}
			if o.Visible >= 0.5 {
				of.Tracked = append(of.Tracked, Tracked{TrackID: id, Class: class, Box: o.Box})
			}
		}
		obs.Frames = append(obs.Frames, of)
	}
	obs.Crossings = []ObservedCrossing{
		{TrackID: 7, Class: "person", Direction: In, T: 4 * time.Second},
		{TrackID: 8, Class: "person", Direction: Out, T: 4 * time.Second},
		{TrackID: 9, Class: "person", Direction: Out, T: 6 * time.Second}, // counted twice
		// The car's crossing was missed.
	}
	// Track 9's stay, while it followed 1 (though it followed 2 on more frames).
	obs.Stays = []ObservedStay{{TrackID: 9, Class: "person", Enter: 2200 * time.Millisecond, Exit: 3100 * time.Millisecond}}
	fig, err := ScoreRun(sc, line, zone, obs, ScoreOptions{Ignore: []geom.Box{parked}, Classes: map[string]string{"truck": "car"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(fig)
	// Truth: 1 and 2 on frames 0..80, the car on frames 10..50. 1 and 2 switch tracks once
	// each; track 9 is assigned to no one (7 follows 1 on more frames, 8 follows 2 on
	// more), so its frames are IDFP and the same frames of 1 and 2 IDFN; it is handed over.
	if fig.Score.IDSwitches != 2 || fig.Score.FalsePositives != 0 || fig.Tracks != 5 || fig.Objects != 3 || fig.Handovers != 1 {
		t.Errorf("score %+v", fig.Score)
	}
	id := fig.ID
	if id.Assigned[2] != 8 || id.Assigned[1] != 7 || id.Assigned[3] != 20 || id.IDFP != id.IDFN || id.IDFP == 0 || !approx(id.IDP, id.IDR) {
		t.Errorf("identity %+v", id)
	}
	want := map[CountKey]LineCount{{In, "person"}: {1, 1}, {Out, "person"}: {2, 1}, {In, "car"}: {0, 1}}
	if !reflect.DeepEqual(fig.Lines, want) || !approx(fig.CountAccuracy, 1-2.0/3) {
		t.Errorf("lines %v, accuracy %v; want %v, 1/3", fig.Lines, fig.CountAccuracy, want)
	}
	if acc := fig.Lines[CountKey{Out, "person"}].Accuracy(); acc != 0 {
		t.Errorf("out accuracy %v, want 0", acc)
	}
	// Person 1 is in the zone from 2 s to 3 s (x 0.3..0.4 at 0.1 a second): 1 s true, 0.9
	// reported: error 0.1.
	if fig.Visits != 1 || fig.Stays != 1 || (fig.DwellTrue-time.Second).Abs() > time.Millisecond ||
		math.Abs(fig.DwellError-0.1) > 1e-3 || (fig.MeanDwellError-100*time.Millisecond).Abs() > time.Millisecond {
		t.Errorf("zone: %d visits, %d stays, dwell %v true, error %v (mean %v)", fig.Visits, fig.Stays, fig.DwellTrue, fig.DwellError, fig.MeanDwellError)
	}
	if _, err := ScoreRun(sc, line, zone, Observed{Frames: []ObservedFrame{{T: 11 * time.Second}}}, ScoreOptions{}); err == nil {
		t.Error("a frame after the video's end was scored")
	}
}
