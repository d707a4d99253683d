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
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
)

// Hooks make a worker misbehave on purpose, for the tests of the daemon side (infer/pool,
// pipeline), which run their test binary as a worker through package workertest and set
// these from its environment. They exist for tests only: Main, the production entry point,
// runs with none and reads no test environment. The zero value changes nothing.
type Hooks struct {
	// HangAt makes the worker sleep forever, ignoring SIGTERM, in the session run of its
	// HangAt-th job (counting from 1), as a worker stuck in the runtime or the GPU driver
	// would; it keeps reading and preparing the jobs behind it until its pipeline is full.
	// Tests use it to exercise the pool's job timeout. 0: never.
	HangAt int
	// Slow is added to each session run (and to the run time reported), as a slower device
	// would. Tests use it to tell pools apart by speed.
	Slow time.Duration
}

// Main is the `visiond worker` subcommand: it loads the model, says hello on fd 5 and
// serves jobs from fd 4 on the frame slots mapped from fd 3 until fd 4 ends (nil), ctx is
// done (nil) or the stream breaks (an error naming what was wrong). A startup failure is
// also sent to the daemon as a hello carrying the error. stderr is its log. args are the
// flags of infer.WorkerFlags.
func Main(ctx context.Context, args []string) error {
	return Serve(ctx, args, Hooks{})
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
	jobs, slots, slotBytes, det, err := startWorker(args, log)
	if err != nil {
		_ = infer.WriteMessage(results, infer.Message{Type: infer.MsgHello, Hello: &infer.HelloMsg{PID: os.Getpid(), Error: err.Error()}})
		return err
	}
	defer unix.Munmap(slots)
	defer jobs.Close()
	defer det.Close()
	info := det.Model()
	if err := infer.WriteMessage(results, infer.Message{Type: infer.MsgHello, Hello: &infer.HelloMsg{
		PID: os.Getpid(), Model: info.Path, InputW: info.InputW, InputH: info.InputH,
		Classes: info.Classes, Provider: info.Provider,
	}}); err != nil {
		return fmt.Errorf("worker: write hello: %w", err)
	}
	// Where its start-up went (the daemon logs the whole, from exec to hello): ONNX
	// Runtime's library, the model's inputs and outputs, the session, the warm-up run.
	lt := det.load
	log.Info("worker ready", "model", info.Path, "input", fmt.Sprintf("%dx%d", info.InputW, info.InputH),
		"classes", len(info.Classes), "provider", info.Provider, "ready_in", time.Since(began).Round(time.Millisecond),
		"ort_init", lt.ORT.Round(time.Millisecond), "inspect", lt.Inspect.Round(time.Millisecond),
		"session", lt.Session.Round(time.Millisecond), "warm_up", lt.WarmUp.Round(time.Millisecond))
	js := &jobServer{det: det, log: log, slots: slots, slotBytes: slotBytes, hooks: hooks}
	return js.serve(ctx, jobs, results)
}

// jobServer is the worker's job pipeline. Three stages, each a goroutine, overlap the
// work around the session run so that the device runs back to back:
//
//	read     reads job k+1, takes a free tensor pair and fills its input from the slot
//	run      runs the session on job k's pair (and an arena shrinkage run before it)
//	post     decodes job k-1's output, frees its pair and writes its result
//
// connected by channels of depth 1. A job holds its pair (Detector.pairs) from read to
// post, so the stages never touch the same tensors; with pipelineDepth pairs, read waits
// for post to free one. Results leave in job order: each stage serves jobs in turn.
type jobServer struct {
	det       *Detector
	log       *slog.Logger
	slots     []byte // the frame slots mapped from fd 3
	slotBytes int
	hooks     Hooks
}

// stagedJob is a job passing through the stages.
type stagedJob struct {
	job      *infer.JobMsg
	n        int    // 1 for the first job received
	pair     int    // the tensor pair it holds
	err      string // why it failed (bad job, failed run); "" if not
	pre, run time.Duration
}

// serve runs the stages until the job stream ends (nil, once every job read has been
// answered), ctx ends (nil, jobs in the pipeline may go unanswered), the job stream breaks
// (an error, after the jobs before the break are answered) or a result cannot be written
// (an error).
func (s *jobServer) serve(ctx context.Context, jobs *os.File, results io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A closed jobs pipe unblocks the read stage when ctx ends.
	stop := context.AfterFunc(ctx, func() { jobs.Close() })
	defer stop()

	free := make(chan int, pipelineDepth)
	for p := range pipelineDepth {
		free <- p
	}
	toRun := make(chan stagedJob, 1)
	toPost := make(chan stagedJob, 1)
	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() {
		defer close(toRun)
		readErr = s.read(ctx, bufio.NewReader(jobs), free, toRun)
	})
	wg.Go(func() {
		defer close(toPost)
		s.run(ctx, toRun, toPost)
	})
	postErr := s.post(toPost, free, results)
	if postErr != nil {
		cancel() // stop reading and running: nobody writes results any more
	}
	wg.Wait()
	return cmp.Or(postErr, readErr)
}

