package pipeline

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
)

// The stage's queue takes ends without blocking while its goroutines are busy, runs them in
// the order they came on up to n goroutines at once, and runs what is queued before stop
// returns.
func TestStageHandsOverAndDrains(t *testing.T) {
	const n, ends = 3, 60
	release := make(chan struct{})
	var running, most atomic.Int32
	var mu sync.Mutex
	var order []uint64
	s := newStage(n, func(e jobEnd) {
		r := running.Add(1)
		for m := most.Load(); r > m && !most.CompareAndSwap(m, r); m = most.Load() {
		}
		<-release
		mu.Lock()
		order = append(order, e.res.Job.Seq)
		mu.Unlock()
		running.Add(-1)
	})
	put := make(chan struct{})
	go func() {
		for seq := range uint64(ends) {
			s.put(jobEnd{res: infer.Result{Job: infer.Job{Seq: seq}}})
		}
		close(put)
	}()
	select {
	case <-put: // every end queued while the stage's goroutines wait
	case <-time.After(time.Minute):
		t.Fatal("put blocked while the stage's goroutines were busy")
	}
	close(release)
	s.stop()
	s.stop() // twice is safe
	if len(order) != ends {
		t.Fatalf("%d ends run before stop returned, want %d", len(order), ends)
	}
	if m := most.Load(); m > n {
		t.Errorf("%d ends ran at once, want at most %d", m, n)
	}
}

// With one goroutine, the ends run one after the other, in the order they came.
func TestStageOneGoroutineKeepsOrder(t *testing.T) {
	var order []uint64
	s := newStage(1, func(e jobEnd) { order = append(order, e.res.Job.Seq) })
	for seq := range uint64(100) {
		s.put(jobEnd{res: infer.Result{Job: infer.Job{Seq: seq}}})
	}
	s.stop()
	for i, seq := range order {
		if seq != uint64(i) {
			t.Fatalf("end %d ran as the %dth: %v", seq, i, order)
		}
	}
	if len(order) != 100 {
		t.Fatalf("%d ends run, want 100", len(order))
	}
}
