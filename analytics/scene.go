package analytics

import (
	"fmt"
	"slices"
	"time"

	"github.com/visiond/visiond/analytics/track"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// Change is what a frame did to a followed object: the kind of its object event.
type Change int

// The changes of an object's life.
const (
	ObjectNew    Change = iota + 1 // its track was confirmed
	ObjectUpdate                   // something about it changed: ObjectReport.Why says what
	ObjectEnd                      // its track ended (lost too long, left the frame, or ended by the scene)
)

func (c Change) String() string {
	switch c {
	case ObjectNew:
		return "new"
	case ObjectUpdate:
		return "update"
	case ObjectEnd:
		return "end"
	}
	return fmt.Sprintf("Change(%d)", int(c))
}

// Why is a reason for an ObjectUpdate, or for an ObjectEnd (end.go: WhyLost and the camera's
// reasons).
type Why int

// The reasons for an update, in the order a report lists them when several come in one
// frame: zones first, then motion, and the interval only when nothing else happened.
const (
	WhyZoneEnter  Why = iota + 1 // it entered a zone
	WhyZoneExit                  // it left a zone
	WhyStationary                // it stopped moving
	WhyMoving                    // it moved again
	WhyInterval                  // nothing changed for the objects' update interval
)

func (w Why) String() string {
	if name, ok := endName(w); ok {
		return name
	}
	switch w {
	case WhyZoneEnter:
		return "zone_enter"
	case WhyZoneExit:
		return "zone_exit"
	case WhyStationary:
		return "stationary"
	case WhyMoving:
		return "moving"
	case WhyInterval:
		return "interval"
	}
	return fmt.Sprintf("Why(%d)", int(w))
}

// Scene is one camera's analytics and the life of its objects: its Filter, tracker
// (analytics/track), ZoneSet, LineSet and Motion, fed each analysed frame of the camera in
// frame order (Step). A track confirmed in a frame goes through the zones and lines where it
// was seen while tentative first (track.Result.Paths), so what it did during the
// confirmation counts. Every confirmed track is an object, reported when it is confirmed
// (ObjectNew), when something about it changes or at the latest every update interval
// (ObjectUpdate, with why) and when it ends (ObjectEnd). Like the parts it holds, a Scene
// holds no lock: one goroutine at a time.
type Scene struct {
	settings Config // applied
	filter   *Filter
	tracker  *track.Tracker
	zones    *ZoneSet
	lines    *LineSet
	motion   *Motion
	objects  map[uint64]*object // confirmed tracks, by id
	last     time.Time          // the latest frame's time given to the tracker
	tracks   []track.Track      // the tracker's live tracks after the latest frame (its slice, reused)

	frame    Frame      // reused by Step
	past     Frame      // reused by replay
	ended    []uint64   // reused by Step
	presence []Presence // reused by report
}

// object is what the scene keeps of a confirmed track for its reports.
type object struct {
	start     geom.Point // normalized anchor when confirmed
	lastBox   geom.Box   // the latest matched detection's box
	lastEvent time.Time  // the latest report's frame time
	events    uint64     // reports made for the track
	// The object's evidence (see EvidenceWanted): its name once taken, the score and frame
	// time of the detection it shows.
	evidence      string
	evidenceScore float32
	evidenceAt    time.Time
	stationary    bool
}

// timeSlack is how far a frame's capture time may go back (after a reconnect, say) and
// still be taken as a moment after the previous frame; further back, every track ends and
// tracking starts afresh.
const timeSlack = time.Second

// ObjectReport is one moment of a followed object's life: the track as of the frame, what
// changed, and what the scene knows of it. It becomes an object event.
type ObjectReport struct {
	Change Change
	Why    []Why // an update's reasons; an end's one reason (WhyLost, WhyCameraOffline...); nil for new
	Track  track.Track
	// Seq numbers the track's reports from 1: with the track id, it names the report.
	Seq        uint64
	Zones      []Presence // the zones it is in or has been in, with its time in each
	Stationary bool
	Box        geom.Box   // its latest matched detection (a lost track's own box is a prediction)
	Start, End geom.Point // normalized anchors: when confirmed, where last seen
	Evidence   string     // the name of its evidence once taken (Scene.Evidenced); "" before
}

// StepResult is what one frame changed in a scene. Its slices are the caller's.
type StepResult struct {
	Dets    []infer.Detection // the detections kept by the filter, in the result's order
	IDs     []uint64          // IDs[i]: the track id of Dets[i], 0 when none
	Dropped Dropped           // the filter's drops in this frame, by reason
	Objects []ObjectReport
	// Zones and Lines are the frame's zone and line events. The events a track confirmed in
	// this frame made while it was tentative come first, dated by their earlier frames.
	Zones []ZoneEvent
	Lines []LineEvent
}

// NewScene returns the scene of settings (checked as NewFilter, NewZoneSet and NewLineSet
// check them), with track ids from firstID.
func NewScene(settings Config, firstID uint64) (*Scene, error) {
	tr, err := track.New(track.Config{FrameInterval: settings.FrameInterval, ClassGroups: settings.Objects.Groups()}, firstID)
	if err != nil {
		return nil, err
	}
	motion, err := NewMotion(0, 0, settings.Objects.Anchor)
	if err != nil {
		return nil, err
	}
	s := &Scene{tracker: tr, motion: motion, objects: map[uint64]*object{}}
	if err := s.Apply(settings); err != nil {
		return nil, err
	}
	return s, nil
}

// Apply changes the scene's settings (a hot reload): the filter is rebuilt, zones and
// lines whose definition is unchanged keep their state (ZoneSet.Apply, LineSet.Apply), the
// motion test takes the objects' anchor (Motion.SetAnchor), the tracker the camera's rate
// (FrameInterval) and the class groups, the tracks go on.
func (s *Scene) Apply(settings Config) error {
	f, err := NewFilter(settings.Objects, settings.Masks)
	if err != nil {
		return err
	}
	if s.zones == nil {
		if s.zones, err = NewZoneSet(settings.Zones); err != nil {
			return err
		}
		if s.lines, err = NewLineSet(settings.Lines); err != nil {
			return err
		}
	} else {
		if err := s.zones.Apply(settings.Zones); err != nil {
			return err
		}
		if err := s.lines.Apply(settings.Lines); err != nil {
			return err
		}
	}
	if err := s.motion.SetAnchor(settings.Objects.Anchor); err != nil {
		return err
	}
	groups := settings.Objects.Groups()
	if tc := s.tracker.Config(); tc.FrameInterval != settings.FrameInterval || !slices.EqualFunc(tc.ClassGroups, groups, slices.Equal) {
		tc.FrameInterval, tc.ClassGroups = settings.FrameInterval, groups
		if err := s.tracker.SetConfig(tc); err != nil {
			return err
		}
	}
	s.filter, s.settings = f, settings
	return nil
}

// Step runs one analysed frame of w x h pixels captured at `at` through the scene. dets is
// the worker's result; the kept detections are moved to its front.
func (s *Scene) Step(at time.Time, w, h int, dets []infer.Detection) (StepResult, error) {
	var res StepResult
	res.Dets, res.Dropped = s.filter.Apply(dets, w, h)
	if !at.After(s.last) && !s.last.IsZero() {
		if s.last.Sub(at) > timeSlack {
			res.Objects, res.Zones = s.endAll(w, h, WhyClockBack, res.Objects)
			s.last = time.Time{}
		} else {
			at = s.last.Add(time.Millisecond)
		}
	}
	tr, err := s.tracker.Update(at, w, h, res.Dets)
	if err != nil {
		return res, fmt.Errorf("tracker: %w", err)
	}
	s.last = at
	s.tracks = tr.Tracks
	res.IDs = tr.IDs
	s.setFrame(tr, at, w, h)
	moves, err := s.geometry(tr, &res, w, h)
	if err != nil {
		return res, err
	}
	s.reports(tr, moves, &res, at, w, h)
	return res, nil
}

// setFrame makes s.frame the frame at at, of w x h pixels, with tr's matched tracks and
// the tracks it ended.
func (s *Scene) setFrame(tr track.Result, at time.Time, w, h int) {
	f := &s.frame
	f.Time, f.W, f.H = at, w, h
	f.Objects = f.Objects[:0]
	for _, t := range tr.Tracks {
		if t.ID != 0 && t.Matched {
			f.Objects = append(f.Objects, Object{TrackID: t.ID, Label: t.Label, Box: t.Box})
			if o := s.objects[t.ID]; o != nil {
				o.lastBox = t.Box
			}
		}
	}
	s.ended = s.ended[:0]
	for _, t := range tr.Ended {
		s.ended = append(s.ended, t.ID)
	}
	f.Ended = s.ended
}

// geometry runs the frame (s.frame) through the zones, lines and motion: their events go
// into res (after those already there: a clock jump's exits), the motion's changes are
// returned.
func (s *Scene) geometry(tr track.Result, res *StepResult, w, h int) ([]MotionEvent, error) {
	f := &s.frame
	// The tracks confirmed in this frame go through the zones and lines where they were
	// seen while tentative first, so that an entry or a crossing made during the
	// confirmation counts, at its time.
	pastZones, pastLines, err := s.replay(tr, w, h)
	if err != nil {
		return nil, err
	}
	res.Zones = append(res.Zones, pastZones...) // after a clock jump's exits
	res.Lines = pastLines
	zones, err := s.zones.Update(*f)
	if err != nil {
		return nil, err
	}
	lines, err := s.lines.Update(*f)
	if err != nil {
		return nil, err
	}
	if res.Zones == nil {
		res.Zones = zones
	} else {
		res.Zones = append(res.Zones, zones...)
	}
	if res.Lines == nil {
		res.Lines = lines
	} else {
		res.Lines = append(res.Lines, lines...)
	}
	return s.motion.Update(*f)
}

// reports adds to res the objects' reports of the frame at at: confirmed, changed (zones,
// motion moves, or quiet for the interval), ended.
func (s *Scene) reports(tr track.Result, moves []MotionEvent, res *StepResult, at time.Time, w, h int) {
	anchor := s.settings.Objects.Anchor
	for _, t := range tr.New {
		s.objects[t.ID] = &object{start: normAnchor(anchor, t.Box, w, h), lastBox: t.Box}
		res.Objects = s.report(res.Objects, ObjectNew, nil, t, w, h)
	}
	changed := map[uint64][]Why{}
	for _, z := range res.Zones {
		switch {
		case z.Ended: // the end report says it
		case z.Type == ZoneEnter:
			changed[z.TrackID] = appendNew(changed[z.TrackID], WhyZoneEnter)
		case z.Type == ZoneExit:
			changed[z.TrackID] = appendNew(changed[z.TrackID], WhyZoneExit)
		}
	}
	for _, m := range moves {
		if o := s.objects[m.TrackID]; o != nil {
			o.stationary = m.Stationary
		}
		why := WhyMoving
		if m.Stationary {
			why = WhyStationary
		}
		changed[m.TrackID] = appendNew(changed[m.TrackID], why)
	}
	for _, t := range tr.Tracks {
		o := s.objects[t.ID]
		if t.ID == 0 || o == nil || o.lastEvent.Equal(at) {
			continue // tentative, or its new report is this frame's
		}
		why := changed[t.ID]
		if len(why) == 0 && at.Sub(o.lastEvent) >= s.settings.Objects.Interval() {
			why = []Why{WhyInterval}
		}
		if len(why) > 0 {
			res.Objects = s.report(res.Objects, ObjectUpdate, why, t, w, h)
		}
	}
	for _, t := range tr.Ended {
		if s.objects[t.ID] != nil {
			res.Objects = s.report(res.Objects, ObjectEnd, nil, t, w, h)
			delete(s.objects, t.ID)
		}
	}
}

// replay plays the sightings of the tracks confirmed in tr while they were tentative
// (track.Result.Paths) through the zones and lines, one past frame of w x h pixels each, in
// order, and returns the events they made (nil when none: the common frame allocates
// nothing).
func (s *Scene) replay(tr track.Result, w, h int) (zones []ZoneEvent, lines []LineEvent, err error) {
	for k, t := range tr.New {
		for _, sg := range tr.Paths[k] {
			s.past.Time, s.past.W, s.past.H = sg.At, w, h
			s.past.Objects = append(s.past.Objects[:0], Object{TrackID: t.ID, Label: t.Label, Box: sg.Box})
			ze, err := s.zones.Update(s.past)
			if err != nil {
				return nil, nil, err
			}
			le, err := s.lines.Update(s.past)
			if err != nil {
				return nil, nil, err
			}
			zones, lines = append(zones, ze...), append(lines, le...)
		}
	}
	return zones, lines, nil
}

// report appends the report of change (new, update or end) of t; why gives an update's
// reasons, or an end's one reason (WhyLost when none is given).
func (s *Scene) report(out []ObjectReport, change Change, why []Why, t track.Track, w, h int) []ObjectReport {
	o := s.objects[t.ID]
	if change == ObjectEnd && len(why) == 0 {
		why = []Why{WhyLost} // the tracker ended it
	}
	at := t.LastSeen
	if change != ObjectEnd {
		at = s.frame.Time
	}
	o.lastEvent = at
	o.events++
	s.presence = s.zones.Presence(t.ID, s.presence[:0])
	return append(out, ObjectReport{
		Change:     change,
		Why:        why,
		Track:      t,
		Seq:        o.events,
		Zones:      slices.Clone(s.presence),
		Stationary: o.stationary,
		Box:        o.lastBox,
		Start:      o.start,
		End:        normAnchor(s.settings.Objects.Anchor, o.lastBox, w, h), // where it was last seen
		Evidence:   o.evidence,
	})
}

// Evidence is kept of each object: the frame of one of its best detections, with its box.
// A detection replaces an object's evidence when it scores at least EvidenceBetter more than
// the one taken, at most once per EvidenceEvery, and only where its box is inside the frame
// (not cut by an edge, EvidenceMargin pixels in).
const (
	EvidenceBetter = 0.05
	EvidenceEvery  = 5 * time.Second
	EvidenceMargin = 2
)

// EvidenceWanted appends to dst the objects matched in the latest frame (of w x h pixels)
// whose detection there would be better evidence than what was taken of them, and returns
// it: for each, take the frame's picture of t.Box and then call Evidenced.
func (s *Scene) EvidenceWanted(dst []track.Track, w, h int) []track.Track {
	for _, t := range s.tracks {
		o := s.objects[t.ID]
		if t.ID == 0 || !t.Matched || o == nil {
			continue
		}
		if o.evidence != "" && (t.Score < o.evidenceScore+EvidenceBetter || s.last.Sub(o.evidenceAt) < EvidenceEvery) {
			continue
		}
		b := t.Box
		if b.X < EvidenceMargin || b.Y < EvidenceMargin || b.X+b.W > float64(w-EvidenceMargin) || b.Y+b.H > float64(h-EvidenceMargin) {
			continue
		}
		dst = append(dst, t)
	}
	return dst
}

// Evidenced records that object t (from EvidenceWanted) has its evidence taken from the
// latest frame, under name: its later reports carry it.
func (s *Scene) Evidenced(t track.Track, name string) {
	if o := s.objects[t.ID]; o != nil {
		o.evidence, o.evidenceScore, o.evidenceAt = name, t.Score, s.last
	}
}

// LiveObject is a followed object (confirmed or lost) after the latest frame.
type LiveObject struct {
	Track      track.Track // State Confirmed or Lost
	Box        geom.Box    // its latest matched detection (a lost track's own box is a prediction)
	Zones      []string    // the zones it is in
	Stationary bool
}

// Live returns the scene's followed objects after the latest frame, in the tracker's order.
func (s *Scene) Live() []LiveObject {
	out := []LiveObject{}
	for _, t := range s.tracks {
		if t.ID == 0 {
			continue
		}
		lo := LiveObject{Track: t, Box: t.Box, Zones: []string{}}
		if o := s.objects[t.ID]; o != nil {
			lo.Stationary, lo.Box = o.stationary, o.lastBox
		}
		s.presence = s.zones.Presence(t.ID, s.presence[:0])
		for _, p := range s.presence {
			if p.Inside {
				lo.Zones = append(lo.Zones, p.Zone)
			}
		}
		out = append(out, lo)
	}
	return out
}

// Occupancy is the zones' occupancy after the latest frame (ZoneSet.Occupancy).
func (s *Scene) Occupancy() []Occupancy { return s.zones.Occupancy() }

// Counts are the lines' counts after the latest frame (LineSet.Counts).
func (s *Scene) Counts() []Count { return s.lines.Counts() }

// Restore puts saved line counts back (LineSet.Restore) and returns how many it took.
func (s *Scene) Restore(counts []Count) int { return s.lines.Restore(counts) }

// NextID is the id the next confirmed track gets: keep it across restarts, and give it to
// NewScene, so that ids are not reused.
func (s *Scene) NextID() uint64 { return s.tracker.NextID() }

// normAnchor is the anchor of box b in normalized coordinates of a w x h frame.
func normAnchor(a Anchor, b geom.Box, w, h int) geom.Point {
	p := a.Point(b)
	return geom.Point{X: p.X / float64(w), Y: p.Y / float64(h)}
}

// appendNew appends v to list unless it is there already.
func appendNew[T comparable](list []T, v T) []T {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}
