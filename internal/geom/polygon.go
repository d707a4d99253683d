package geom

// Points, segments and polygons: the plane geometry of analytics' zones, masks and lines.

import (
	"fmt"
	"math"
)

// Point is a point in the plane: pixels, or coordinates normalized to the frame (0..1).
// Like the frame, the y axis points down.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Sub returns p - q.
func (p Point) Sub(q Point) Point { return Point{p.X - q.X, p.Y - q.Y} }

// Cross returns the z component of the cross product (a - o) x (b - o): positive when b
// lies to the right of the directed line o -> a as drawn on a frame (y down), negative when
// to its left, zero when o, a and b are collinear. Its magnitude is twice the area of the
// triangle o, a, b.
func Cross(o, a, b Point) float64 {
	return (a.X-o.X)*(b.Y-o.Y) - (a.Y-o.Y)*(b.X-o.X)
}

// Side says on which side of the directed line a -> b the point p lies, as drawn on a frame
// whose y axis points down: +1 on the right-hand side of someone walking from a to b, -1 on
// the left-hand side, 0 on the line. It is the sign of Cross(a, b, p).
func Side(a, b, p Point) int {
	switch c := Cross(a, b, p); {
	case c > 0:
		return 1
	case c < 0:
		return -1
	}
	return 0
}

// onSegment says whether p, known to be collinear with a and b, lies on the closed segment a-b.
func onSegment(a, b, p Point) bool {
	return math.Min(a.X, b.X) <= p.X && p.X <= math.Max(a.X, b.X) &&
		math.Min(a.Y, b.Y) <= p.Y && p.Y <= math.Max(a.Y, b.Y)
}

// edgeTolerance is how close to an edge a point is on it, as a fraction of the edge's length:
// far below any pixel or normalized coordinate that matters, far above rounding errors, so
// that a point computed to lie on a slanted edge (0.7, 0.7 on the edge from 0.9, 0.5 to
// 0.5, 0.9) is on it.
const edgeTolerance = 1e-10

// onEdge says whether p lies on the segment a-b, within edgeTolerance.
func onEdge(a, b, p Point) bool {
	d := b.Sub(a)
	l2 := d.X*d.X + d.Y*d.Y
	if l2 == 0 {
		return p == a
	}
	if c := Cross(a, b, p); c*c > edgeTolerance*edgeTolerance*l2*l2 {
		return false // farther from the line than edgeTolerance times the edge's length
	}
	// Within the ends: the projection of p falls in 0..1 of the way from a to b.
	t := ((p.X-a.X)*d.X + (p.Y-a.Y)*d.Y) / l2
	return t >= -edgeTolerance && t <= 1+edgeTolerance
}

// SegmentsIntersect says whether the closed segments p1-p2 and q1-q2 have a point in common:
// they cross, one ends on the other, or they are collinear and overlap.
func SegmentsIntersect(p1, p2, q1, q2 Point) bool {
	d1 := Side(q1, q2, p1)
	d2 := Side(q1, q2, p2)
	d3 := Side(p1, p2, q1)
	d4 := Side(p1, p2, q2)
	if d1*d2 < 0 && d3*d4 < 0 {
		return true
	}
	return (d1 == 0 && onSegment(q1, q2, p1)) || (d2 == 0 && onSegment(q1, q2, p2)) ||
		(d3 == 0 && onSegment(p1, p2, q1)) || (d4 == 0 && onSegment(p1, p2, q2))
}

// Intersection returns where the segment p1-p2 meets the line through a and b, as the
// fraction t of the way from p1 to p2 and the fraction u of the way from a to b (the point is
// p1 + t(p2-p1) = a + u(b-a)). ok is false when the segment and the line are parallel (or a
// segment has no length). The segment p1-p2 crosses the segment a-b when t and u are in 0..1.
func Intersection(p1, p2, a, b Point) (t, u float64, ok bool) {
	r := p2.Sub(p1)
	s := b.Sub(a)
	den := r.X*s.Y - r.Y*s.X
	if den == 0 {
		return 0, 0, false
	}
	qp := a.Sub(p1)
	t = (qp.X*s.Y - qp.Y*s.X) / den
	u = (qp.X*r.Y - qp.Y*r.X) / den
	return t, u, true
}

