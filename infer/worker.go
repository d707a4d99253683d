package infer

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// File descriptors a worker inherits from the daemon (protocol.go).
const (
	fdSlots   = 3
	fdJobs    = 4
	fdResults = 5
)

// DefaultSlotBytes is the size of one frame slot: room for a 1280x1280 RGB24 input.
const DefaultSlotBytes = 1280 * 1280 * 3

// hangEnv is a test hook: a worker whose environment has VISIOND_TEST_WORKER_HANG=<n>
// sleeps forever, ignoring SIGTERM, in the n-th job it receives (counting from 1), as a
// worker stuck in the runtime or the GPU driver would. Tests use it to exercise
// PoolConfig.JobTimeout; it has no use in production.
const hangEnv = "VISIOND_TEST_WORKER_HANG"

type workerFlags struct {
	DetectorOptions
	slots, slotBytes int
}

func parseWorkerFlags(args []string) (workerFlags, error) {
	var f workerFlags
	var detector string
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&detector, "detector", "", "detector options as JSON (infer.DetectorOptions)")
	fs.IntVar(&f.slots, "slots", 1, "frame slots in the memfd on fd 3")
	fs.IntVar(&f.slotBytes, "slot-bytes", DefaultSlotBytes, "bytes per frame slot")
	if err := fs.Parse(args); err != nil {
		return f, fmt.Errorf("worker flags: %w", err)
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("worker flags: unexpected argument %q", fs.Arg(0))
	}
	dec := json.NewDecoder(strings.NewReader(detector))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f.DetectorOptions); err != nil {
		return f, fmt.Errorf("worker flags: -detector: %w", err)
	}
	f.setDefaults()
	switch {
	case f.slots < 1:
		return f, fmt.Errorf("worker flags: -slots %d must be >= 1", f.slots)
	case f.slotBytes < 1:
		return f, fmt.Errorf("worker flags: -slot-bytes %d must be >= 1", f.slotBytes)
	}
	if err := f.validate(); err != nil {
		return f, fmt.Errorf("worker flags: -detector: %w", err)
	}
	return f, nil
}

// WorkerMain is the `visiond worker` subcommand: it loads the model, says hello on fd 5
// and serves jobs from fd 4 on the frame slots mapped from fd 3 until fd 4 ends (nil),
// ctx is done (nil) or the stream breaks (an error naming what was wrong). A startup
// failure is also sent to the daemon as a hello carrying the error. stderr is its log.
func WorkerMain(ctx context.Context, args []string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var st unix.Stat_t
	if err := unix.Fstat(fdResults, &st); err != nil {
		return fmt.Errorf("worker: fd 5 (results) is not open (%v); workers are started by the daemon", err)
	}
	results := os.NewFile(fdResults, "results")
	defer results.Close()
	jobs, slots, slotBytes, det, err := startWorker(args, log)
	if err != nil {
		_ = writeMessage(results, message{Type: msgHello, Hello: &helloMsg{PID: os.Getpid(), Error: err.Error()}})
		return err
	}
	defer unix.Munmap(slots)
	defer jobs.Close()
	defer det.Close()
	info := det.Model()
	if err := writeMessage(results, message{Type: msgHello, Hello: &helloMsg{
		PID: os.Getpid(), Model: info.Path, InputW: info.InputW, InputH: info.InputH,
		Classes: info.Classes, Provider: info.Provider,
	}}); err != nil {
		return fmt.Errorf("worker: write hello: %w", err)
	}
	log.Info("worker ready", "model", info.Path, "input", fmt.Sprintf("%dx%d", info.InputW, info.InputH),
		"classes", len(info.Classes), "provider", info.Provider)
	hangAt, _ := strconv.Atoi(os.Getenv(hangEnv))

	// A closed jobs pipe unblocks the read below when ctx ends.
	stop := context.AfterFunc(ctx, func() { jobs.Close() })
	defer stop()

	nslots := len(slots) / slotBytes
	frameBytes := info.InputW * info.InputH * 3
	r := bufio.NewReader(jobs)
	var buf []byte
	dets := make([]Detection, 0, 300)
	for n := 1; ; n++ {
		var m message
		m, buf, err = readMessage(r, buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("worker: read job: %w", err)
		}
		if m.Type != msgJob {
			return fmt.Errorf("worker: read job: %w: got a %q message", ErrBadMessage, m.Type)
		}
		if n == hangAt {
			log.Warn("test hook: hanging in this job", "env", hangEnv, "job", m.Job.ID)
			for {
				time.Sleep(time.Hour)
			}
		}
		if m.Job.ShrinkArenas {
			spec := det.shrinkSpec()
			t0 := time.Now()
			if err := det.shrinkArenas(spec); err != nil {
				log.Warn("arena shrinkage failed", "job", m.Job.ID, "err", err)
			} else {
				log.Info("arenas shrunk", "job", m.Job.ID, "arenas", spec, "took", time.Since(t0).Round(time.Microsecond))
			}
		}
		res := resultMsg{ID: m.Job.ID}
		if err := checkJob(m.Job, nslots, info.InputW, info.InputH); err != nil {
			res.Error = err.Error()
		} else {
			off := m.Job.Slot * slotBytes
			var tm Timings
			dets, tm, err = det.Detect(slots[off:off+frameBytes], m.Job.Letterbox, dets)
			if err != nil {
				res.Error = fmt.Sprintf("job %d: %v", m.Job.ID, err)
			}
			res.Detections = dets
			res.PreUS, res.RunUS, res.PostUS = tm.Pre.Microseconds(), tm.Run.Microseconds(), tm.Post.Microseconds()
		}
		if res.Error != "" {
			log.Warn("job rejected", "job", m.Job.ID, "camera", m.Job.Camera, "err", res.Error)
		}
		if err := writeMessage(results, message{Type: msgResult, Result: &res}); err != nil {
			return fmt.Errorf("worker: write result of job %d: %w", m.Job.ID, err)
		}
	}
}

