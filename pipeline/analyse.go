package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/analytics/track"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/sinks"
)

// sceneStore keeps what a camera's analytics must find again after a restart (line counts,
// the next track id) and the present state a dashboard reads (zone occupancy): the site's
// JetStream key-value bucket, *sinks.State. Its writes never block.
type sceneStore interface {
	PutOccupancy(camera, zone string, byClass map[string]int) error
	PutLineCounts(camera string, counts []sinks.LineCount) error
	PutNextTrackID(camera string, next uint64) error
	LineCounts(ctx context.Context, camera string) ([]sinks.LineCount, error)
	NextTrackID(ctx context.Context, camera string) (uint64, error)
}

// snapshotStore keeps each tracked object's evidence, a JPEG of its best frame with its box:
// the site's JetStream object store, *sinks.Snapshots. PutSnapshot never blocks.
type snapshotStore interface {
	PutSnapshot(name string, jpeg []byte) error
}

// Evidence is taken from the frames the snapshot keeps (one a second per camera): a frame
// replaces an object's evidence when the object scores at least evidenceBetter more in it
// than in the one taken, at most once per evidenceEvery, and only where its box is inside the
// frame (not cut by an edge).
const (
	evidenceBetter = 0.05
	evidenceEvery  = 5 * time.Second
	evidenceMargin = 2 // pixels from the frame's edges
)

// takeEvidence stores the evidence of the objects of camera c for which the frame just
// analysed (seq, kept by the snapshot) is better than what was taken, and names it in this
// frame's object events that did not name one yet.
func (s *slicer) takeEvidence(c *camera, seq uint64, w, h int, res *sceneResult) {
	sc := c.scene
	at := sc.last
	for _, t := range sc.tracks {
		o := sc.objects[t.ID]
		if t.ID == 0 || !t.Matched || o == nil {
			continue
		}
		if o.snapshot != "" && (t.Score < o.snapshotScore+evidenceBetter || at.Sub(o.snapshotAt) < evidenceEvery) {
			continue
		}
		b := t.Box
		if b.X < evidenceMargin || b.Y < evidenceMargin || b.X+b.W > float64(w-evidenceMargin) || b.Y+b.H > float64(h-evidenceMargin) {
			continue
		}
		data, ok, err := c.snap.evidence(seq, infer.Detection{ClassID: t.ClassID, Label: t.Label, Score: t.Score, Box: b}, t.ID)
		if err != nil || !ok {
			if err != nil {
				c.noteError(err)
			}
			return // the frame is not there: none of its objects can be taken
		}
		name := sinks.SnapshotName(c.cfg.ID, t.ID)
		if err := s.snapshots.PutSnapshot(name, data); err != nil {
			c.noteError(err)
			continue
		}
		o.snapshot, o.snapshotScore, o.snapshotAt = name, t.Score, at
		for i := range res.objects {
			if res.objects[i].track.ID == t.ID && res.objects[i].snapshot == "" {
				res.objects[i].snapshot = name
			}
		}
	}
}

// sceneRestoreTimeout bounds the reads of a camera's saved state when its scene starts.
const sceneRestoreTimeout = 2 * time.Second

// liveObject is a followed object as /api/cameras/<id>/objects lists it.
type liveObject struct {
	TrackID    uint64    `json:"track_id"`
	Label      string    `json:"label"`
	State      string    `json:"state"` // confirmed (seen in the latest frame) or lost
	Score      float32   `json:"score"`
	Box        sinks.Box `json:"box"` // its latest matched detection
	FirstSeen  time.Time `json:"first_seen"`
	LastSeen   time.Time `json:"last_seen"`
	Zones      []string  `json:"zones"`
	Stationary bool      `json:"stationary"`
}

// analyse runs a result of camera c through its scene: the filter drops what the camera does
// not want, the tracker gives the rest their track ids, zones, lines and motion say what
// changed. It runs in finish, one job of a camera at a time. The kept detections are moved to
// the front of r.Detections. ok is false when the scene could not run: the result then goes
// out as it came, without track ids.
func (s *slicer) analyse(c *camera, r *infer.Result) (res sceneResult, ok bool) {
	settings := c.analytics()
	if c.scene == nil {
		sc, err := s.newScene(c.cfg.ID, settings.Analytics)
		if err != nil {
			c.noteError(fmt.Errorf("analytics: %w", err))
			return res, false
		}
		c.scene, c.sceneFor = sc, settings
	} else if c.sceneFor != settings {
		if err := c.scene.apply(settings.Analytics); err != nil {
			// Checked before the reload put them in force: not expected.
			c.noteError(fmt.Errorf("analytics: new settings: %w", err))
		}
		c.sceneFor = settings
	}
	w, h := r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH
	res, err := c.scene.step(r.Job.Captured, w, h, r.Detections)
	if err != nil {
		c.noteError(fmt.Errorf("analytics: %w", err))
		return res, false
	}
	live := c.scene.liveObjects()
	c.objects.Store(&live)
	st := c.sceneState.Load()
	if st == nil || len(res.zones) > 0 || len(res.lines) > 0 || c.sceneFor != st.settings || st.tracked != len(live) {
		st = &sceneState{settings: c.sceneFor, tracked: len(live), occupancy: c.scene.zones.Occupancy(), counts: c.scene.lines.Counts()}
		c.sceneState.Store(st)
	}
	return res, true
}

