package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// dispatcher hands a job to an idle worker, or returns false when none is idle; the
// daemon's workerPools are the real one.
type dispatcher interface {
	TryDispatch(job infer.Job, pix []byte, done func(infer.Result)) bool
}

// publisher publishes detection events and the analytics' events; *sinks.Publisher is the
// real one.
type publisher interface {
	PublishDetections(ev *sinks.DetectionEvent) error
	PublishObject(ev *sinks.ObjectEvent) error
	PublishZone(ev *sinks.ZoneEvent) error
	PublishLine(ev *sinks.LineEvent) error
}

// eventOrigin is what every detection event names besides its camera and frame.
type eventOrigin struct {
	instance string // this run of the daemon, for the event ids
	site     string
	model    string // the model's file name without its extension
}

// slicer is the time-slicer: each round (the daemon's run goroutine calls dispatch) it hands
// jobs for the cameras that are due to idle workers, in start-time fair order, and each
// result becomes a detection event for the publisher. The daemon builds it in Start; cams,
// jobs and maxAge are the run goroutine's, which a reload changes between rounds. finish
// runs on the pools' goroutines and touches only the camera and inflight.
type slicer struct {
	cams      []*camera     // the enabled cameras, in config order
	jobs      dispatcher    // the worker pools in force
	maxAge    time.Duration // pipeline.max_frame_age: an older frame is dropped, counted stale
	pub       publisher
	state     sceneStore    // nil without JetStream: the analytics' state is then not kept
	snapshots snapshotStore // nil without JetStream: no evidence is kept
	origin    eventOrigin   // of the jobs dispatched now: a reload that replaces the pools may change the model
	log       *slog.Logger
	// resized is called when a camera's resolution changed: buffers sized for the old one
	// may sit in the workers' memory arenas. wake asks for another round: a job ended.
	resized, wake func()

	vtime    float64        // virtual time of the fair queue: start of the last job dispatched
	ready    []candidate    // reused by dispatch
	inflight sync.WaitGroup // jobs dispatched and not finished; Close drains it
}

// candidate is a camera ready for a job in this dispatch round.
type candidate struct {
	cam   *camera
	frame *sources.Frame
	start float64 // virtual start time of its job
}

// dispatch hands one job to an idle worker for each camera that is due and has a fresh
// frame, until no worker is idle. The order is start-time fair queuing: each camera has a
// virtual pass that a job advances by 1/weight, and the cameras with the smallest pass go
// first, so under overload each camera gets a share of the workers in proportion to its
// weight (up to its fps) and none starves; a camera that was idle or offline starts at the
// current virtual time instead of catching up in a burst.
func (s *slicer) dispatch(now time.Time) {
	ready := s.ready[:0]
	for _, c := range s.cams {
		if c.busy.Load() || c.nextDue.Sub(now) > c.slack {
			continue
		}
		f := c.box.Take()
		if f == nil {
			continue
		}
		if now.Sub(f.Received) > s.maxAge {
			f.Release()
			c.stale.Add(1)
			continue
		}
		ready = append(ready, candidate{c, f, max(c.pass, s.vtime)})
	}
	slices.SortStableFunc(ready, func(a, b candidate) int { return cmp.Compare(a.start, b.start) })
	for i, r := range ready {
		c, f := r.cam, r.frame
		job := infer.Job{Camera: c.cfg.ID, Seq: f.Seq, Captured: f.Captured, Letterbox: f.Letterbox}
		c.busy.Store(true)
		received := f.Received
		// The round's now may precede a frame that arrived during the round: take the
		// dispatch time per job, so that a frame's queue time is never negative.
		dispatched := time.Now()
		s.inflight.Add(1)
		c.snap.offer(f.Pix, f.Letterbox, f.Seq, now)
		origin := s.origin // the job's own: finish runs on the pool's goroutine, after a reload perhaps
		if !s.jobs.TryDispatch(job, f.Pix, func(res infer.Result) { s.finish(c, origin, res, received, dispatched) }) {
			s.inflight.Done()
			c.busy.Store(false)
			for _, r := range ready[i:] { // no worker idle: the frames wait for the next round
				r.cam.box.Restore(r.frame)
			}
			break
		}
		g := [2]int{f.Letterbox.SrcW, f.Letterbox.SrcH}
		f.Release() // TryDispatch copied the pixels into the worker's slot
		if g != c.geometry {
			if c.geometry != [2]int{} {
				s.log.Info("camera resolution changed; shrinking worker memory arenas", "camera", c.cfg.ID,
					"from", fmt.Sprintf("%dx%d", c.geometry[0], c.geometry[1]), "to", fmt.Sprintf("%dx%d", g[0], g[1]))
				s.resized()
			}
			c.geometry = g
		}
		c.pass = r.start + 1/c.cfg.Weight
		s.vtime = r.start
		c.frameAge.observe(dispatched.Sub(received))
		// Keep to the camera's schedule, but never burst to catch up after a gap.
		next := c.nextDue.Add(c.interval)
		if next.Before(now) {
			next = now.Add(c.interval)
		}
		c.schedule(next)
	}
	clear(ready) // drop the frame pointers; keep the capacity
	s.ready = ready[:0]
}

