package pool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/visiond/visiond/infer"
)

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

// terminate asks the worker to stop by ending its job stream, at the end of which it
// answers the jobs it holds and exits, and kills it if it has not exited within bound. No
// signal asks it: a worker ignores SIGINT and SIGTERM, which reach it when they are sent to
// the daemon's process group (worker.IgnoreStopSignals).
func (pr *proc) terminate(bound time.Duration) {
	pr.jobsW.Close()
	pr.awaitExit(bound)
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
