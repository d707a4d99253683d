// Package pool is the daemon's side of inference: a Pool starts worker processes (`visiond
// worker`, package infer/worker) on one device, each running Config.Sessions sessions of the
// model at once, hands them frames through shared-memory slots and job messages (the
// protocol of package infer), and supervises them: a worker
// that exits, breaks the protocol, misses a job's deadline or outgrows a memory limit has
// its jobs reported as lost (infer.ErrWorkerLost, infer.ErrJobTimeout) or is recycled
// between jobs, and is replaced: at once after a healthy run, after a jittered, growing
// delay when it keeps failing. DispatchAcross spreads jobs over the pools of several
// devices. A job's result goes to its caller's callback, which must hand it over and return
// (TryDispatch): what happens to a result downstream is the caller's, on goroutines of its
// own.
//
// It does not link ONNX Runtime: a crash or a hang there costs a worker process, never the
// daemon.
package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
)

// DefaultJobTimeout is the default of Config.JobTimeout, and of the daemon's
// workers.job_timeout: the time a worker may take on one frame before it is killed.
const DefaultJobTimeout = 5 * time.Second

// Config configures a Pool. Zero values take the documented defaults.
type Config struct {
	Count int // worker processes; default 1
	// DetectorOptions are each worker's model, library, provider and thresholds (MaxDet is
	// the worker's default).
	infer.DetectorOptions

	// JobTimeout bounds the wait for each job's result; a worker that misses it is killed
	// (infer.ErrJobTimeout for the oldest job, infer.ErrWorkerLost for the others it held).
	// A job's clock starts when fewer than Sessions jobs sent to its worker before it are
	// unanswered: at its dispatch, or at the answer that brings it among the worker's
	// Sessions oldest jobs if that comes later. Since a worker's sessions take its jobs about
	// in order, that bounds the time a job spends in a session's run without charging it the
	// runs of the jobs ahead of it (with several sessions, a job may still wait behind the
	// run of one older job on its session: keep JobTimeout well above a run). Default
	// DefaultJobTimeout.
	JobTimeout   time.Duration
	StartTimeout time.Duration // from exec to hello (model load); default 2 min
	StopTimeout  time.Duration // end of a worker's job stream to SIGKILL on Close; default 5 s
	// RestartDelay is the delay before restarting a worker whose replacement failed to
	// start or ended within a minute, doubled per further failure, jittered; default
	// 250 ms. The first restart after a healthy run is immediate (supervise).
	RestartDelay    time.Duration
	MaxRestartDelay time.Duration // cap of the restart delay; default 30 s
	// Sessions is the number of ONNX Runtime sessions in each worker process, running jobs
	// at once in one runtime environment and, on a GPU, one CUDA context (infer/protocol.go).
	// Supervision, memory limits and crash accounting stay per process: a crash loses the
	// jobs of all its sessions. 1..infer.MaxSessions; default infer.DefaultSessions of the
	// provider.
	Sessions int
	// Slots is the number of frame slots per session, and so the jobs each session of a
	// worker holds at once: while it runs one, it prepares the next and answers the
	// previous. A worker holds Sessions*Slots jobs. Default 2. 1: one job at a time.
	Slots     int
	SlotBytes int // bytes per slot; default infer.DefaultSlotBytes (1280x1280 RGB24)

	// MemoryLimit is the resident memory (VmRSS) in bytes past which a worker is recycled:
	// it gets no new job, and when its jobs in flight have been answered it is stopped
	// gracefully and replaced.
	// 0: no limit.
	MemoryLimit int64
	// GPUMemoryLimit is the same for the GPU memory of a worker process, as
	// GPUMemoryCommand reports it. 0: no limit.
	GPUMemoryLimit int64
	// MemoryInterval is how often each worker's memory is sampled; default 5 s.
	MemoryInterval time.Duration
	// GPUMemoryCommand prints the GPU memory of each process as "pid, MiB" lines (the
	// format of DefaultGPUMemoryCommand). nil: DefaultGPUMemoryCommand() when Provider is
	// cuda or tensorrt, none for cpu. A non-nil empty slice: none, e.g. on a Jetson, where
	// memory is unified and RSSBytes is the figure to watch.
	GPUMemoryCommand []string

	Command []string // argv that starts a worker; default {os.Executable(), "worker"}; flags are appended
	Env     []string // extra environment of workers, appended to os.Environ()
	Logger  *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Count == 0 {
		c.Count = 1
	}
	c.DetectorOptions.SetDefaults()
	if c.JobTimeout == 0 {
		c.JobTimeout = DefaultJobTimeout
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 2 * time.Minute
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = 5 * time.Second
	}
	if c.RestartDelay == 0 {
		c.RestartDelay = 250 * time.Millisecond
	}
	if c.MaxRestartDelay == 0 {
		c.MaxRestartDelay = 30 * time.Second
	}
	if c.Sessions == 0 {
		c.Sessions = infer.DefaultSessions(c.Provider)
	}
	if c.Slots == 0 {
		c.Slots = 2
	}
	if c.SlotBytes == 0 {
		c.SlotBytes = infer.DefaultSlotBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MemoryInterval == 0 {
		c.MemoryInterval = 5 * time.Second
	}
	if c.GPUMemoryCommand == nil && c.Provider.GPU() {
		c.GPUMemoryCommand = DefaultGPUMemoryCommand()
	}
	if len(c.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("infer: worker command: %w", err)
		}
		c.Command = []string{exe, "worker"}
	}
	switch {
	case c.Count < 0:
		return fmt.Errorf("infer: Count %d must be positive", c.Count)
	case c.Model == "":
		return errors.New("infer: Model is empty")
	case c.Slots < 0 || c.SlotBytes < 0:
		return fmt.Errorf("infer: Slots %d and SlotBytes %d must be positive", c.Slots, c.SlotBytes)
	case c.Sessions < 1 || c.Sessions > infer.MaxSessions:
		return fmt.Errorf("infer: Sessions %d must be in 1..%d", c.Sessions, infer.MaxSessions)
	case c.MemoryLimit < 0 || c.GPUMemoryLimit < 0 || c.MemoryInterval < 0:
		return fmt.Errorf("infer: MemoryLimit %d, GPUMemoryLimit %d and MemoryInterval %v must not be negative",
			c.MemoryLimit, c.GPUMemoryLimit, c.MemoryInterval)
	}
	if err := c.DetectorOptions.Validate(); err != nil {
		return fmt.Errorf("infer: detector options: %w", err)
	}
	return nil
}

