package pool

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/infer/worker/workertest"
)

// A worker of two sessions holds four jobs (two slots per session) and runs two at once:
// with the Overlap hook its first two session runs wait until both are running, which a
// worker running one job at a time never passes (the jobs would time out). Every job gets
// its frame's detections, each once.
func TestPoolSessions(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, _ := testPoolConfig(t, a)
	cfg.Sessions, cfg.Threads = 2, 1
	cfg.Env = append(cfg.Env, workertest.OverlapEnv+"=2")
	p := startPool(t, cfg)
	if o, ok := p.Offer(); !ok || o.Slots != 4 || o.Sessions != 2 || o.InFlight != 0 {
		t.Fatalf("offer of an idle worker of 2 sessions: %+v %v", o, ok)
	}
	pix, lb, w, h := messiFrame(t, a)
	results := make(chan infer.Result, 8)
	for seq := uint64(1); seq <= 4; seq++ {
		if !p.TryDispatch(infer.Job{Camera: "messi", Seq: seq, Letterbox: lb}, infer.RGB(pix), func(r infer.Result) { results <- r }) {
			t.Fatalf("job %d refused: %+v", seq, p.Workers()[0])
		}
	}
	if p.TryDispatch(infer.Job{Seq: 5, Letterbox: lb}, infer.RGB(pix), func(infer.Result) { t.Error("fifth job dispatched to a full worker") }) {
		t.Fatal("TryDispatch accepted a fifth job with 2 sessions x 2 slots")
	}
	seen := map[uint64]bool{}
	for range 4 {
		r := waitResult(t, results)
		if r.Err != nil || seen[r.Job.Seq] {
			t.Fatalf("job %d: %v (seen %v)", r.Job.Seq, r.Err, seen)
		}
		seen[r.Job.Seq] = true
		infertest.CheckMessi(t, r.Detections, w, h)
	}
	if s := p.Workers()[0]; s.Jobs != 4 || s.Lost != 0 || s.InFlight != 0 || s.State != infer.WorkerIdle {
		t.Errorf("status %+v", s)
	}
}

// kill -9 of a worker of two sessions with its four jobs in flight (two running, slowed by
// an hour, two waiting behind them): every one is reported lost, once, and counted.
func TestPoolSessionsWorkerLost(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, _ := testPoolConfig(t, a)
	cfg.Sessions, cfg.Threads = 2, 1
	cfg.Env = append(cfg.Env, workertest.SlowEnv+"=1h")
	p := startPool(t, cfg)
	pix, lb, _, _ := messiFrame(t, a)
	results := make(chan infer.Result, 8)
	for seq := uint64(1); seq <= 4; seq++ {
		if !p.TryDispatch(infer.Job{Seq: seq, Letterbox: lb}, infer.RGB(pix), func(r infer.Result) { results <- r }) {
			t.Fatalf("job %d refused", seq)
		}
	}
	s := p.Workers()[0]
	if s.InFlight != 4 {
		t.Fatalf("want four jobs in flight: %+v", s)
	}
	if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for range 4 {
		r := waitResult(t, results)
		if !errors.Is(r.Err, infer.ErrWorkerLost) || r.Detections != nil || seen[r.Job.Seq] {
			t.Fatalf("job %d of a killed worker: %+v (seen %v)", r.Job.Seq, r, seen)
		}
		seen[r.Job.Seq] = true
	}
	s = waitIdle(t, p, 0, 1)
	if s.Lost != 4 || s.Jobs != 0 {
		t.Fatalf("after restart: %+v", s)
	}
	select {
	case r := <-results:
		t.Fatalf("a lost job reported twice: %+v", r)
	default:
	}
}

// fakeWorkerEnv makes the test binary a worker that breaks the result protocol (TestMain):
// "unknown" answers each job with a result naming a job never sent, "twice" answers each
// job twice.
const fakeWorkerEnv = "VISIOND_TEST_FAKE_WORKER"