// read is the first stage: it reads jobs, checks them and fills a tensor pair's input
// from each job's slot.
func (s *jobServer) read(ctx context.Context, r io.Reader, free <-chan int, out chan<- stagedJob) error {
	info := s.det.Model()
	nslots := len(s.slots) / s.slotBytes
	frameBytes := info.InputW * info.InputH * 3
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
		sj := stagedJob{job: m.Job, n: n}
		select {
		case sj.pair = <-free:
		case <-ctx.Done():
			return nil
		}
		if err := infer.CheckJob(m.Job, nslots, info.InputW, info.InputH); err != nil {
			sj.err = err.Error()
		} else {
			off := m.Job.Slot * s.slotBytes
			t0 := time.Now()
			s.det.prepare(sj.pair, s.slots[off:off+frameBytes])
			sj.pre = time.Since(t0)
		}
		select {
		case out <- sj:
		case <-ctx.Done():
			return nil
		}
	}
}

// run is the second stage: the session runs, one at a time, each on its job's pair.
func (s *jobServer) run(ctx context.Context, in <-chan stagedJob, out chan<- stagedJob) {
	for sj := range in {
		if sj.n == s.hooks.HangAt {
			s.log.Warn("test hook: hanging in this job", "hook", "HangAt", "job", sj.job.ID)
			for {
				time.Sleep(time.Hour)
			}
		}
		if sj.job.ShrinkArenas {
			spec := s.det.shrinkSpec()
			t0 := time.Now()
			if err := s.det.shrinkArenas(sj.pair, spec); err != nil {
				s.log.Warn("arena shrinkage failed", "job", sj.job.ID, "err", err)
			} else {
				s.log.Info("arenas shrunk", "job", sj.job.ID, "arenas", spec, "took", time.Since(t0).Round(time.Microsecond))
			}
		}
		if sj.err == "" {
			t0 := time.Now()
			time.Sleep(s.hooks.Slow)
			if err := s.det.run(sj.pair); err != nil {
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

// post is the last stage: it decodes each job's output, frees its pair and writes its
// result.
func (s *jobServer) post(in <-chan stagedJob, free chan<- int, results io.Writer) error {
	dets := make([]infer.Detection, 0, 300)
	for sj := range in {
		res := infer.ResultMsg{ID: sj.job.ID, Error: sj.err, PreUS: sj.pre.Microseconds(), RunUS: sj.run.Microseconds()}
		if sj.err == "" {
			t0 := time.Now()
			dets = s.det.decodeOutput(sj.pair, sj.job.Letterbox, dets[:0])
			res.Detections = dets
			res.PostUS = time.Since(t0).Microseconds()
		}
		free <- sj.pair // never blocks: it has room for every pair
		if res.Error != "" {
			s.log.Warn("job rejected", "job", sj.job.ID, "camera", sj.job.Camera, "err", res.Error)
		}
		if err := infer.WriteMessage(results, infer.Message{Type: infer.MsgResult, Result: &res}); err != nil {
			return fmt.Errorf("worker: write result of job %d: %w", sj.job.ID, err)
		}
	}
	return nil
}

func startWorker(args []string, log *slog.Logger) (jobs *os.File, slots []byte, slotBytes int, det *Detector, err error) {
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
	// openDetector runs the model once: a provider that cannot run fails here (or falls
	// back to the CPU when Fallback says so), before the hello, not on the first frame.
	det, err = openDetector(f.Detector, log.Warn)
	if err != nil {
		return nil, nil, 0, nil, fmt.Errorf("worker: %w", err)
	}
	info := det.Model()
	if need := info.InputW * info.InputH * 3; need > f.SlotBytes {
		det.Close()
		return nil, nil, 0, nil, fmt.Errorf("worker: model input %dx%d RGB24 needs %d bytes, -slot-bytes is %d",
			info.InputW, info.InputH, need, f.SlotBytes)
	}
	slots, err = unix.Mmap(infer.FDSlots, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		det.Close()
		return nil, nil, 0, nil, fmt.Errorf("worker: map frame slots (fd 3, %d bytes): %w", size, err)
	}
	// Non-blocking so that the runtime poller serves it and Close unblocks a pending read.
	if err := unix.SetNonblock(infer.FDJobs, true); err != nil {
		unix.Munmap(slots)
		det.Close()
		return nil, nil, 0, nil, fmt.Errorf("worker: fd 4 (jobs): %w", err)
	}
	return os.NewFile(infer.FDJobs, "jobs"), slots, f.SlotBytes, det, nil
}