func (c *Config) workerArgs() []string {
	f := infer.WorkerFlags{Detector: c.DetectorOptions, Slots: c.workerSlots(), SlotBytes: c.SlotBytes, Sessions: c.Sessions}
	return append(slices.Clone(c.Command), f.Args()...)
}

// workerSlots is the number of frame slots, and of jobs in flight, of each worker.
func (c *Config) workerSlots() int { return c.Sessions * c.Slots }

// Pool runs Count worker processes and hands each up to Sessions*Slots jobs at a time,
// which its sessions answer as they finish them.
type Pool struct {
	cfg    Config
	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // supervisors and the memory monitor

	mu      sync.Mutex
	started bool
	closed  bool
	model   infer.ModelInfo
	workers []*worker
	next    int           // round-robin start of the worker search, which breaks ties
	nextID  uint64        // job ids
	runEst  time.Duration // moving average of the session runs of the pool's jobs; 0 before one
}

type worker struct {
	index int
	memfd *os.File
	mem   []byte // the daemon's mapping of memfd

	// guarded by Pool.mu
	state     infer.WorkerState
	pr        *proc
	provider  string
	inflight  []*pending // jobs sent to pr, oldest first
	jobs      uint64
	lost      uint64
	restarts  uint64
	recycles  uint64
	rss, gpu  int64  // last memory sample of pr
	recycle   string // why pr is to be recycled when idle (it gets no new job); "" if not
	recycling bool   // pr's job stream was closed to recycle it
	shrink    bool   // the next job asks for arena shrinkage
}

type pending struct {
	id      uint64
	slot    int
	job     infer.Job
	done    func(infer.Result)
	started time.Time // dispatch
	clock   time.Time // when its JobTimeout clock started; zero before (Config.JobTimeout)
}

// New returns a pool of cfg; Start starts its workers.
func New(cfg Config) *Pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &Pool{cfg: cfg, ctx: ctx, cancel: cancel}
}

