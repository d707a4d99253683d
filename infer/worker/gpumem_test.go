package worker

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/internal/testutil"
)

// BenchmarkGPUMemory says where a GPU worker's memory goes: it opens sessions one by one in
// this process, as a worker of several sessions does, and reads this process's GPU memory
// (nvidia-smi) after each stage: the first session created (CUDA context, weights, cuDNN
// and cuBLAS handles), its first run (the arena's activations, cuDNN's convolution
// workspace and algorithm search), each further session created and run, then under
// constant load on every session at once (pipelined pairs, as the worker runs them) for
// $VISIOND_BENCH_SECONDS (60), sampled every 5 s. It reports the stages in MiB, the cost
// of each added session, and how much memory grew under load after the first 60 s.
// Environment: VISIOND_BENCH_PROVIDER (cuda; it skips on cpu), VISIOND_BENCH_SESSIONS (4),
// VISIOND_BENCH_CUDA (the CUDA options as JSON, infer.CUDAOptions; {} takes the defaults,
// {"arena_extend_strategy":"kNextPowerOfTwo","cudnn_conv_max_workspace":true} ORT's own).
func BenchmarkGPUMemory(b *testing.B) {
	provider := infer.Provider(os.Getenv("VISIOND_BENCH_PROVIDER"))
	if !provider.GPU() {
		b.Skip("VISIOND_BENCH_PROVIDER is not a GPU provider")
	}
	sessions, seconds := 4, 60
	testutil.EnvInts(b, map[string]*int{"VISIOND_BENCH_SESSIONS": &sessions, "VISIOND_BENCH_SECONDS": &seconds})
	a := infertest.ThirdParty(b)
	opts := infer.DetectorOptions{Model: a.Model, Library: a.Library, Provider: provider}
	if v := os.Getenv("VISIOND_BENCH_CUDA"); v != "" {
		if err := json.Unmarshal([]byte(v), &opts.CUDA); err != nil {
			b.Fatalf("VISIOND_BENCH_CUDA=%q: %v", v, err)
		}
	}
	pix, _, _, _ := messiFrame(b, a)
	began := time.Now()
	mib := func(stage string) float64 {
		b.Helper()
		m, err := testutil.OwnGPUMiB()
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%6.1fs %-28s %6.0f MiB", time.Since(began).Seconds(), stage, m)
		return m
	}
	opts.SetDefaults()
	b.Logf("pid %d, %d session(s), cuda options %+v", os.Getpid(), sessions, opts.CUDA)
	var dets []*Detector
	defer func() {
		for _, d := range dets {
			d.Close()
		}
	}()
	var created, warm []float64
	for i := range sessions {
		d, err := NewDetector(opts)
		if err != nil {
			b.Fatal(err)
		}
		dets = append(dets, d)
		created = append(created, mib(fmt.Sprintf("session %d created", i+1)))
		for p := range pipelineDepth {
			d.prepare(p, pix)
			if err := d.run(p); err != nil {
				b.Fatal(err)
			}
		}
		warm = append(warm, mib(fmt.Sprintf("session %d run", i+1)))
	}
	// Constant load: every session runs back to back, on its pairs in turn.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var runs sync.Map
	for i, d := range dets {
		wg.Go(func() {
			n := 0
			for {
				select {
				case <-stop:
					runs.Store(i, n)
					return
				default:
				}
				if err := d.run(n % pipelineDepth); err != nil {
					b.Error(err)
				}
				n++
			}
		})
	}
	var load []float64
	loadBegan := time.Now()
	for t := 5; t <= seconds; t += 5 {
		time.Sleep(time.Until(loadBegan.Add(time.Duration(t) * time.Second)))
		load = append(load, mib(fmt.Sprintf("load %ds", t)))
	}
	close(stop)
	wg.Wait()
	total := 0
	runs.Range(func(_, v any) bool { total += v.(int); return true })
	b.ReportMetric(float64(total)/time.Since(loadBegan).Seconds(), "runs/s")
	b.ReportMetric(created[0], "MiB-created")
	b.ReportMetric(warm[0], "MiB-1-session-run")
	b.ReportMetric(warm[len(warm)-1], "MiB-all-sessions-run")
	if sessions > 1 {
		b.ReportMetric((warm[len(warm)-1]-warm[0])/float64(sessions-1), "MiB-per-added-session")
	}
	if len(load) > 0 {
		b.ReportMetric(load[len(load)-1], "MiB-end")
		b.ReportMetric(load[len(load)-1]-warm[len(warm)-1], "MiB-growth-under-load")
		if len(load) > 12 {
			b.ReportMetric(load[len(load)-1]-load[11], "MiB-growth-after-60s")
		}
	}
}
