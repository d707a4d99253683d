package sinks

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// The events of tracked objects (issue 14): an object's life on <prefix>.<site>.<camera>.objects,
// zone visits on .zones and line crossings on .lines. The daemon fills them from the tracker
// (analytics/track) and the zones and lines (analytics) of one camera; sinks does not import
// those packages, so the wire format stays apart from the logic that makes it.

// Object event types (ObjectEvent.Type).
const (
	ObjectNew    = "new"    // the track was confirmed
	ObjectUpdate = "update" // something about it changed: ObjectEvent.Why says what
	ObjectEnd    = "end"    // the object ended: ObjectEvent.Reason says why
	// ObjectClip names a stored clip that shows the object (ObjectEvent.Clip), once it is
	// stored: after the object's end, or while it lasts when the clip reached max_length.
	// It repeats the object's state of its latest event before; it is not part of its
	// lifecycle (end stays its last).
	ObjectClip = "clip"
)

// Reasons for an object's end (ObjectEvent.Reason).
const (
	EndLost           = "lost"            // unmatched for longer than the tracker's lost buffer, or gone out of the frame
	EndCameraOffline  = "camera_offline"  // no frame of its camera analysed for the lost buffer
	EndCameraRemoved  = "camera_removed"  // its camera was removed from the config by a reload
	EndCameraDisabled = "camera_disabled" // its camera was disabled (enabled: false) by a reload
	EndSourceChanged  = "source_changed"  // its camera restarted on another source (url, kind, ...) by a reload
	EndShutdown       = "shutdown"        // the daemon stopped
	EndClockBack      = "clock_back"      // its camera's capture clock went back (a new stream): tracking starts afresh
	EndVideoEnd       = "video_end"       // the recording that visiond replay analyses ended
)

// Reasons for an object update (ObjectEvent.Why).
const (
	WhyZoneEnter  = "zone_enter" // it entered a zone
	WhyZoneExit   = "zone_exit"  // it left a zone
	WhyStationary = "stationary" // it stopped moving
	WhyMoving     = "moving"     // it moved again
	WhyInterval   = "interval"   // nothing changed for the update interval
)

// Zone event types (ZoneEvent.Type).
const (
	ZoneEnter  = "enter"
	ZoneExit   = "exit"
	ZoneLoiter = "loiter"
)

// Line crossing directions (LineEvent.Direction and the keys of LineEvent.Counts); the
// analytics package documents which side is which.
const (
	DirectionIn  = "in"
	DirectionOut = "out"
)

// Precision of the new events' other numbers, as decimals kept (see Detection for boxes and
// scores): seconds to a tenth (the frame spacing at 10 fps), degrees to a tenth; times are
// written to the millisecond.
const (
	secondDecimals = 1
	degreeDecimals = 1
)

// ObjectEvent is one moment of a tracked object's life, published on
// <prefix>.<site>.<camera>.objects: `new` when its track is confirmed, `update` when it
// enters or leaves a zone, stops or moves again, or at the latest every update interval, and
// `end` when it ends: lost for good, or its camera's life ended it (Reason). Every event carries the whole present state, so a
// consumer that missed one loses nothing it cannot read from the next.
type ObjectEvent struct {
	Version int `json:"version"`
	// ID is stamped by the Publisher: <instance>.<camera>.t<track_id>.<Seq>.
	ID     string `json:"id"`
	Site   string `json:"site"`
	Camera string `json:"camera"`
	Type   string `json:"type"` // ObjectNew, ObjectUpdate or ObjectEnd
	// Why lists what changed, for an update (Why* constants; several when they happened in
	// one frame); empty for new and end.
	Why []string `json:"why,omitempty"`
	// Reason says why an end ended the object (End* constants); empty for new and update.
	Reason  string `json:"reason,omitempty"`
	TrackID uint64 `json:"track_id"` // unique per camera, never reused (docs/events.md, "Track ids")
	Label   string `json:"label"`
	ClassID int    `json:"class_id"`
	// FirstSeen and LastSeen are the capture times of the first and latest frames whose
	// detections matched the track.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	// Box, BoxNorm and Score are the latest matched detection's.
	Box     Box     `json:"box"`      // source-frame pixels
	BoxNorm Box     `json:"box_norm"` // fractions of the frame, 0..1
	Score   float32 `json:"score"`
	Best    Best    `json:"best"` // the best detection so far: the one the snapshot shows
	// Zones are the ids of the zones the object is in now (entered, not yet left); never
	// nil in JSON. ZoneSeconds is the time spent in each zone it has entered, this visit
	// included, in seconds.
	Zones       []string           `json:"zones"`
	ZoneSeconds map[string]float64 `json:"zone_seconds,omitempty"`
	Stationary  bool               `json:"stationary"`
	Path        Path               `json:"path"`
	// Snapshot is the name of the object's best frame (a JPEG) in the site's snapshot store
	// (SnapshotName), once stored; omitted before.
	Snapshot string `json:"snapshot,omitempty"`
	// Clip, for an ObjectClip event, is the stored clip that shows the object.
	Clip *ClipRef `json:"clip,omitempty"`
	// Seq numbers the track's events from 1: the last part of the event's id, which is how
	// it travels (not a field of the JSON). Required.
	Seq uint64 `json:"-"`
}

