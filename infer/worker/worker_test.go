package worker_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/infer/worker/workertest"
	"github.com/visiond/visiond/internal/geom"
)

// TestMain lets the test binary act as a worker process (workertest), for the tests that
// drive one over its pipes.
func TestMain(m *testing.M) {
	workertest.Main()
	os.Exit(m.Run())
}

// rawWorker is a worker process driven by hand over its pipes, without a Pool.
type rawWorker struct {
	cmd    *exec.Cmd
	jobs   *os.File
	res    *bufio.Reader
	stderr bytes.Buffer
	mem    []byte
}

func startRawWorker(t *testing.T, slots int) *rawWorker {
	t.Helper()
	return startRawWorkerWith(t, slots, 1)
}

// startRawWorkerWith starts a raw worker of sessions sessions, with env added to its
// environment (workertest hooks).
func startRawWorkerWith(t *testing.T, slots, sessions int, env ...string) *rawWorker {
	t.Helper()
	a := infertest.ThirdParty(t)
	const slotBytes = 640 * 640 * 3
	fd, err := unix.MemfdCreate("test-frames", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	memfd := os.NewFile(uintptr(fd), "frames")
	t.Cleanup(func() { memfd.Close() })
	if err := unix.Ftruncate(fd, int64(slots*slotBytes)); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, slots*slotBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	jobsR, jobsW, _ := os.Pipe()
	resR, resW, _ := os.Pipe()
	w := &rawWorker{jobs: jobsW, res: bufio.NewReader(resR), mem: mem}
	w.cmd = exec.Command(os.Args[0], "-detector", fmt.Sprintf(`{"model":%q,"library":%q,"threads":2}`, a.Model, a.Library),
		"-slots", strconv.Itoa(slots), "-slot-bytes", "1228800", "-sessions", strconv.Itoa(sessions))
	w.cmd.Env = append(append(os.Environ(), workertest.Enable), env...)
	w.cmd.ExtraFiles = []*os.File{memfd, jobsR, resW}
	w.cmd.Stderr = &w.stderr
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	jobsR.Close()
	resW.Close()
	t.Cleanup(func() {
		jobsW.Close()
		resR.Close()
		w.cmd.Process.Kill()
		w.cmd.Wait()
	})
	m, _, err := infer.ReadMessage(w.res, nil)
	if err != nil || m.Type != infer.MsgHello || m.Hello.Error != "" {
		t.Fatalf("hello: %+v %v", m.Hello, err)
	}
	return w
}

func (w *rawWorker) job(t *testing.T, j infer.JobMsg) *infer.ResultMsg {
	t.Helper()
	if err := infer.WriteMessage(w.jobs, infer.Message{Type: infer.MsgJob, Job: &j}); err != nil {
		t.Fatal(err)
	}
	m, _, err := infer.ReadMessage(w.res, nil)
	if err != nil || m.Type != infer.MsgResult || m.Result.ID != j.ID {
		t.Fatalf("result of job %d: %+v %v", j.ID, m, err)
	}
	return m.Result
}

// TestWorkerProtocol drives a real worker: bad jobs get error results and the worker keeps
// serving; a broken stream ends it with a clear error.
func TestWorkerProtocol(t *testing.T) {
	w := startRawWorker(t, 2)
	lb := geom.NewLetterbox(640, 640, 640, 640)
	if r := w.job(t, infer.JobMsg{ID: 1, Slot: 5, Letterbox: lb}); !strings.Contains(r.Error, "job 1: slot 5 out of range [0,2)") {
		t.Errorf("slot out of range: %+v", r)
	}
	if r := w.job(t, infer.JobMsg{ID: 2, Slot: 0, Letterbox: geom.NewLetterbox(640, 640, 320, 320)}); !strings.Contains(r.Error, "letterbox canvas 320x320 does not match model input 640x640") {
		t.Errorf("letterbox mismatch: %+v", r)
	}
	for i := range w.mem {
		w.mem[i] = geom.PadValue
	}
	if r := w.job(t, infer.JobMsg{ID: 3, Slot: 1, Letterbox: lb}); r.Error != "" || r.RunUS <= 0 {
		t.Errorf("good job after bad ones: %+v", r)
	}
	// An oversized frame breaks the stream: the worker exits with that error.
	w.jobs.Write(binary.LittleEndian.AppendUint32(nil, infer.MaxFrameSize+1)) // a length past the limit
	err := w.cmd.Wait()
	if err == nil || !strings.Contains(w.stderr.String(), "protocol frame too large") {
		t.Fatalf("worker exit %v, stderr:\n%s", err, w.stderr.String())
	}
}

// send writes a job without waiting for its result.
func (w *rawWorker) send(t *testing.T, j infer.JobMsg) {
	t.Helper()
	if err := infer.WriteMessage(w.jobs, infer.Message{Type: infer.MsgJob, Job: &j}); err != nil {
		t.Fatal(err)
	}
}

// A worker of two sessions runs two jobs at once: with the Overlap hook, its first two
// session runs wait until both are running, which one session alone never passes (its
// first job would never be answered). Both jobs are answered, by different sessions, with
// the detections of their frames; then it serves four jobs in flight at once (its four
// slots), each answered once.
func TestWorkerSessions(t *testing.T) {
	a := infertest.ThirdParty(t)
	w := startRawWorkerWith(t, 4, 2, workertest.OverlapEnv+"=2")
	pix, lb, fw, fh := infertest.MessiFrame(t, a, worker.LetterboxImage)
	const slotBytes = 1228800
	for s := range 4 {
		copy(w.mem[s*slotBytes:], pix)
	}
	results := make(chan *infer.ResultMsg, 8)
	errs := make(chan error, 1)
	go func() {
		for {
			m, _, err := infer.ReadMessage(w.res, nil)
			if err != nil {
				errs <- err
				return
			}
			results <- m.Result
		}
	}()
	next := func() *infer.ResultMsg {
		t.Helper()
		select {
		case r := <-results:
			return r
		case err := <-errs:
			t.Fatalf("worker ended: %v; stderr:\n%s", err, w.stderr.String())
		case <-time.After(2 * time.Minute):
			t.Fatalf("no result: the sessions did not run at once; stderr:\n%s", w.stderr.String())
		}
		return nil
	}
	w.send(t, infer.JobMsg{ID: 1, Slot: 0, Camera: "a", Letterbox: lb})
	w.send(t, infer.JobMsg{ID: 2, Slot: 1, Camera: "b", Letterbox: lb})
	seen := map[uint64]int{}
	for range 2 {
		r := next()
		if r.Error != "" {
			t.Fatalf("job %d: %s", r.ID, r.Error)
		}
		infertest.CheckMessi(t, r.Detections, fw, fh)
		checkDescriptors(t, r.Detections)
		seen[r.ID] = r.Session
	}
	if len(seen) != 2 || seen[1] == seen[2] {
		t.Fatalf("jobs 1 and 2 by sessions %v, want one each", seen)
	}
	for id := uint64(3); id <= 6; id++ {
		w.send(t, infer.JobMsg{ID: id, Slot: int(id-3) % 4, Letterbox: lb})
	}
	for range 4 {
		r := next()
		if r.Error != "" || r.ID < 3 || r.ID > 6 || r.Session < 0 || r.Session > 1 {
			t.Fatalf("result %+v", r)
		}
		if _, dup := seen[r.ID]; dup {
			t.Fatalf("job %d answered twice", r.ID)
		}
		seen[r.ID] = r.Session
		infertest.CheckMessi(t, r.Detections, fw, fh)
		checkDescriptors(t, r.Detections)
	}
}

// checkDescriptors fails unless every detection came with an appearance descriptor
// (protocol version 3): on the wire exactly appearance.Size bytes (the decoder refuses any
// other length), here a non-zero byte in every stripe.
func checkDescriptors(t *testing.T, dets []infer.Detection) {
	t.Helper()
	for _, d := range dets {
		for s := range appearance.Stripes {
			if stripe := d.Appearance[s*appearance.Bins : (s+1)*appearance.Bins]; !slices.ContainsFunc(stripe, func(b byte) bool { return b != 0 }) {
				t.Errorf("%s at %+v: stripe %d of its appearance descriptor is empty: %v", d.Label, d.Box, s, d.Appearance)
			}
		}
	}
}

// A worker given -sessions out of range says why in its hello and exits.
func TestWorkerBadSessions(t *testing.T) {
	a := infertest.ThirdParty(t)
	fd, err := unix.MemfdCreate("test-frames", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	memfd := os.NewFile(uintptr(fd), "frames")
	defer memfd.Close()
	jobsR, jobsW, _ := os.Pipe()
	resR, resW, _ := os.Pipe()
	defer jobsW.Close()
	defer resR.Close()
	cmd := exec.Command(os.Args[0], "-detector", fmt.Sprintf(`{"model":%q,"library":%q}`, a.Model, a.Library), "-sessions", "0")
	cmd.Env = append(os.Environ(), workertest.Enable)
	cmd.ExtraFiles = []*os.File{memfd, jobsR, resW}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	jobsR.Close()
	resW.Close()
	m, _, err := infer.ReadMessage(bufio.NewReader(resR), nil)
	if err != nil || m.Type != infer.MsgHello || !strings.Contains(m.Hello.Error, "-sessions 0 must be in 1..64") {
		t.Errorf("hello %+v, err %v: want an error naming -sessions", m.Hello, err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("worker exited 0 after a bad -sessions")
	}
}
