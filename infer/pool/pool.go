// Package pool is the daemon's side of inference: a Pool starts worker processes (`visiond
// worker`, package infer/worker) on one device, hands them frames through shared-memory
// slots and job messages (the protocol of package infer), and supervises them: a worker
// that exits, breaks the protocol, misses a job's deadline or outgrows a memory limit has
// its jobs reported as lost (infer.ErrWorkerLost, infer.ErrJobTimeout) or is recycled
// between jobs, and is replaced: at once after a healthy run, after a jittered, growing
// delay when it keeps failing. DispatchAcross spreads jobs over the pools of several
// devices.
//
// It does not link ONNX Runtime: a crash or a hang there costs a worker process, never the
// daemon.
package pool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// Config configures a Pool. Zero values take the documented defaults.
type Config struct {
	Count int // worker processes; default 1
	// DetectorOptions are each worker's model, library, provider and thresholds (MaxDet is
	// the worker's default).
	infer.DetectorOptions

	// JobTimeout bounds the wait for each job's result; a worker that misses it is killed
	// (ErrJobTimeout for that job, ErrWorkerLost for the jobs queued behind it). A job's
	// clock starts when it is the oldest job of its worker not answered: at its dispatch,
	// or at the answer to the job ahead of it if that comes later. Since a worker serves
	// its jobs in order, that bounds the time a job spends in the worker's run without
	// charging it the runs of the jobs ahead of it. Default 10 s.
	JobTimeout   time.Duration
	StartTimeout time.Duration // from exec to hello (model load); default 2 min
	StopTimeout  time.Duration // SIGTERM to SIGKILL on Close; default 5 s
	// RestartDelay is the delay before restarting a worker whose replacement failed to
	// start or ended within a minute, doubled per further failure, jittered; default
	// 250 ms. The first restart after a healthy run is immediate (supervise).
	RestartDelay    time.Duration
	MaxRestartDelay time.Duration // cap of the restart delay; default 30 s
	// Slots is the number of frame slots per worker, and so the jobs a worker holds at
	// once: while it runs one, it prepares the next and answers the previous. Default 2.
	// 1: one job at a time.
	Slots     int
	SlotBytes int // bytes per slot; default DefaultSlotBytes (1280x1280 RGB24)

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
		c.JobTimeout = 10 * time.Second
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
	f := infer.WorkerFlags{Detector: c.DetectorOptions, Slots: c.Slots, SlotBytes: c.SlotBytes}
	return append(slices.Clone(c.Command), f.Args()...)
}

// Pool runs Count worker processes and hands each up to Slots jobs at a time, which it
// answers in order.
type Pool struct {
	cfg    Config
	ctx    context.Context // ends on Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // supervisors and done callbacks

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
	inflight  []*pending // jobs sent to pr, oldest first: the order of their results
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
		w, err := newWorker(i, p.cfg.Slots*p.cfg.SlotBytes)
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

// TryDispatch hands the job to a worker with a free slot and returns true, or returns
// false at once if every worker holds Slots jobs (or the pool is not running). It picks
// the worker with the fewest jobs in flight, so that an idle worker is preferred to a
// busy one and latency stays low while there is capacity; ties go round-robin. pix,
// RGB24 HWC of the model's input size letterboxed as job.Letterbox says, is copied before
// TryDispatch returns. done is called exactly once, from a goroutine of the pool, with
// the result; the results of one worker's jobs come in dispatch order. done must not
// block for long.
func (p *Pool) TryDispatch(job infer.Job, pix []byte, done func(infer.Result)) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.started {
		return false
	}
	w := p.pick()
	if w == nil {
		return false
	}
	p.next = (w.index + 1) % len(p.workers)
	if err := p.checkInput(pix, job.Letterbox); err != nil {
		res := infer.Result{Job: job, Worker: w.index, Err: fmt.Errorf("%w: camera %q seq %d: %v", infer.ErrJobRejected, job.Camera, job.Seq, err)}
		p.wg.Go(func() { done(res) })
		return true
	}
	slot := freeSlot(w.inflight, p.cfg.Slots)
	copy(w.mem[slot*p.cfg.SlotBytes:], pix)
	p.nextID++
	pr := w.pr
	if len(w.inflight) == 0 {
		// The oldest job's clock (Config.JobTimeout); readResults moves it on.
		pr.resR.SetReadDeadline(time.Now().Add(p.cfg.JobTimeout))
	}
	w.inflight = append(w.inflight, &pending{id: p.nextID, slot: slot, job: job, done: done, started: time.Now()})
	w.state = infer.WorkerBusy
	err := infer.WriteMessage(pr.jobsW, infer.Message{Type: infer.MsgJob, Job: &infer.JobMsg{
		ID: p.nextID, Slot: slot, Camera: job.Camera, Seq: job.Seq, Letterbox: job.Letterbox,
		ShrinkArenas: w.shrink,
	}})
	w.shrink = false
	if err != nil {
		// The worker is gone or going; its supervisor reports its jobs as lost.
		pr.note(fmt.Errorf("write job: %w", err))
		pr.kill()
	}
	return true
}

