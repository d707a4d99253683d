package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/clips"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/sinks"
)

// EventSink receives the events of results, in the order the daemon publishes them, built
// by package sinks' constructors (sinks.NewDetectionEvent etc.). *sinks.Publisher is the
// daemon's, which stamps their version, site and id; Replay's caller gives its own.
type EventSink interface {
	PublishDetections(ev *sinks.DetectionEvent) error
	PublishObject(ev *sinks.ObjectEvent) error
	PublishZone(ev *sinks.ZoneEvent) error
	PublishLine(ev *sinks.LineEvent) error
}

// sceneStore keeps what a camera's analytics must find again after a restart (line counts,
// the track ids given) and the present state a dashboard reads (zone occupancy): the site's
// JetStream key-value bucket, *sinks.State. Its Put and Delete writes never block;
// ReserveTrackIDs and ForgetCamera wait for the server (within their ctx).
type sceneStore interface {
	idStore
	PutOccupancy(camera, zone string, byClass map[string]int) error
	PutLineCounts(camera string, counts []analytics.Count) error
	DeleteZone(camera, zone string) error
	DeleteLine(camera, line string) error
	ForgetCamera(ctx context.Context, camera string) error
	LineCounts(ctx context.Context, camera string) ([]analytics.Count, error)
	Occupancy(ctx context.Context, camera string) (map[string]sinks.Occupancy, error)
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
// constructors), publishes them and writes the camera's state. It runs on the goroutines of
// the daemon's stage (stage.go), one job of a camera at a time (the slicer dispatches one
// per camera), and owns the camera's stageState. The camera's life ends its objects from the
// daemon's run goroutine (endCamera, retire, sweep: offline, removed, restarted, shutdown),
// so a camera's stageState is guarded by its sceneMu, held for a result's analysis and
// publication (no network wait: publishes and state writes queue).
type results struct {
	pub       EventSink
	state     sceneStore    // nil without JetStream: the analytics' state is then not kept
	snapshots snapshotStore // nil without JetStream: no evidence is kept
	ids       idStore       // reserves the blocks of track ids; nil: the state bucket, or the clock without one (trackids.go)
	clips     clipStore     // nil without JetStream: no clips are made (clips.go)
	clipDir   string        // where recorders write their clips, on the store's filesystem
	budget    *memoryBudget // the memory budget: the clip rings' shares of it; nil: no budget
	log       *slog.Logger

	clipCams atomic.Int32 // cameras with a recorder: they share the rings' part of the budget

	wg sync.WaitGroup // reservations of track ids and forgetting of removed cameras; close waits

	mu         sync.Mutex
	forgetting map[string]chan struct{} // by camera id: its keys are being deleted; closed when done
	// removed holds, by camera id, the next track id of each camera removed while the daemon
	// runs: added again, its ids go on from there, not from 1 (its forgotten counter's start),
	// which would repeat its old objects' track ids and event ids (JetStream would drop the
	// new events as duplicates of the old).
	removed map[string]uint64
}

// jobRun is what the slicer knows of a job besides what its result carries.
type jobRun struct {
	received   time.Time     // the frame was decoded
	dispatched time.Time     // handed to a worker
	model      string        // the name of the model of the pools that ran it
	interval   time.Duration // the camera's 1/fps at dispatch: the result stage's copy (stageState.interval)
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
	c.sceneMu.Lock()
	defer c.sceneMu.Unlock()
	if j.interval > 0 {
		c.stage.interval = j.interval
	}
	published := time.Now()
	step, analysed := rs.analyse(c, &r, published)
	dets, ids := r.Detections, []uint64(nil)
	if analysed {
		dets, ids = step.Dets, step.IDs
	}
	ev := sinks.NewDetectionEvent(c.cfg.ID, j.model, r, dets, ids, published, j.latency(r, published))
	c.countResult(ev)
	if c.feed.watched() { // before forMode: the feed shows every detection of the frame
		c.feed.send(frameMessage(ev, c.sceneState.Load()))
	}
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
		if rs.snapshots != nil {
			rs.takeEvidence(c, r.Job.Seq, kept, w, h, &step)
		}
		rs.publishScene(c, step, w, h)
	}
	c.snap.settle(published) // the frame kept goes back, unless a client watches the camera
}

