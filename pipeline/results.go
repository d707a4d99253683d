package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/sinks"
)

// publisher publishes the events of results; *sinks.Publisher is the real one, which stamps
// their version, site and id.
type publisher interface {
	PublishDetections(ev *sinks.DetectionEvent) error
	PublishObject(ev *sinks.ObjectEvent) error
	PublishZone(ev *sinks.ZoneEvent) error
	PublishLine(ev *sinks.LineEvent) error
}

// sceneStore keeps what a camera's analytics must find again after a restart (line counts,
// the next track id) and the present state a dashboard reads (zone occupancy): the site's
// JetStream key-value bucket, *sinks.State. Its writes never block.
type sceneStore interface {
	PutOccupancy(camera, zone string, byClass map[string]int) error
	PutLineCounts(camera string, counts []analytics.Count) error
	PutNextTrackID(camera string, next uint64) error
	LineCounts(ctx context.Context, camera string) ([]analytics.Count, error)
	NextTrackID(ctx context.Context, camera string) (uint64, error)
}

// snapshotStore keeps each tracked object's evidence, a JPEG of its best frame with its box:
// the site's JetStream object store, *sinks.Snapshots. PutSnapshot never blocks.
type snapshotStore interface {
	PutSnapshot(name string, jpeg []byte) error
}

// results is the result stage: what happens to a worker's result. For each job of a camera
// it counts the job's outcome, runs the result through the camera's scene (the filter,
// tracker, zones, lines and motion, and the life of its objects: analytics.Scene), takes the
// objects' evidence, builds the detection, object, zone and line events (package sinks'
// constructors), publishes them and writes the camera's state. It runs on the pool's
// goroutine that ends the job, one job of a camera at a time (the slicer dispatches one per
// camera), so a camera's scene is only ever used by one goroutine at a time and holds no lock.
type results struct {
	pub       publisher
	state     sceneStore    // nil without JetStream: the analytics' state is then not kept
	snapshots snapshotStore // nil without JetStream: no evidence is kept
	log       *slog.Logger
}

// jobRun is what the slicer knows of a job besides what its result carries.
type jobRun struct {
	received   time.Time // the frame was decoded
	dispatched time.Time // handed to a worker
	model      string    // the name of the model of the pools that ran it
}

// latency is the time job j with result r spent in each stage, measured on this host's
// clock from when its frame was decoded until published.
func (j jobRun) latency(r infer.Result, published time.Time) sinks.Latency {
	return sinks.Latency{
		Queue: ms(j.dispatched.Sub(j.received)),
		Pre:   ms(r.Pre),
		Infer: ms(r.Run),
		Post:  ms(r.Post),
		Total: ms(published.Sub(j.received)),
	}
}

// finish takes the result r of camera c's job: a failed job is counted by its cause; a
// result is analysed, counted and published.
func (rs *results) finish(c *camera, j jobRun, r infer.Result) {
	if r.Err != nil {
		switch {
		case errors.Is(r.Err, infer.ErrPoolClosed): // cut off by shutdown after the drain timed out
			c.shutdown.Add(1)
		case errors.Is(r.Err, infer.ErrJobTimeout):
			c.timeouts.Add(1)
		case errors.Is(r.Err, infer.ErrJobRejected):
			c.rejected.Add(1)
		default:
			c.lost.Add(1)
		}
		c.noteError(r.Err)
		return
	}
	published := time.Now()
	step, analysed := rs.analyse(c, &r)
	dets, ids := r.Detections, []uint64(nil)
	if analysed {
		dets, ids = step.Dets, step.IDs
	}
	ev := sinks.NewDetectionEvent(c.cfg.ID, j.model, r, dets, ids, published, j.latency(r, published))
	c.countResult(ev)
	kept := c.snap.result(r.Job.Seq, dets, ids, c.sceneState.Load())
	c.inferAge.observe(r.Run)
	c.total.observe(published.Sub(j.received))
	c.fps.tick(published)
	var publish bool
	if ev.Detections, publish = forMode(c.analytics().Events.DetectionMode(), ev.Detections); publish {
		if err := rs.pub.PublishDetections(ev); err != nil {
			c.noteError(err)
		}
	}
	if analysed {
		w, h := r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH
		if kept && rs.snapshots != nil {
			rs.takeEvidence(c, r.Job.Seq, w, h, &step)
		}
		rs.publishScene(c, step, w, h)
	}
}