// Offer is what a pool offers the next job: the worker TryDispatch would pick now.
type Offer struct {
	InFlight int           // that worker's jobs in flight
	Slots    int           // its slots (Config.Slots)
	Run      time.Duration // the pool's moving average of its jobs' session runs; 0 before one ran
}

// Offer returns what the pool offers the next job; ok is false if no worker has a free
// slot (TryDispatch would refuse it).
func (p *Pool) Offer() (o Offer, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.started {
		return Offer{}, false
	}
	w := p.pick()
	if w == nil {
		return Offer{}, false
	}
	return Offer{InFlight: len(w.inflight), Slots: p.cfg.Slots, Run: p.runEst}, true
}

// DispatchAcross hands the job to the pool, of pools, expected to answer it first, and
// returns false if no pool has a free slot; done is as for TryDispatch.
//
// A worker answers its jobs one after another, so a job given to a worker holding n jobs
// is expected back after (n+1) runs of its pool (Offer.Run): that wait decides, then the
// load (n over slots), then the order of pools. So an idle slow device does not take a
// job that a fast one would answer sooner even behind the job it holds, a slow pool
// listed first does not get the jobs a faster one would answer sooner, and pools of
// about equal speed share the jobs by load, as the workers of one pool do. A pool not
// measured yet is taken to be as fast as the fastest measured one: it gets jobs by load
// until its first runs say what it is worth (before any run, it is the least-loaded
// worker across pools, the first pool on a tie).
func DispatchAcross(pools []*Pool, job infer.Job, pix []byte, done func(infer.Result)) bool {
	type offer struct {
		Offer
		ok bool
	}
	var buf [8]offer
	offers := buf[:0]
	var fastest time.Duration
	for _, p := range pools {
		o, ok := p.Offer()
		offers = append(offers, offer{o, ok})
		if ok && o.Run > 0 && (fastest == 0 || o.Run < fastest) {
			fastest = o.Run
		}
	}
	best := -1
	var bestWait time.Duration
	var bestLoad float64
	for i, o := range offers {
		if !o.ok {
			continue
		}
		run := o.Run
		if run == 0 {
			run = fastest
		}
		wait, load := time.Duration(o.InFlight+1)*run, float64(o.InFlight)/float64(o.Slots)
		if best < 0 || wait < bestWait || wait == bestWait && load < bestLoad {
			best, bestWait, bestLoad = i, wait, load
		}
	}
	if best < 0 {
		return false
	}
	if pools[best].TryDispatch(job, pix, done) {
		return true
	}
	for i, p := range pools { // its worker was lost since its offer: any other will do
		if i != best && p.TryDispatch(job, pix, done) {
			return true
		}
	}
	return false
}

// runEstWeight is the weight of a new run in Pool.runEst: about the last 8 runs count.
const runEstWeight = 8

// pick returns the worker the next job goes to, or nil if none has a free slot: the one
// with the fewest jobs in flight, ties going round-robin. Called with p.mu held.
func (p *Pool) pick() *worker {
	var w *worker
	for k := range p.workers {
		c := p.workers[(p.next+k)%len(p.workers)]
		if p.accepts(c) && (w == nil || len(c.inflight) < len(w.inflight)) {
			w = c
		}
	}
	return w
}

// accepts says whether w can take a job now: its process serves, is not to be recycled
// and has a free slot. Called with p.mu held.
func (p *Pool) accepts(w *worker) bool {
	return (w.state == infer.WorkerIdle || w.state == infer.WorkerBusy) && w.pr != nil &&
		w.recycle == "" && !w.recycling && len(w.inflight) < p.cfg.Slots
}