// analyse runs a result of camera c through its scene (under c.sceneMu), at now. The kept
// detections are moved to the front of r.Detections. ok is false when the scene could not
// run, or the camera's life has ended (retire): the result then goes out as it came,
// without track ids.
func (rs *results) analyse(c *camera, r *infer.Result, now time.Time) (step analytics.StepResult, ok bool) {
	if c.stage.retired {
		return step, false
	}
	settings := c.analytics()
	w, h := r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH
	if c.stage.scene == nil {
		sc, ids, err := rs.newScene(c.cfg.ID, settings.Analytics, now)
		if err != nil {
			c.noteError(fmt.Errorf("analytics: %w", err))
			return step, false
		}
		c.stage.scene, c.stage.sceneFor, c.stage.ids = sc, settings, ids
	} else if c.stage.sceneFor != settings {
		left, err := c.stage.scene.Reconfigure(settings.Analytics)
		if err != nil {
			// Checked before the reload put them in force: not expected.
			c.noteError(fmt.Errorf("analytics: new settings: %w", err))
		} else {
			rs.publishScene(c, left, w, h) // the exits of a removed or changed zone's members
			rs.forgetRemoved(c.cfg.ID, c.stage.sceneFor.Analytics, settings.Analytics)
		}
		c.stage.sceneFor = settings
	}
	c.stage.ids.prepare(c.stage.scene, len(r.Detections), now)
	step, err := c.stage.scene.Step(r.Job.Captured, w, h, r.Detections)
	if err != nil {
		c.noteError(fmt.Errorf("analytics: %w", err))
		return step, false
	}
	c.stage.stepped, c.stage.frameW, c.stage.frameH = now, w, h
	c.countFiltered(step.Dropped)
	rs.noteScene(c, len(step.Zones) > 0 || len(step.Lines) > 0)
	return step, true
}

// noteScene stores camera c's followed objects for the API and, when they or its zones and
// lines changed, its analytics state for /metrics and the snapshot.
func (rs *results) noteScene(c *camera, changed bool) {
	live := liveObjects(c.stage.scene.Live())
	c.objects.Store(&live)
	st := c.sceneState.Load()
	if st == nil || changed || c.stage.sceneFor != st.settings || st.tracked != len(live) {
		st = &sceneState{settings: c.stage.sceneFor, tracked: len(live), occupancy: c.stage.scene.Occupancy(), counts: c.stage.scene.Counts()}
		c.sceneState.Store(st)
	}
}

// forgetRemoved deletes from the state bucket the keys of camera's zones and lines that a
// reload removed (and of lines it changed, whose counts no longer apply).
func (rs *results) forgetRemoved(camera string, old, now analytics.Config) {
	if rs.state == nil {
		return
	}
	var errs []error
	for _, z := range old.Zones {
		if !slices.ContainsFunc(now.Zones, func(n analytics.Zone) bool { return n.ID == z.ID }) {
			errs = append(errs, rs.state.DeleteZone(camera, z.ID))
		}
	}
	for _, l := range old.Lines {
		if !slices.ContainsFunc(now.Lines, func(n analytics.Line) bool { return n.ID == l.ID && n.Fingerprint() == l.Fingerprint() }) {
			errs = append(errs, rs.state.DeleteLine(camera, l.ID))
		}
	}
	if err := errors.Join(errs...); err != nil {
		rs.log.Warn("analytics: keys of removed zones or lines not deleted", "camera", camera, "err", err)
	}
}

// sceneRestoreTimeout bounds the reads of a camera's saved state when its scene starts.
const sceneRestoreTimeout = 2 * time.Second