// analyse runs a result of camera c through its scene. The kept detections are moved to
// the front of r.Detections. ok is false when the scene could not run: the result then goes
// out as it came, without track ids.
func (rs *results) analyse(c *camera, r *infer.Result) (step analytics.StepResult, ok bool) {
	settings := c.analytics()
	if c.scene == nil {
		sc, err := rs.newScene(c.cfg.ID, settings.Analytics)
		if err != nil {
			c.noteError(fmt.Errorf("analytics: %w", err))
			return step, false
		}
		c.scene, c.sceneFor = sc, settings
	} else if c.sceneFor != settings {
		if err := c.scene.Apply(settings.Analytics); err != nil {
			// Checked before the reload put them in force: not expected.
			c.noteError(fmt.Errorf("analytics: new settings: %w", err))
		}
		c.sceneFor = settings
	}
	w, h := r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH
	step, err := c.scene.Step(r.Job.Captured, w, h, r.Detections)
	if err != nil {
		c.noteError(fmt.Errorf("analytics: %w", err))
		return step, false
	}
	c.countFiltered(step.Dropped)
	live := liveObjects(c.scene.Live())
	c.objects.Store(&live)
	st := c.sceneState.Load()
	if st == nil || len(step.Zones) > 0 || len(step.Lines) > 0 || c.sceneFor != st.settings || st.tracked != len(live) {
		st = &sceneState{settings: c.sceneFor, tracked: len(live), occupancy: c.scene.Occupancy(), counts: c.scene.Counts()}
		c.sceneState.Store(st)
	}
	return step, true
}

// sceneRestoreTimeout bounds the reads of a camera's saved state when its scene starts.
const sceneRestoreTimeout = 2 * time.Second

// newScene starts the scene of camera, its line counts and track ids carried on from the
// state bucket (when there is one and it answers in time).
func (rs *results) newScene(camera string, settings analytics.Config) (*analytics.Scene, error) {
	var firstID uint64
	var saved []analytics.Count
	if rs.state != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sceneRestoreTimeout)
		var err error
		if firstID, err = rs.state.NextTrackID(ctx, camera); err != nil {
			rs.log.Warn("analytics: next track id not read; ids start from 1", "camera", camera, "err", err)
		}
		if saved, err = rs.state.LineCounts(ctx, camera); err != nil {
			rs.log.Warn("analytics: line counts not read; they start from 0", "camera", camera, "err", err)
		}
		cancel()
	}
	sc, err := analytics.NewScene(settings, firstID)
	if err != nil {
		return nil, err
	}
	if len(saved) > 0 {
		n := sc.Restore(saved)
		rs.log.Info("analytics: line counts restored", "camera", camera, "counts", n)
	}
	return sc, nil
}

// takeEvidence stores the evidence of the objects of camera c for which the frame just
// analysed (seq, kept by the snapshot) is better than what was taken, and names it in this
// frame's reports that did not name one yet.
func (rs *results) takeEvidence(c *camera, seq uint64, w, h int, step *analytics.StepResult) {
	c.evidence = c.scene.EvidenceWanted(c.evidence[:0], w, h)
	for _, t := range c.evidence {
		data, ok, err := c.snap.evidence(seq, infer.Detection{ClassID: t.ClassID, Label: t.Label, Score: t.Score, Box: t.Box}, t.ID)
		if err != nil || !ok {
			if err != nil {
				c.noteError(err)
			}
			return // the frame is not there: none of its objects can be taken
		}
		name := sinks.SnapshotName(c.cfg.ID, t.ID)
		if err := rs.snapshots.PutSnapshot(name, data); err != nil {
			c.noteError(err)
			continue
		}
		c.scene.Evidenced(t, name)
		for i := range step.Objects {
			if o := &step.Objects[i]; o.Track.ID == t.ID && o.Evidence == "" {
				o.Evidence = name
			}
		}
	}
	clear(c.evidence) // keep no tracks past the frame; keep the capacity
}