// Best is the best detection of a track: the highest score at a good size.
type Best struct {
	Box     Box       `json:"box"`
	BoxNorm Box       `json:"box_norm"`
	Score   float32   `json:"score"`
	At      time.Time `json:"at"` // the capture time of its frame
}

// Point is a position in normalized coordinates: fractions 0..1 of the frame's width and
// height from its top-left corner, y pointing down.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Path is where an object went: from the anchor point (the middle of its box's bottom edge,
// or the one the camera's objects are tracked by) of its first detection to that of its
// latest. Make it with NewPath.
type Path struct {
	Start Point `json:"start"`
	End   Point `json:"end"`
	// Direction is the heading from Start to End as drawn on the frame, in degrees
	// clockwise from the right: 0 right, 90 down, 180 left, 270 up; in [0, 360), measured
	// in pixels (so a 45° heading looks like one on a wide frame); 0 when it has not moved.
	Direction float64 `json:"direction"`
	// Distance is the straight line from Start to End as a fraction of the frame's
	// diagonal (the unit of the analytics package's distances): 0..1.
	Distance float64 `json:"distance"`
}

// NewPath is the path from start to end (normalized points) on a frame of w x h pixels.
func NewPath(start, end Point, w, h int) Path {
	dx, dy := (end.X-start.X)*float64(w), (end.Y-start.Y)*float64(h)
	p := Path{Start: start, End: end}
	if diag := math.Hypot(float64(w), float64(h)); diag > 0 {
		p.Distance = math.Hypot(dx, dy) / diag
	}
	if dx != 0 || dy != 0 {
		deg := math.Atan2(dy, dx) * 180 / math.Pi
		if deg < 0 {
			deg += 360
		}
		p.Direction = deg
	}
	return p
}

// MarshalJSON writes e with the precision of Detection's numbers and times to the
// millisecond.
func (e ObjectEvent) MarshalJSON() ([]byte, error) {
	type plain ObjectEvent // without this method
	p := plain(e)
	p.FirstSeen, p.LastSeen = ms(e.FirstSeen), ms(e.LastSeen)
	p.Box, p.BoxNorm = e.Box.rounded(pixelDecimals), e.BoxNorm.rounded(normDecimals)
	p.Score = roundScore(e.Score)
	p.Best = Best{Box: e.Best.Box.rounded(pixelDecimals), BoxNorm: e.Best.BoxNorm.rounded(normDecimals),
		Score: roundScore(e.Best.Score), At: ms(e.Best.At)}
	if p.Zones == nil {
		p.Zones = []string{}
	}
	if len(e.ZoneSeconds) > 0 {
		p.ZoneSeconds = make(map[string]float64, len(e.ZoneSeconds))
		for z, s := range e.ZoneSeconds {
			p.ZoneSeconds[z] = round(s, secondDecimals)
		}
	}
	p.Path = Path{Start: e.Path.Start.rounded(), End: e.Path.End.rounded(),
		Direction: round(e.Path.Direction, degreeDecimals), Distance: round(e.Path.Distance, normDecimals)}
	if p.Path.Direction >= 360 {
		p.Path.Direction = 0 // 359.96 rounds to 360: the same heading
	}
	return json.Marshal(p)
}

func (pt Point) rounded() Point {
	return Point{X: round(pt.X, normDecimals), Y: round(pt.Y, normDecimals)}
}

func roundScore(s float32) float32 { return float32(round(float64(s), scoreDecimals)) }

// ms is t truncated to the millisecond, in UTC (the zero time stays zero).
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Millisecond).UTC()
}