// fakeWorker is a worker process that says hello for a 640x640 model and then answers jobs
// as fakeWorkerEnv says.
func fakeWorker(mode string) error {
	results := os.NewFile(infer.FDResults, "results")
	jobs := bufio.NewReader(os.NewFile(infer.FDJobs, "jobs"))
	if err := infer.WriteMessage(results, infer.Message{Type: infer.MsgHello, Hello: &infer.HelloMsg{
		PID: os.Getpid(), Model: "fake.onnx", InputW: 640, InputH: 640, Classes: []string{"person"}, Provider: "cpu"}}); err != nil {
		return err
	}
	for {
		m, _, err := infer.ReadMessage(jobs, nil)
		if err != nil {
			return err
		}
		res := infer.Message{Type: infer.MsgResult, Result: &infer.ResultMsg{ID: m.Job.ID}}
		n := 1
		switch mode {
		case "unknown":
			res.Result.ID += 1000
		case "twice":
			n = 2
		default:
			return fmt.Errorf("%s=%q: want unknown or twice", fakeWorkerEnv, mode)
		}
		for range n {
			if err := infer.WriteMessage(results, res); err != nil {
				return err
			}
		}
	}
}

// A result that names no job in flight (one never sent, or one answered already) breaks
// the protocol: the pool kills the worker, reports its jobs lost, says why and replaces it.
func TestPoolResultNotInFlight(t *testing.T) {
	a := infertest.ThirdParty(t)
	pix, lb, _, _ := messiFrame(t, a)
	for _, tc := range []struct{ mode, want string }{
		{"unknown", "result for job 1001, which is not in flight on this worker"},
		{"twice", "result for job 1, which is not in flight on this worker"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg, log := testPoolConfig(t, a)
			cfg.Sessions = 2
			cfg.Env = append(cfg.Env, fakeWorkerEnv+"="+tc.mode)
			p := startPool(t, cfg)
			r := waitResult(t, dispatch(t, p, infer.Job{Seq: 1, Letterbox: lb}, pix))
			if tc.mode == "unknown" && (!errors.Is(r.Err, infer.ErrWorkerLost) || !strings.Contains(r.Err.Error(), tc.want)) {
				t.Fatalf("job of a worker answering another job: %v, want ErrWorkerLost naming %q", r.Err, tc.want)
			}
			if tc.mode == "twice" && r.Err != nil {
				t.Fatalf("first answer: %v", r.Err)
			}
			s := waitIdle(t, p, 0, 1)
			if !strings.Contains(log.String(), tc.want) || !strings.Contains(log.String(), "bad protocol message") {
				t.Fatalf("log does not say %q:\n%s", tc.want, log)
			}
			wantLost := uint64(0)
			if tc.mode == "unknown" {
				wantLost = 1
			}
			if s.Lost != wantLost {
				t.Errorf("status %+v, want %d lost", s, wantLost)
			}
		})
	}
}

// A worker of two sessions whose session hangs in a job (the hang hook) still answers the
// job sent after it, on its other session, as that finishes; the hung job then times out
// (its clock ran from its dispatch), and the worker is replaced.
func TestPoolSessionsHang(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, log := testPoolConfig(t, a)
	cfg.Sessions, cfg.Threads = 2, 1
	cfg.JobTimeout = 15 * time.Second        // far above a run on a loaded 2-core box under -race
	cfg.StopTimeout = 200 * time.Millisecond // a hung worker outlives its job stream: killed after this
	cfg.Env = append(cfg.Env, workertest.HangEnv+"=2")
	p := startPool(t, cfg)
	pix, lb, w, h := messiFrame(t, a)
	if r := waitResult(t, dispatch(t, p, infer.Job{Seq: 1, Letterbox: lb}, pix)); r.Err != nil {
		t.Fatalf("first job: %v", r.Err)
	}
	hung := dispatch(t, p, infer.Job{Seq: 2, Letterbox: lb}, pix)
	next := dispatch(t, p, infer.Job{Seq: 3, Letterbox: lb}, pix)
	select {
	case r := <-hung:
		t.Fatalf("the hung job ended before the one behind it: %+v", r)
	case r := <-next:
		if r.Err != nil {
			t.Fatalf("job 3, on the other session: %v", r.Err)
		}
		infertest.CheckMessi(t, r.Detections, w, h)
	case <-time.After(2 * time.Minute):
		t.Fatal("no result")
	}
	if r := waitResult(t, hung); !errors.Is(r.Err, infer.ErrJobTimeout) || r.Job.Seq != 2 {
		t.Fatalf("hung job: want ErrJobTimeout, got %+v", r)
	}
	s := waitIdle(t, p, 0, 1)
	if s.Lost != 1 || s.Jobs != 2 {
		t.Fatalf("after timeout: %+v", s)
	}
	if !strings.Contains(log.String(), "test hook: hanging in this job") {
		t.Error("the hang hook did not fire")
	}
}

