package analytics

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// leftHalf is a zone over the frame's left half.
func leftHalf(id string) Zone { return Zone{ID: id, Polygon: square(0, 0, 0.5, 1)} }

// evs formats events compactly for comparison: "enter door 7 @1000 since 0".
func evs(events []ZoneEvent) []string {
	var out []string
	for _, e := range events {
		s := fmt.Sprintf("%s %s %d @%d since %d", e.Type, e.Zone, e.TrackID, e.Time.Sub(t0).Milliseconds(), e.Since.Sub(t0).Milliseconds())
		if e.Type != ZoneEnter {
			s += fmt.Sprintf(" dwell %d", e.Dwell.Milliseconds())
		}
		if e.Ended {
			s += " ended"
		}
		out = append(out, s)
	}
	return out
}

// run feeds frames to s and returns every event, formatted.
func runZones(t *testing.T, s *ZoneSet, frames ...Frame) []string {
	t.Helper()
	var all []string
	for _, f := range frames {
		e, err := s.Update(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, evs(e)...)
	}
	return all
}

// walk returns frames every step ms from start to end (inclusive) of track id at x(ms).
func walk(id uint64, label string, start, end, step int, x func(ms int) float64) []Frame {
	var fs []Frame
	for ms := start; ms <= end; ms += step {
		fs = append(fs, frame(ms, obj(id, label, x(ms), 0.5)))
	}
	return fs
}

func inside(int) float64  { return 0.25 }
func outside(int) float64 { return 0.75 }

