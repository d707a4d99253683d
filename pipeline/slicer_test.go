package pipeline

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// These tests drive the slicer's dispatch on a simulated clock with stand-ins for the worker
// pool and the publisher, so the scheduling rules are checked exactly. The real pool and
// publisher are exercised by TestDaemonEndToEnd.

// workers is a pool of n stand-in workers; a job stays in flight until complete is called.
type workers struct {
	n        int
	inflight []func(infer.Result)
	jobs     []infer.Job
}

func (w *workers) TryDispatch(job infer.Job, _ infer.Input, done func(infer.Result)) bool {
	if len(w.inflight) == w.n {
		return false
	}
	w.inflight = append(w.inflight, func(r infer.Result) { r.Job = job; done(r) })
	w.jobs = append(w.jobs, job)
	return true
}

func (w *workers) modelName() string { return "sim" }

func (w *workers) complete(err error) {
	for _, done := range w.inflight {
		done(infer.Result{Err: err})
	}
	w.inflight = nil
}

type sim struct {
	sl      *slicer
	w       *workers
	slice   time.Duration
	now     time.Time
	events  []*sinks.DetectionEvent
	objects []*sinks.ObjectEvent
	zones   []*sinks.ZoneEvent
	lines   []*sinks.LineEvent
	wake    chan struct{} // the run goroutine's wake-up, as Daemon.wakeUp fills it
	resized int           // calls of the slicer's resized
}

func newSim(nworkers int, slice time.Duration, fps ...float64) *sim {
	s := &sim{w: &workers{n: nworkers}, slice: slice, now: time.Unix(1_000_000, 0), wake: make(chan struct{}, 1)}
	log := slog.New(slog.DiscardHandler)
	s.sl = &slicer{jobs: s.w, results: &results{pub: s, log: log}, log: log, resized: func() { s.resized++ }, wake: s.wakeUp}
	s.sl.handOver = s.sl.end // the simulation's workers complete on its goroutine, in order
	for i, f := range fps {
		cc := config.Camera{ID: fmt.Sprintf("cam%d", i), FPS: f, Enabled: true}
		s.sl.cams = append(s.sl.cams, newCamera(cc, slice, s.wakeUp))
	}
	return s
}

func (s *sim) PublishDetections(ev *sinks.DetectionEvent) error {
	s.events = append(s.events, ev)
	return nil
}

func (s *sim) PublishObject(ev *sinks.ObjectEvent) error {
	s.objects = append(s.objects, ev)
	return nil
}

func (s *sim) PublishZone(ev *sinks.ZoneEvent) error {
	s.zones = append(s.zones, ev)
	return nil
}

func (s *sim) PublishLine(ev *sinks.LineEvent) error {
	s.lines = append(s.lines, ev)
	return nil
}

func (s *sim) wakeUp() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// feed gives every camera a fresh frame, as a camera streaming faster than it is analysed does.
func (s *sim) feed() {
	for _, c := range s.sl.cams {
		c.box.Put(&sources.Frame{Camera: c.cfg.ID, Captured: s.now, Received: s.now,
			Letterbox: geom.NewLetterbox(768, 576, 640, 640)})
	}
}

// run simulates ticks of the slice for the given time; jobs take half a slice, and their
// completion wakes the slicer at once, mid-slice.
func (s *sim) run(total, jitter time.Duration) {
	slice := s.slice
	for end := s.now.Add(total); s.now.Before(end); {
		s.feed()
		s.sl.dispatch(s.now.Add(jitter), time.Second)
		s.w.complete(nil)
		s.now = s.now.Add(slice / 2)
		s.feed()
		s.sl.dispatch(s.now, time.Second) // the wake-up after completions
		s.w.complete(nil)
		s.now = s.now.Add(slice / 2)
		jitter = -jitter // ticks land a little late, then a little early
	}
}

func (s *sim) perCamera() map[string]int {
	m := map[string]int{}
	for _, j := range s.w.jobs {
		m[j.Camera]++
	}
	return m
}

