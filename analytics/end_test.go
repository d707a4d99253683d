package analytics

import (
	"slices"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// standing steps a scene of a 1000x500 frame n frames at 5 fps from t0 with people standing
// at boxes, and returns the last frame's time.
func standing(t *testing.T, s *Scene, n int, boxes ...geom.Box) time.Time {
	t.Helper()
	var at time.Time
	for i := range n {
		at = t0.Add(time.Duration(i) * 200 * time.Millisecond)
		dets := make([]infer.Detection, len(boxes))
		for j, b := range boxes {
			dets[j] = infer.Detection{Label: "person", Score: 0.9, Box: b}
		}
		if _, err := s.Step(at, 1000, 500, dets); err != nil {
			t.Fatal(err)
		}
	}
	return at
}

// End ends every object with the reason given, and their zones' members leave, with
// occupancy down to zero; the scene goes on with new ids. A scene that saw no frame ends
// nothing.
func TestSceneEnd(t *testing.T) {
	zero := 0.0
	settings := Config{Zones: []Zone{{ID: "lower", Polygon: Points{{0, 0.5}, {1, 0.5}, {1, 1}, {0, 1}}, MinSeconds: &zero}}}
	s, err := NewScene(settings, 7)
	if err != nil {
		t.Fatal(err)
	}
	if res := s.End(WhyShutdown); len(res.Objects)+len(res.Zones) != 0 {
		t.Fatalf("a scene without frames ended %+v", res)
	}
	last := standing(t, s, 10, geom.Box{X: 100, Y: 300, W: 50, H: 150}, geom.Box{X: 600, Y: 50, W: 50, H: 100})
	if s.Objects() != 2 || s.Occupancy()[0].Total != 1 {
		t.Fatalf("%d objects, occupancy %+v; want 2 objects, one in the zone", s.Objects(), s.Occupancy())
	}
	res := s.End(WhyCameraRemoved)
	if len(res.Objects) != 2 {
		t.Fatalf("End: %d reports, want the 2 objects' ends", len(res.Objects))
	}
	for _, o := range res.Objects {
		if o.Change != ObjectEnd || !slices.Equal(o.Why, []Why{WhyCameraRemoved}) || o.Track.ID < 7 {
			t.Errorf("End: report %v %v of track %d, want an end for camera_removed", o.Change, o.Why, o.Track.ID)
		}
	}
	if len(res.Zones) != 1 || res.Zones[0].Type != ZoneExit || !res.Zones[0].Ended || !res.Zones[0].Time.Equal(last) {
		t.Fatalf("End: zone events %+v, want the member's exit (ended) at the last frame", res.Zones)
	}
	if s.Objects() != 0 || s.Occupancy()[0].Total != 0 || len(s.Live()) != 0 {
		t.Fatalf("after End: %d objects, occupancy %+v, live %v", s.Objects(), s.Occupancy(), s.Live())
	}
	if res := s.End(WhyShutdown); len(res.Objects)+len(res.Zones) != 0 {
		t.Fatalf("a second End ended %+v", res)
	}
	next := s.NextID()
	// The camera back: new objects, new ids, and the tracker's own ends say lost.
	var ends []ObjectReport
	for i := range 60 {
		at := last.Add(time.Duration(i+1) * 200 * time.Millisecond)
		var dets []infer.Detection
		if i < 10 {
			dets = []infer.Detection{{Label: "person", Score: 0.9, Box: geom.Box{X: 100, Y: 300, W: 50, H: 150}}}
		}
		res, err := s.Step(at, 1000, 500, dets)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range res.Objects {
			if o.Change == ObjectNew && o.Track.ID < next {
				t.Errorf("a new object after End has id %d, below %d", o.Track.ID, next)
			}
			if o.Change == ObjectEnd {
				ends = append(ends, o)
			}
		}
	}
	if len(ends) != 1 || !slices.Equal(ends[0].Why, []Why{WhyLost}) {
		t.Fatalf("the tracker's end: %+v, want one, lost", ends)
	}
}

// A zone removed or changed by Reconfigure gives its members their exits and their objects
// an update saying so; an unchanged zone keeps them.
func TestSceneReconfigureZoneExits(t *testing.T) {
	zero := 0.0
	lower := Zone{ID: "lower", Polygon: Points{{0, 0.5}, {1, 0.5}, {1, 1}, {0, 1}}, MinSeconds: &zero}
	all := Zone{ID: "all", Polygon: Points{{0, 0}, {1, 0}, {1, 1}, {0, 1}}, MinSeconds: &zero}
	s, err := NewScene(Config{Zones: []Zone{lower, all}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	standing(t, s, 10, geom.Box{X: 100, Y: 300, W: 50, H: 150})
	res, err := s.Reconfigure(Config{Zones: []Zone{all}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Zones) != 1 || res.Zones[0].Zone != "lower" || res.Zones[0].Type != ZoneExit || res.Zones[0].Ended {
		t.Fatalf("lower removed: zone events %+v, want its member's exit", res.Zones)
	}
	if len(res.Objects) != 1 || res.Objects[0].Change != ObjectUpdate || !slices.Equal(res.Objects[0].Why, []Why{WhyZoneExit}) {
		t.Fatalf("lower removed: reports %+v, want an update for zone_exit", res.Objects)
	}
	if occ := s.Occupancy(); len(occ) != 1 || occ[0].Zone != "all" || occ[0].Total != 1 {
		t.Fatalf("occupancy after: %+v, want zone all with its member", occ)
	}
	// Zone all changed (its classes): its member leaves, and enters again from what is seen.
	all.Classes = []string{"person"}
	res, err = s.Reconfigure(Config{Zones: []Zone{all}})
	if err != nil || len(res.Zones) != 1 || res.Zones[0].Zone != "all" || s.Occupancy()[0].Total != 0 {
		t.Fatalf("zone all changed: %+v, %v; occupancy %+v", res.Zones, err, s.Occupancy())
	}
	// Bad settings change nothing.
	if _, err := s.Reconfigure(Config{Zones: []Zone{{ID: "bad", Polygon: Points{{0, 0}}}}}); err == nil {
		t.Fatal("a one-point polygon was taken")
	}
	if z := s.zones.Zones(); len(z) != 1 || z[0].ID != "all" {
		t.Fatalf("zones after bad settings: %+v", z)
	}
}

// A member of a zone not seen for StaleAfter without its end leaves with an exit: occupancy
// never falls without one.
func TestZoneStaleMemberExits(t *testing.T) {
	zero := 0.0
	zs, err := NewZoneSet([]Zone{{ID: "z", Polygon: Points{{0, 0}, {1, 0}, {1, 1}, {0, 1}}, MinSeconds: &zero}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zs.Update(frame(0, obj(1, "person", 0.5, 0.5))); err != nil {
		t.Fatal(err)
	}
	if zs.Occupancy()[0].Total != 1 {
		t.Fatalf("occupancy %+v, want 1", zs.Occupancy())
	}
	evs, err := zs.Update(frame(int((StaleAfter + time.Second).Milliseconds())))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Type != ZoneExit || !evs[0].Ended || evs[0].TrackID != 1 || zs.Occupancy()[0].Total != 0 {
		t.Fatalf("a stale member: events %+v, occupancy %+v; want its exit (ended) and 0", evs, zs.Occupancy())
	}
}