func newZones(t *testing.T, zones ...Zone) *ZoneSet {
	t.Helper()
	s, err := NewZoneSet(zones)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("events:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

func TestZoneDebounceEnterExit(t *testing.T) {
	for _, fps := range []int{2, 5, 10} {
		t.Run(fmt.Sprintf("%dfps", fps), func(t *testing.T) {
			step := 1000 / fps
			s := newZones(t, leftHalf("door")) // debounce 1 s
			// Inside from 0 to 4000 ms: enters at 1000 (one second after it was first seen).
			got := runZones(t, s, walk(7, "person", 0, 900, step, inside)...)
			wantEvents(t, got)
			got = runZones(t, s, walk(7, "person", 1000, 4000, step, inside)...)
			wantEvents(t, got, "enter door 7 @1000 since 0")
			// Outside from 4000+step: leaves one second later, having dwelt until then.
			out := 4000 + step
			got = runZones(t, s, walk(7, "person", out, out+900, step, outside)...)
			wantEvents(t, got)
			got = runZones(t, s, walk(7, "person", out+1000, out+3000, step, outside)...)
			wantEvents(t, got, fmt.Sprintf("exit door 7 @%d since 0 dwell %d", out+1000, out))
		})
	}
}

func TestZoneDebounceJitter(t *testing.T) {
	s := newZones(t, leftHalf("door"))
	// In, in, out for a frame: the run restarts at the next frame inside.
	got := runZones(t, s,
		frame(0, obj(1, "person", 0.45, 0.5)),
		frame(200, obj(1, "person", 0.49, 0.5)),
		frame(400, obj(1, "person", 0.51, 0.5)),
		frame(600, obj(1, "person", 0.49, 0.5)),
		frame(800, obj(1, "person", 0.5, 0.5)), // on the edge: inside
		frame(1000, obj(1, "person", 0.48, 0.5)),
		frame(1400, obj(1, "person", 0.48, 0.5)),
		frame(1600, obj(1, "person", 0.48, 0.5)),
	)
	wantEvents(t, got, "enter door 1 @1600 since 600")
	// Out for a frame while a member: no exit, and the run out restarts.
	got = runZones(t, s,
		frame(1800, obj(1, "person", 0.52, 0.5)),
		frame(2000, obj(1, "person", 0.49, 0.5)),
		frame(2600, obj(1, "person", 0.52, 0.5)),
		frame(3400, obj(1, "person", 0.52, 0.5)),
		frame(3600, obj(1, "person", 0.52, 0.5)),
	)
	wantEvents(t, got, "exit door 1 @3600 since 600 dwell 2000")
}

func TestZoneAbsentFrames(t *testing.T) {
	// Frames that do not show the object change nothing: a run spans them.
	s := newZones(t, leftHalf("door"))
	other := obj(2, "person", 0.9, 0.9)
	got := runZones(t, s,
		frame(0, obj(1, "person", 0.2, 0.5)),
		frame(500, other),
		frame(900, other),
		frame(1000, obj(1, "person", 0.2, 0.5)),
	)
	wantEvents(t, got, "enter door 1 @1000 since 0")
}

func TestZoneNoDebounce(t *testing.T) {
	z := leftHalf("door")
	z.MinSeconds = ptr(0.0)
	s := newZones(t, z)
	got := runZones(t, s,
		frame(0, obj(1, "person", 0.7, 0.5)),
		frame(200, obj(1, "person", 0.3, 0.5)),
		frame(400, obj(1, "person", 0.3, 0.5)),
		frame(600, obj(1, "person", 0.7, 0.5)),
	)
	wantEvents(t, got, "enter door 1 @200 since 200", "exit door 1 @600 since 200 dwell 400")
}

func TestZoneLoiter(t *testing.T) {
	z := leftHalf("door")
	z.LoiterSeconds = 3
	s := newZones(t, z)
	got := runZones(t, s, walk(1, "person", 0, 2800, 200, inside)...)
	wantEvents(t, got, "enter door 1 @1000 since 0")
	// Loiters once, three seconds after the visit began, however long it stays.
	got = runZones(t, s, walk(1, "person", 3000, 10000, 200, inside)...)
	wantEvents(t, got, "loiter door 1 @3000 since 0 dwell 3000")
	// Outside (no loitering counted there), then back: a new visit may loiter again.
	got = runZones(t, s, walk(1, "person", 10200, 12000, 200, outside)...)
	wantEvents(t, got, "exit door 1 @11200 since 0 dwell 10200")
	got = runZones(t, s, walk(1, "person", 20000, 24000, 500, inside)...)
	wantEvents(t, got, "enter door 1 @21000 since 20000", "loiter door 1 @23000 since 20000 dwell 3000")
}

func TestZoneLoiterNotWhileLeaving(t *testing.T) {
	z := leftHalf("door")
	z.LoiterSeconds = 2
	z.MinSeconds = ptr(1.5)
	s := newZones(t, z)
	got := runZones(t, s, walk(1, "person", 0, 1600, 400, inside)...)
	wantEvents(t, got, "enter door 1 @1600 since 0")
	// Outside from 1800: the visit is 2 s old at 2000, but the object is not inside.
	got = runZones(t, s, walk(1, "person", 1800, 3400, 400, outside)...)
	wantEvents(t, got, "exit door 1 @3400 since 0 dwell 1800")
}

func TestZoneEndedTrack(t *testing.T) {
	s := newZones(t, leftHalf("door"), Zone{ID: "right", Polygon: square(0.5, 0, 1, 1)})
	got := runZones(t, s,
		frame(0, obj(1, "person", 0.2, 0.5), obj(2, "car", 0.8, 0.5)),
		frame(1000, obj(1, "person", 0.2, 0.5), obj(2, "car", 0.8, 0.5)),
		frame(1500, obj(1, "person", 0.2, 0.5)),
		frame(1800, obj(3, "dog", 0.1, 0.5)),
	)
	wantEvents(t, got, "enter door 1 @1000 since 0", "enter right 2 @1000 since 0")
	// Track 1 ends at 4000, last seen inside at 1500: it leaves at once, dwell 1.5 s. Track 3
	// (inside, not yet entered) ends silently; track 2 was not told to end.
	got = runZones(t, s, ended(4000, 1, 3))
	wantEvents(t, got, "exit door 1 @4000 since 0 dwell 1500 ended")
	occ := s.Occupancy()
	if occ[0].Total != 0 || occ[1].Total != 1 || occ[1].ByClass["car"] != 1 {
		t.Errorf("occupancy %+v", occ)
	}
	if p := s.Presence(1, nil); len(p) != 0 {
		t.Errorf("an ended track has presence %+v", p)
	}
	// The id, if reused, starts afresh.
	got = runZones(t, s, frame(5000, obj(3, "dog", 0.1, 0.5)), frame(5500, obj(3, "dog", 0.1, 0.5)))
	wantEvents(t, got)
}

func TestZoneOccupancyAndClasses(t *testing.T) {
	people := Zone{ID: "people", Polygon: square(0, 0, 1, 1), Classes: []string{"person"}, MinSeconds: ptr(0.0)}
	all := Zone{ID: "all", Polygon: square(0, 0, 0.5, 1), MinSeconds: ptr(0.0)}
	s := newZones(t, people, all)
	got := runZones(t, s, frame(0,
		obj(1, "person", 0.2, 0.5),
		obj(2, "person", 0.4, 0.5),
		obj(3, "car", 0.3, 0.5),
		obj(4, "person", 0.8, 0.5),
	))
	wantEvents(t, got,
		"enter people 1 @0 since 0", "enter people 2 @0 since 0", "enter people 4 @0 since 0",
		"enter all 1 @0 since 0", "enter all 2 @0 since 0", "enter all 3 @0 since 0")
	occ := s.Occupancy()
	want := []Occupancy{
		{Zone: "people", Total: 3, ByClass: map[string]int{"person": 3}},
		{Zone: "all", Total: 3, ByClass: map[string]int{"person": 2, "car": 1}},
	}
	if fmt.Sprint(occ) != fmt.Sprint(want) {
		t.Errorf("occupancy %v, want %v", occ, want)
	}
	// The maps are the caller's.
	occ[0].ByClass["person"] = 99
	if s.Occupancy()[0].ByClass["person"] != 3 {
		t.Error("Occupancy shares its maps")
	}
	// The car leaves "all"; person 2 moves out of it too.
	runZones(t, s, frame(200, obj(1, "person", 0.2, 0.5), obj(2, "person", 0.6, 0.5), obj(3, "car", 0.9, 0.5)))
	occ = s.Occupancy()
	want[1] = Occupancy{Zone: "all", Total: 1, ByClass: map[string]int{"person": 1}}
	if fmt.Sprint(occ) != fmt.Sprint(want) {
		t.Errorf("occupancy %v, want %v", occ, want)
	}
	empty := newZones(t, leftHalf("x")).Occupancy()
	if len(empty) != 1 || empty[0].Total != 0 || empty[0].ByClass == nil {
		t.Errorf("empty occupancy %+v", empty)
	}
}

func TestZonePresence(t *testing.T) {
	s := newZones(t, leftHalf("door"), Zone{ID: "far", Polygon: square(0.9, 0.9, 1, 1)})
	runZones(t, s, walk(1, "person", 0, 3000, 500, inside)...)     // enters at 1000, since 0
	runZones(t, s, walk(1, "person", 3500, 5000, 500, outside)...) // leaves at 4500: 3.5 s
	runZones(t, s, walk(1, "person", 6000, 8000, 500, inside)...)  // enters at 7000, since 6000
	p := s.Presence(1, nil)
	want := []Presence{{Zone: "door", Inside: true, Since: at(6000), Total: 3500*time.Millisecond + 2*time.Second}}
	if !slices.Equal(p, want) {
		t.Errorf("presence %+v, want %+v", p, want)
	}
	if p := s.Presence(99, nil); p != nil {
		t.Errorf("unknown track: %+v", p)
	}
	// After leaving again, the record stays, not inside.
	runZones(t, s, walk(1, "person", 8500, 10000, 500, outside)...)
	p = s.Presence(1, p[:0])
	want = []Presence{{Zone: "door", Total: 3500*time.Millisecond + 2500*time.Millisecond}}
	if !slices.Equal(p, want) {
		t.Errorf("presence %+v, want %+v", p, want)
	}
}

func TestZoneConcave(t *testing.T) {
	// A U-shaped zone; an object walking down the notch never enters, one walking down an
	// arm does.
	u := Zone{ID: "u", Polygon: Points{{0, 0}, {0.3, 0}, {0.3, 0.6}, {0.7, 0.6}, {0.7, 0}, {1, 0}, {1, 1}, {0, 1}}, MinSeconds: ptr(0.5)}
	s := newZones(t, u)
	var frames []Frame
	for i := range 12 {
		y := 0.05 + 0.05*float64(i) // 0.05 .. 0.6: down to the notch's floor
		frames = append(frames, frame(i*200, obj(1, "person", 0.5, y), obj(2, "person", 0.15, y)))
	}
	got := runZones(t, s, frames...)
	wantEvents(t, got, "enter u 2 @600 since 0")
	got = runZones(t, s,
		frame(2400, obj(1, "person", 0.5, 0.65)),
		frame(2600, obj(1, "person", 0.5, 0.7)),
		frame(2800, obj(1, "person", 0.5, 0.75)),
	)
	// At 2200 it was at y 0.6, on the notch's floor: inside, so its visit began there, and
	// it enters half a second later.
	wantEvents(t, got, "enter u 1 @2800 since 2200")
}

func TestZoneApply(t *testing.T) {
	door, yard := leftHalf("door"), Zone{ID: "yard", Polygon: square(0, 0, 0.7, 1)}
	s := newZones(t, door, yard)
	got := runZones(t, s, walk(1, "person", 0, 1000, 500, inside)...)
	wantEvents(t, got, "enter door 1 @1000 since 0", "enter yard 1 @1000 since 0")

	// yard changes its debounce; door is unchanged (only spelled differently); gate is new.
	door2 := door
	door2.MinSeconds, door2.Anchor = ptr(1.0), AnchorBottomCenter
	yard2 := yard
	yard2.MinSeconds = ptr(2.0)
	gate := Zone{ID: "gate", Polygon: square(0, 0, 0.3, 1), MinSeconds: ptr(0.0)}
	if err := s.Apply([]Zone{gate, yard2, door2}); err != nil {
		t.Fatal(err)
	}
	if ids := s.Zones(); len(ids) != 3 || ids[0].ID != "gate" || ids[1].ID != "yard" || ids[2].ID != "door" {
		t.Errorf("zones %+v", ids)
	}
	occ := s.Occupancy()
	if occ[0].Total != 0 || occ[1].Total != 0 || occ[2].Total != 1 {
		t.Errorf("occupancy after Apply %+v", occ)
	}
	// door keeps its member (no new enter); gate enters at once; yard after its new 2 s.
	got = runZones(t, s, walk(1, "person", 1500, 3500, 500, inside)...)
	wantEvents(t, got, "enter gate 1 @1500 since 1500", "enter yard 1 @3500 since 1500")
	// door's visit still began at 0.
	got = runZones(t, s, walk(1, "person", 4000, 6000, 500, outside)...)
	wantEvents(t, got, "exit gate 1 @4000 since 1500 dwell 2500", "exit door 1 @5000 since 0 dwell 4000", "exit yard 1 @6000 since 1500 dwell 2500")

	// Removing a zone drops it; a bad set is refused and the old one kept.
	if err := s.Apply([]Zone{door}); err != nil {
		t.Fatal(err)
	}
	err := s.Apply([]Zone{door, {ID: "door", Polygon: square(0, 0, 1, 1)}})
	if err == nil || err.Error() != "zones[1] (door): id repeats zones[0]" {
		t.Errorf("Apply of a repeated id: %v", err)
	}
	if z := s.Zones(); len(z) != 1 || z[0].ID != "door" {
		t.Errorf("zones after a refused Apply: %+v", z)
	}
}

func TestZoneStale(t *testing.T) {
	z := leftHalf("door")
	z.MinSeconds = ptr(0.0)
	s := newZones(t, z)
	runZones(t, s, frame(0, obj(1, "person", 0.2, 0.5), obj(2, "person", 0.3, 0.5)))
	// Track 1 is never seen again nor said to end; track 2 stays.
	for ms := 60_000; ms <= 400_000; ms += 60_000 {
		runZones(t, s, frame(ms, obj(2, "person", 0.3, 0.5)))
	}
	if occ := s.Occupancy(); occ[0].Total != 1 {
		t.Errorf("occupancy %+v, want track 2 only", occ)
	}
	if p := s.Presence(1, nil); p != nil {
		t.Errorf("stale track remembered: %+v", p)
	}
	if s.String() != "1 zones, 1 tracks followed" {
		t.Errorf("String: %s", s)
	}
}

func TestZoneBadFrameAndTime(t *testing.T) {
	s := newZones(t, leftHalf("door"))
	if _, err := s.Update(Frame{Time: t0, W: 0, H: 480}); err == nil || err.Error() != "analytics: frame size 0x480 is not positive" {
		t.Errorf("err %v", err)
	}
	// Time going backwards: the run spanning the jump counts as zero, nothing breaks.
	got := runZones(t, s,
		frame(5000, obj(1, "person", 0.2, 0.5)),
		frame(1000, obj(1, "person", 0.2, 0.5)),
		frame(1500, obj(1, "person", 0.2, 0.5)),
		frame(6000, obj(1, "person", 0.2, 0.5)),
	)
	wantEvents(t, got, "enter door 1 @6000 since 5000")
	if _, err := NewZoneSet([]Zone{{ID: "x"}}); err == nil {
		t.Error("NewZoneSet accepted a zone without polygon")
	}
}
