package groundtruth

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// Point is a position in normalized frame coordinates: X from 0 (left edge) to 1 (right
// edge), Y from 0 (top edge) to 1 (bottom edge), as the daemon's zones and lines are given.
type Point struct {
	X, Y float64
}

// Line is a counting line from P1 to P2, in normalized coordinates.
//
// Direction rule (the analytics package uses the same): stand on P1 and look towards P2;
// an anchor that crosses the segment from the right-hand side to the left-hand side goes
// In, from left to right goes Out. Right and left are as seen on the picture (y grows
// downwards). So for a vertical line drawn top to bottom (P1 above P2), walking from the
// left half of the picture to the right half is In; for a horizontal line drawn left to
// right, walking up the picture (from the bottom part to the top part) is In. In terms of
// the cross product c = (P2-P1) x (A-P1) = dx*(Ay-P1y) - dy*(Ax-P1x) in picture
// coordinates, c > 0 is the right-hand side: In goes from c > 0 to c < 0.
type Line struct {
	P1, P2 Point
}

// Direction of a line crossing: In or Out (see Line).
type Direction string

// The directions of a crossing.
const (
	In  Direction = "in"
	Out Direction = "out"
)

// Validate says whether the line's points are finite and distinct.
func (l Line) Validate() error {
	for i, p := range []Point{l.P1, l.P2} {
		if !finite(p.X) || !finite(p.Y) {
			return fmt.Errorf("line point %d (%v, %v) is not finite", i+1, p.X, p.Y)
		}
	}
	if l.P1 == l.P2 {
		return fmt.Errorf("line points are the same (%v, %v): a line needs two distinct points", l.P1.X, l.P1.Y)
	}
	return nil
}

// side returns the sign of the cross product (P2-P1) x (p-P1): +1 on the right-hand side
// (as seen on the picture), -1 on the left, 0 on the line (within a tolerance relative to the
// line's length).
func (l Line) side(p Point) int {
	dx, dy := l.P2.X-l.P1.X, l.P2.Y-l.P1.Y
	c := dx*(p.Y-l.P1.Y) - dy*(p.X-l.P1.X)
	if math.Abs(c) <= eps*math.Hypot(dx, dy) {
		return 0
	}
	if c > 0 {
		return 1
	}
	return -1
}

// onSegment says whether p, a point on the line's infinite extension, lies between P1 and
// P2 (ends included).
func (l Line) onSegment(p Point) bool {
	dx, dy := l.P2.X-l.P1.X, l.P2.Y-l.P1.Y
	u := ((p.X-l.P1.X)*dx + (p.Y-l.P1.Y)*dy) / (dx*dx + dy*dy)
	return u >= -eps && u <= 1+eps
}

// eps is the geometric tolerance in normalized units (a billionth of the frame).
const eps = 1e-9

// Crossing is one true crossing of a line by an object's anchor.
type Crossing struct {
	ObjectID  int
	Class     string
	Direction Direction
	T         time.Duration // when the anchor was on the line, leaving for the far side; from the start of the video
	At        Point         // where it crossed
}

