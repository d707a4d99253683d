// Package worker is the inference worker process, `visiond worker`: the far side of the
// process boundary that package infer describes. Main loads the model into a Detector (one
// ONNX Runtime session with reused tensors, CHW pre-processing, the decoding of the YOLO
// output layouts in layout.go and class-wise NMS), says hello, and serves the daemon's jobs
// from its frame slots in a three-stage pipeline, so that a crash or a hang in the runtime or
// the GPU driver costs one worker process, never the daemon. The daemon side is package
// infer/pool.
//
// This is the only package outside cmd/ that links ONNX Runtime (github.com/yalue/
// onnxruntime_go, and cgo in providers.go for the few calls it does not wrap) and OpenCV
// (LetterboxImage, for still images).
package worker

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
)

// Hooks make a worker misbehave on purpose, for the tests of the daemon side (infer/pool,
// pipeline), which run their test binary as a worker through package workertest and set
// these from its environment. They exist for tests only: Main, the production entry point,
// runs with none and reads no test environment. The zero value changes nothing.
type Hooks struct {
	// HangAt makes the worker sleep forever, past the end of its job stream, in the session
	// run of its HangAt-th job (counting from 1), as a worker stuck in the runtime or the GPU
	// driver would; it keeps reading and preparing the jobs behind it until its pipeline is
	// full. Tests use it to exercise the pool's job timeout. 0: never.
	HangAt int
	// Slow is added to each session run (and to the run time reported), as a slower device
	// would. Tests use it to tell pools apart by speed.
	Slow time.Duration
	// Overlap makes the first Overlap session runs wait, each before its run, until all
	// Overlap of them are waiting at once: a barrier that only sessions running at the same
	// time can pass (with fewer sessions than Overlap the first jobs never finish). Tests use
	// it to show that a worker's sessions run jobs concurrently. 0: none.
	Overlap int
}

// Main is the `visiond worker` subcommand: it loads the model, says hello on fd 5 and
// serves jobs from fd 4 on the frame slots mapped from fd 3 until fd 4 ends (nil), ctx is
// done (nil) or the stream breaks (an error naming what was wrong). A startup failure is
// also sent to the daemon as a hello carrying the error. stderr is its log. args are the
// flags of infer.WorkerFlags.
func Main(ctx context.Context, args []string) error {
	return Serve(ctx, args, Hooks{})
}

// IgnoreStopSignals makes this process ignore SIGINT and SIGTERM; a worker process calls it
// first. Those signals reach a worker only as a member of the daemon's process group (Ctrl-C
// in a terminal, GNU timeout) or control group (a service manager), and the stop they ask for
// is the daemon's to make: it lets the jobs in flight finish, then ends each worker's job
// stream, at the end of which the worker exits, and kills one that does not (infer/pool:
// Pool.Close). A worker that ended on them itself would end while the daemon still sends it
// jobs, which the daemon cannot tell from a crash. None outlives the daemon: its death ends
// the job stream too, and the kernel kills the worker (the pool starts it with Pdeathsig).
func IgnoreStopSignals() {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
}

// Serve is Main with test hooks: for tests only (Hooks).
func Serve(ctx context.Context, args []string, hooks Hooks) error {
	began := time.Now()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var st unix.Stat_t
	if err := unix.Fstat(infer.FDResults, &st); err != nil {
		return fmt.Errorf("worker: fd 5 (results) is not open (%v); workers are started by the daemon", err)
	}
	results := os.NewFile(infer.FDResults, "results")
	defer results.Close()
	jobs, slots, slotBytes, dets, err := startWorker(args, log)
	if err != nil {
		_ = infer.WriteMessage(results, infer.Message{Type: infer.MsgHello, Hello: &infer.HelloMsg{PID: os.Getpid(), Error: err.Error()}})
		return err
	}
	defer unix.Munmap(slots)
	defer jobs.Close()
	defer closeAll(dets)
	info := dets[0].Model()
	if err := infer.WriteMessage(results, infer.Message{Type: infer.MsgHello, Hello: &infer.HelloMsg{
		PID: os.Getpid(), Model: info.Path, InputW: info.InputW, InputH: info.InputH,
		Classes: info.Classes, Provider: info.Provider,
	}}); err != nil {
		return fmt.Errorf("worker: write hello: %w", err)
	}
	// Where its start-up went (the daemon logs the whole, from exec to hello): ONNX
	// Runtime's library, the model's inputs and outputs, the sessions, the warm-up runs.
	var lt loadTimings
	for _, d := range dets {
		lt.ORT += d.load.ORT
		lt.Inspect += d.load.Inspect
		lt.Session += d.load.Session
		lt.WarmUp += d.load.WarmUp
	}
	log.Info("worker ready", "model", info.Path, "input", fmt.Sprintf("%dx%d", info.InputW, info.InputH),
		"classes", len(info.Classes), "provider", info.Provider, "sessions", len(dets), "ready_in", time.Since(began).Round(time.Millisecond),
		"ort_init", lt.ORT.Round(time.Millisecond), "inspect", lt.Inspect.Round(time.Millisecond),
		"session", lt.Session.Round(time.Millisecond), "warm_up", lt.WarmUp.Round(time.Millisecond))
	js := newJobServer(dets, log, slots, slotBytes, hooks)
	return js.serve(ctx, jobs, results)
}