// Start starts Count workers and waits for each one's hello. If one fails (bad model,
// missing library, unavailable provider), the others are stopped and Start returns that
// worker's error. ctx bounds the start only; the workers run until Close.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.started || p.closed {
		p.mu.Unlock()
		return errors.New("infer: pool already started or closed")
	}
	p.started = true
	p.mu.Unlock()
	if err := p.cfg.setDefaults(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(p.ctx, cancel) // Close during Start
	defer stop()

	workers := make([]*worker, p.cfg.Count)
	for i := range workers {
		w, err := newWorker(i, p.cfg.workerSlots()*p.cfg.SlotBytes)
		if err != nil {
			for _, w := range workers[:i] {
				w.release()
			}
			return err
		}
		workers[i] = w
	}
	procs := make([]*proc, len(workers))
	hellos := make([]*infer.HelloMsg, len(workers))
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() { procs[i], hellos[i], errs[i] = p.launch(ctx, w) })
	}
	wg.Wait()
	var err error
	for i, e := range errs { // the first failure; the others are most likely the same
		if e != nil && err == nil {
			err = e
		} else if e != nil {
			p.cfg.Logger.Error("worker failed to start", "worker", i, "err", e)
		}
	}
	if err == nil {
		for i, h := range hellos[1:] {
			if h.InputW != hellos[0].InputW || h.InputH != hellos[0].InputH || len(h.Classes) != len(hellos[0].Classes) {
				err = fmt.Errorf("infer: worker %d loaded a different model than worker 0", i+1)
			}
		}
	}
	if err != nil {
		for i, pr := range procs {
			if pr != nil {
				pr.terminate(p.cfg.StopTimeout)
				pr.close()
			}
			workers[i].release()
		}
		return err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for i, pr := range procs {
			pr.terminate(p.cfg.StopTimeout)
			pr.close()
			workers[i].release()
		}
		return infer.ErrPoolClosed
	}
	h := hellos[0]
	p.model = infer.ModelInfo{Path: h.Model, InputW: h.InputW, InputH: h.InputH, Classes: h.Classes, Provider: h.Provider}
	p.workers = workers
	for i, w := range workers {
		w.pr, w.state, w.provider = procs[i], infer.WorkerIdle, hellos[i].Provider
		p.wg.Add(1)
		go p.supervise(w)
	}
	p.wg.Add(1)
	go p.monitorMemory()
	return nil
}

func newWorker(index, size int) (*worker, error) {
	fd, err := unix.MemfdCreate("visiond-frames-"+strconv.Itoa(index), unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("infer: memfd for worker %d: %w", index, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("infer: size memfd of worker %d to %d bytes: %w", index, size, err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("infer: map memfd of worker %d: %w", index, err)
	}
	return &worker{index: index, memfd: os.NewFile(uintptr(fd), "frames"), mem: mem, state: infer.WorkerStarting}, nil
}

func (w *worker) release() {
	if w.mem != nil {
		unix.Munmap(w.mem)
		w.mem = nil
	}
	w.memfd.Close()
}

// Model describes the model the workers loaded (valid after Start).
func (p *Pool) Model() infer.ModelInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.model
	m.Classes = slices.Clone(m.Classes)
	return m
}

// Workers returns a snapshot of every worker slot.
func (p *Pool) Workers() []infer.WorkerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]infer.WorkerStatus, len(p.workers))
	for i, w := range p.workers {
		out[i] = infer.WorkerStatus{Index: w.index, State: w.state, Provider: w.provider, InFlight: len(w.inflight), Jobs: w.jobs, Lost: w.lost,
			Restarts: w.restarts, Recycles: w.recycles, RSSBytes: w.rss, GPUBytes: w.gpu}
		if w.pr != nil {
			out[i].PID = w.pr.pid
		}
	}
	return out
}

// Sessions is the number of sessions of all its workers (Count*Sessions): the jobs it runs
// at once.
func (p *Pool) Sessions() int { return p.cfg.Count * p.cfg.Sessions }

// ShrinkArenas makes the next job of each worker run with ONNX Runtime's arena
// shrinkage (infer/protocol.go: "shrink_arenas"), which hands back the memory the arenas hold
// beyond what runs need. Call it when the camera set or a resolution changes, never per
// frame: a shrink costs one extra session run.
func (p *Pool) ShrinkArenas() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		w.shrink = true
	}
}

// Close stops the workers: it ends their job streams, at the end of which each answers the
// jobs it holds and exits, and SIGKILLs one still running after StopTimeout. A job in flight
// that its worker did not answer ends with infer.ErrPoolClosed. A worker that ends once Close
// has begun is neither restarted nor logged as ended. Close waits for every goroutine of the
// pool: when it returns, every job's done has been called. Safe to call twice.
func (p *Pool) Close() {
	p.mu.Lock()
	first := !p.closed
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	if first {
		for _, w := range p.workers {
			w.release()
		}
	}
}
