package geom

import (
	"math"
	"strings"
	"testing"
)

func pt(x, y float64) Point { return Point{x, y} }

func TestSide(t *testing.T) {
	// A line drawn left to right along the top of a frame: y grows downwards, so the frame
	// below it is on the right-hand side of someone walking from a to b.
	a, b := pt(0, 0), pt(10, 0)
	for _, tc := range []struct {
		p    Point
		want int
	}{
		{pt(5, 1), 1}, {pt(5, -1), -1}, {pt(5, 0), 0}, {pt(20, 0), 0}, {pt(-3, 1e-9), 1},
	} {
		if got := Side(a, b, tc.p); got != tc.want {
			t.Errorf("Side(%v, %v, %v) = %d, want %d", a, b, tc.p, got, tc.want)
		}
	}
	// Reversing the line swaps the sides.
	if Side(b, a, pt(5, 1)) != -1 {
		t.Error("reversed line: below is not on the left")
	}
	// A diagonal line from top-left to bottom-right: the point below-left of it is on the
	// right-hand side (walking down-right, the right hand points down-left).
	if got := Side(pt(0, 0), pt(1, 1), pt(0, 1)); got != 1 {
		t.Errorf("diagonal: Side = %d, want 1", got)
	}
	if got := Side(pt(0, 0), pt(1, 1), pt(0.5, 0.5)); got != 0 {
		t.Errorf("on the diagonal: Side = %d, want 0", got)
	}
}