// publishScene publishes what a frame changed in camera c's scene (object, zone and line
// events) and stores the new state (next track id, occupancy, line counts).
func (rs *results) publishScene(c *camera, step analytics.StepResult, w, h int) {
	id := c.cfg.ID
	var errs []error
	for _, rep := range step.Objects {
		errs = append(errs, rs.pub.PublishObject(sinks.NewObjectEvent(id, rep, w, h)))
	}
	if len(step.Zones) > 0 {
		occ := map[string]map[string]int{}
		for _, z := range c.scene.Occupancy() {
			occ[z.Zone] = z.ByClass
		}
		for _, z := range step.Zones {
			errs = append(errs, rs.pub.PublishZone(sinks.NewZoneEvent(id, z, occ[z.Zone])))
		}
		if rs.state != nil {
			for zone, byClass := range occ {
				errs = append(errs, rs.state.PutOccupancy(id, zone, byClass))
			}
			// Zones that emptied are no longer in Occupancy's list.
			for _, z := range step.Zones {
				if _, ok := occ[z.Zone]; !ok {
					occ[z.Zone] = nil
					errs = append(errs, rs.state.PutOccupancy(id, z.Zone, nil))
				}
			}
		}
	}
	if len(step.Lines) > 0 {
		all := c.scene.Counts()
		for _, l := range step.Lines {
			errs = append(errs, rs.pub.PublishLine(sinks.NewLineEvent(id, l, all)))
		}
		if rs.state != nil {
			errs = append(errs, rs.state.PutLineCounts(id, all))
		}
	}
	if rs.state != nil && slices.ContainsFunc(step.Objects, func(r analytics.ObjectReport) bool { return r.Change == analytics.ObjectNew }) {
		errs = append(errs, rs.state.PutNextTrackID(id, c.scene.NextID()))
	}
	if err := errors.Join(errs...); err != nil {
		c.noteError(err)
	}
}

// sceneState is a camera's analytics state for /metrics and the snapshot; never changed
// once stored.
type sceneState struct {
	settings  *analyticsSettings // the settings it was taken under
	tracked   int                // confirmed tracks followed
	occupancy []analytics.Occupancy
	counts    []analytics.Count
}

// liveObject is a followed object as /api/cameras/<id>/objects lists it.
type liveObject struct {
	TrackID    uint64    `json:"track_id"`
	Label      string    `json:"label"`
	State      string    `json:"state"` // confirmed (seen in the latest frame) or lost (track.State)
	Score      float32   `json:"score"`
	Box        sinks.Box `json:"box"` // its latest matched detection
	FirstSeen  time.Time `json:"first_seen"`
	LastSeen   time.Time `json:"last_seen"`
	Zones      []string  `json:"zones"`
	Stationary bool      `json:"stationary"`
}

// liveObjects are a scene's followed objects as the API lists them.
func liveObjects(live []analytics.LiveObject) []liveObject {
	out := make([]liveObject, 0, len(live))
	for _, o := range live {
		t := o.Track
		out = append(out, liveObject{
			TrackID: t.ID, Label: t.Label, State: t.State.String(), Score: t.Score, Box: sinks.PixelBox(o.Box),
			FirstSeen: t.FirstSeen, LastSeen: t.LastSeen, Zones: o.Zones, Stationary: o.Stationary,
		})
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