// finish runs on the pool's goroutine when a job ends: a failed job is counted by its
// cause; a result is counted and published as a detection event.
func (s *slicer) finish(c *camera, o eventOrigin, r infer.Result, received, dispatched time.Time) {
	defer s.inflight.Done()
	defer s.wake()
	defer c.busy.Store(false)
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
	res, analysed := s.analyse(c, &r)
	dets, ids := r.Detections, []uint64(nil)
	if analysed {
		dets, ids = res.dets, res.ids
	}
	ev := newDetectionEvent(o, c.cfg.ID, r, dets, ids, received, dispatched, published)
	c.countResult(ev)
	kept := c.snap.result(r.Job.Seq, dets, ids, c.sceneState.Load())
	c.inferAge.observe(r.Run)
	c.total.observe(published.Sub(received))
	c.fps.tick(published)
	var publish bool
	if ev.Detections, publish = forMode(c.analytics().Events.DetectionMode(), ev.Detections); publish {
		if err := s.pub.PublishDetections(ev); err != nil {
			c.noteError(err)
		}
	}
	if analysed {
		if kept && s.snapshots != nil {
			s.takeEvidence(c, r.Job.Seq, r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH, &res)
		}
		s.publishScene(c, o, res, r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH)
	}
}

// newDetectionEvent is the event published for a job's result on camera, with its boxes in
// source pixels and normalized to the frame. Latencies are measured on this host's clock
// from when the frame was decoded (received); captured_at is the camera's own capture time.
func newDetectionEvent(o eventOrigin, camera string, r infer.Result, dets []infer.Detection, ids []uint64, received, dispatched, published time.Time) *sinks.DetectionEvent {
	ev := &sinks.DetectionEvent{
		Version:     sinks.Version,
		ID:          sinks.EventID(o.instance, camera, r.Job.Seq),
		Site:        o.site,
		Camera:      camera,
		CapturedAt:  r.Job.Captured.UTC(),
		PublishedAt: published.UTC(),
		Frame:       sinks.FrameInfo{Seq: r.Job.Seq, Width: r.Job.Letterbox.SrcW, Height: r.Job.Letterbox.SrcH},
		Model:       o.model,
		Detections:  make([]sinks.Detection, 0, len(dets)),
		LatencyMS: sinks.Latency{
			Queue: ms(dispatched.Sub(received)),
			Pre:   ms(r.Pre),
			Infer: ms(r.Run),
			Post:  ms(r.Post),
			Total: ms(published.Sub(received)),
		},
	}
	w, h := r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH
	for i, det := range dets {
		d := sinks.Detection{Label: det.Label, ClassID: det.ClassID, Score: det.Score, Box: pixelBox(det.Box), BoxNorm: normBox(det.Box, w, h)}
		if i < len(ids) {
			d.TrackID = ids[i]
		}
		ev.Detections = append(ev.Detections, d)
	}
	return ev
}

// drain waits until no job is in flight, or until timeout. (After a timeout the waiting
// goroutine ends when the pools are closed, which ends every job.)
func (s *slicer) drain(timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		s.log.Warn("stopping with jobs still in flight; they end as lost", "waited", timeout)
	}
}