// sceneState is a camera's analytics state for /metrics; never changed once stored.
type sceneState struct {
	settings  *analyticsSettings // the settings it was taken under
	tracked   int                // confirmed tracks followed
	occupancy []analytics.Occupancy
	counts    []analytics.Count
}

// newScene starts the scene of camera, its line counts and track ids carried on from the
// state bucket (when there is one and it answers in time).
func (s *slicer) newScene(camera string, settings analytics.Config) (*scene, error) {
	var firstID uint64
	var saved []sinks.LineCount
	if s.state != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sceneRestoreTimeout)
		var err error
		if firstID, err = s.state.NextTrackID(ctx, camera); err != nil {
			s.log.Warn("analytics: next track id not read; ids start from 1", "camera", camera, "err", err)
		}
		if saved, err = s.state.LineCounts(ctx, camera); err != nil {
			s.log.Warn("analytics: line counts not read; they start from 0", "camera", camera, "err", err)
		}
		cancel()
	}
	sc, err := newScene(settings, firstID)
	if err != nil {
		return nil, err
	}
	if len(saved) > 0 {
		counts := make([]analytics.Count, len(saved))
		for i, lc := range saved {
			counts[i] = analytics.Count{Line: lc.Line, Fingerprint: lc.Fingerprint, Direction: analytics.Direction(lc.Direction), Class: lc.Class, N: lc.N}
		}
		n := sc.lines.Restore(counts)
		s.log.Info("analytics: line counts restored", "camera", camera, "counts", n)
	}
	return sc, nil
}

// publishScene publishes what a frame changed in camera c's scene (object, zone and line
// events) and stores the new state (next track id, occupancy, line counts).
func (s *slicer) publishScene(c *camera, o eventOrigin, res sceneResult, w, h int) {
	id := c.cfg.ID
	var errs []error
	for _, rep := range res.objects {
		errs = append(errs, s.pub.PublishObject(objectEvent(o, id, rep, w, h)))
	}
	if len(res.zones) > 0 {
		occ := map[string]map[string]int{}
		for _, z := range c.scene.zones.Occupancy() {
			occ[z.Zone] = z.ByClass
		}
		for _, z := range res.zones {
			errs = append(errs, s.pub.PublishZone(&sinks.ZoneEvent{
				Version: sinks.Version, Site: o.site, Camera: id, Type: string(z.Type), Zone: z.Zone,
				TrackID: z.TrackID, Label: z.Label, At: z.Time, Since: z.Since, DwellS: z.Dwell.Seconds(),
				Ended: z.Ended, Occupancy: nonNil(occ[z.Zone]),
			}))
		}
		if s.state != nil {
			for zone, byClass := range occ {
				errs = append(errs, s.state.PutOccupancy(id, zone, byClass))
			}
			// Zones that emptied are no longer in Occupancy's list.
			for _, z := range res.zones {
				if _, ok := occ[z.Zone]; !ok {
					occ[z.Zone] = nil
					errs = append(errs, s.state.PutOccupancy(id, z.Zone, nil))
				}
			}
		}
	}
	if len(res.lines) > 0 {
		all := c.scene.lines.Counts()
		for _, l := range res.lines {
			counts := map[string]map[string]uint64{}
			for _, n := range all {
				if n.Line == l.Line {
					if counts[string(n.Direction)] == nil {
						counts[string(n.Direction)] = map[string]uint64{}
					}
					counts[string(n.Direction)][n.Class] = n.N
				}
			}
			errs = append(errs, s.pub.PublishLine(&sinks.LineEvent{
				Version: sinks.Version, Site: o.site, Camera: id, Line: l.Line, TrackID: l.TrackID, Label: l.Label,
				Direction: string(l.Direction), At: l.Time, Point: sinks.Point{X: l.At.X, Y: l.At.Y}, Counts: counts,
			}))
		}
		if s.state != nil {
			saved := make([]sinks.LineCount, 0, len(all))
			for _, n := range all {
				saved = append(saved, sinks.LineCount{Line: n.Line, Fingerprint: n.Fingerprint, Direction: string(n.Direction), Class: n.Class, N: n.N})
			}
			errs = append(errs, s.state.PutLineCounts(id, saved))
		}
	}
	if s.state != nil && slices.ContainsFunc(res.objects, func(r objectReport) bool { return r.change == sinks.ObjectNew }) {
		errs = append(errs, s.state.PutNextTrackID(id, c.scene.tracker.NextID()))
	}
	if err := errors.Join(errs...); err != nil {
		c.noteError(err)
	}
}