func startWorker(args []string, log *slog.Logger) (jobs *os.File, slots []byte, slotBytes int, det *Detector, err error) {
	f, err := parseWorkerFlags(args)
	if err != nil {
		return nil, nil, 0, nil, err
	}
	size := f.slots * f.slotBytes
	var st unix.Stat_t
	if err := unix.Fstat(fdSlots, &st); err != nil {
		return nil, nil, 0, nil, fmt.Errorf("worker: fd 3 (frame slots): %w", err)
	}
	if st.Size < int64(size) {
		return nil, nil, 0, nil, fmt.Errorf("worker: fd 3 (frame slots) has %d bytes, -slots %d x -slot-bytes %d needs %d",
			st.Size, f.slots, f.slotBytes, size)
	}
	// openDetector runs the model once: a provider that cannot run fails here (or falls
	// back to the CPU when Fallback says so), before the hello, not on the first frame.
	det, err = openDetector(f.DetectorOptions, log.Warn)
	if err != nil {
		return nil, nil, 0, nil, fmt.Errorf("worker: %w", err)
	}
	info := det.Model()
	if need := info.InputW * info.InputH * 3; need > f.slotBytes {
		det.Close()
		return nil, nil, 0, nil, fmt.Errorf("worker: model input %dx%d RGB24 needs %d bytes, -slot-bytes is %d",
			info.InputW, info.InputH, need, f.slotBytes)
	}
	slots, err = unix.Mmap(fdSlots, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		det.Close()
		return nil, nil, 0, nil, fmt.Errorf("worker: map frame slots (fd 3, %d bytes): %w", size, err)
	}
	// Non-blocking so that the runtime poller serves it and Close unblocks a pending read.
	if err := unix.SetNonblock(fdJobs, true); err != nil {
		unix.Munmap(slots)
		det.Close()
		return nil, nil, 0, nil, fmt.Errorf("worker: fd 4 (jobs): %w", err)
	}
	return os.NewFile(fdJobs, "jobs"), slots, f.slotBytes, det, nil
}

// elapsedUS converts worker-reported microseconds to a Duration.
func elapsedUS(us int64) time.Duration { return time.Duration(us) * time.Microsecond }
