package infer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testLog collects the pool's log for assertions and failure output.
type testLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func testPoolConfig(t *testing.T, a assets) (PoolConfig, *testLog) {
	log := &testLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pool log:\n%s", log)
		}
	})
	return PoolConfig{
		Count:           1,
		DetectorOptions: DetectorOptions{Model: a.model, Library: a.library, Threads: 2},
		JobTimeout:      time.Minute, // -race makes the worker slow
		RestartDelay:    20 * time.Millisecond,
		Command:         []string{os.Args[0]},
		Env:             []string{workerEnv + "=1"},
		Logger:          slog.New(slog.NewTextHandler(log, nil)),
	}, log
}

func startPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	p := NewPool(cfg)
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return p
}

// dispatch hands one job to the pool and returns a channel with its result.
func dispatch(t *testing.T, p *Pool, job Job, pix []byte) <-chan Result {
	t.Helper()
	ch := make(chan Result, 2) // 2: a second call of done would show in the test
	if !p.TryDispatch(job, pix, func(r Result) { ch <- r }) {
		t.Fatal("TryDispatch: no idle worker")
	}
	return ch
}

func waitResult(t *testing.T, ch <-chan Result) Result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(2 * time.Minute):
		t.Fatal("no result")
		return Result{}
	}
}

// waitIdle waits until worker i serves again with at least restarts restarts.
func waitIdle(t *testing.T, p *Pool, i int, restarts uint64) WorkerStatus {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if s := p.Workers()[i]; s.State == WorkerIdle && s.Restarts >= restarts {
			return s
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("worker %d not idle after %d restarts: %+v", i, restarts, p.Workers()[i])
	return WorkerStatus{}
}

func TestPoolStillImage(t *testing.T) {
	a := thirdParty(t)
	cfg, log := testPoolConfig(t, a)
	cfg.Count = 2
	p := startPool(t, cfg)
	m := p.Model()
	if m.InputW != 640 || m.InputH != 640 || len(m.Classes) != 80 || m.Provider != "cpu" || m.Path != a.model {
		t.Fatalf("model %+v", m)
	}
	pix, lb, w, h := messiFrame(t, a)
	job := Job{Camera: "messi", Seq: 1, Captured: time.Now(), Letterbox: lb}
	ch := dispatch(t, p, job, pix)
	job2 := job
	job2.Seq = 2
	ch2 := dispatch(t, p, job2, pix)
	if p.TryDispatch(job, pix, func(Result) { t.Error("third job dispatched to a busy pool") }) {
		t.Fatal("TryDispatch accepted a job with every worker busy")
	}
	r, r2 := waitResult(t, ch), waitResult(t, ch2)
	if r.Err != nil || r2.Err != nil {
		t.Fatal(r.Err, r2.Err)
	}
	if r.PID == os.Getpid() || r.PID == 0 || r2.PID == r.PID || r.Worker == r2.Worker {
		t.Fatalf("results from pids %d and %d (workers %d, %d); test pid %d", r.PID, r2.PID, r.Worker, r2.Worker, os.Getpid())
	}
	if r2.Job.Seq != 2 || len(r2.Detections) != len(r.Detections) {
		t.Errorf("second worker: %+v", r2)
	}
	if r.Job.Camera != "messi" || r.Job.Seq != 1 || r.Run <= 0 || r.Total < r.Run {
		t.Errorf("result %+v", r)
	}
	checkMessi(t, r.Detections, w, h)
	t.Logf("pre %v run %v post %v total %v: %d detections", r.Pre, r.Run, r.Post, r.Total, len(r.Detections))

	// A letterbox for another input size is rejected without reaching the worker.
	bad := lb
	bad.DstW, bad.DstH = 320, 320
	r = waitResult(t, dispatch(t, p, Job{Letterbox: bad}, pix))
	if !errors.Is(r.Err, ErrJobRejected) || !strings.Contains(r.Err.Error(), "does not match model input 640x640") {
		t.Errorf("bad letterbox: %v", r.Err)
	}
	for _, s := range p.Workers() {
		if s.PID == 0 || s.State != WorkerIdle || s.Jobs != 1 || s.Lost != 0 || s.Restarts != 0 {
			t.Errorf("status %+v", s)
		}
	}
	if !strings.Contains(log.String(), "worker ready") {
		t.Errorf("worker stderr not forwarded to the log")
	}
	p.Close()
	p.Close()
	if p.TryDispatch(job, pix, func(Result) {}) {
		t.Error("TryDispatch after Close")
	}
	for _, s := range p.Workers() {
		if s.State != WorkerStopped || s.PID != 0 {
			t.Errorf("after Close: %+v", s)
		}
	}
}

func TestPoolStartErrors(t *testing.T) {
	a := thirdParty(t)
	garbage := t.TempDir() + "/corrupt.onnx"
	if err := os.WriteFile(garbage, []byte{0x08, 0xff, 0x13, 0x37, 0x00, 0x42}, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		edit    func(*PoolConfig)
		wantErr []string
	}{
		{"corrupt model", func(c *PoolConfig) { c.Model = garbage }, []string{garbage}},
		{"missing model", func(c *PoolConfig) { c.Model = "/nonexistent/yolo.onnx" }, []string{"/nonexistent/yolo.onnx", "no such file"}},
		{"missing library", func(c *PoolConfig) { c.Library = "/nonexistent/libonnxruntime.so" }, []string{"/nonexistent/libonnxruntime.so"}},
		{"cuda", func(c *PoolConfig) { c.Provider = "cuda" }, []string{"provider cuda (device 0) unavailable"}},
		{"bad command", func(c *PoolConfig) { c.Command = []string{"/nonexistent/visiond"} }, []string{"start /nonexistent/visiond"}},
		{"small slot", func(c *PoolConfig) { c.SlotBytes = 1000 }, []string{"needs 1228800 bytes, -slot-bytes is 1000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := testPoolConfig(t, a)
			cfg.Count = 2
			tc.edit(&cfg)
			p := NewPool(cfg)
			defer p.Close()
			err := p.Start(context.Background())
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err %q does not name %q", err, want)
				}
			}
			t.Logf("%v", err)
		})
	}
}

