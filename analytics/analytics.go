// Package analytics turns a camera's detections and tracks into what happened in its scene:
// detections dropped by class, score, size or mask before tracking (Filter); objects entering,
// leaving and loitering in zones, with occupancy per zone and class (ZoneSet); objects
// crossing lines, counted per line, direction and class (LineSet); objects becoming
// stationary or moving again (Motion). It is pure logic: no goroutines, no I/O, no cgo, no
// clock (every time comes from the frames), so the daemon drives it and tests replay
// synthetic timestamps.
//
// # Use, per camera
//
// The daemon keeps one Scene per camera (scene.go), which holds the camera's Filter,
// tracker, ZoneSet, LineSet and Motion and the life of its objects, and feeds it the
// camera's results in frame order from one goroutine:
//
//	sc, _ := analytics.NewScene(settings, nextID) // nextID kept across restarts: ids never repeat
//	step, _ := sc.Step(captured, w, h, result.Detections)
//	// step.Dets, step.IDs: the detections kept, with their track ids
//	// step.Objects: ObjectNew / ObjectUpdate (with Why) / ObjectEnd reports -> .objects
//	// step.Zones, step.Lines: -> .zones, .lines; step.Dropped: the filter's drops by reason
//	sc.Apply(newSettings)                          // a hot reload: tracks go on
//
// The parts can be used on their own; they hold no locks, so calls on one value must not
// overlap. For each analysed frame, a Scene does:
//
//	dets, dropped := filter.Apply(result.Detections, w, h) // before the tracker
//	... tracker ...                                       // package analytics/track
//	f := analytics.Frame{Time: captured, W: w, H: h, Objects: objs, Ended: endedIDs}
//	zoneEvents, _ := zones.Update(f)   // enter / exit / loiter -> <prefix>.<site>.<camera>.zones
//	lineEvents, _ := lines.Update(f)   // crossings            -> <prefix>.<site>.<camera>.lines
//	motionEvents, _ := motion.Update(f) // stationary / moving  -> object `update` events
//
// Objects are the tracks matched in this frame (a track the tracker only predicts is left
// out: no evidence, no change); Ended are the tracks the tracker ended in it, which leave
// every zone at once (an exit event with Ended set) and are forgotten. The events returned are
// valid until the next Update. For object events, ZoneSet.Presence gives the zones a track is
// in and its time in each, Motion.Stationary whether it stands still. ZoneSet.Occupancy and
// LineSet.Counts are the present state for the key-value bucket and Prometheus; they change
// only when Update returns events. LineSet.Restore puts saved counts back after a restart.
//
// On a hot reload, build a new Filter (it holds no state), and call ZoneSet.Apply and
// LineSet.Apply with the new definitions: zones and lines whose definition is unchanged
// (Zone.Equal, Line.Equal) keep their state and counts, changed ones start afresh, removed
// ones are dropped. Settings are checked first with Config.Check and the model's labels.
//
// # Coordinates
//
// Zones, masks and lines are in normalized coordinates: x and y are fractions 0..1 of the
// frame's width and height from its top-left corner, y pointing down. Boxes arrive in pixels
// with the frame's size, so a change of resolution changes nothing. Distances (a line's band,
// Motion's radius) are fractions of the frame's diagonal, measured in pixels, so that they are
// the same in every direction. The point of a box that is tested is its Anchor: by default the
// middle of its bottom edge (where an object stands), or its centre. A point on a zone's or a
// mask's outline is inside it.
//
// # Line direction
//
// A line runs from its first point P1 to its second P2. Someone walking along it from P1 to
// P2, as drawn on the frame, has a right-hand and a left-hand side. An object whose anchor goes
// from the right-hand side to the left-hand side crosses `in`; from left to right, `out`.
// Reverse the points to swap them. For a vertical line drawn from top to bottom, `in` is
// left to right:
//
//	       P1 (x, 0.1)
//	        |
//	right   |   left
//	side    |   side
//	  o ----|---> o     in:  from the right-hand side to the left
//	  o <---|---- o     out: from the left-hand side to the right
//	        |
//	        v
//	       P2 (x, 0.9)
//
// and for a horizontal line drawn from left to right, P1 ------> P2, `in` is going up the
// frame (from below the line, its right-hand side, to above it).
//
// A crossing counts when the anchor, having been at least the line's Band (a fraction of the
// frame's diagonal) away on one side, gets at least as far on the other, and its path crossed
// the segment between P1 and P2 (not the line's extension beyond them). Jitter inside the band
// counts nothing, however often it goes back and forth over the line; an object standing on
// the line counts once it leaves the band on the far side.
//
// # Zones
//
// An object (of one of the zone's classes) enters a zone once its anchor has been inside for
// the zone's debounce, Zone.MinSeconds, over consecutive frames that saw it; it leaves once
// seen outside for as long, or at once when its track ends. Enter events are dated by the
// frame that decided them and carry Since, the first frame of the visit; exit events carry
// the Dwell, from Since to the first frame seen outside (or the last seen inside, for an
// ended track). An object inside for longer than Zone.LoiterSeconds loiters: one event per
// visit. Tracks are forgotten when they end or when unseen for longer than StaleAfter.
package analytics

import (
	"fmt"
	"math"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// StaleAfter is how long a ZoneSet, LineSet or Motion remembers a track it has not seen and
// that was never said to have ended, so that state stays bounded if the caller misses an end.
const StaleAfter = 5 * time.Minute

// Frame is one analysed frame of a camera, after tracking.
type Frame struct {
	// Time is the frame's capture time. Times should not go backwards; if they do, the
	// durations that span the jump count as zero.
	Time time.Time
	// W and H are the frame's size in pixels, > 0.
	W, H int
	// Objects are the tracks matched in this frame, each TrackID once.
	Objects []Object
	// Ended lists the tracks that ended at this frame.
	Ended []uint64
}

// Object is a tracked object as seen in one frame.
type Object struct {
	TrackID uint64
	Label   string
	// Box is the object's box in pixels of the frame.
	Box geom.Box
}

// check says whether the frame can be used.
func (f *Frame) check() error {
	if f.W <= 0 || f.H <= 0 {
		return fmt.Errorf("analytics: frame size %dx%d is not positive", f.W, f.H)
	}
	return nil
}

// normalized returns b's anchor in normalized coordinates.
func (f *Frame) normalized(a Anchor, b geom.Box) geom.Point {
	p := a.Point(b)
	return geom.Point{X: p.X / float64(f.W), Y: p.Y / float64(f.H)}
}

func (f *Frame) diagonal() float64 { return math.Hypot(float64(f.W), float64(f.H)) }

// since returns t - from, or 0 when t is before from.
func since(t, from time.Time) time.Duration { return max(0, t.Sub(from)) }