// newScene starts the scene of camera at now: its first block of track ids reserved (from
// the clock when the state bucket does not answer in time: trackIDs), its line counts carried
// on from the bucket, and no ghost occupants: every zone's occupancy is written empty (it is
// rebuilt from what is seen) and the keys of zones and lines no longer configured go.
func (rs *results) newScene(camera string, settings analytics.Config, now time.Time) (*analytics.Scene, *trackIDs, error) {
	store := rs.ids
	if store == nil && rs.state != nil {
		store = rs.state
	}
	ids := newTrackIDs(camera, store, rs.log, &rs.wg)
	rs.mu.Lock()
	forgetting := rs.forgetting[camera]
	after := rs.removed[camera]
	delete(rs.removed, camera) // from now on its counter in the bucket holds it
	rs.mu.Unlock()
	if forgetting != nil { // removed and added again: its old keys go first, then its new ones come
		<-forgetting // bounded by the forget's timeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), sceneRestoreTimeout)
	defer cancel()
	firstID := ids.first(ctx, now, after)
	sc, err := analytics.NewScene(settings, firstID)
	if err != nil {
		return nil, nil, err
	}
	if rs.state == nil {
		return sc, ids, nil
	}
	saved, err := rs.state.LineCounts(ctx, camera)
	if err != nil {
		rs.log.Warn("analytics: line counts not read; they start from 0", "camera", camera, "err", err)
	}
	if len(saved) > 0 {
		n := sc.Restore(saved)
		rs.log.Info("analytics: line counts restored", "camera", camera, "counts", n)
	}
	var errs []error
	for _, c := range saved {
		if !slices.ContainsFunc(settings.Lines, func(l analytics.Line) bool { return l.ID == c.Line }) {
			errs = append(errs, rs.state.DeleteLine(camera, c.Line))
		}
	}
	for _, z := range settings.Zones {
		errs = append(errs, rs.state.PutOccupancy(camera, z.ID, nil))
	}
	occ, err := rs.state.Occupancy(ctx, camera)
	errs = append(errs, err)
	for zone := range occ {
		if !slices.ContainsFunc(settings.Zones, func(z analytics.Zone) bool { return z.ID == zone }) {
			errs = append(errs, rs.state.DeleteZone(camera, zone))
		}
	}
	if err := errors.Join(errs...); err != nil {
		rs.log.Warn("analytics: the state of the camera's zones and lines not reset", "camera", camera, "err", err)
	}
	return sc, ids, nil
}

// endCamera ends every object of camera c's scene, for why (analytics.WhyCameraOffline, a
// reload's reasons, WhyShutdown, or the end of a replayed video): their end events, their
// zone exits (at the time of the scene's latest frame), the zones' occupancy written empty.
// It takes c.sceneMu: call it from any goroutine but one stepping c's scene. The scene goes
// on afterwards (a camera back online gets new objects); retire also stops it.
func (rs *results) endCamera(c *camera, why analytics.Why) {
	c.sceneMu.Lock()
	defer c.sceneMu.Unlock()
	rs.endLocked(c, why)
}

// endLocked is endCamera under c.sceneMu.
func (rs *results) endLocked(c *camera, why analytics.Why) {
	if c.stage.scene == nil || c.stage.scene.Objects() == 0 { // zone members are objects
		return
	}
	step := c.stage.scene.End(why)
	if len(step.Objects)+len(step.Zones) == 0 {
		return
	}
	rs.publishScene(c, step, c.stage.frameW, c.stage.frameH)
	rs.noteScene(c, true)
}

// retire ends camera c's life in the result stage: its objects end for why (the camera
// removed, disabled or restarted by a reload, or the daemon stopping), and a result that
// comes for it afterwards (a job in flight) is published without analysis. forget also
// removes its keys from the state bucket (a camera removed from the config), once its
// reservation of ids in flight, if any, has ended; it runs on a goroutine of the stage's.
func (rs *results) retire(c *camera, why analytics.Why, forget bool) {
	c.sceneMu.Lock()
	rs.endLocked(c, why)
	closed := clips.ClosedStopped
	if why == analytics.WhyShutdown {
		closed = clips.ClosedShutdown
	}
	rs.stopClips(c, closed)
	c.stage.retired = true
	ids := c.stage.ids
	var next uint64
	if c.stage.scene != nil {
		next = c.stage.scene.NextID()
	}
	c.sceneMu.Unlock()
	if !forget || rs.state == nil {
		return
	}
	done := make(chan struct{})
	rs.mu.Lock()
	if rs.forgetting == nil {
		rs.forgetting, rs.removed = map[string]chan struct{}{}, map[string]uint64{}
	}
	rs.forgetting[c.cfg.ID] = done
	rs.removed[c.cfg.ID] = max(rs.removed[c.cfg.ID], next)
	rs.mu.Unlock()
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		defer func() {
			rs.mu.Lock()
			if rs.forgetting[c.cfg.ID] == done {
				delete(rs.forgetting, c.cfg.ID)
			}
			rs.mu.Unlock()
			close(done)
		}()
		if ids != nil {
			ids.wait() // a block reserved after the forget would leave the key
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := rs.state.ForgetCamera(ctx, c.cfg.ID); err != nil {
			rs.log.Warn("analytics: the state of a removed camera not deleted", "camera", c.cfg.ID, "err", err)
		}
	}()
}

// sweep ends, as camera_offline, the objects of each of cams that has had no frame analysed
// for longer than its tracker's lost buffer (and a frame interval): without frames the
// tracker's clock stands still, and its lost tracks would never end. It runs on the
// daemon's run goroutine, every slice; a camera whose result is being analysed is skipped
// (it is not offline).
func (rs *results) sweep(now time.Time, cams []*camera) {
	for _, c := range cams {
		if !c.sceneMu.TryLock() {
			continue
		}
		if c.stage.scene != nil && !c.stage.retired && c.stage.scene.Objects() > 0 && now.Sub(c.stage.stepped) > c.stage.scene.LostAfter()+c.sched.interval {
			rs.endLocked(c, analytics.WhyCameraOffline)
		}
		c.sceneMu.Unlock()
	}
}

// close waits for the stage's goroutines: reservations of ids and forgets in flight, each
// bounded by its own timeout.
func (rs *results) close() { rs.wg.Wait() }

// takeEvidence stores the evidence of the objects of camera c for which the frame just
// analysed (seq; kept: the snapshot kept it) is better than what was taken, and names it in
// this frame's reports that did not name one yet. Whether any object wanted evidence decides
// whether the camera's next frames are kept.
func (rs *results) takeEvidence(c *camera, seq uint64, kept bool, w, h int, step *analytics.StepResult) {
	c.stage.evidence = c.stage.scene.EvidenceWanted(c.stage.evidence[:0], w, h)
	c.wantsEvidence.Store(len(c.stage.evidence) > 0)
	if !kept {
		clear(c.stage.evidence)
		return
	}
	for _, t := range c.stage.evidence {
		data, ok, err := c.snap.evidence(seq, infer.Detection{ClassID: t.ClassID, Label: t.Label, Score: t.Score, Box: t.Box}, t.ID)
		if err != nil || !ok {
			if err != nil {
				c.noteError(err)
			}
			break // the frame is not there: none of its objects can be taken
		}
		name := sinks.SnapshotName(c.cfg.ID, t.ID, t.FirstSeen)
		if err := rs.snapshots.PutSnapshot(name, data); err != nil {
			c.noteError(err)
			continue
		}
		c.stage.scene.Evidenced(t, name)
		for i := range step.Objects {
			if o := &step.Objects[i]; o.Track.ID == t.ID && o.Evidence == "" {
				o.Evidence = name
			}
		}
	}
	clear(c.stage.evidence) // keep no tracks past the frame; keep the capacity
}

// publishScene publishes what a frame changed in camera c's scene (object, zone and line
// events) and stores the new state (occupancy, line counts).
func (rs *results) publishScene(c *camera, step analytics.StepResult, w, h int) {
	id := c.cfg.ID
	var errs []error
	evs := c.stage.objEvents[:0]
	for _, rep := range step.Objects {
		ev := sinks.NewObjectEvent(id, rep, w, h)
		evs = append(evs, ev)
		errs = append(errs, rs.pub.PublishObject(ev))
	}
	rs.observeClips(c, evs)
	clear(evs)
	c.stage.objEvents = evs[:0]
	if len(step.Zones) > 0 {
		occ := map[string]map[string]int{}
		for _, z := range c.stage.scene.Occupancy() {
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
		all := c.stage.scene.Counts()
		for _, l := range step.Lines {
			errs = append(errs, rs.pub.PublishLine(sinks.NewLineEvent(id, l, all)))
		}
		if rs.state != nil {
			errs = append(errs, rs.state.PutLineCounts(id, all))
		}
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
