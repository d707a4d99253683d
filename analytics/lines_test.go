package analytics

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// vertical runs down the middle of the frame, drawn from top to bottom: `in` is left to right.
func vertical(id string) Line { return Line{ID: id, Points: Points{{0.5, 0.1}, {0.5, 0.9}}} }

func newLines(t *testing.T, lines ...Line) *LineSet {
	t.Helper()
	s, err := NewLineSet(lines)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// path feeds track id's anchor through the normalized points given, one frame every 200 ms
// from ms, and returns the crossings as "line id direction label count @ms".
func path(t *testing.T, s *LineSet, ms int, id uint64, label string, pts ...[2]float64) []string {
	t.Helper()
	var out []string
	for i, p := range pts {
		e, err := s.Update(frame(ms+200*i, obj(id, label, p[0], p[1])))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lineEvs(e)...)
	}
	return out
}

func lineEvs(events []LineEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprintf("%s %d %s %s %d @%d", e.Line, e.TrackID, e.Direction, e.Label, e.Count, e.Time.Sub(t0).Milliseconds()))
	}
	return out
}

func wantCrossings(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("crossings:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// xs returns points at y along the xs given.
func xs(y float64, x ...float64) [][2]float64 {
	out := make([][2]float64, len(x))
	for i, v := range x {
		out[i] = [2]float64{v, y}
	}
	return out
}

func TestLineDirection(t *testing.T) {
	s := newLines(t, vertical("gate"))
	got := path(t, s, 0, 1, "person", xs(0.5, 0.3, 0.4, 0.45, 0.55, 0.6, 0.7)...)
	// Band: 2% of the 1000x500 frame's diagonal, 22.4 px = 0.0224 of the width: decided at
	// 0.55 (frame 3, 600 ms).
	wantCrossings(t, got, "gate 1 in person 1 @600")
	got = path(t, s, 2000, 1, "person", xs(0.5, 0.7, 0.6, 0.4, 0.3)...)
	wantCrossings(t, got, "gate 1 out person 1 @2400")
	got = path(t, s, 4000, 1, "person", xs(0.5, 0.45, 0.6)...)
	wantCrossings(t, got, "gate 1 in person 2 @4200")

	// A horizontal line drawn left to right: going up the frame is `in`.
	h := newLines(t, Line{ID: "h", Points: Points{{0.1, 0.5}, {0.9, 0.5}}})
	up := [][2]float64{{0.4, 0.8}, {0.4, 0.6}, {0.4, 0.4}, {0.4, 0.2}}
	wantCrossings(t, path(t, h, 0, 1, "car", up...), "h 1 in car 1 @400")
	slices.Reverse(up)
	wantCrossings(t, path(t, h, 1000, 1, "car", up...), "h 1 out car 1 @1400")

	// Reversing the line's points swaps the directions.
	r := newLines(t, Line{ID: "r", Points: Points{{0.5, 0.9}, {0.5, 0.1}}})
	wantCrossings(t, path(t, r, 0, 1, "person", xs(0.5, 0.3, 0.7)...), "r 1 out person 1 @200")
}

func TestLineDiagonal(t *testing.T) {
	// From the top-left to the bottom-right corner region: walking along it, the bottom-left
	// is on the right-hand side, so going from bottom-left to top-right is `in`.
	s := newLines(t, Line{ID: "d", Points: Points{{0.1, 0.1}, {0.9, 0.9}}})
	got := path(t, s, 0, 1, "person", [2]float64{0.2, 0.8}, [2]float64{0.4, 0.6}, [2]float64{0.6, 0.4}, [2]float64{0.8, 0.2})
	wantCrossings(t, got, "d 1 in person 1 @400")
	got = path(t, s, 2000, 2, "person", [2]float64{0.7, 0.3}, [2]float64{0.3, 0.7})
	wantCrossings(t, got, "d 2 out person 1 @2200")
	// Along the line, jittering across it: nothing.
	var along [][2]float64
	for i := range 30 {
		v := 0.15 + 0.02*float64(i)
		j := 0.004 * float64(1-2*(i%2))
		along = append(along, [2]float64{v + j, v - j})
	}
	wantCrossings(t, path(t, s, 5000, 3, "person", along...))
}

func TestLineJitter(t *testing.T) {
	s := newLines(t, vertical("gate"))
	// From the left, then back and forth across the line within the band (±15 px, band
	// 22 px) for 40 frames: nothing counts.
	pts := xs(0.5, 0.3)
	for i := range 40 {
		pts = append(pts, [2]float64{0.5 + 0.015*float64(1-2*(i%2)), 0.5})
	}
	wantCrossings(t, path(t, s, 0, 1, "person", pts...))
	// Then it goes on to the right: one crossing.
	wantCrossings(t, path(t, s, 10000, 1, "person", xs(0.5, 0.51, 0.6)...), "gate 1 in person 1 @10200")
	// Standing on the line, then going back left: one crossing out.
	wantCrossings(t, path(t, s, 20000, 1, "person", xs(0.5, 0.5, 0.5, 0.5, 0.4)...), "gate 1 out person 1 @20600")

	// An object that appears inside the band has no side yet: leaving it counts nothing.
	wantCrossings(t, path(t, s, 30000, 2, "person", xs(0.5, 0.49, 0.51, 0.7, 0.8)...))
	// Just past the band is not enough (0.522 is 22 px < 22.36 px), just beyond is.
	wantCrossings(t, path(t, s, 40000, 2, "person", xs(0.5, 0.478, 0.477)...), "gate 2 out person 2 @40200")
}

func TestLineExtent(t *testing.T) {
	s := newLines(t, vertical("gate")) // y from 0.1 to 0.9
	// Crossing below the segment's end (y 0.95): no count.
	wantCrossings(t, path(t, s, 0, 1, "person", xs(0.95, 0.3, 0.7)...))
	// Around the end and back across within the segment: counts, out.
	wantCrossings(t, path(t, s, 1000, 1, "person", [2]float64{0.7, 0.5}, [2]float64{0.3, 0.5}), "gate 1 out person 1 @1200")
	// A step from far left-below to right-above whose path meets the segment: counts.
	wantCrossings(t, path(t, s, 2000, 2, "person", [2]float64{0.1, 0.99}, [2]float64{0.9, 0.6}), "gate 2 in person 1 @2200")
	// A step whose path passes above P1: no count.
	wantCrossings(t, path(t, s, 3000, 3, "person", [2]float64{0.3, 0.08}, [2]float64{0.7, 0.02}))
	// Ending exactly on P2's level counts (the ends belong to the segment).
	wantCrossings(t, path(t, s, 4000, 4, "person", xs(0.9, 0.3, 0.7)...), "gate 4 in person 2 @4200")
}

func TestLineLowFPS(t *testing.T) {
	// At 1 fps an object may jump from well left to well right in one frame.
	s := newLines(t, vertical("gate"))
	var got []string
	for i, x := range []float64{0.05, 0.35, 0.65, 0.95} {
		e, err := s.Update(frame(i*1000, obj(1, "car", x, 0.5)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, lineEvs(e)...)
	}
	wantCrossings(t, got, "gate 1 in car 1 @2000")
	// Frames that miss it do not matter: it reappears far on the other side.
	e, _ := s.Update(frame(4000, obj(2, "car", 0.9, 0.5)))
	got = lineEvs(e)
	for ms := 5000; ms < 9000; ms += 1000 {
		e, _ := s.Update(frame(ms))
		got = append(got, lineEvs(e)...)
	}
	e, _ = s.Update(frame(9000, obj(1, "car", 0.2, 0.5), obj(2, "car", 0.1, 0.5)))
	got = append(got, lineEvs(e)...)
	wantCrossings(t, got, "gate 1 out car 1 @9000", "gate 2 out car 2 @9000")
}

func TestLineCountsByClassAndDirection(t *testing.T) {
	people := vertical("people")
	people.Classes = []string{"person"}
	all := Line{ID: "all", Points: Points{{0.5, 0}, {0.5, 1}}, Anchor: AnchorCenter}
	s := newLines(t, people, all)
	cross := func(ms int, id uint64, label string, from, to float64) []string {
		e1, _ := s.Update(frame(ms, obj(id, label, from, 0.5)))
		e2, _ := s.Update(frame(ms+200, obj(id, label, to, 0.5)))
		return append(lineEvs(e1), lineEvs(e2)...)
	}
	var got []string
	got = append(got, cross(0, 1, "person", 0.2, 0.8)...)
	got = append(got, cross(1000, 2, "person", 0.2, 0.8)...)
	got = append(got, cross(2000, 3, "car", 0.2, 0.8)...)
	got = append(got, cross(3000, 1, "person", 0.8, 0.2)...)
	got = append(got, cross(4000, 4, "dog", 0.9, 0.1)...)
	wantCrossings(t, got,
		"people 1 in person 1 @200", "all 1 in person 1 @200",
		"people 2 in person 2 @1200", "all 2 in person 2 @1200",
		"all 3 in car 1 @2200",
		"people 1 out person 1 @3200", "all 1 out person 1 @3200",
		"all 4 out dog 1 @4200")
	fp1, fp2 := people.Fingerprint(), all.Fingerprint()
	want := []Count{
		{"people", fp1, In, "person", 2},
		{"people", fp1, Out, "person", 1},
		{"all", fp2, In, "car", 1},
		{"all", fp2, In, "person", 2},
		{"all", fp2, Out, "dog", 1},
		{"all", fp2, Out, "person", 1},
	}
	if c := s.Counts(); !slices.Equal(c, want) {
		t.Errorf("counts\n got %v\nwant %v", c, want)
	}
}

func TestLineEventPoint(t *testing.T) {
	s := newLines(t, Line{ID: "h", Points: Points{{0.2, 0.5}, {0.6, 0.5}}})
	s.Update(frame(0, obj(1, "person", 0.3, 0.7)))
	e, _ := s.Update(frame(200, obj(1, "person", 0.5, 0.3)))
	if len(e) != 1 || math.Abs(e[0].At.X-0.4) > 1e-9 || math.Abs(e[0].At.Y-0.5) > 1e-9 || !e[0].Time.Equal(at(200)) {
		t.Errorf("events %+v, want one crossing at (0.4, 0.5)", e)
	}
}

// TestLineEventCrossed: the crossing's time is interpolated between the frames either side
// of the line, however late the band lets the crossing be decided.
func TestLineEventCrossed(t *testing.T) {
	s := newLines(t, vertical("gate"))
	// At 1 fps: 0.30 at 0 s, 0.48 at 1 s (in the band), 0.62 at 2 s (past it: decided). The
	// step from 0.48 to 0.62 met the line at a seventh of its way: 1 s + 143 ms.
	var got []LineEvent
	for i, x := range []float64{0.30, 0.48, 0.62} {
		e, err := s.Update(frame(i*1000, obj(1, "person", x, 0.5)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e...)
	}
	if len(got) != 1 || !got[0].Time.Equal(at(2000)) || got[0].Crossed.Sub(at(1000)).Milliseconds() != 142 {
		t.Errorf("events %+v, want one decided at 2 s, crossed at 1.142 s", got)
	}
	// Where a frame is missing, the step is the longer: 0.8 at 3 s, nothing at 4 s, 0.1 at
	// 5 s (back the other way): met at 3/7 of the 2 s.
	s.Update(frame(3000, obj(1, "person", 0.8, 0.5)))
	s.Update(frame(4000))
	e, _ := s.Update(frame(5000, obj(1, "person", 0.1, 0.5)))
	if len(e) != 1 || e[0].Direction != Out || e[0].Crossed.Sub(at(3000)).Milliseconds() != 857 {
		t.Errorf("events %+v, want one out, crossed at 3.857 s", e)
	}
}

func TestLineEndedTrack(t *testing.T) {
	s := newLines(t, vertical("gate"))
	path(t, s, 0, 1, "person", xs(0.5, 0.2)...)
	// The track ends; its id comes back on the other side: no crossing is made of it.
	s.Update(ended(1000, 1))
	wantCrossings(t, path(t, s, 2000, 1, "person", xs(0.5, 0.8, 0.9)...))
	// A track unseen for longer than StaleAfter is forgotten too.
	path(t, s, 3000, 2, "person", xs(0.5, 0.2)...)
	s.Update(frame(3000 + int(StaleAfter.Milliseconds()) + 1000))
	wantCrossings(t, path(t, s, 3000+int(StaleAfter.Milliseconds())+2000, 2, "person", xs(0.5, 0.8)...))
}

func TestLineApplyAndRestore(t *testing.T) {
	gate, side := vertical("gate"), Line{ID: "side", Points: Points{{0.3, 0}, {0.3, 1}}}
	s := newLines(t, gate, side)
	path(t, s, 0, 1, "person", xs(0.5, 0.1, 0.9)...)
	path(t, s, 1000, 2, "person", xs(0.5, 0.1, 0.9)...)
	saved := s.Counts()
	if len(saved) != 2 || saved[0].N != 2 || saved[1].N != 2 {
		t.Fatalf("counts %v", saved)
	}

	// gate unchanged (spelled differently), side moved, new line added.
	gate2 := gate
	gate2.Band = DefaultBand
	side2 := Line{ID: "side", Points: Points{{0.35, 0}, {0.35, 1}}}
	extra := Line{ID: "extra", Points: Points{{0.7, 0}, {0.7, 1}}}
	if err := s.Apply([]Line{extra, side2, gate2}); err != nil {
		t.Fatal(err)
	}
	c := s.Counts()
	if len(c) != 1 || c[0].Line != "gate" || c[0].N != 2 {
		t.Errorf("counts after Apply %v, want gate's only", c)
	}
	// gate kept its tracks' positions: track 1, last seen on the right, seen on the left
	// counts out on gate; the new lines had not seen it.
	wantCrossings(t, path(t, s, 2000, 1, "person", xs(0.5, 0.1)...), "gate 1 out person 1 @2000")
	if err := s.Apply([]Line{{ID: "bad", Points: Points{{0, 0}}}}); err == nil {
		t.Error("Apply accepted a bad line")
	}
	if l := s.Lines(); len(l) != 3 || l[0].ID != "extra" {
		t.Errorf("lines after a refused Apply %+v", l)
	}

	// After a restart: the same lines restore their counts; a changed line does not.
	r := newLines(t, gate, side2)
	n := r.Restore(append(saved, Count{Line: "gate", Fingerprint: gate.Fingerprint(), Direction: "sideways", Class: "person", N: 5},
		Count{Line: "gone", Fingerprint: "x", Direction: In, Class: "person", N: 5}))
	if n != 1 {
		t.Errorf("restored %d counts, want 1 (gate's)", n)
	}
	if c := r.Counts(); !slices.Equal(c, saved[:1]) {
		t.Errorf("restored counts %v, want %v", c, saved[:1])
	}
	// Counting goes on from the restored value.
	wantCrossings(t, path(t, r, 0, 9, "person", xs(0.5, 0.1, 0.9)...), "gate 9 in person 3 @200", "side 9 in person 1 @200")
	// Restoring a zero removes the count.
	r.Restore([]Count{{Line: "gate", Fingerprint: gate.Fingerprint(), Direction: In, Class: "person"}})
	if c := r.Counts(); len(c) != 1 || c[0].Line != "side" {
		t.Errorf("counts after restoring a zero: %v", c)
	}
}

func TestLineSetBad(t *testing.T) {
	if _, err := NewLineSet([]Line{{ID: "x", Points: Points{{0.5, 0.5}, {0.5, 0.5}}}}); err == nil ||
		err.Error() != "lines[0] (x): points are the same point: a line needs two distinct ends" {
		t.Errorf("err %v", err)
	}
	s := newLines(t, vertical("gate"))
	if _, err := s.Update(Frame{W: 640, H: -1}); err == nil {
		t.Error("Update accepted a frame without a size")
	}
}
