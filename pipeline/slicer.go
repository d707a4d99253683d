package pipeline

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/sources"
)

// dispatcher hands a job to an idle worker, or returns false when none is idle; the
// daemon's workerPools are the real one.
type dispatcher interface {
	TryDispatch(job infer.Job, in infer.Input, done func(infer.Result)) bool
	// modelName is the name of the model the workers run, as events carry it.
	modelName() string
}

// resultStage takes each job's result: the daemon's results is the real one.
type resultStage interface {
	finish(c *camera, run jobRun, r infer.Result)
}

// slicer is the time-slicer: each round (the daemon's run goroutine calls dispatch) it hands
// jobs for the cameras that are due to idle workers, in start-time fair order, and hands each
// job's end over to the result stage. It schedules and nothing else. The daemon builds it in
// Start; cams and jobs are the run goroutine's, which a reload changes between rounds. A
// job's end (end) runs on the result stage's goroutines and touches only the camera's
// stage-owned state and atomics, the result stage and inflight.
type slicer struct {
	cams    []*camera   // the enabled cameras, in config order
	jobs    dispatcher  // the worker pools in force
	results resultStage // what happens to each job's result
	// handOver takes each job's end from the pool that ran it, on that pool's goroutine, and
	// must not block (pool.Pool.TryDispatch): the daemon's stage queues it for its goroutines,
	// which run end. A simulation may run end at once.
	handOver func(jobEnd)
	log      *slog.Logger
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
// current virtual time instead of catching up in a burst. A frame older than maxAge
// (pipeline.max_frame_age) is dropped, counted stale.
func (s *slicer) dispatch(now time.Time, maxAge time.Duration) {
	ready := s.ready[:0]
	for _, c := range s.cams {
		if c.busy.Load() || c.sched.nextDue.Sub(now) > c.sched.slack {
			continue
		}
		f := c.box.Take()
		if f == nil {
			continue
		}
		if now.Sub(f.Received) > maxAge {
			f.Release()
			c.stale.Add(1)
			continue
		}
		ready = append(ready, candidate{c, f, max(c.sched.pass, s.vtime)})
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
		c.snap.offer(f, now, c.wantsEvidence.Load()) // its copy of the pixels, which go with the frame
		// The job's own: its result comes on the stage's goroutine, after a reload perhaps,
		// with a copy of what it needs of the schedule.
		run := jobRun{received: received, dispatched: dispatched, model: s.jobs.modelName(), interval: c.sched.interval}
		if !s.jobs.TryDispatch(job, f, func(res infer.Result) { s.handOver(jobEnd{c, run, res}) }) {
			s.inflight.Done()
			c.busy.Store(false)
			for _, r := range ready[i:] { // no worker idle: the frames wait for the next round
				r.cam.box.Restore(r.frame)
			}
			break
		}
		g := [2]int{f.Letterbox.SrcW, f.Letterbox.SrcH}
		f.Release() // TryDispatch wrote the pixels into the worker's slot
		if g != c.sched.geometry {
			if c.sched.geometry != [2]int{} {
				s.log.Info("camera resolution changed; shrinking worker memory arenas", "camera", c.cfg.ID,
					"from", fmt.Sprintf("%dx%d", c.sched.geometry[0], c.sched.geometry[1]), "to", fmt.Sprintf("%dx%d", g[0], g[1]))
				s.resized()
			}
			c.sched.geometry = g
		}
		c.sched.pass = r.start + 1/c.cfg.Weight
		s.vtime = r.start
		c.frameAge.observe(dispatched.Sub(received))
		// Keep to the camera's schedule, but never burst to catch up after a gap.
		next := c.sched.nextDue.Add(c.sched.interval)
		if next.Before(now) {
			next = now.Add(c.sched.interval)
		}
		c.schedule(next)
	}
	clear(ready) // drop the frame pointers; keep the capacity
	s.ready = ready[:0]
}

// end runs on a goroutine of the result stage when a job has ended: the result stage takes
// its result, and the camera is free for its next job.
func (s *slicer) end(e jobEnd) {
	defer s.inflight.Done()
	defer s.wake()
	defer e.cam.busy.Store(false)
	s.results.finish(e.cam, e.run, e.res)
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