func TestSlicerKeepsEachCameraToItsFPS(t *testing.T) {
	s := newSim(4, 200*time.Millisecond, 5, 2, 1, 0.5)
	s.run(20*time.Second, 3*time.Millisecond)
	got := s.perCamera()
	for cam, want := range map[string]int{"cam0": 100, "cam1": 40, "cam2": 20, "cam3": 10} {
		if d := got[cam] - want; d < -1 || d > 1 {
			t.Errorf("%s: %d jobs in 20 s, want %d±1 (all: %v)", cam, got[cam], want, got)
		}
	}
	if len(s.events) != len(s.w.jobs) {
		t.Fatalf("%d events for %d jobs", len(s.events), len(s.w.jobs))
	}
	// Evenly spaced: a camera never goes much earlier than 1/fps after its previous frame.
	last := map[string]time.Time{}
	for _, j := range s.w.jobs {
		interval := time.Duration(float64(time.Second) / s.sl.cams[j.Camera[3]-'0'].cfg.FPS)
		if prev, ok := last[j.Camera]; ok && j.Captured.Sub(prev) < interval*3/4 {
			t.Fatalf("%s: frames %v apart, want about %v", j.Camera, j.Captured.Sub(prev), interval)
		}
		last[j.Camera] = j.Captured
	}
}

func TestSlicerIsFairUnderOverload(t *testing.T) {
	// 5 cameras at 5 fps need 25 jobs/s; one worker that finishes each job within its slice
	// gives 10/s (a dispatch at the tick and one at the completion wake-up mid-slice).
	s := newSim(1, 200*time.Millisecond, 5, 5, 5, 5, 5)
	s.run(20*time.Second, 0)
	got := s.perCamera()
	total := len(s.w.jobs)
	if total != 200 {
		t.Fatalf("%d jobs in 20 s with one worker and two dispatches per slice, want 200", total)
	}
	for cam, n := range got {
		if n < 39 || n > 41 {
			t.Errorf("%s: %d jobs, want 40±1 of 200 (all: %v)", cam, n, got)
		}
	}
	if len(got) != 5 {
		t.Fatalf("cameras served: %v, want all 5", got)
	}
}

func TestSlicerDropsStaleFrames(t *testing.T) {
	s := newSim(1, 200*time.Millisecond, 5)
	c := s.sl.cams[0]
	c.box.Put(&sources.Frame{Camera: "cam0", Received: s.now.Add(-2 * time.Second)})
	s.sl.dispatch(s.now, time.Second)
	if len(s.w.jobs) != 0 || c.stale.Load() != 1 {
		t.Fatalf("frame 2 s old with max_frame_age 1 s: %d jobs, %d stale; want 0 jobs, 1 stale", len(s.w.jobs), c.stale.Load())
	}
}

func TestSlicerKeepsFrameWhenNoWorkerIsIdle(t *testing.T) {
	s := newSim(1, 200*time.Millisecond, 5, 5)
	s.feed()
	s.sl.dispatch(s.now, time.Second)
	if len(s.w.jobs) != 1 || s.w.jobs[0].Camera != "cam0" {
		t.Fatalf("jobs %+v, want one for cam0", s.w.jobs)
	}
	// cam1's frame was not dispatched (no idle worker): it waits in its mailbox and cam1
	// goes first once the worker is free, although cam0 is due again.
	if f := s.sl.cams[1].box.Take(); f == nil {
		t.Fatal("cam1's frame was lost when no worker was idle")
	} else {
		s.sl.cams[1].box.Restore(f)
	}
	s.w.complete(nil)
	s.now = s.now.Add(200 * time.Millisecond)
	s.sl.cams[0].box.Put(&sources.Frame{Camera: "cam0", Captured: s.now, Received: s.now})
	s.sl.dispatch(s.now, time.Second)
	if len(s.w.jobs) != 2 || s.w.jobs[1].Camera != "cam1" {
		t.Fatalf("jobs %+v, want cam1 second", s.w.jobs)
	}
}

func TestSlicerCountsLostJobs(t *testing.T) {
	s := newSim(1, 200*time.Millisecond, 5)
	s.feed()
	s.sl.dispatch(s.now, time.Second)
	s.w.complete(infer.ErrWorkerLost)
	c := s.sl.cams[0]
	if c.lost.Load() != 1 || c.analysed.Load() != 0 || len(s.events) != 0 {
		t.Fatalf("lost %d analysed %d events %d: a lost job must be counted, never published", c.lost.Load(), c.analysed.Load(), len(s.events))
	}
	if c.busy.Load() {
		t.Fatal("camera still busy after its job ended")
	}
}

