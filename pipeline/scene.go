package pipeline

import (
	"fmt"
	"math"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/analytics/track"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/sinks"
)

// scene is one camera's analytics: its filter, tracker, zones, lines and motion, fed each
// analysed frame of the camera in frame order. The slicer's finish runs one job of a camera
// at a time (the camera's busy flag), so a scene is only ever used by one goroutine at a
// time and holds no lock.
type scene struct {
	settings analytics.Config // applied
	filter   *analytics.Filter
	tracker  *track.Tracker
	zones    *analytics.ZoneSet
	lines    *analytics.LineSet
	motion   *analytics.Motion
	objects  map[uint64]*sceneObject // confirmed tracks, by id
	last     time.Time               // the latest frame's time given to the tracker
	tracks   []track.Track           // the tracker's live tracks after the latest frame (its slice, reused)

	frame    analytics.Frame      // reused by step
	ended    []uint64             // reused by step
	presence []analytics.Presence // reused by string
}

// sceneObject is what the scene keeps of a confirmed track for its object events.
type sceneObject struct {
	start     geom.Point // normalized anchor when confirmed
	startAt   time.Time
	lastBox   geom.Box  // the latest matched detection's box
	lastEvent time.Time // the latest object event's frame time
	// The object's evidence in the snapshot store: its name once taken, the score and
	// frame time of the detection it shows.
	snapshot      string
	snapshotScore float32
	snapshotAt    time.Time
	events        uint64 // object events published for the track
	stationary    bool
}

// sceneTimeSlack is how far a frame's capture time may go back (after a reconnect, say)
// and still be taken as a moment after the previous frame; further back, every track ends
// and tracking starts afresh.
const sceneTimeSlack = time.Second

// objectReport is one object event to publish: the track as of the frame, why, and what
// the scene knows of it.
type objectReport struct {
	change     string   // new, update or end
	why        []string // an update's reasons
	track      track.Track
	seq        uint64 // the track's object event number, from 1
	zones      []analytics.Presence
	stationary bool
	box        geom.Box   // its latest matched detection (a lost track's own box is a prediction)
	start, end geom.Point // normalized anchors: when confirmed, now
	startAt    time.Time
	snapshot   string // the object's evidence in the snapshot store, once taken
}

// sceneResult is what one frame changed.
type sceneResult struct {
	dets    []infer.Detection // the detections kept by the filter, in the result's order
	ids     []uint64          // ids[i]: the track id of dets[i], 0 when none
	dropped analytics.Dropped
	objects []objectReport
	zones   []analytics.ZoneEvent
	lines   []analytics.LineEvent
}

// newScene returns the scene of settings, with track ids from firstID.
func newScene(settings analytics.Config, firstID uint64) (*scene, error) {
	tr, err := track.New(track.Config{}, firstID)
	if err != nil {
		return nil, err
	}
	motion, err := analytics.NewMotion(0, 0, settings.Objects.Anchor)
	if err != nil {
		return nil, err
	}
	s := &scene{tracker: tr, motion: motion, objects: map[uint64]*sceneObject{}}
	if err := s.apply(settings); err != nil {
		return nil, err
	}
	return s, nil
}

