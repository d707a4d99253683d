package pipeline

import (
	"sync"

	"github.com/visiond/visiond/infer"
)

// jobEnd is a job's end as the pools hand it over: its camera, what the slicer knew of it,
// and its result.
type jobEnd struct {
	cam *camera
	run jobRun
	res infer.Result
}

// stage runs the result stage on goroutines of its own: the pools hand each job's end over
// (put, which never blocks: it is called on a pool's reader), and the stage's goroutines
// take them in the order they came and run them (the slicer's end: the results, then the
// camera free for its next job). Its queue is bounded by the jobs in flight, at most one per
// camera (the slicer dispatches a camera's next job only once its end has run here), so a
// camera's results run one at a time, in capture order, and those of different cameras side
// by side, up to the stage's goroutines at once. The daemon starts it in Start and stops it
// in Close, once the pools that feed it have closed (every job's end handed over), after
// its goroutines have run what was queued.
type stage struct {
	run func(jobEnd) // what each end goes through

	mu     sync.Mutex
	more   sync.Cond // signalled on put and on stop
	queue  []jobEnd  // from head on: the ends not taken yet
	head   int
	closed bool
	wg     sync.WaitGroup
}

// newStage starts n goroutines (at least one) that run each job's end through run.
func newStage(n int, run func(jobEnd)) *stage {
	s := &stage{run: run}
	s.more.L = &s.mu
	for range max(n, 1) {
		s.wg.Go(s.serve)
	}
	return s
}

// put hands a job's end over to the stage's goroutines; it never blocks. After stop, an end
// is run at once, on the caller's goroutine (none is expected: the pools have closed).
func (s *stage) put(e jobEnd) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.run(e)
		return
	}
	s.queue = append(s.queue, e)
	s.more.Signal()
	s.mu.Unlock()
}

// serve is one of the stage's goroutines: it runs the ends queued, oldest first, until
// stop, and what was queued before stop.
func (s *stage) serve() {
	for {
		s.mu.Lock()
		for s.head == len(s.queue) && !s.closed {
			s.more.Wait()
		}
		if s.head == len(s.queue) { // stopped, and nothing left
			s.mu.Unlock()
			return
		}
		e := s.queue[s.head]
		s.queue[s.head] = jobEnd{} // keep no result past its run
		s.head++
		if s.head == len(s.queue) { // all taken: the array is reused from its start
			s.queue, s.head = s.queue[:0], 0
		}
		s.mu.Unlock()
		s.run(e)
	}
}

// stop lets the stage's goroutines run what is queued, and waits for them. Call it once
// the pools that put into it have closed. Safe to call twice.
func (s *stage) stop() {
	s.mu.Lock()
	s.closed = true
	s.more.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}