// A frame for a camera that is due wakes the slicer at once; one for a busy camera, or one
// that is not due yet, waits in the mailbox for a tick or a completion.
func TestFrameWakesSlicerOnlyWhenCameraIsDue(t *testing.T) {
	s := newSim(1, 200*time.Millisecond, 10)
	c := s.sl.cams[0]
	woken := func() bool {
		select {
		case <-s.wake:
			return true
		default:
			return false
		}
	}
	c.onFrame(&sources.Frame{Camera: "cam0", Captured: time.Now()})
	if !woken() {
		t.Fatal("a due, idle camera's frame did not wake the slicer")
	}
	c.busy.Store(true)
	c.onFrame(&sources.Frame{Camera: "cam0", Captured: time.Now()})
	if woken() {
		t.Fatal("a busy camera's frame woke the slicer")
	}
	c.busy.Store(false)
	c.schedule(time.Now().Add(time.Second))
	c.onFrame(&sources.Frame{Camera: "cam0", Captured: time.Now()})
	if woken() {
		t.Fatal("a frame of a camera due in 1 s woke the slicer")
	}
	c.schedule(time.Now().Add(c.sched.slack / 2)) // due within its slack: it may go now
	c.onFrame(&sources.Frame{Camera: "cam0", Captured: time.Now()})
	if !woken() {
		t.Fatal("a camera due within its slack was not woken")
	}
}

// Under overload each camera's share follows its weight; a camera asking for less than its
// share gets what it asks, and its unused share goes to the others.
func TestSlicerSharesByWeight(t *testing.T) {
	s := newSim(1, 200*time.Millisecond, 10, 10, 10, 10, 1)
	for i, w := range []float64{1, 1, 2, 4, 8} {
		s.sl.cams[i].cfg.Weight = w
	}
	s.run(40*time.Second, 0) // one worker, two jobs per slice: 400 jobs for 410 wanted
	got := s.perCamera()
	// cam4 (weight 8) only wants 1 fps = 40 jobs; the remaining 360 split 1:1:2:4.
	for cam, want := range map[string]int{"cam0": 45, "cam1": 45, "cam2": 90, "cam3": 180, "cam4": 40} {
		if d := got[cam] - want; d < -3 || d > 3 {
			t.Errorf("%s: %d jobs, want %d±3 (all: %v)", cam, got[cam], want, got)
		}
	}
}

// A camera that was away (offline, or not due for a long time) does not catch up in a burst
// that starves the others: it starts at the current virtual time.
func TestSlicerReturningCameraDoesNotStarveOthers(t *testing.T) {
	s := newSim(1, 200*time.Millisecond, 5, 5, 5)
	// 20 s with cam2 away: it gets no frames.
	slice := s.slice
	for end := s.now.Add(20 * time.Second); s.now.Before(end); s.now = s.now.Add(slice / 2) {
		for _, c := range s.sl.cams[:2] {
			c.box.Put(&sources.Frame{Camera: c.cfg.ID, Captured: s.now, Received: s.now})
		}
		s.sl.dispatch(s.now, time.Second)
		s.w.complete(nil)
	}
	before := s.perCamera()
	s.run(10*time.Second, 0) // all three: 100 jobs
	got := s.perCamera()
	for _, cam := range []string{"cam0", "cam1", "cam2"} {
		if n := got[cam] - before[cam]; n < 30 || n > 37 {
			t.Errorf("%s: %d of 100 jobs after cam2 came back, want about a third (all: %v, before %v)", cam, n, got, before)
		}
	}
}

// A detection event's latencies are measured from when the frame was decoded: queue to its
// dispatch, the worker's stages, total to its publishing.
func TestJobLatency(t *testing.T) {
	received := time.Unix(1_000_000, 0)
	j := jobRun{received: received, dispatched: received.Add(2 * time.Millisecond)}
	r := infer.Result{Pre: time.Millisecond, Run: 5 * time.Millisecond, Post: 500 * time.Microsecond}
	if l := j.latency(r, received.Add(10*time.Millisecond)); l != (sinks.Latency{Queue: 2, Pre: 1, Infer: 5, Post: 0.5, Total: 10}) {
		t.Errorf("latency %+v: want queue 2, pre 1, infer 5, post 0.5, total 10 ms", l)
	}
}

// A camera whose resolution changes between jobs has the workers' arenas shrunk, once; its
// first job is no change.
func TestSlicerShrinksArenasWhenResolutionChanges(t *testing.T) {
	s := newSim(1, 200*time.Millisecond, 5)
	c := s.sl.cams[0]
	for i, size := range [][2]int{{768, 576}, {768, 576}, {1280, 720}, {1280, 720}} {
		c.box.Put(&sources.Frame{Camera: "cam0", Captured: s.now, Received: s.now,
			Letterbox: geom.NewLetterbox(size[0], size[1], 640, 640)})
		s.sl.dispatch(s.now, time.Second)
		s.w.complete(nil)
		if len(s.w.jobs) != i+1 {
			t.Fatalf("frame %d (%dx%d) not dispatched", i, size[0], size[1])
		}
		s.now = s.now.Add(200 * time.Millisecond)
	}
	if s.resized != 1 {
		t.Fatalf("arenas shrunk %d times for one change of resolution, want 1", s.resized)
	}
}