// apply changes the scene's settings: the filter is rebuilt, zones and lines whose
// definition is unchanged keep their state, the tracks go on.
func (s *scene) apply(settings analytics.Config) error {
	f, err := analytics.NewFilter(settings.Objects, settings.Masks)
	if err != nil {
		return err
	}
	if s.zones == nil {
		if s.zones, err = analytics.NewZoneSet(settings.Zones); err != nil {
			return err
		}
		if s.lines, err = analytics.NewLineSet(settings.Lines); err != nil {
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
	s.filter, s.settings = f, settings
	return nil
}

// step runs one analysed frame of w x h pixels captured at `at` through the scene. dets is
// the worker's result; the kept detections are moved to its front.
func (s *scene) step(at time.Time, w, h int, dets []infer.Detection) (sceneResult, error) {
	var res sceneResult
	res.dets, res.dropped = s.filter.Apply(dets, w, h)
	if !at.After(s.last) && !s.last.IsZero() {
		if s.last.Sub(at) > sceneTimeSlack {
			res.objects = s.endAll(at, w, h, res.objects)
			s.last = time.Time{}
		} else {
			at = s.last.Add(time.Millisecond)
		}
	}
	tr, err := s.tracker.Update(at, w, h, res.dets)
	if err != nil {
		return res, fmt.Errorf("tracker: %w", err)
	}
	s.last = at
	s.tracks = tr.Tracks
	res.ids = tr.IDs

	f := &s.frame
	f.Time, f.W, f.H = at, w, h
	f.Objects = f.Objects[:0]
	for _, t := range tr.Tracks {
		if t.ID != 0 && t.Matched {
			f.Objects = append(f.Objects, analytics.Object{TrackID: t.ID, Label: t.Label, Box: t.Box})
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

	if res.zones, err = s.zones.Update(*f); err != nil {
		return res, err
	}
	if res.lines, err = s.lines.Update(*f); err != nil {
		return res, err
	}
	moves, err := s.motion.Update(*f)
	if err != nil {
		return res, err
	}

	// Object events: confirmed, changed (zones, motion, or quiet for the interval), ended.
	anchor := s.settings.Objects.Anchor
	byID := make(map[uint64]track.Track, len(tr.Tracks))
	for _, t := range tr.Tracks {
		if t.ID != 0 {
			byID[t.ID] = t
		}
	}
	for _, t := range tr.New {
		p := normAnchor(anchor, t.Box, w, h)
		s.objects[t.ID] = &sceneObject{start: p, startAt: at, lastBox: t.Box}
		res.objects = s.report(res.objects, sinks.ObjectNew, nil, t, w, h)
	}
	changed := map[uint64][]string{}
	for _, z := range res.zones {
		switch {
		case z.Ended: // the end event says it
		case z.Type == analytics.ZoneEnter:
			changed[z.TrackID] = appendNew(changed[z.TrackID], sinks.WhyZoneEnter)
		case z.Type == analytics.ZoneExit:
			changed[z.TrackID] = appendNew(changed[z.TrackID], sinks.WhyZoneExit)
		}
	}
	for _, m := range moves {
		if o := s.objects[m.TrackID]; o != nil {
			o.stationary = m.Stationary
		}
		why := sinks.WhyMoving
		if m.Stationary {
			why = sinks.WhyStationary
		}
		changed[m.TrackID] = appendNew(changed[m.TrackID], why)
	}
	for _, t := range tr.Tracks {
		o := s.objects[t.ID]
		if t.ID == 0 || o == nil || o.lastEvent.Equal(at) {
			continue // tentative, or its `new` event is this frame's
		}
		why := changed[t.ID]
		if len(why) == 0 && at.Sub(o.lastEvent) >= s.settings.Objects.Interval() {
			why = []string{sinks.WhyInterval}
		}
		if len(why) > 0 {
			res.objects = s.report(res.objects, sinks.ObjectUpdate, why, t, w, h)
		}
	}
	for _, t := range tr.Ended {
		if s.objects[t.ID] != nil {
			res.objects = s.report(res.objects, sinks.ObjectEnd, nil, t, w, h)
			delete(s.objects, t.ID)
		}
	}
	return res, nil
}

// endAll ends every track (the camera's clock went back), reporting their end.
func (s *scene) endAll(at time.Time, w, h int, out []objectReport) []objectReport {
	ended := s.tracker.EndAll()
	ids := make([]uint64, 0, len(ended))
	for _, t := range ended {
		ids = append(ids, t.ID)
	}
	f := analytics.Frame{Time: s.last, W: w, H: h, Ended: ids}
	s.zones.Update(f)  //nolint:errcheck // the size is positive: only a bad size fails
	s.lines.Update(f)  //nolint:errcheck
	s.motion.Update(f) //nolint:errcheck
	for _, t := range ended {
		if s.objects[t.ID] != nil {
			out = s.report(out, sinks.ObjectEnd, nil, t, w, h)
			delete(s.objects, t.ID)
		}
	}
	return out
}

// report appends the object event of type change (new, update or end) of t; why gives an
// update's reasons.
func (s *scene) report(out []objectReport, change string, why []string, t track.Track, w, h int) []objectReport {
	o := s.objects[t.ID]
	at := t.LastSeen
	if change != sinks.ObjectEnd {
		at = s.frame.Time
	}
	o.lastEvent = at
	o.events++
	s.presence = s.zones.Presence(t.ID, s.presence[:0])
	return append(out, objectReport{
		change:     change,
		why:        why,
		track:      t,
		seq:        o.events,
		zones:      append([]analytics.Presence(nil), s.presence...),
		stationary: o.stationary,
		box:        o.lastBox,
		start:      o.start,
		end:        normAnchor(s.settings.Objects.Anchor, o.lastBox, w, h), // where it was last seen
		startAt:    o.startAt,
		snapshot:   o.snapshot,
	})
}

// normAnchor is the anchor of box b in normalized coordinates of a w x h frame.
func normAnchor(a analytics.Anchor, b geom.Box, w, h int) geom.Point {
	p := a.Point(b)
	return geom.Point{X: p.X / float64(w), Y: p.Y / float64(h)}
}

// heading is the direction of travel from a to b, in degrees clockwise from the frame's
// right (0 right, 90 down, 180 left, 270 up), and the distance as a fraction of the frame's
// diagonal, for frames of w x h pixels.
func heading(a, b geom.Point, w, h int) (deg, dist float64) {
	dx, dy := (b.X-a.X)*float64(w), (b.Y-a.Y)*float64(h)
	deg = math.Mod(math.Atan2(dy, dx)*180/math.Pi+360, 360)
	return deg, math.Hypot(dx, dy) / math.Hypot(float64(w), float64(h))
}
