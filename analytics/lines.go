package analytics

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// Direction is the way an object crossed a line: see the package documentation.
type Direction string

// Directions.
const (
	In  Direction = "in"  // from the line's right-hand side to its left-hand side
	Out Direction = "out" // from its left-hand side to its right-hand side
)

// LineEvent is an object crossing a line.
type LineEvent struct {
	Line      string // the line's id
	TrackID   uint64
	Label     string
	Direction Direction
	// Time is the capture time of the frame that decided the crossing: the first that saw
	// the anchor past the band on the far side.
	Time time.Time
	// Crossed is when the anchor crossed the line: between the capture times of the two
	// frames whose step crossed it, in proportion to where the step met it (at 1 fps,
	// Time may be seconds after it: the band and the frames in it).
	Crossed time.Time
	// At is where the anchor's path crossed the line, in normalized coordinates.
	At geom.Point
	// Count is the line's count for this direction and class, this crossing included.
	Count uint64
}

// Count is a line's count of crossings in one direction by one class, as LineSet.Counts
// exports it and LineSet.Restore takes it back.
type Count struct {
	Line string `json:"line"`
	// Fingerprint is the line's Fingerprint when counted: counts are restored only into a
	// line of the same definition.
	Fingerprint string    `json:"fingerprint"`
	Direction   Direction `json:"direction"`
	Class       string    `json:"class"`
	N           uint64    `json:"n"`
}

// LineSet counts the tracks of one camera crossing its lines. Create it with NewLineSet and
// feed it every analysed frame with Update; see the package documentation. Not safe for
// concurrent use.
type LineSet struct {
	lines  []*lineState
	events []LineEvent
	last   time.Time // time of the last stale sweep
}

type lineState struct {
	def         Line
	key         string
	fingerprint string
	p1, p2      geom.Point // normalized
	classes     map[string]bool
	band        float64 // fraction of the diagonal
	anchor      Anchor
	tracks      map[uint64]*crosser
	counts      map[countKey]uint64
}

type countKey struct {
	dir   Direction
	class string
}

// crosser is a track's state against one line.
type crosser struct {
	side     int        // the side it was last seen beyond the band: +1 right, -1 left, 0 not yet
	prev     geom.Point // its anchor in the previous frame that saw it, pixels
	prevD    float64    // its signed distance from the line then, pixels (+ right)
	crossed  bool       // its path crossed the line's extension since it was last beyond the band
	crossU   float64    // where, as a fraction of P1 -> P2 (0..1: within the segment)
	crossT   time.Time  // and when (LineEvent.Crossed)
	lastSeen time.Time  // the time of the previous frame that saw it
}

// NewLineSet returns a LineSet of lines with no counts, or a Problems error if they are bad
// (classes are not checked: Config.Check does that with the model's labels).
func NewLineSet(lines []Line) (*LineSet, error) {
	s := &LineSet{}
	if err := s.Apply(lines); err != nil {
		return nil, err
	}
	return s, nil
}

// Apply replaces the set's lines by lines, for a hot reload. A line whose definition is
// unchanged (same id and Equal) keeps its counts and the tracks' positions; a new or changed
// line starts at zero; a removed line is dropped with its counts (Counts afterwards lists
// only the current lines: stored counts of the others are stale). If lines are bad, Apply
// returns a Problems error and keeps the lines it had.
func (s *LineSet) Apply(lines []Line) error {
	var ps problems
	checkLines(&ps, lines)
	if err := ps.err(); err != nil {
		return err
	}
	old := make(map[string]*lineState, len(s.lines))
	for _, l := range s.lines {
		old[l.key] = l
	}
	next := make([]*lineState, len(lines))
	for i, l := range lines {
		key := l.key()
		if st, ok := old[key]; ok {
			next[i] = st
			continue
		}
		next[i] = &lineState{
			def:         l,
			key:         key,
			fingerprint: l.Fingerprint(),
			p1:          geom.Point{X: l.Points[0][0], Y: l.Points[0][1]},
			p2:          geom.Point{X: l.Points[1][0], Y: l.Points[1][1]},
			classes:     classSet(l.Classes),
			band:        l.band(),
			anchor:      anchorOr(l.Anchor),
			tracks:      map[uint64]*crosser{},
			counts:      map[countKey]uint64{},
		}
	}
	s.lines = next
	return nil
}

// Lines returns the set's line definitions, in order.
func (s *LineSet) Lines() []Line {
	out := make([]Line, len(s.lines))
	for i, l := range s.lines {
		out[i] = l.def
	}
	return out
}