// A worker of s sessions is expected to answer a new job after ceil((n+1)/s) runs when it
// holds n jobs (DispatchAcross): an idle worker of 4 sessions holding 3 jobs answers as soon
// as an idle worker of one session, sooner than one of one session holding one job.
func TestOfferWait(t *testing.T) {
	const run = 10 * time.Millisecond
	for _, tc := range []struct {
		o    Offer
		want time.Duration
	}{
		{Offer{InFlight: 0, Sessions: 1}, run},
		{Offer{InFlight: 1, Sessions: 1}, 2 * run},
		{Offer{InFlight: 0, Sessions: 0}, run}, // an Offer built without sessions: one
		{Offer{InFlight: 3, Sessions: 4}, run},
		{Offer{InFlight: 4, Sessions: 4}, 2 * run},
		{Offer{InFlight: 7, Sessions: 4}, 2 * run},
		{Offer{InFlight: 8, Sessions: 4}, 3 * run},
	} {
		if got := tc.o.wait(run); got != tc.want {
			t.Errorf("%+v: wait %v, want %v", tc.o, got, tc.want)
		}
	}
}

// Sessions out of range is refused at Start, naming the field.
func TestPoolSessionsBadInput(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, _ := testPoolConfig(t, a)
	cfg.Sessions = infer.MaxSessions + 1
	if err := New(cfg).Start(t.Context()); err == nil || !strings.Contains(err.Error(), "Sessions 65 must be in 1..64") {
		t.Errorf("Sessions 65: %v", err)
	}
}

// The pool calls a worker's done callbacks on its reader, one after the other, and starts
// no goroutine for a result: with two sessions running side by side, no callback of the
// worker runs while another does, and each job's comes once.
func TestPoolSessionsCallbacksHandOver(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, _ := testPoolConfig(t, a)
	cfg.Sessions, cfg.Threads = 2, 1
	p := startPool(t, cfg)
	pix, lb, _, _ := messiFrame(t, a)
	const jobs = 4
	var running, overlapped atomic.Int32
	results := make(chan infer.Result, jobs)
	done := func(r infer.Result) {
		if running.Add(1) > 1 {
			overlapped.Add(1)
		}
		time.Sleep(20 * time.Millisecond) // a slow hand-over: a second callback would overlap it
		running.Add(-1)
		results <- r
	}
	for seq := uint64(1); seq <= jobs; seq++ {
		if !p.TryDispatch(infer.Job{Camera: "messi", Seq: seq, Letterbox: lb}, infer.RGB(pix), done) {
			t.Fatalf("job %d refused", seq)
		}
	}
	for range jobs {
		if r := waitResult(t, results); r.Err != nil {
			t.Fatalf("job %d: %v", r.Job.Seq, r.Err)
		}
	}
	if n := overlapped.Load(); n > 0 {
		t.Errorf("%d callbacks ran while another did: the pool ran them on goroutines of its own", n)
	}
}