// freeSlot returns a slot no job in flight uses. The daemon writes a slot only after the
// job on it has been answered (protocol.go), so the worker never reads a frame being
// overwritten. There is one: len(inflight) < slots.
func freeSlot(inflight []*pending, slots int) int {
	for s := range slots {
		if !slices.ContainsFunc(inflight, func(pd *pending) bool { return pd.slot == s }) {
			return s
		}
	}
	panic("infer: no free slot") // accepts checked len(inflight) < slots
}

// ShrinkArenas makes the next job of each worker run with ONNX Runtime's arena
// shrinkage (protocol.go: "shrink_arenas"), which hands back the memory the arenas hold
// beyond what runs need. Call it when the camera set or a resolution changes, never per
// frame: a shrink costs one extra session run.
func (p *Pool) ShrinkArenas() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		w.shrink = true
	}
}

func (p *Pool) checkInput(pix []byte, lb geom.Letterbox) error {
	m := p.model
	if want := m.InputW * m.InputH * 3; len(pix) != want {
		return fmt.Errorf("frame has %d bytes, model input %dx%d RGB24 needs %d", len(pix), m.InputW, m.InputH, want)
	}
	return lb.Check(m.InputW, m.InputH)
}

// Close stops the workers (SIGTERM, SIGKILL after StopTimeout), reports jobs in flight
// with ErrPoolClosed and waits for every goroutine of the pool. Safe to call twice.
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

// supervise serves w's current process until it ends, then replaces it, until the pool
// closes. A process that had been healthy (served for healthyRun, or was recycled) is
// replaced at once: a crash, a kill or a hang then costs one process start and nothing
// more. Only when a replacement fails to start, or ends before healthyRun, does the next
// start wait a jittered delay growing from RestartDelay to MaxRestartDelay, so that a
// worker that keeps crashing does not spin.
func (p *Pool) supervise(w *worker) {
	defer p.wg.Done()
	log := p.cfg.Logger.With("worker", w.index)
	attempt := 0 // starts since the last healthy process; 0: the next one starts at once
	for {
		started := time.Now()
		err := p.serve(w)
		if p.ctx.Err() != nil {
			p.setState(w, infer.WorkerStopped)
			return
		}
		recycled := errors.Is(err, errRecycled)
		if recycled {
			log.Info("worker stopped to be recycled", "err", err, "served", time.Since(started).Round(time.Millisecond))
		} else {
			log.Warn("worker ended", "err", err, "served", time.Since(started).Round(time.Millisecond))
		}
		if recycled || time.Since(started) > healthyRun {
			attempt = 0 // it had been healthy: replace it at once
		}
		for {
			var delay time.Duration
			if attempt > 0 {
				delay = backoff(p.cfg.RestartDelay, p.cfg.MaxRestartDelay, attempt-1)
			}
			attempt++
			p.setState(w, infer.WorkerRestarting)
			log.Info("restarting worker", "in", delay.Round(time.Millisecond), "attempt", attempt)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-p.ctx.Done():
				t.Stop()
				p.setState(w, infer.WorkerStopped)
				return
			}
			p.setState(w, infer.WorkerStarting)
			pr, hello, err := p.launch(p.ctx, w)
			if err == nil {
				p.mu.Lock()
				w.pr, w.state, w.provider = pr, infer.WorkerIdle, hello.Provider
				w.restarts++
				w.shrink = false // a fresh process has nothing to shrink
				p.mu.Unlock()
				log.Info("worker restarted", "pid", pr.pid)
				break
			}
			if p.ctx.Err() != nil {
				p.setState(w, infer.WorkerStopped)
				return
			}
			log.Error("worker restart failed", "err", err)
		}
	}
}

// healthyRun is how long a worker process must have served for its end to be replaced at
// once (supervise); one that ends sooner is restarted with backoff.
const healthyRun = time.Minute

// backoff is base*2^attempt capped at maxDelay, drawn uniformly from its upper half.
func backoff(base, maxDelay time.Duration, attempt int) time.Duration {
	d := maxDelay
	if attempt < 30 {
		d = min(maxDelay, base<<attempt)
	}
	return d/2 + rand.N(d/2+1)
}

func (p *Pool) setState(w *worker, s infer.WorkerState) {
	p.mu.Lock()
	w.state = s
	p.mu.Unlock()
}