func closeAll(dets []*Detector) {
	for _, d := range dets {
		d.Close()
	}
}

// jobServer is the worker's job pipeline. A reader goroutine reads the jobs and hands each
// to the session with the most free tensor pairs (Detector.pairs), which it then holds
// until its result is written; each session has three stages, each a goroutine, that
// overlap the work around its runs so that the session runs back to back:
//
//	prepare  checks job k+1 and fills its pair's input from the slot
//	run      runs the session on job k's pair (and an arena shrinkage run before it)
//	post     decodes job k-1's output, writes its result and frees its pair
//
// connected by channels of depth pipelineDepth. The sessions run at once, each in its own
// goroutines; their results go out as they finish (infer/protocol.go: result order), one
// write at a time. With one session that is job order: each stage serves jobs in turn.
type jobServer struct {
	sessions  []*session
	log       *slog.Logger
	slots     []byte // the frame slots mapped from fd 3
	slotBytes int
	hooks     Hooks
	freed     chan struct{} // a pair was freed (cap 1): the reader may find a session now

	wmu sync.Mutex // one result write at a time

	overlapMu   sync.Mutex // Hooks.Overlap's barrier
	overlapCond *sync.Cond
	overlapIn   int
}

// session is one Detector and the channels between its stages.
type session struct {
	index  int
	det    *Detector
	free   chan int       // its free tensor pairs (cap pipelineDepth); only the reader takes
	toPrep chan stagedJob // reader -> prepare (cap pipelineDepth: never blocks, a job holds a pair)
	shrink atomic.Bool    // run an arena shrinkage before the next run
}

// stagedJob is a job passing through the stages.
type stagedJob struct {
	job      *infer.JobMsg
	n        int    // 1 for the first job received
	pair     int    // the tensor pair it holds
	err      string // why it failed (bad job, failed run); "" if not
	pre, run time.Duration
}

func newJobServer(dets []*Detector, log *slog.Logger, slots []byte, slotBytes int, hooks Hooks) *jobServer {
	s := &jobServer{log: log, slots: slots, slotBytes: slotBytes, hooks: hooks, freed: make(chan struct{}, 1)}
	s.overlapCond = sync.NewCond(&s.overlapMu)
	for i, d := range dets {
		ss := &session{index: i, det: d, free: make(chan int, pipelineDepth), toPrep: make(chan stagedJob, pipelineDepth)}
		for p := range pipelineDepth {
			ss.free <- p
		}
		s.sessions = append(s.sessions, ss)
	}
	return s
}

// serve runs the stages until the job stream ends (nil, once every job read has been
// answered), ctx ends (nil, jobs in the pipeline may go unanswered), the job stream breaks
// (an error, after the jobs read before the break are answered) or a result cannot be
// written (an error).
func (s *jobServer) serve(ctx context.Context, jobs *os.File, results io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A closed jobs pipe unblocks the reader when ctx ends.
	stop := context.AfterFunc(ctx, func() { jobs.Close() })
	defer stop()

	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() {
		defer func() {
			for _, ss := range s.sessions {
				close(ss.toPrep)
			}
		}()
		readErr = s.read(ctx, bufio.NewReader(jobs))
	})
	postErrs := make([]error, len(s.sessions))
	for i, ss := range s.sessions {
		toRun := make(chan stagedJob, pipelineDepth)
		toPost := make(chan stagedJob, pipelineDepth)
		wg.Go(func() {
			defer close(toRun)
			s.prepare(ctx, ss, toRun)
		})
		wg.Go(func() {
			defer close(toPost)
			s.run(ctx, ss, toRun, toPost)
		})
		wg.Go(func() {
			if postErrs[i] = s.post(ss, toPost, results); postErrs[i] != nil {
				cancel() // stop reading and running: nobody writes results any more
			}
		})
	}
	wg.Wait()
	return cmp.Or(cmp.Or(postErrs...), readErr)
}

