package pipeline

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
)

// Two CPU pools from the config, one worker with two slots each: two jobs dispatched at
// once go one to each pool (the least-loaded worker across pools; infer.DispatchAcross
// has the rest), not both to the first pool, whose worker has a second slot free.
func TestWorkerPoolsDispatchAcrossPools(t *testing.T) {
	cfg := config.Workers{
		Model:      testutil.ThirdParty(t, "yolov8n.onnx"),
		Library:    testutil.ThirdParty(t, "libonnxruntime.so.1"),
		JobTimeout: time.Minute, // -race makes the workers slow
		Pools:      []config.WorkerPool{{Count: 1, Provider: "cpu", Threads: 1}, {Count: 1, Provider: "cpu", Threads: 1}},
	}
	var w workerPools
	defer w.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.start(ctx, cfg, []string{os.Args[0]}, []string{workerEnv}, testutil.Logger(t)); err != nil {
		t.Fatal(err)
	}
	pix := bytes.Repeat([]byte{geom.PadValue}, 640*640*3)
	lb := geom.NewLetterbox(640, 480, 640, 640)
	results := make(chan infer.Result, 4)
	for seq := uint64(1); seq <= 2; seq++ {
		if !w.TryDispatch(infer.Job{Camera: "blank", Seq: seq, Letterbox: lb}, infer.RGB(pix), func(r infer.Result) { results <- r }) {
			t.Fatalf("job %d refused", seq)
		}
	}
	ws := w.workers()
	// One job in each pool (or already done: a loaded machine may hold this test up for
	// longer than a job takes), never two in the first; the results' pids tell where they ran.
	if len(ws) != 2 || ws[0].InFlight > 1 || ws[1].InFlight > 1 {
		t.Fatalf("workers %+v, want one job in flight in each pool", ws)
	}
	pids := map[int]bool{}
	for range 2 {
		select {
		case r := <-results:
			if r.Err != nil {
				t.Fatalf("job %d: %v", r.Job.Seq, r.Err)
			}
			pids[r.PID] = true
		case <-time.After(time.Minute):
			t.Fatal("no result")
		}
	}
	if !pids[ws[0].PID] || !pids[ws[1].PID] {
		t.Errorf("results from pids %v, want both workers %d and %d", pids, ws[0].PID, ws[1].PID)
	}
}