// Polygon is a closed polygon: its vertices in order, the last joined to the first. Edge i
// runs from vertex i to vertex i+1 (the last edge back to vertex 0).
type Polygon []Point

// Contains says whether p lies inside the polygon or on its boundary. Points on an edge or a
// vertex count as inside, so that a polygon and its neighbour sharing an edge both hold the
// points of that edge, and a zone drawn to the frame's border holds objects touching it.
// Inside is decided by the even-odd rule (a ray from p crosses the boundary an odd number of
// times), which for a simple polygon, concave or not, is the usual inside. A polygon of fewer
// than 3 vertices contains only the points of its boundary.
func (pg Polygon) Contains(p Point) bool {
	n := len(pg)
	if n == 0 {
		return false
	}
	inside := false
	for i, j := 0, n-1; i < n; j, i = i, i+1 {
		a, b := pg[j], pg[i]
		if onEdge(a, b, p) {
			return true
		}
		// Does the edge cross the horizontal ray from p to +x? Half-open in y, so that a
		// vertex on the ray is counted once.
		if (a.Y > p.Y) != (b.Y > p.Y) {
			x := a.X + (p.Y-a.Y)*(b.X-a.X)/(b.Y-a.Y)
			if x > p.X {
				inside = !inside
			}
		}
	}
	return inside
}

// Area returns the polygon's signed area by the shoelace formula: positive when its vertices
// run clockwise as drawn on a frame (y down), negative when anticlockwise.
func (pg Polygon) Area() float64 {
	var s float64
	for i, j := 0, len(pg)-1; i < len(pg); j, i = i, i+1 {
		s += pg[j].X*pg[i].Y - pg[i].X*pg[j].Y
	}
	return s / 2
}

// SelfIntersects says whether the polygon is not simple: Check finds a repeated vertex, an
// edge folding back onto the one before it, or two non-adjacent edges that touch or cross.
func (pg Polygon) SelfIntersects() bool {
	_, _, found := pg.selfIntersection()
	return found
}

// selfIntersection returns the first two edges i < j that have a point in common although
// they should not: non-adjacent edges touching or crossing, or adjacent edges overlapping
// along a stretch (a spike that folds back).
func (pg Polygon) selfIntersection() (i, j int, found bool) {
	n := len(pg)
	for i := range n {
		a1, a2 := pg[i], pg[(i+1)%n]
		for j := i + 1; j < n; j++ {
			b1, b2 := pg[j], pg[(j+1)%n]
			adjacent := j == i+1 || (i == 0 && j == n-1)
			if !adjacent {
				if SegmentsIntersect(a1, a2, b1, b2) {
					return i, j, true
				}
				continue
			}
			// Adjacent edges share one vertex; they may only meet there. They meet
			// elsewhere when collinear and pointing back over each other.
			shared, p, q := a2, a1, b2 // edge i then edge j = i+1
			if i == 0 && j == n-1 && n > 2 {
				shared, p, q = a1, a2, b1 // edge n-1 ends where edge 0 starts
			}
			if Cross(shared, p, q) == 0 {
				d1, d2 := p.Sub(shared), q.Sub(shared)
				if d1.X*d2.X+d1.Y*d2.Y > 0 {
					return i, j, true
				}
			}
		}
	}
	return 0, 0, false
}

// Check says whether the polygon is a usable region: at least 3 vertices, all finite, no
// vertex repeated, no two edges touching or crossing except adjacent ones at their shared
// vertex, and a non-zero area. The error names the vertices or edges at fault, e.g.
// "self-intersects at edges 0 and 2", counting from 0.
func (pg Polygon) Check() error {
	n := len(pg)
	if n < 3 {
		return fmt.Errorf("has %d points, want at least 3", n)
	}
	for i, p := range pg {
		if math.IsNaN(p.X) || math.IsNaN(p.Y) || math.IsInf(p.X, 0) || math.IsInf(p.Y, 0) {
			return fmt.Errorf("point %d is not a finite number", i)
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if pg[i] == pg[j] {
				return fmt.Errorf("points %d and %d are the same (%g, %g)", i, j, pg[i].X, pg[i].Y)
			}
		}
	}
	if i, j, found := pg.selfIntersection(); found {
		return fmt.Errorf("self-intersects at edges %d and %d", i, j)
	}
	if pg.Area() == 0 {
		return fmt.Errorf("has no area: its points lie on one line")
	}
	return nil
}