// serve reads w's results until its process ends or breaks the protocol, then reports
// every job still in flight as lost (or timed out).
func (p *Pool) serve(w *worker) error {
	p.mu.Lock()
	pr := w.pr
	p.mu.Unlock()

	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-p.ctx.Done():
			pr.terminate(p.cfg.StopTimeout)
		case <-quit:
		}
	})
	err := p.readResults(w, pr)
	p.mu.Lock()
	w.state = infer.WorkerRestarting // no new job for this process
	recycling, why := w.recycling, w.recycle
	p.mu.Unlock()
	if recycling {
		pr.awaitExit(p.cfg.StopTimeout) // it stops at the end of its job stream
	} else {
		pr.kill() // no-op if it already exited
	}
	close(quit)
	wg.Wait()
	pr.close()
	if n := pr.noted(); n != nil {
		err = fmt.Errorf("%w (%v)", err, n)
	}
	err = fmt.Errorf("worker %d (pid %d): %w; %s", w.index, pr.pid, err, pr.exitDescription())

	p.mu.Lock()
	pend := w.inflight
	w.inflight, w.pr = nil, nil
	w.rss, w.gpu, w.recycle, w.recycling = 0, 0, "", false
	w.lost += uint64(len(pend))
	if recycling && len(pend) == 0 {
		w.recycles++
		err = fmt.Errorf("%w (%s): %v", errRecycled, why, err)
	}
	p.mu.Unlock()
	// Every job in flight ends with an error, in order: the oldest timed out when no
	// result came (the worker hung in it or before it), the others were lost with it.
	for i, pd := range pend {
		res := infer.Result{Job: pd.job, Worker: w.index, PID: pr.pid, Total: time.Since(pd.started)}
		switch {
		case p.ctx.Err() != nil:
			res.Err = fmt.Errorf("%w: %v", infer.ErrPoolClosed, err)
		case errors.Is(err, errNoResult) && i == 0:
			res.Err = fmt.Errorf("%w: %v", infer.ErrJobTimeout, err)
		case errors.Is(err, errNoResult):
			res.Err = fmt.Errorf("%w: queued behind job %d, which timed out: %v", infer.ErrWorkerLost, pend[0].id, err)
		default:
			res.Err = fmt.Errorf("%w: %v", infer.ErrWorkerLost, err)
		}
		pd.done(res)
	}
	return err
}

func (p *Pool) readResults(w *worker, pr *proc) error {
	r := bufio.NewReader(pr.resR)
	var buf []byte
	for {
		var m infer.Message
		var err error
		m, buf, err = infer.ReadMessage(r, buf)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("%w within %v", errNoResult, p.cfg.JobTimeout)
		case errors.Is(err, io.EOF):
			return errors.New("worker closed its results pipe")
		case err != nil:
			return fmt.Errorf("read result: %w", err)
		case m.Type != infer.MsgResult:
			return fmt.Errorf("read result: %w: got a %q message", infer.ErrBadMessage, m.Type)
		}
		p.mu.Lock()
		if len(w.inflight) == 0 || w.inflight[0].id != m.Result.ID {
			p.mu.Unlock()
			return fmt.Errorf("read result: %w: result for job %d, not the oldest job in flight", infer.ErrBadMessage, m.Result.ID)
		}
		pend := w.inflight[0]
		w.inflight = slices.Delete(w.inflight, 0, 1)
		w.jobs++
		tm := m.Result.Timings()
		if run := tm.Run; m.Result.Error == "" && run > 0 {
			if p.runEst == 0 {
				p.runEst = run
			} else {
				p.runEst += (run - p.runEst) / runEstWeight
			}
		}
		if len(w.inflight) > 0 {
			// The next job's clock starts now (Config.JobTimeout).
			pr.resR.SetReadDeadline(time.Now().Add(p.cfg.JobTimeout))
		} else {
			pr.resR.SetReadDeadline(time.Time{}) // before idle: the next dispatch sets its own
			w.state = infer.WorkerIdle
			if w.recycle != "" {
				p.stopToRecycle(w)
			}
		}
		p.mu.Unlock()

		rm := m.Result
		res := infer.Result{
			Job: pend.job, Detections: rm.Detections, Worker: w.index, PID: pr.pid,
			Pre: tm.Pre, Run: tm.Run, Post: tm.Post,
			Total: time.Since(pend.started),
		}
		if rm.Error != "" {
			res.Err = fmt.Errorf("%w: worker %d: %s", infer.ErrJobRejected, w.index, rm.Error)
		}
		pend.done(res)
	}
}

// errNoResult: the oldest job in flight passed its deadline.
var errNoResult = errors.New("no result")

// errRecycled: the worker was stopped between jobs for being over a memory limit.
var errRecycled = errors.New("recycled")