// read reads jobs and hands each to a session, with a free pair taken for it.
func (s *jobServer) read(ctx context.Context, r io.Reader) error {
	var buf []byte
	for n := 1; ; n++ {
		var m infer.Message
		var err error
		m, buf, err = infer.ReadMessage(r, buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("worker: read job: %w", err)
		}
		if m.Type != infer.MsgJob {
			return fmt.Errorf("worker: read job: %w: got a %q message", infer.ErrBadMessage, m.Type)
		}
		if m.Job.ShrinkArenas {
			for _, ss := range s.sessions {
				ss.shrink.Store(true)
			}
		}
		ss := s.pickSession(ctx)
		if ss == nil {
			return nil
		}
		ss.toPrep <- stagedJob{job: m.Job, n: n, pair: <-ss.free} // neither blocks: pickSession saw a free pair
	}
}

// pickSession returns the session with the most free pairs, the first on a tie, waiting
// for one to be freed if none is; nil when ctx ends first. Only the reader takes pairs, so
// a pair seen free stays free until it takes it.
func (s *jobServer) pickSession(ctx context.Context) *session {
	for {
		var best *session
		for _, ss := range s.sessions {
			if len(ss.free) > 0 && (best == nil || len(ss.free) > len(best.free)) {
				best = ss
			}
		}
		if best != nil {
			return best
		}
		select {
		case <-s.freed:
		case <-ctx.Done():
			return nil
		}
	}
}

// prepare is a session's first stage: it checks each job and fills its pair's input from
// the job's slot.
func (s *jobServer) prepare(ctx context.Context, ss *session, out chan<- stagedJob) {
	info := ss.det.Model()
	nslots := len(s.slots) / s.slotBytes
	frameBytes := info.InputW * info.InputH * 3
	for sj := range ss.toPrep {
		if err := infer.CheckJob(sj.job, nslots, info.InputW, info.InputH); err != nil {
			sj.err = err.Error()
		} else {
			off := sj.job.Slot * s.slotBytes
			t0 := time.Now()
			ss.det.prepare(sj.pair, s.slots[off:off+frameBytes])
			sj.pre = time.Since(t0)
		}
		select {
		case out <- sj:
		case <-ctx.Done():
			return
		}
	}
}

// run is a session's second stage: its runs, one at a time, each on its job's pair.
func (s *jobServer) run(ctx context.Context, ss *session, in <-chan stagedJob, out chan<- stagedJob) {
	for sj := range in {
		if sj.n == s.hooks.HangAt {
			s.log.Warn("test hook: hanging in this job", "hook", "HangAt", "job", sj.job.ID)
			for {
				time.Sleep(time.Hour)
			}
		}
		if ss.shrink.Swap(false) {
			spec := ss.det.shrinkSpec()
			t0 := time.Now()
			if spec == "" {
				s.log.Info("arena shrinkage skipped: the session runs on device buffers (cuda.device_io)", "job", sj.job.ID, "session", ss.index)
			} else if err := ss.det.shrinkArenas(sj.pair, spec); err != nil {
				s.log.Warn("arena shrinkage failed", "job", sj.job.ID, "session", ss.index, "err", err)
			} else {
				s.log.Info("arenas shrunk", "job", sj.job.ID, "session", ss.index, "arenas", spec, "took", time.Since(t0).Round(time.Microsecond))
			}
		}
		if sj.err == "" {
			s.overlap()
			t0 := time.Now()
			time.Sleep(s.hooks.Slow)
			if err := ss.det.run(sj.pair); err != nil {
				sj.err = fmt.Sprintf("job %d: %v", sj.job.ID, err)
			}
			sj.run = time.Since(t0)
		}
		select {
		case out <- sj:
		case <-ctx.Done():
			return
		}
	}
}

