package pool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/visiond/visiond/infer"
)

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
	if recycling || p.ctx.Err() != nil {
		// It stops at the end of its job stream (recycled, or ended by Close through
		// terminate): a worker that has closed its results is exiting, not to be killed.
		pr.awaitExit(p.cfg.StopTimeout)
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
		i := slices.IndexFunc(w.inflight, func(pd *pending) bool { return pd.id == m.Result.ID })
		if i < 0 {
			p.mu.Unlock()
			return fmt.Errorf("read result: %w: result for job %d, which is not in flight on this worker", infer.ErrBadMessage, m.Result.ID)
		}
		pend := w.inflight[i]
		w.inflight = slices.Delete(w.inflight, i, i+1)
		w.jobs++
		tm := m.Result.Timings()
		if run := tm.Run; m.Result.Error == "" && run > 0 {
			if p.runEst == 0 {
				p.runEst = run
			} else {
				p.runEst += (run - p.runEst) / runEstWeight
			}
		}
		p.startClocks(w) // the jobs that move up start their clocks now (Config.JobTimeout)
		if len(w.inflight) == 0 {
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
		pend.done(res) // hands it over (TryDispatch): the next result waits for it
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