func TestSegmentsIntersect(t *testing.T) {
	for _, tc := range []struct {
		name           string
		p1, p2, q1, q2 Point
		want           bool
	}{
		{"cross", pt(0, 0), pt(2, 2), pt(0, 2), pt(2, 0), true},
		{"apart", pt(0, 0), pt(1, 0), pt(0, 1), pt(1, 1), false},
		{"T touching", pt(0, 0), pt(2, 0), pt(1, 0), pt(1, 5), true},
		{"end to end", pt(0, 0), pt(1, 1), pt(1, 1), pt(2, 0), true},
		{"collinear overlap", pt(0, 0), pt(2, 0), pt(1, 0), pt(3, 0), true},
		{"collinear apart", pt(0, 0), pt(1, 0), pt(2, 0), pt(3, 0), false},
		{"would cross if longer", pt(0, 0), pt(1, 1), pt(3, 0), pt(2, 1), false},
		{"parallel", pt(0, 0), pt(1, 1), pt(0, 1), pt(1, 2), false},
	} {
		if got := SegmentsIntersect(tc.p1, tc.p2, tc.q1, tc.q2); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
		if got := SegmentsIntersect(tc.q1, tc.q2, tc.p1, tc.p2); got != tc.want {
			t.Errorf("%s swapped: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIntersection(t *testing.T) {
	// The step (1,-1) -> (1,3) crosses the line (0,0) -> (4,0) a quarter of the way along it,
	// a quarter of the way through the step.
	tt, u, ok := Intersection(pt(1, -1), pt(1, 3), pt(0, 0), pt(4, 0))
	if !ok || math.Abs(tt-0.25) > 1e-12 || math.Abs(u-0.25) > 1e-12 {
		t.Errorf("got t=%g u=%g ok=%v, want 0.25 0.25 true", tt, u, ok)
	}
	// Beyond the segment's end: u > 1.
	if _, u, ok := Intersection(pt(5, -1), pt(5, 1), pt(0, 0), pt(4, 0)); !ok || u <= 1 {
		t.Errorf("beyond the end: u=%g ok=%v, want u > 1", u, ok)
	}
	if _, _, ok := Intersection(pt(0, 1), pt(4, 1), pt(0, 0), pt(4, 0)); ok {
		t.Error("parallel: ok")
	}
	if _, _, ok := Intersection(pt(1, 1), pt(1, 1), pt(0, 0), pt(4, 0)); ok {
		t.Error("a step of no length: ok")
	}
}

func TestContainsConvex(t *testing.T) {
	sq := Polygon{pt(0, 0), pt(1, 0), pt(1, 1), pt(0, 1)}
	for _, tc := range []struct {
		name string
		p    Point
		want bool
	}{
		{"centre", pt(0.5, 0.5), true},
		{"outside right", pt(1.5, 0.5), false},
		{"outside above", pt(0.5, -0.001), false},
		{"on top edge", pt(0.5, 0), true},
		{"on right edge", pt(1, 0.3), true},
		{"on bottom edge", pt(0.2, 1), true},
		{"on left edge", pt(0, 0.9), true},
		{"vertex", pt(1, 1), true},
		{"vertex origin", pt(0, 0), true},
		{"on edge's line beyond vertex", pt(1.5, 0), false},
		{"level with a vertex, outside", pt(-1, 0), false},
		{"level with a vertex, inside", pt(0.5, 1), true},
		{"just inside", pt(1-1e-9, 1-1e-9), true},
		{"just outside", pt(1+1e-8, 0.5), false},
		{"on the edge but for rounding", pt(1+1e-12, 0.5), true},
	} {
		if got := sq.Contains(tc.p); got != tc.want {
			t.Errorf("%s %v: got %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
	// The vertex order does not matter.
	rev := Polygon{pt(0, 1), pt(1, 1), pt(1, 0), pt(0, 0)}
	if !rev.Contains(pt(0.5, 0.5)) || rev.Contains(pt(2, 2)) || !rev.Contains(pt(0, 0.5)) {
		t.Error("anticlockwise square differs")
	}
}

func TestContainsConcave(t *testing.T) {
	// A U shape: two arms joined at the bottom, the notch between them open at the top.
	//  (0,0) (1,0)   (2,0) (3,0)
	//    +-----+       +-----+
	//    |     |       |     |
	//    |     +-------+     |  y=2
	//    |                   |
	//    +-------------------+  y=3
	u := Polygon{pt(0, 0), pt(1, 0), pt(1, 2), pt(2, 2), pt(2, 0), pt(3, 0), pt(3, 3), pt(0, 3)}
	if err := u.Check(); err != nil {
		t.Fatalf("U: %v", err)
	}
	for _, tc := range []struct {
		name string
		p    Point
		want bool
	}{
		{"left arm", pt(0.5, 1), true},
		{"right arm", pt(2.5, 1), true},
		{"in the notch", pt(1.5, 1), false},
		{"notch floor edge", pt(1.5, 2), true},
		{"notch inner vertex", pt(1, 2), true},
		{"notch wall", pt(1, 1), true},
		{"notch mouth (not an edge)", pt(1.5, 0), false},
		{"base", pt(1.5, 2.5), true},
		// A ray from here to +x passes through the vertices (2,0) and (3,0)'s level.
		{"level with the arm tops, left", pt(-0.5, 0), false},
		{"level with the notch floor, inside", pt(0.5, 2), true},
		{"level with the notch floor, outside", pt(3.5, 2), false},
		{"below", pt(1.5, 3.5), false},
	} {
		if got := u.Contains(tc.p); got != tc.want {
			t.Errorf("%s %v: got %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}

	// A star (concave at 5 vertices) checked against a point-in-triangles decomposition.
	var star Polygon
	for i := range 10 {
		r := 1.0
		if i%2 == 1 {
			r = 0.4
		}
		a := float64(i) * math.Pi / 5
		star = append(star, pt(r*math.Sin(a), -r*math.Cos(a)))
	}
	if err := star.Check(); err != nil {
		t.Fatalf("star: %v", err)
	}
	inFan := func(p Point) bool { // the star is a fan of triangles around the origin
		for i := range star {
			a, b := star[i], star[(i+1)%len(star)]
			s1, s2, s3 := Side(pt(0, 0), a, p), Side(a, b, p), Side(b, pt(0, 0), p)
			if (s1 >= 0 && s2 >= 0 && s3 >= 0) || (s1 <= 0 && s2 <= 0 && s3 <= 0) {
				return true
			}
		}
		return false
	}
	for y := -1.1; y <= 1.1; y += 0.0371 {
		for x := -1.1; x <= 1.1; x += 0.0371 {
			if got, want := star.Contains(pt(x, y)), inFan(pt(x, y)); got != want {
				t.Errorf("star at (%g, %g): got %v, want %v", x, y, got, want)
			}
		}
	}
}

func TestContainsSlantedEdge(t *testing.T) {
	// Points computed to lie on a slanted edge are on it, whatever the rounding.
	tri := Polygon{pt(0.5, 0.5), pt(0.9, 0.5), pt(0.5, 0.9)}
	for i := range 41 {
		x := 0.5 + 0.4*float64(i)/40
		p := pt(x, 1.4-x)
		if !tri.Contains(p) {
			t.Errorf("%v on the slanted edge: outside", p)
		}
		if out := pt(x+1e-6, 1.4-x+1e-6); tri.Contains(out) {
			t.Errorf("%v just beyond the slanted edge: inside", out)
		}
	}
}

func TestContainsDegenerate(t *testing.T) {
	if (Polygon{}).Contains(pt(0, 0)) {
		t.Error("empty polygon contains a point")
	}
	seg := Polygon{pt(0, 0), pt(2, 0)}
	if !seg.Contains(pt(1, 0)) || seg.Contains(pt(1, 1)) {
		t.Error("a two-point polygon should hold exactly its segment")
	}
}

func TestArea(t *testing.T) {
	cw := Polygon{pt(0, 0), pt(2, 0), pt(2, 1), pt(0, 1)} // clockwise on a y-down frame
	if a := cw.Area(); a != 2 {
		t.Errorf("area %g, want 2", a)
	}
	ccw := Polygon{pt(0, 0), pt(0, 1), pt(2, 1), pt(2, 0)}
	if a := ccw.Area(); a != -2 {
		t.Errorf("area %g, want -2", a)
	}
}

func TestPolygonCheck(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pg      Polygon
		wantErr string
	}{
		{"triangle", Polygon{pt(0, 0), pt(1, 0), pt(0, 1)}, ""},
		{"concave", Polygon{pt(0, 0), pt(2, 0), pt(1, 1), pt(2, 2), pt(0, 2)}, ""},
		{"two points", Polygon{pt(0, 0), pt(1, 0)}, "has 2 points, want at least 3"},
		{"none", nil, "has 0 points"},
		{"NaN", Polygon{pt(0, 0), pt(math.NaN(), 0), pt(0, 1)}, "point 1 is not a finite number"},
		{"repeated vertex", Polygon{pt(0, 0), pt(1, 0), pt(1, 0), pt(0, 1)}, "points 1 and 2 are the same"},
		{"closed explicitly", Polygon{pt(0, 0), pt(1, 0), pt(0, 1), pt(0, 0)}, "points 0 and 3 are the same"},
		// A bow tie: edge 0 (0,0)-(1,1) crosses edge 2 (1,0)-(0,1).
		{"bow tie", Polygon{pt(0, 0), pt(1, 1), pt(1, 0), pt(0, 1)}, "self-intersects at edges 0 and 2"},
		{"collinear", Polygon{pt(0, 0), pt(1, 0), pt(2, 0)}, "self-intersects"},
		// A spike: edge 1 goes out along x and edge 2 comes back over it.
		{"spike", Polygon{pt(0, 0), pt(1, 0), pt(3, 0), pt(2, 0), pt(1, 1)}, "self-intersects at edges 1 and 2"},
		// A vertex touching a non-adjacent edge.
		{"touching", Polygon{pt(0, 0), pt(4, 0), pt(4, 4), pt(2, 0), pt(0, 4)}, "self-intersects at edges 0 and 2"},
		{"vertex on an edge", Polygon{pt(0, 0), pt(1, 0), pt(2, 1), pt(3, 0), pt(3, 1), pt(0, 1)}, "self-intersects at edges 1 and 4"},
		{"zigzag", Polygon{pt(0, 0), pt(1, 0), pt(2, 0.5), pt(3, 0), pt(3, 1), pt(0, 1)}, ""},
	} {
		err := tc.pg.Check()
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		}
		if tc.wantErr == "" && tc.pg.SelfIntersects() {
			t.Errorf("%s: SelfIntersects on a simple polygon", tc.name)
		}
		if strings.Contains(tc.wantErr, "self-intersects") && !tc.pg.SelfIntersects() {
			t.Errorf("%s: SelfIntersects false", tc.name)
		}
	}
}