// Crossings returns the true crossings of line by the anchors of the scenario's objects,
// in time order (ties by object id), computed on the continuous piecewise-linear paths,
// not on frames: an anchor crosses when it goes from one side of the line to the other
// through a point of the segment (ends included). Touching the line and going back, or
// passing beyond either end of the segment, is no crossing; an anchor that runs along the
// line crosses where it leaves it for the other side. Objects outside the frame count the
// same (their anchor is not clipped): put lines well inside the frame.
func (s Scenario) Crossings(line Line) ([]Crossing, error) {
	if err := line.Validate(); err != nil {
		return nil, err
	}
	var out []Crossing
	for _, o := range s.Objects {
		last := 0 // the side of the last waypoint off the line
		for i, w := range o.Path {
			p := Point{w.X, w.Y}
			sd := line.side(p)
			if sd == 0 {
				continue
			}
			if last != 0 && sd != last {
				// The path went from side last to side sd since the previous waypoint: through
				// the previous waypoint when that is on the line (the end of a stretch on it),
				// else through the point of the move from it that meets the line.
				q := o.Path[i-1]
				at, t := Point{q.X, q.Y}, q.T
				if line.side(at) != 0 {
					at, t = intersect(line, at, p, q.T, w.T)
				}
				if line.onSegment(at) {
					dir := In
					if last < 0 {
						dir = Out
					}
					out = append(out, Crossing{ObjectID: o.ID, Class: o.class(), Direction: dir, T: t, At: at})
				}
			}
			last = sd
		}
	}
	slices.SortStableFunc(out, func(a, b Crossing) int {
		if a.T != b.T {
			return cmp.Compare(a.T, b.T)
		}
		return a.ObjectID - b.ObjectID
	})
	return out, nil
}

// intersect returns where and when the move from a (at ta) to b (at tb), whose ends are on
// opposite sides of line, meets it.
func intersect(line Line, a, b Point, ta, tb time.Duration) (Point, time.Duration) {
	dx, dy := line.P2.X-line.P1.X, line.P2.Y-line.P1.Y
	ca := dx*(a.Y-line.P1.Y) - dy*(a.X-line.P1.X)
	cb := dx*(b.Y-line.P1.Y) - dy*(b.X-line.P1.X)
	u := ca / (ca - cb)
	return Point{a.X + u*(b.X-a.X), a.Y + u*(b.Y-a.Y)}, ta + time.Duration(u*float64(tb-ta))
}

// CountKey is one counter of a line: a direction and a class.
type CountKey struct {
	Direction Direction
	Class     string
}

// Count returns the number of crossings per direction and class.
func Count(cs []Crossing) map[CountKey]int {
	m := map[CountKey]int{}
	for _, c := range cs {
		m[CountKey{c.Direction, c.Class}]++
	}
	return m
}

// Zone is a polygon in normalized coordinates, at least 3 vertices, closed implicitly (the
// last vertex joins the first). A point on its boundary is inside.
type Zone []Point

// Validate says whether the zone has at least 3 finite vertices.
func (z Zone) Validate() error {
	if len(z) < 3 {
		return fmt.Errorf("zone has %d points, a polygon needs at least 3", len(z))
	}
	for i, p := range z {
		if !finite(p.X) || !finite(p.Y) {
			return fmt.Errorf("zone point %d (%v, %v) is not finite", i+1, p.X, p.Y)
		}
	}
	return nil
}

// Contains says whether p is inside the polygon or on its boundary (even-odd rule, so
// concave polygons work).
func (z Zone) Contains(p Point) bool {
	in := false
	for i := range z {
		a, b := z[i], z[(i+1)%len(z)]
		if onEdge(a, b, p) {
			return true
		}
		if (a.Y > p.Y) != (b.Y > p.Y) {
			x := a.X + (p.Y-a.Y)*(b.X-a.X)/(b.Y-a.Y)
			if p.X < x {
				in = !in
			}
		}
	}
	return in
}

func onEdge(a, b, p Point) bool {
	dx, dy := b.X-a.X, b.Y-a.Y
	c := dx*(p.Y-a.Y) - dy*(p.X-a.X)
	l := math.Hypot(dx, dy)
	if math.Abs(c) > eps*math.Max(l, 1) {
		return false
	}
	if l == 0 {
		return math.Hypot(p.X-a.X, p.Y-a.Y) <= eps
	}
	u := ((p.X-a.X)*dx + (p.Y-a.Y)*dy) / (l * l)
	return u >= -eps && u <= 1+eps
}

// Visit is one stay of an object's anchor inside a zone, from Enter to Exit. Open is true
// when the object's path ended (it vanished) while inside: Exit is then the path's end.
type Visit struct {
	ObjectID    int
	Class       string
	Enter, Exit time.Duration
	Open        bool
}