func TestPoolWorkerLost(t *testing.T) {
	a := thirdParty(t)
	cfg, log := testPoolConfig(t, a)
	p := startPool(t, cfg)
	pix, lb, w, h := messiFrame(t, a)
	job := Job{Camera: "messi", Seq: 1, Letterbox: lb}

	// kill -9 mid-job: the job is lost, never a success.
	ch := dispatch(t, p, job, pix)
	pid := p.Workers()[0].PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	r := waitResult(t, ch)
	if !errors.Is(r.Err, ErrWorkerLost) || r.Detections != nil {
		t.Fatalf("job of a killed worker: %+v", r)
	}
	t.Logf("lost: %v", r.Err)

	// It comes back and serves, promptly: the restart delay (20 ms here) plus a model
	// load and a warm-up run.
	s := waitIdle(t, p, 0, 1)
	if s.PID == pid || s.Lost != 1 {
		t.Fatalf("after restart: %+v (old pid %d)", s, pid)
	}
	r = waitResult(t, dispatch(t, p, Job{Seq: 2, Letterbox: lb}, pix))
	if r.Err != nil || r.PID != s.PID {
		t.Fatalf("after restart: %+v", r)
	}
	served := time.Since(killed)
	t.Logf("a replacement served %v after the kill", served.Round(time.Millisecond))
	if served > 2*time.Second*replaceSlack {
		t.Errorf("replacement served %v after the kill, want within 2 s (x%d slack for -race and a loaded box)", served, replaceSlack)
	}
	checkMessi(t, r.Detections, w, h)
	if !strings.Contains(log.String(), "restarting worker") {
		t.Errorf("restart not logged")
	}
}

// replaceSlack widens the 2 s bound on replacing a killed worker: model load and warm-up
// run slower under -race on a 2-core box.
const replaceSlack = 3

// A worker that hangs in a job (the VISIOND_TEST_WORKER_HANG hook: in its 2nd job) is
// killed after JobTimeout, its job reported as timed out, and a replacement serves.
func TestPoolJobTimeout(t *testing.T) {
	a := thirdParty(t)
	cfg, log := testPoolConfig(t, a)
	cfg.JobTimeout = 2 * time.Second
	cfg.Env = append(cfg.Env, hangEnv+"=2")
	p := startPool(t, cfg)
	pix, lb, w, h := messiFrame(t, a)
	pid := p.Workers()[0].PID
	r := waitResult(t, dispatch(t, p, Job{Seq: 1, Letterbox: lb}, pix))
	if r.Err != nil {
		t.Fatalf("first job: %v", r.Err)
	}
	start := time.Now()
	r = waitResult(t, dispatch(t, p, Job{Seq: 2, Letterbox: lb}, pix))
	if !errors.Is(r.Err, ErrJobTimeout) || r.Detections != nil {
		t.Fatalf("want ErrJobTimeout, got %+v", r)
	}
	if took := time.Since(start); took < 2*time.Second || took > 4*time.Second {
		t.Errorf("timeout reported after %v, want about 2 s", took)
	}
	t.Logf("timeout: %v", r.Err)
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("hung worker %d still runs", pid)
	}
	s := waitIdle(t, p, 0, 1)
	if s.PID == pid || s.Lost != 1 || s.Jobs != 1 {
		t.Fatalf("after timeout: %+v (old pid %d)", s, pid)
	}
	r = waitResult(t, dispatch(t, p, Job{Seq: 3, Letterbox: lb}, pix))
	if r.Err != nil || r.PID != s.PID {
		t.Fatalf("job after the timeout: %+v", r)
	}
	checkMessi(t, r.Detections, w, h)
	if !strings.Contains(log.String(), "test hook: hanging in this job") {
		t.Error("the hang hook did not fire")
	}
}

func TestBackoff(t *testing.T) {
	base, maxd := 100*time.Millisecond, time.Second
	for attempt, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		if attempt == 5 {
			attempt = 60 // no overflow
		}
		for range 20 {
			if d := backoff(base, maxd, attempt); d < want/2 || d > want {
				t.Fatalf("attempt %d: %v not in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}