// overlap is Hooks.Overlap's barrier: the first Overlap calls wait until all have come.
func (s *jobServer) overlap() {
	if s.hooks.Overlap == 0 {
		return
	}
	s.overlapMu.Lock()
	defer s.overlapMu.Unlock()
	if s.overlapIn >= s.hooks.Overlap {
		return // passed
	}
	s.overlapIn++
	if s.overlapIn == s.hooks.Overlap {
		s.log.Info("test hook: runs overlap", "hook", "Overlap", "runs", s.overlapIn)
		s.overlapCond.Broadcast()
		return
	}
	for s.overlapIn < s.hooks.Overlap {
		s.overlapCond.Wait()
	}
}

// post is a session's last stage: it decodes each job's output, writes its result and
// frees its pair.
func (s *jobServer) post(ss *session, in <-chan stagedJob, results io.Writer) error {
	dets := make([]infer.Detection, 0, 300)
	info := ss.det.Model()
	frameBytes := info.InputW * info.InputH * 3
	for sj := range in {
		res := infer.ResultMsg{ID: sj.job.ID, Error: sj.err, PreUS: sj.pre.Microseconds(), RunUS: sj.run.Microseconds(), Session: ss.index}
		if sj.err == "" {
			t0 := time.Now()
			off := sj.job.Slot * s.slotBytes // the frame is ours until its result is written
			dets = ss.det.decodeOutput(sj.pair, sj.job.Letterbox, s.slots[off:off+frameBytes], dets[:0])
			res.Detections = dets
			res.PostUS = time.Since(t0).Microseconds()
		}
		ss.free <- sj.pair // never blocks: it has room for every pair
		select {
		case s.freed <- struct{}{}:
		default:
		}
		if res.Error != "" {
			s.log.Warn("job rejected", "job", sj.job.ID, "camera", sj.job.Camera, "err", res.Error)
		}
		s.wmu.Lock()
		err := infer.WriteMessage(results, infer.Message{Type: infer.MsgResult, Result: &res})
		s.wmu.Unlock()
		if err != nil {
			return fmt.Errorf("worker: write result of job %d: %w", sj.job.ID, err)
		}
	}
	return nil
}

func startWorker(args []string, log *slog.Logger) (jobs *os.File, slots []byte, slotBytes int, dets []*Detector, err error) {
	f, err := infer.ParseWorkerFlags(args)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	size := f.Slots * f.SlotBytes
	var st unix.Stat_t
	if err := unix.Fstat(infer.FDSlots, &st); err != nil {
		return nil, nil, 0, nil, fmt.Errorf("worker: fd 3 (frame slots): %w", err)
	}
	if st.Size < int64(size) {
		return nil, nil, 0, nil, fmt.Errorf("worker: fd 3 (frame slots) has %d bytes, -slots %d x -slot-bytes %d needs %d",
			st.Size, f.Slots, f.SlotBytes, size)
	}
	// openSessions runs each session once: a provider that cannot run fails here (or falls
	// back to the CPU when Fallback says so), before the hello, not on the first frame.
	dets, err = openSessions(f.Detector, f.Sessions, log.Warn)
	if err != nil {
		return nil, nil, 0, nil, fmt.Errorf("worker: %w", err)
	}
	info := dets[0].Model()
	if need := info.InputW * info.InputH * 3; need > f.SlotBytes {
		closeAll(dets)
		return nil, nil, 0, nil, fmt.Errorf("worker: model input %dx%d RGB24 needs %d bytes, -slot-bytes is %d",
			info.InputW, info.InputH, need, f.SlotBytes)
	}
	slots, err = unix.Mmap(infer.FDSlots, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		closeAll(dets)
		return nil, nil, 0, nil, fmt.Errorf("worker: map frame slots (fd 3, %d bytes): %w", size, err)
	}
	// Non-blocking so that the runtime poller serves it and Close unblocks a pending read.
	if err := unix.SetNonblock(infer.FDJobs, true); err != nil {
		unix.Munmap(slots)
		closeAll(dets)
		return nil, nil, 0, nil, fmt.Errorf("worker: fd 4 (jobs): %w", err)
	}
	return os.NewFile(infer.FDJobs, "jobs"), slots, f.SlotBytes, dets, nil
}