// stopToRecycle closes the job stream of w's idle process, which then exits: its reader
// sees the end of the results and serve replaces it. Called with p.mu held.
func (p *Pool) stopToRecycle(w *worker) {
	w.state = infer.WorkerRestarting // no new job for this process
	w.recycling = true
	w.pr.jobsW.Close()
	w.pr.resR.SetReadDeadline(time.Now().Add(p.cfg.StopTimeout)) // should it not exit
}

// monitorMemory samples the memory of every worker each MemoryInterval until Close.
func (p *Pool) monitorMemory() {
	defer p.wg.Done()
	log := p.cfg.Logger.With("component", "memory")
	t := time.NewTicker(p.cfg.MemoryInterval)
	defer t.Stop()
	var gpuErr string // the last GPU memory command error, logged once until it changes
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		p.sampleMemory(log, &gpuErr)
	}
}

// sampleMemory reads each worker's RSS and GPU memory, and marks a worker over a limit
// for recycling: at once when idle, else when its last job in flight is answered
// (readResults); it gets no new job meanwhile.
func (p *Pool) sampleMemory(log *slog.Logger, gpuErr *string) {
	p.mu.Lock()
	samples := make([]memorySample, len(p.workers))
	for i, w := range p.workers {
		if w.pr != nil {
			samples[i].pid = w.pr.pid
		}
	}
	p.mu.Unlock()

	for i := range samples {
		if samples[i].pid != 0 {
			samples[i].rss, _ = readRSS("/proc", samples[i].pid) // an error: it just exited
		}
	}
	if len(p.cfg.GPUMemoryCommand) > 0 {
		gpu, err := gpuMemory(p.ctx, p.cfg.GPUMemoryCommand, 5*time.Second)
		switch {
		case err != nil && p.ctx.Err() == nil && err.Error() != *gpuErr:
			log.Warn("cannot read GPU memory per process (repeats are not logged)", "err", err)
			*gpuErr = err.Error()
		case err == nil && *gpuErr != "":
			log.Info("GPU memory per process readable again")
			*gpuErr = ""
		}
		for i := range samples {
			samples[i].gpu = gpu[samples[i].pid]
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for i, w := range p.workers {
		s := samples[i]
		if w.pr == nil || w.pr.pid != s.pid {
			continue // restarted meanwhile
		}
		w.rss, w.gpu = s.rss, s.gpu
		why := overLimit(s, p.cfg.MemoryLimit, p.cfg.GPUMemoryLimit)
		if why == "" || w.recycle != "" || w.recycling {
			continue
		}
		w.recycle = why
		log.Warn("recycling worker between jobs", "worker", w.index, "pid", s.pid, "reason", why,
			"rss_bytes", s.rss, "gpu_bytes", s.gpu, "busy", len(w.inflight) > 0, "in_flight", len(w.inflight))
		if w.state == infer.WorkerIdle && len(w.inflight) == 0 {
			p.stopToRecycle(w)
		}
	}
}

// proc is one worker process with its pipes.
type proc struct {
	cmd      *exec.Cmd
	pid      int
	jobsW    *os.File      // daemon -> worker
	resR     *os.File      // worker -> daemon
	exited   chan struct{} // closed once the process has been waited for
	wg       sync.WaitGroup
	mu       sync.Mutex
	tail     []string // last stderr lines
	firstErr error    // a write error seen by TryDispatch
}

const tailLines = 8

// launch starts a worker process for w and waits for its hello.
func (p *Pool) launch(ctx context.Context, w *worker) (*proc, *infer.HelloMsg, error) {
	log := p.cfg.Logger.With("worker", w.index)
	jobsR, jobsW, err := os.Pipe()
	if err != nil {
		return nil, nil, fmt.Errorf("infer: worker %d: %w", w.index, err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		jobsR.Close()
		jobsW.Close()
		return nil, nil, fmt.Errorf("infer: worker %d: %w", w.index, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		jobsR.Close()
		jobsW.Close()
		resR.Close()
		resW.Close()
		return nil, nil, fmt.Errorf("infer: worker %d: %w", w.index, err)
	}
	argv := p.cfg.workerArgs()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	cmd.Stdout, cmd.Stderr = errW, errW
	cmd.ExtraFiles = []*os.File{w.memfd, jobsR, resW} // fds 3, 4, 5
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	began := time.Now()
	err = cmd.Start()
	jobsR.Close()
	resW.Close()
	errW.Close()
	if err != nil {
		jobsW.Close()
		resR.Close()
		errR.Close()
		return nil, nil, fmt.Errorf("infer: worker %d: start %s: %w", w.index, argv[0], err)
	}
	pr := &proc{cmd: cmd, pid: cmd.Process.Pid, jobsW: jobsW, resR: resR, exited: make(chan struct{})}
	pr.wg.Go(func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		close(pr.exited)
	})
	pr.wg.Go(func() { pr.forwardLog(errR, log.With("pid", pr.pid)) })

	fail := func(err error) (*proc, *infer.HelloMsg, error) {
		pr.kill()
		pr.close()
		return nil, nil, fmt.Errorf("infer: worker %d (pid %d): %w", w.index, pr.pid, err)
	}
	resR.SetReadDeadline(time.Now().Add(p.cfg.StartTimeout))
	stop := context.AfterFunc(ctx, func() { resR.SetReadDeadline(time.Now()) })
	m, _, err := infer.ReadMessage(resR, nil)
	stop()
	resR.SetReadDeadline(time.Time{})
	switch {
	case err != nil && ctx.Err() != nil:
		return fail(fmt.Errorf("start cancelled: %w", ctx.Err()))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fail(fmt.Errorf("no hello within %v", p.cfg.StartTimeout))
	case err != nil:
		pr.kill()
		pr.close()
		return nil, nil, fmt.Errorf("infer: worker %d (pid %d) ended before its hello (%v); %s",
			w.index, pr.pid, err, pr.exitDescription())
	case m.Type != infer.MsgHello:
		return fail(fmt.Errorf("%w: first message is %q, want hello", infer.ErrBadMessage, m.Type))
	case m.Hello.Error != "":
		return fail(errors.New(m.Hello.Error))
	case m.Hello.InputW*m.Hello.InputH*3 > p.cfg.SlotBytes:
		return fail(fmt.Errorf("model input %dx%d does not fit a slot of %d bytes", m.Hello.InputW, m.Hello.InputH, p.cfg.SlotBytes))
	}
	if m.Hello.Provider != string(p.cfg.Provider) {
		log.Warn("worker runs on a fallback provider", "pid", pr.pid, "configured", p.cfg.Provider, "provider", m.Hello.Provider)
	}
	log.Info("worker started", "pid", pr.pid, "model", m.Hello.Model, "provider", m.Hello.Provider,
		"took", time.Since(began).Round(time.Millisecond)) // exec to hello; the worker's log says where it went
	return pr, m.Hello, nil
}

// forwardLog logs each stderr line of the worker and keeps the last few for errors.
func (pr *proc) forwardLog(r *os.File, log *slog.Logger) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := br.ReadString('\n')
		if line = strings.TrimSpace(stripANSI(line)); line != "" {
			log.Info("worker log", "line", line)
			pr.mu.Lock()
			pr.tail = append(pr.tail, line)
			if len(pr.tail) > tailLines {
				pr.tail = pr.tail[1:]
			}
			pr.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func stripANSI(s string) string {
	if !strings.Contains(s, "\x1b[") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (pr *proc) note(err error) {
	pr.mu.Lock()
	if pr.firstErr == nil {
		pr.firstErr = err
	}
	pr.mu.Unlock()
}

func (pr *proc) noted() error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.firstErr
}

func (pr *proc) kill() {
	select {
	case <-pr.exited:
	default:
		_ = pr.cmd.Process.Kill()
	}
}

// awaitExit waits up to bound for the process to exit on its own, then kills it.
func (pr *proc) awaitExit(bound time.Duration) {
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-pr.exited:
	case <-t.C:
		pr.kill()
	}
}

// terminate asks the worker to stop (end of its job stream, SIGTERM) and kills it if it
// has not exited within bound.
func (pr *proc) terminate(bound time.Duration) {
	pr.jobsW.Close()
	select {
	case <-pr.exited:
		return
	default:
	}
	_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-pr.exited:
	case <-t.C:
		_ = pr.cmd.Process.Kill()
	}
}

// close waits for the process and its log, then closes the daemon's pipe ends.
func (pr *proc) close() {
	pr.wg.Wait()
	pr.jobsW.Close()
	pr.resR.Close()
}

// exitDescription says how the process ended and what it last logged. Call after close.
func (pr *proc) exitDescription() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	s := "exit: " + pr.cmd.ProcessState.String()
	if len(pr.tail) > 0 {
		s += "; stderr: " + strings.Join(pr.tail, " | ")
	}
	return s
}