// ZoneEvent is an object entering, leaving or loitering in a zone, published on
// <prefix>.<site>.<camera>.zones.
type ZoneEvent struct {
	Version int `json:"version"`
	// ID is stamped by the Publisher: <instance>.<camera>.<zone>.t<track_id>.<type>.<since
	// in Unix ms>; one visit's enter, loiter and exit each have their own.
	ID      string `json:"id"`
	Site    string `json:"site"`
	Camera  string `json:"camera"`
	Type    string `json:"type"` // ZoneEnter, ZoneExit or ZoneLoiter
	Zone    string `json:"zone"`
	TrackID uint64 `json:"track_id"`
	Label   string `json:"label"`
	// At is the capture time of the frame that decided the event; Since the first frame
	// of the visit (the entry debounce began there).
	At    time.Time `json:"at"`
	Since time.Time `json:"since"`
	// DwellS is the time inside in seconds: for an exit the whole visit, for a loiter the
	// visit so far; absent for an enter.
	DwellS float64 `json:"dwell_s,omitempty"`
	// Ended says that an exit is due to the end of the object (it left the view or was lost,
	// or its camera's life ended it: its end event's Reason), not to its leaving the zone.
	Ended bool `json:"ended,omitempty"`
	// Occupancy is the number of objects in the zone by class after the event; classes
	// with none are left out of the JSON, which is {} for an empty zone.
	Occupancy map[string]int `json:"occupancy"`
}

// MarshalJSON writes e with its times to the millisecond and its dwell to a tenth of a
// second.
func (e ZoneEvent) MarshalJSON() ([]byte, error) {
	type plain ZoneEvent
	p := plain(e)
	p.At, p.Since, p.DwellS = ms(e.At), ms(e.Since), round(e.DwellS, secondDecimals)
	p.Occupancy = make(map[string]int, len(e.Occupancy))
	for c, n := range e.Occupancy {
		if n > 0 {
			p.Occupancy[c] = n
		}
	}
	return json.Marshal(p)
}

// LineEvent is an object crossing a line, published on <prefix>.<site>.<camera>.lines.
type LineEvent struct {
	Version int `json:"version"`
	// ID is stamped by the Publisher: <instance>.<camera>.<line>.t<track_id>.<at in Unix
	// ms>; a track crosses a line at most once per frame.
	ID        string    `json:"id"`
	Site      string    `json:"site"`
	Camera    string    `json:"camera"`
	Line      string    `json:"line"`
	TrackID   uint64    `json:"track_id"`
	Label     string    `json:"label"`
	Direction string    `json:"direction"` // DirectionIn or DirectionOut
	At        time.Time `json:"at"`        // the capture time of the frame that decided the crossing
	// CrossedAt is when the object's path crossed the line: between the capture times of
	// the frames either side of it, in proportion (at is later: the line's band).
	CrossedAt time.Time `json:"crossed_at"`
	// Point is where the object's path crossed the line (normalized).
	Point Point `json:"point"`
	// Counts are the line's counts after the event: direction ("in", "out") to class to
	// crossings; zero counts are left out of the JSON, which is never null.
	Counts map[string]map[string]uint64 `json:"counts"`
}

// MarshalJSON writes e with its time to the millisecond and its point to 4 decimals.
func (e LineEvent) MarshalJSON() ([]byte, error) {
	type plain LineEvent
	p := plain(e)
	p.At, p.CrossedAt, p.Point = ms(e.At), ms(e.CrossedAt), e.Point.rounded()
	p.Counts = make(map[string]map[string]uint64, len(e.Counts))
	for dir, byClass := range e.Counts {
		for c, n := range byClass {
			if n == 0 {
				continue
			}
			if p.Counts[dir] == nil {
				p.Counts[dir] = map[string]uint64{}
			}
			p.Counts[dir][c] = n
		}
	}
	return json.Marshal(p)
}

// ObjectSubject is the subject that carries a camera's object events.
func ObjectSubject(prefix, site, camera string) string {
	return fmt.Sprintf("%s.%s.%s.objects", prefix, site, camera)
}

// ZoneSubject is the subject that carries a camera's zone events.
func ZoneSubject(prefix, site, camera string) string {
	return fmt.Sprintf("%s.%s.%s.zones", prefix, site, camera)
}

// LineSubject is the subject that carries a camera's line crossing events.
func LineSubject(prefix, site, camera string) string {
	return fmt.Sprintf("%s.%s.%s.lines", prefix, site, camera)
}