// Dwell is the time spent inside.
func (v Visit) Dwell() time.Duration { return v.Exit - v.Enter }

// Visits returns the true stays of the scenario's objects in zone, in order of entry (ties
// by object id), from the continuous paths: an object enters when its anchor comes inside
// (or on the boundary) and leaves when it is outside again. An object whose path starts
// inside enters at the path's start. No debounce is applied: subtract the daemon's
// min_seconds where it matters (an entry is reported min_seconds after Enter). Stays
// shorter than a frame interval are real stays here but may be missed on frames: keep
// scenario paths clear of such grazes.
func (s Scenario) Visits(zone Zone) ([]Visit, error) {
	if err := zone.Validate(); err != nil {
		return nil, err
	}
	var out []Visit
	for _, o := range s.Objects {
		var cur *Visit
		mark := func(inside bool, t time.Duration) {
			switch {
			case inside && cur == nil:
				cur = &Visit{ObjectID: o.ID, Class: o.class(), Enter: t}
			case !inside && cur != nil:
				cur.Exit = t
				out = append(out, *cur)
				cur = nil
			}
		}
		if len(o.Path) == 0 {
			continue
		}
		first := o.Path[0]
		mark(zone.Contains(Point{first.X, first.Y}), first.T)
		for i := 1; i < len(o.Path); i++ {
			a, b := o.Path[i-1], o.Path[i]
			pa, pb := Point{a.X, a.Y}, Point{b.X, b.Y}
			us := zone.cuts(pa, pb)
			// Between consecutive cuts the segment is wholly inside or outside: test the middle.
			prev := 0.0
			for _, u := range append(us, 1) {
				if u-prev > eps {
					m := (prev + u) / 2
					inside := zone.Contains(Point{pa.X + m*(pb.X-pa.X), pa.Y + m*(pb.Y-pa.Y)})
					mark(inside, a.T+time.Duration(prev*float64(b.T-a.T)))
				}
				prev = u
			}
			mark(zone.Contains(pb), b.T)
		}
		if cur != nil {
			cur.Exit, cur.Open = o.Path[len(o.Path)-1].T, true
			out = append(out, *cur)
		}
	}
	slices.SortStableFunc(out, func(a, b Visit) int {
		if a.Enter != b.Enter {
			return cmp.Compare(a.Enter, b.Enter)
		}
		return a.ObjectID - b.ObjectID
	})
	return out, nil
}

// cuts returns the parameters u in (0, 1), sorted, where the move from a to b meets an edge
// of the zone (including both ends of a stretch along an edge).
func (z Zone) cuts(a, b Point) []float64 {
	var us []float64
	d := Point{b.X - a.X, b.Y - a.Y}
	for i := range z {
		p, q := z[i], z[(i+1)%len(z)]
		e := Point{q.X - p.X, q.Y - p.Y}
		den := d.X*e.Y - d.Y*e.X
		w := Point{p.X - a.X, p.Y - a.Y}
		if math.Abs(den) > eps*eps {
			u := (w.X*e.Y - w.Y*e.X) / den // along a→b
			v := (w.X*d.Y - w.Y*d.X) / den // along p→q
			if v >= -eps && v <= 1+eps {
				us = append(us, u)
			}
			continue
		}
		// Parallel: collinear stretches add the edge's ends projected onto a→b.
		if dd := d.X*d.X + d.Y*d.Y; dd > 0 && math.Abs(w.X*d.Y-w.Y*d.X) <= eps*math.Sqrt(dd) {
			for _, r := range []Point{p, q} {
				us = append(us, ((r.X-a.X)*d.X+(r.Y-a.Y)*d.Y)/dd)
			}
		}
	}
	us = slices.DeleteFunc(us, func(u float64) bool { return u <= eps || u >= 1-eps })
	slices.Sort(us)
	return us
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
