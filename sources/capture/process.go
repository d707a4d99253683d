package capture

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say how to start a capture process.
type Options struct {
	// Command is the argv that starts a capture process. Default {os.Executable(), "capture"}.
	Command []string
	// Env is added to the process's environment (which is the daemon's, plus ChildEnv).
	Env []string
	// Pipeline is the GStreamer pipeline to read. Required.
	Pipeline string
	// Logger receives the process's stdout and stderr lines, at debug level. Default
	// slog.Default().
	Logger *slog.Logger
	// Scrub hides secrets in the lines of the process's output before they are logged or
	// quoted in errors. Default: none.
	Scrub func(string) string
}

const (
	tailLines = 4       // last output lines kept for errors
	pipeSize  = 1 << 20 // frames pipe capacity asked of the kernel (default 64 KiB)
	exitWait  = 5 * time.Second
)

// Process is a running capture process, seen from the daemon. Next and ReadFrame are called
// from one goroutine; Close may be called from any, once, and ends a blocked Next.
type Process struct {
	*Reader
	cmd    *exec.Cmd
	pid    int
	frames *os.File      // read end of the process's fd 3
	logR   *os.File      // read end of its stdout and stderr
	logged chan struct{} // closed when forwardLog returns
	scrub  func(string) string
	exited chan struct{} // closed once the process has been waited for
	wg     sync.WaitGroup
	mu     sync.Mutex
	tail   []string // last output lines, scrubbed
	notes  []string // last warnings and errors among them, without OpenCV's prefix
	closed bool
}

// Start starts a capture process for o.Pipeline and hands it the request. It does not wait
// for the pipeline to open: the first message (Next) says whether it did.
func Start(o Options) (*Process, error) {
	if os.Getenv(childEnvVar) == "1" {
		// A test binary that started as a capture process without RunIfChild would run its
		// tests, whose cameras would start more of them.
		return nil, errors.New("capture: a capture process does not start capture processes (a test binary's TestMain lacks capture.RunIfChild?)")
	}
	argv := o.Command
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("capture: finding the executable: %w", err)
		}
		argv = []string{exe, Subcommand}
	}
	if o.Scrub == nil {
		o.Scrub = func(s string) string { return s }
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	req, err := json.Marshal(Request{Pipeline: o.Pipeline})
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	var opened []*os.File
	closeAll := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			opened = append(opened, r, w)
		}
		return r, w, err
	}
	framesR, framesW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	inR, inW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("capture: %w", err)
	}
	logR, logW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("capture: %w", err)
	}
	growPipe(framesR)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), o.Env...), ChildEnv)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, logW, logW
	cmd.ExtraFiles = []*os.File{framesW} // fd 3
	// Its own process group: a terminal's ^C or GNU timeout signals the daemon's group, and
	// the daemon, not the signal, ends its cameras' captures (Close). Pdeathsig: it dies
	// with the daemon.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, fmt.Errorf("capture: start %s: %w", argv[0], err)
	}
	inR.Close()
	framesW.Close()
	logW.Close()
	p := &Process{Reader: NewReader(framesR), cmd: cmd, pid: cmd.Process.Pid, frames: framesR, logR: logR,
		scrub: o.Scrub, exited: make(chan struct{}), logged: make(chan struct{})}
	p.wg.Go(func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		close(p.exited)
	})
	log := o.Logger.With("pid", p.pid)
	p.wg.Go(func() { p.forwardLog(logR, log) })
	// The request is far below the pipe's capacity, so this does not block on a stuck child.
	_, err = inW.Write(append(req, '\n'))
	inW.Close()
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("capture: writing the request to pid %d: %w; %s", p.pid, err, p.ExitDescription())
	}
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.pid }

// forwardLog logs each output line of the process and keeps the last few for errors.
func (p *Process) forwardLog(r *os.File, log *slog.Logger) {
	defer close(p.logged)
	br := bufio.NewReaderSize(r, 4096)
	for {
		line, err := br.ReadString('\n')
		if line = strings.TrimSpace(line); line != "" {
			line = p.scrub(line)
			log.Debug("capture process", "line", line)
			p.mu.Lock()
			p.tail = keepLast(p.tail, line)
			if n, ok := note(line); ok {
				p.notes = keepLast(p.notes, n)
			}
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// Ended waits (up to a few seconds, then kills it) for a process whose messages ended, and
// says how it ended and what it last printed, leaving out lines that hold known (the
// process's last message, which it also prints).
func (p *Process) Ended(known string) string {
	t := time.NewTimer(exitWait)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.endLog()
	return p.describe(known)
}

// endLog waits briefly for the rest of the output of an exited process, then stops reading
// it: a helper the process started (GStreamer's plugin scanner) may still hold the pipe.
func (p *Process) endLog() {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-p.logged:
	case <-t.C:
	}
	p.logR.Close()
	p.wg.Wait()
}

// ExitDescription says how the process ended (if it has) and what it last printed.
func (p *Process) ExitDescription() string { return p.describe("") }

func (p *Process) describe(known string) string {
	s := fmt.Sprintf("capture process %d", p.pid)
	select {
	case <-p.exited:
		s += ": " + p.cmd.ProcessState.String()
	default:
		s += ": running"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := p.notes
	if len(lines) == 0 {
		lines = p.tail
	}
	var tail []string
	for _, l := range lines {
		if known == "" || !strings.Contains(l, known) {
			tail = append(tail, l)
		}
	}
	if len(tail) > 0 {
		s += "; output: " + strings.Join(tail, " | ")
	}
	return s
}

// Close kills the process, whatever it is doing (a blocked open or read included), ends a
// blocked Next, and waits for the process to be reaped. Safe to call twice.
func (p *Process) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.mu.Unlock()
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
	}
	p.frames.Close() // ends a Next blocked in a read, even if another process holds the write end
	<-p.exited       // SIGKILL: at once
	p.endLog()
}

func keepLast(lines []string, line string) []string {
	lines = append(lines, line)
	if len(lines) > tailLines {
		lines = lines[1:]
	}
	return lines
}

// note returns what a line of the process's output says, if it is a warning or an error:
// OpenCV's GStreamer warnings without their source-file prefix ("[ WARN:0@0.06] global
// .../cap_gstreamer.cpp (2401) handleMessage OpenCV | GStreamer warning: "), GStreamer's
// ERROR and WARN debug lines, and the process's own last word. GLib's criticals (from
// OpenCV's teardown of a failed pipeline) say nothing of the cause, and span lines.
func note(line string) (string, bool) {
	if _, after, ok := strings.Cut(line, "GStreamer warning: "); ok {
		return after, true
	}
	for _, k := range []string{"ERROR", "WARN", "capture: "} {
		if strings.Contains(line, k) {
			return line, true
		}
	}
	return "", false
}

// growPipe asks for a larger pipe, so a frame crosses in a few writes instead of one per
// 64 KiB; a refusal (a lower /proc/sys/fs/pipe-max-size) leaves the default.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		const fSetPipeSz = 1031 // F_SETPIPE_SZ
		_, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, fSetPipeSz, pipeSize)
	})
}