// Update takes one frame and returns the crossings it decided, for each line in order, the
// frame's objects in their order. The slice is reused by the next Update. It fails only on a
// frame without a size.
func (s *LineSet) Update(f Frame) ([]LineEvent, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	s.events = s.events[:0]
	w, h := float64(f.W), float64(f.H)
	diag := f.diagonal()
	for _, l := range s.lines {
		// The line in pixels, so that distances are the same in every direction.
		a := geom.Point{X: l.p1.X * w, Y: l.p1.Y * h}
		b := geom.Point{X: l.p2.X * w, Y: l.p2.Y * h}
		length := math.Hypot(b.X-a.X, b.Y-a.Y)
		band := l.band * diag
		for _, o := range f.Objects {
			if l.classes != nil && !l.classes[o.Label] {
				continue
			}
			p := l.anchor.Point(o.Box)
			d := geom.Cross(a, b, p) / length
			c := l.tracks[o.TrackID]
			if c == nil {
				c = &crosser{}
				l.tracks[o.TrackID] = c
			} else if sign(d) != sign(c.prevD) {
				// This step crossed the line or its extension (or reached it): where?
				if v, u, ok := geom.Intersection(c.prev, p, a, b); ok {
					c.crossed, c.crossU = true, u
					c.crossT = c.lastSeen.Add(time.Duration(min(max(v, 0), 1) * float64(f.Time.Sub(c.lastSeen))))
				}
			}
			c.prev, c.prevD, c.lastSeen = p, d, f.Time
			if math.Abs(d) < band {
				continue // in the band: nothing is decided
			}
			side := sign(d)
			if c.side != 0 && side != c.side && c.crossed && c.crossU >= 0 && c.crossU <= 1 {
				dir := In
				if c.side < 0 {
					dir = Out
				}
				k := countKey{dir, o.Label}
				l.counts[k]++
				at := geom.Point{X: l.p1.X + c.crossU*(l.p2.X-l.p1.X), Y: l.p1.Y + c.crossU*(l.p2.Y-l.p1.Y)}
				s.events = append(s.events, LineEvent{Line: l.def.ID, TrackID: o.TrackID, Label: o.Label,
					Direction: dir, Time: f.Time, Crossed: c.crossT, At: at, Count: l.counts[k]})
			}
			// Beyond the band, on this side: a crossing before (counted, or around the
			// segment's end, or back and forth) is done with.
			c.side, c.crossed = side, false
		}
		for _, id := range f.Ended {
			delete(l.tracks, id)
		}
	}
	s.forgetStale(f.Time)
	return s.events, nil
}

func sign(v float64) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// forgetStale drops the tracks not seen for StaleAfter.
func (s *LineSet) forgetStale(t time.Time) {
	if since(t, s.last) < StaleAfter/10 && !s.last.IsZero() {
		return
	}
	s.last = t
	for _, l := range s.lines {
		for id, c := range l.tracks {
			if since(t, c.lastSeen) > StaleAfter {
				delete(l.tracks, id)
			}
		}
	}
}

// Counts returns every non-zero count, by line (in the set's order), direction (in, out) and
// class (sorted), for the key-value bucket and metrics.
func (s *LineSet) Counts() []Count {
	var out []Count
	for _, l := range s.lines {
		start := len(out)
		for k, n := range l.counts {
			out = append(out, Count{Line: l.def.ID, Fingerprint: l.fingerprint, Direction: k.dir, Class: k.class, N: n})
		}
		slices.SortFunc(out[start:], func(x, y Count) int {
			return cmp.Or(cmp.Compare(x.Direction, y.Direction), cmp.Compare(x.Class, y.Class))
		})
	}
	return out
}

// Restore sets counts saved by Counts (after a restart), each into the line of the same id
// and fingerprint; counts of lines that are gone or have changed, or of an unknown direction,
// are skipped. It returns how many were restored. A restored count replaces the line's count
// for that direction and class; the others are left as they are.
func (s *LineSet) Restore(counts []Count) int {
	n := 0
	for _, c := range counts {
		if c.Direction != In && c.Direction != Out {
			continue
		}
		for _, l := range s.lines {
			if l.def.ID == c.Line && l.fingerprint == c.Fingerprint {
				if c.N == 0 {
					delete(l.counts, countKey{c.Direction, c.Class})
				} else {
					l.counts[countKey{c.Direction, c.Class}] = c.N
				}
				n++
				break
			}
		}
	}
	return n
}