// objectEvent is the object event of rep on camera, for frames of w x h pixels.
func objectEvent(o eventOrigin, camera string, rep objectReport, w, h int) *sinks.ObjectEvent {
	t := rep.track
	ev := &sinks.ObjectEvent{
		Version:   sinks.Version,
		ID:        sinks.ObjectEventID(o.instance, camera, t.ID, rep.seq),
		Site:      o.site,
		Camera:    camera,
		Type:      rep.change,
		Why:       rep.why,
		TrackID:   t.ID,
		Label:     t.Label,
		ClassID:   t.ClassID,
		FirstSeen: t.FirstSeen,
		LastSeen:  t.LastSeen,
		Box:       pixelBox(rep.box),
		BoxNorm:   normBox(rep.box, w, h),
		Score:     t.Score,
		Best: sinks.Best{
			Box: pixelBox(t.BestBox), BoxNorm: normBox(t.BestBox, w, h), Score: t.BestScore, At: t.BestAt,
		},
		Zones:      []string{},
		Stationary: rep.stationary,
		Path:       sinks.NewPath(sinks.Point{X: rep.start.X, Y: rep.start.Y}, sinks.Point{X: rep.end.X, Y: rep.end.Y}, w, h),
		Snapshot:   rep.snapshot,
	}
	for _, p := range rep.zones {
		if p.Inside {
			ev.Zones = append(ev.Zones, p.Zone)
		}
		if p.Total > 0 {
			if ev.ZoneSeconds == nil {
				ev.ZoneSeconds = map[string]float64{}
			}
			ev.ZoneSeconds[p.Zone] = p.Total.Seconds()
		}
	}
	return ev
}

// liveObjects lists the scene's followed objects (confirmed and lost), for the HTTP API.
func (s *scene) liveObjects() []liveObject {
	out := []liveObject{}
	var pres []analytics.Presence
	for _, t := range s.tracks {
		if t.ID == 0 {
			continue
		}
		state := "confirmed"
		if t.State == track.Lost {
			state = "lost"
		}
		lo := liveObject{
			TrackID: t.ID, Label: t.Label, State: state, Score: t.Score, Box: pixelBox(t.Box),
			FirstSeen: t.FirstSeen, LastSeen: t.LastSeen, Zones: []string{},
		}
		if o := s.objects[t.ID]; o != nil {
			lo.Stationary = o.stationary
			lo.Box = pixelBox(o.lastBox) // a lost track's own box is a prediction
		}
		pres = s.zones.Presence(t.ID, pres[:0])
		for _, p := range pres {
			if p.Inside {
				lo.Zones = append(lo.Zones, p.Zone)
			}
		}
		out = append(out, lo)
	}
	return out
}

// forMode returns ev's detections that mode publishes (all, or those of confirmed tracks),
// and whether the event is published at all.
func forMode(mode config.DetectionEvents, dets []sinks.Detection) ([]sinks.Detection, bool) {
	switch mode {
	case config.DetectionsOff:
		return nil, false
	case config.DetectionsTracked:
		kept := dets[:0]
		for _, d := range dets {
			if d.TrackID != 0 {
				kept = append(kept, d)
			}
		}
		return kept, true
	}
	return dets, true
}

// pixelBox is b as events carry it, in source-frame pixels.
func pixelBox(b geom.Box) sinks.Box { return sinks.Box{X: b.X, Y: b.Y, W: b.W, H: b.H} }

// normBox is b as a fraction of a w x h frame.
func normBox(b geom.Box, w, h int) sinks.Box {
	fw, fh := float64(w), float64(h)
	return sinks.Box{X: b.X / fw, Y: b.Y / fh, W: b.W / fw, H: b.H / fh}
}

func nonNil(m map[string]int) map[string]int {
	if m == nil {
		return map[string]int{}
	}
	return maps.Clone(m)
}
