package groundtruth

import (
	"math"
	"strings"
	"testing"
	"time"
)

const s = time.Second

// walker returns an object of class "person" with the given path, of (time, x, y) triples.
func walker(id int, class string, pts ...float64) Object {
	o := Object{ID: id, Sprite: &Sprite{Name: "box", Class: class}}
	for i := 0; i+2 < len(pts); i += 3 {
		o.Path = append(o.Path, Waypoint{T: time.Duration(pts[i] * float64(s)), X: pts[i+1], Y: pts[i+2]})
	}
	return o
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func nearT(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }

func TestLineSides(t *testing.T) {
	// The rule of the doc, on the picture (y down): for a line drawn top to bottom, the left
	// half is the right-hand side of someone walking P1 → P2; for one drawn left to right,
	// the bottom part is.
	vertical := Line{Point{0.5, 0}, Point{0.5, 1}}
	horizontal := Line{Point{0, 0.5}, Point{1, 0.5}}
	for _, tc := range []struct {
		line Line
		p    Point
		want int
	}{
		{vertical, Point{0.2, 0.5}, 1},
		{vertical, Point{0.8, 0.5}, -1},
		{vertical, Point{0.5, 0.3}, 0},
		{horizontal, Point{0.3, 0.9}, 1},
		{horizontal, Point{0.3, 0.1}, -1},
		{Line{Point{0, 0}, Point{1, 1}}, Point{0.2, 0.8}, 1}, // below the diagonal
	} {
		if got := tc.line.side(tc.p); got != tc.want {
			t.Errorf("line %v, point %v: side %d, want %d", tc.line, tc.p, got, tc.want)
		}
	}
}

func TestCrossings(t *testing.T) {
	vertical := Line{Point{0.5, 0}, Point{0.5, 1}}
	short := Line{Point{0.5, 0.2}, Point{0.5, 0.6}}
	type want struct {
		dir Direction
		t   time.Duration
		at  Point
	}
	for _, tc := range []struct {
		name string
		line Line
		obj  Object
		want []want
	}{
		{"left to right is in", vertical, walker(1, "person", 0, 0.2, 0.5, 6, 0.8, 0.5),
			[]want{{In, 3 * s, Point{0.5, 0.5}}}},
		{"right to left is out", vertical, walker(1, "person", 2, 0.9, 0.4, 6, 0.1, 0.6),
			[]want{{Out, 4 * s, Point{0.5, 0.5}}}},
		{"touch and back", vertical, walker(1, "person", 0, 0.2, 0.5, 1, 0.5, 0.5, 2, 0.2, 0.6), nil},
		{"stop on the line, then over", vertical, walker(1, "person", 0, 0.2, 0.5, 1, 0.5, 0.5, 3, 0.5, 0.5, 4, 0.8, 0.5),
			[]want{{In, 3 * s, Point{0.5, 0.5}}}},
		{"along the line, then over", vertical, walker(1, "person", 0, 0.2, 0.2, 1, 0.5, 0.2, 2, 0.5, 0.6, 3, 0.9, 0.6),
			[]want{{In, 2 * s, Point{0.5, 0.6}}}},
		{"along the line, then back", vertical, walker(1, "person", 0, 0.2, 0.2, 1, 0.5, 0.2, 2, 0.5, 0.6, 3, 0.1, 0.6), nil},
		{"there and back", vertical, walker(1, "person", 0, 0.3, 0.5, 2, 0.7, 0.5, 4, 0.3, 0.5),
			[]want{{In, 1 * s, Point{0.5, 0.5}}, {Out, 3 * s, Point{0.5, 0.5}}}},
		{"past the end of the segment", short, walker(1, "person", 0, 0.2, 0.8, 2, 0.8, 0.8), nil},
		{"through the end point", short, walker(1, "person", 0, 0.2, 0.6, 2, 0.8, 0.6),
			[]want{{In, 1 * s, Point{0.5, 0.6}}}},
		{"diagonal move across the end", short, walker(1, "person", 0, 0.3, 0.3, 4, 0.7, 0.7),
			[]want{{In, 2 * s, Point{0.5, 0.5}}}},
		{"diagonal move past the end", short, walker(1, "person", 0, 0.3, 0.5, 4, 0.7, 0.9), nil},
		{"diagonal line, left to right", Line{Point{0, 0}, Point{1, 1}}, walker(1, "person", 0, 0.8, 0.2, 10, 0.2, 0.8),
			[]want{{Out, 5 * s, Point{0.5, 0.5}}}},
		{"horizontal line, walking up", Line{Point{0, 0.5}, Point{1, 0.5}}, walker(1, "person", 1, 0.4, 0.9, 5, 0.4, 0.1),
			[]want{{In, 3 * s, Point{0.4, 0.5}}}},
		{"horizontal line drawn right to left, walking up", Line{Point{1, 0.5}, Point{0, 0.5}}, walker(1, "person", 1, 0.4, 0.9, 5, 0.4, 0.1),
			[]want{{Out, 3 * s, Point{0.4, 0.5}}}},
		{"from beyond the frame", vertical, walker(1, "person", 0, -0.5, 0.5, 2, 1.5, 0.5),
			[]want{{In, 1 * s, Point{0.5, 0.5}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, err := Scenario{Objects: []Object{tc.obj}}.Crossings(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != len(tc.want) {
				t.Fatalf("crossings %+v, want %+v", cs, tc.want)
			}
			for i, w := range tc.want {
				c := cs[i]
				if c.Direction != w.dir || !nearT(c.T, w.t) || !near(c.At.X, w.at.X) || !near(c.At.Y, w.at.Y) || c.ObjectID != 1 || c.Class != "person" {
					t.Errorf("crossing %d: %+v, want %+v", i, c, w)
				}
			}
		})
	}
}

func TestCrossingsOrderAndCount(t *testing.T) {
	sc := Scenario{Objects: []Object{
		walker(1, "person", 0, 0.1, 0.5, 8, 0.9, 0.5), // in at 4 s
		walker(2, "car", 0, 0.9, 0.3, 2, 0.1, 0.3),    // out at 1 s
		walker(3, "person", 0, 0.9, 0.7, 4, 0.1, 0.7), // out at 2 s
		walker(4, "person", 0, 0.2, 0.7, 1, 0.8, 0.7), // in at 0.5 s
		walker(5, "person", 0, 0.2, 0.1, 9, 0.3, 0.9), // never
	}}
	cs, err := sc.Crossings(Line{Point{0.5, 0}, Point{0.5, 1}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, c := range cs {
		ids = append(ids, c.ObjectID)
	}
	if want := []int{4, 2, 3, 1}; !equalInts(ids, want) {
		t.Errorf("crossing order %v, want %v", ids, want)
	}
	got := Count(cs)
	want := map[CountKey]int{{In, "person"}: 2, {Out, "person"}: 1, {Out, "car"}: 1}
	if len(got) != len(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("count %v = %d, want %d", k, got[k], n)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLineAndZoneErrors(t *testing.T) {
	sc := Scenario{}
	if _, err := sc.Crossings(Line{Point{0.5, 0.5}, Point{0.5, 0.5}}); err == nil || !strings.Contains(err.Error(), "two distinct points") {
		t.Errorf("same points: %v", err)
	}
	if _, err := sc.Crossings(Line{Point{math.NaN(), 0}, Point{0.5, 0.5}}); err == nil || !strings.Contains(err.Error(), "line point 1") {
		t.Errorf("NaN: %v", err)
	}
	if _, err := sc.Visits(Zone{{0, 0}, {1, 1}}); err == nil || !strings.Contains(err.Error(), "zone has 2 points") {
		t.Errorf("2 points: %v", err)
	}
	if _, err := sc.Visits(Zone{{0, 0}, {1, 1}, {math.Inf(1), 0}}); err == nil || !strings.Contains(err.Error(), "zone point 3") {
		t.Errorf("Inf: %v", err)
	}
}

// square is the zone (0.2, 0.2)-(0.6, 0.6).
var square = Zone{{0.2, 0.2}, {0.6, 0.2}, {0.6, 0.6}, {0.2, 0.6}}

// notched is a U: a square (0.1, 0.1)-(0.9, 0.9) with the notch (0.3, 0.1)-(0.7, 0.5) cut
// out of its top.
var notched = Zone{{0.1, 0.1}, {0.3, 0.1}, {0.3, 0.5}, {0.7, 0.5}, {0.7, 0.1}, {0.9, 0.1}, {0.9, 0.9}, {0.1, 0.9}}

func TestZoneContains(t *testing.T) {
	for _, tc := range []struct {
		z    Zone
		p    Point
		want bool
	}{
		{square, Point{0.4, 0.4}, true},
		{square, Point{0.1, 0.4}, false},
		{square, Point{0.2, 0.4}, true},   // on the left edge
		{square, Point{0.6, 0.6}, true},   // a vertex
		{square, Point{0.61, 0.6}, false}, // beside it
		{notched, Point{0.5, 0.3}, false}, // in the notch
		{notched, Point{0.5, 0.5}, true},  // on the notch's bottom edge
		{notched, Point{0.5, 0.7}, true},
		{notched, Point{0.2, 0.3}, true},
		{notched, Point{0.8, 0.2}, true},
		{notched, Point{0.95, 0.5}, false},
	} {
		if got := tc.z.Contains(tc.p); got != tc.want {
			t.Errorf("zone %v contains %v: %v, want %v", tc.z, tc.p, got, tc.want)
		}
	}
}

func TestVisits(t *testing.T) {
	type want struct {
		enter, exit time.Duration
		open        bool
	}
	for _, tc := range []struct {
		name string
		zone Zone
		obj  Object
		want []want
	}{
		{"through", square, walker(7, "person", 0, 0, 0.4, 10, 1, 0.4), []want{{2 * s, 6 * s, false}}},
		{"starts inside, stays, leaves", square, walker(7, "person", 1, 0.4, 0.4, 3, 0.4, 0.4, 8, 0.9, 0.4), []want{{1 * s, 5 * s, false}}},
		{"ends inside", square, walker(7, "person", 0, 0, 0.4, 4, 0.4, 0.4), []want{{2 * s, 4 * s, true}}},
		{"never", square, walker(7, "person", 0, 0, 0.1, 4, 1, 0.1), nil},
		{"along an edge", square, walker(7, "person", 0, 0, 0.6, 10, 1, 0.6), []want{{2 * s, 6 * s, false}}},
		{"through a vertex only", square, walker(7, "person", 0, 0, 0.4, 4, 0.4, 0), nil},
		{"concave: in, out by the notch, in again", notched, walker(7, "person", 0, 0, 0.3, 10, 1, 0.3),
			[]want{{1 * s, 3 * s, false}, {7 * s, 9 * s, false}}},
		{"concave: under the notch", notched, walker(7, "person", 0, 0, 0.7, 10, 1, 0.7), []want{{1 * s, 9 * s, false}}},
		{"in, out, in across waypoints", square, walker(7, "person", 0, 0.4, 0.4, 2, 0.8, 0.4, 4, 0.4, 0.4, 5, 0.4, 0.4),
			[]want{{0, 1 * s, false}, {3 * s, 5 * s, true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := Scenario{Objects: []Object{tc.obj}}.Visits(tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != len(tc.want) {
				t.Fatalf("visits %+v, want %+v", vs, tc.want)
			}
			for i, w := range tc.want {
				v := vs[i]
				if !nearT(v.Enter, w.enter) || !nearT(v.Exit, w.exit) || v.Open != w.open || v.ObjectID != 7 || v.Class != "person" {
					t.Errorf("visit %d: %+v, want %+v", i, v, w)
				}
				if !nearT(v.Dwell(), w.exit-w.enter) {
					t.Errorf("visit %d: dwell %v", i, v.Dwell())
				}
			}
		})
	}
}

func TestVisitsOrder(t *testing.T) {
	sc := Scenario{Objects: []Object{
		walker(1, "person", 0, 0, 0.4, 10, 1, 0.4), // enters at 2 s
		walker(2, "person", 0, 0.4, 0, 4, 0.4, 1),  // enters at 0.8 s
		walker(3, "person", 0, 1, 0.4, 10, 0, 0.4), // enters at 4 s
	}}
	vs, err := sc.Visits(square)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, v := range vs {
		ids = append(ids, v.ObjectID)
	}
	if want := []int{2, 1, 3}; !equalInts(ids, want) {
		t.Errorf("visit order %v, want %v", ids, want)
	}
}
