package pool

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
)

// Bad option values stop Start before any worker runs, with an error naming the option.
func TestPoolBadProviderOption(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, _ := testPoolConfig(t, a)
	cfg.Provider = "cuda"
	cfg.CUDA.ArenaExtendStrategy = "huge"
	p := New(cfg)
	defer p.Close()
	err := p.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `cuda.arena_extend_strategy "huge"`) {
		t.Fatalf("Start: %v", err)
	}
}

// On this GPU-less box cuda and tensorrt cannot run: without a fallback a worker fails
// to start with an error naming the provider; with fallback "cpu" it runs on the CPU and
// says so in its hello, hence in Pool.Model and Workers.
func TestPoolProviderFallback(t *testing.T) {
	a := infertest.ThirdParty(t)
	pix, lb, _, _ := messiFrame(t, a)
	for _, provider := range []string{"cuda", "tensorrt"} {
		t.Run(provider+" without fallback", func(t *testing.T) {
			cfg, _ := testPoolConfig(t, a)
			cfg.Provider = infer.Provider(provider)
			cfg.TensorRT.EngineCache = t.TempDir()
			p := New(cfg)
			defer p.Close()
			err := p.Start(context.Background())
			if err == nil || !strings.Contains(err.Error(), "provider "+provider+" (device 0) unavailable") {
				t.Fatalf("Start: %v", err)
			}
			t.Log(err)
		})
		t.Run(provider+" with fallback cpu", func(t *testing.T) {
			cfg, log := testPoolConfig(t, a)
			cfg.Provider, cfg.Fallback = infer.Provider(provider), infer.ProviderCPU
			cfg.GPUMemoryCommand = []string{} // none: nvidia-smi is not here
			p := startPool(t, cfg)
			m := p.Model()
			want := "cpu (fallback: " + provider + " unavailable: provider " + provider + " (device 0) unavailable: "
			if !strings.HasPrefix(m.Provider, want) {
				t.Fatalf("Model().Provider %q, want prefix %q", m.Provider, want)
			}
			if s := p.Workers()[0]; s.Provider != m.Provider {
				t.Errorf("worker provider %q, model %q", s.Provider, m.Provider)
			}
			r := waitResult(t, dispatch(t, p, infer.Job{Camera: "messi", Letterbox: lb}, pix))
			if r.Err != nil || len(r.Detections) == 0 {
				t.Fatalf("job on the fallback: %+v", r)
			}
			for _, line := range []string{"worker runs on a fallback provider", "configured provider unavailable: running on the CPU"} {
				if !strings.Contains(log.String(), line) {
					t.Errorf("log lacks %q", line)
				}
			}
			t.Log(m.Provider)
			if provider != "cuda" {
				return
			}
			// Its replacement falls back too, and its status says so.
			old := p.Workers()[0].PID
			if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if s := waitIdle(t, p, 0, 1); s.PID == old || !strings.HasPrefix(s.Provider, want) {
				t.Errorf("replacement: %+v, want provider prefix %q", s, want)
			}
		})
	}
}

// Pool.ShrinkArenas rides on the next job of each worker, once.
func TestPoolShrinkArenas(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, log := testPoolConfig(t, a)
	p := startPool(t, cfg)
	pix, lb, w, h := messiFrame(t, a)
	p.ShrinkArenas()
	for seq := range uint64(3) {
		r := waitResult(t, dispatch(t, p, infer.Job{Camera: "messi", Seq: seq, Letterbox: lb}, pix))
		if r.Err != nil {
			t.Fatalf("job %d: %v", seq, r.Err)
		}
		infertest.CheckMessi(t, r.Detections, w, h)
	}
	if n := strings.Count(log.String(), "arenas shrunk"); n != 1 {
		t.Fatalf("%d shrinks logged, want 1", n)
	}
	if strings.Contains(log.String(), "arena shrinkage failed") {
		t.Fatal("shrinkage failed")
	}
}

// TestGPUProviders runs only where VISIOND_TEST_GPU=1 says a GPU and ONNX Runtime's CUDA
// provider are there (scripts/gpu/README.md): the cuda provider with every option, arena
// shrinkage of its GPU arena, GPU memory per worker from nvidia-smi, and tensorrt with
// fallback cpu (which runs TensorRT where its provider library is present).
func TestGPUProviders(t *testing.T) {
	if os.Getenv("VISIOND_TEST_GPU") != "1" {
		t.Skip("VISIOND_TEST_GPU=1 not set: no GPU here")
	}
	a := infertest.ThirdParty(t)
	pix, lb, w, h := messiFrame(t, a)
	cfg, log := testPoolConfig(t, a)
	cfg.Provider = "cuda"
	cfg.CUDA = infer.CUDAOptions{GPUMemLimit: 2 << 30, ArenaExtendStrategy: "kSameAsRequested", CudnnConvAlgoSearch: "HEURISTIC"}
	cfg.MemoryInterval = 100 * time.Millisecond
	p := startPool(t, cfg)
	if m := p.Model(); m.Provider != "cuda" {
		t.Fatalf("provider %q", m.Provider)
	}
	p.ShrinkArenas()
	for seq := range uint64(3) {
		r := waitResult(t, dispatch(t, p, infer.Job{Camera: "messi", Seq: seq, Letterbox: lb}, pix))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		infertest.CheckMessi(t, r.Detections, w, h)
		t.Logf("cuda: run %v", r.Run)
	}
	if !strings.Contains(log.String(), "arenas shrunk") || !strings.Contains(log.String(), "cpu:0;gpu:0") ||
		strings.Contains(log.String(), "arena shrinkage failed") {
		t.Errorf("GPU arena shrinkage did not run")
	}
	deadline := time.Now().Add(30 * time.Second)
	for p.Workers()[0].GPUBytes == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	s := p.Workers()[0]
	if s.GPUBytes == 0 || s.RSSBytes == 0 {
		t.Errorf("no memory figures: %+v", s)
	}
	t.Logf("cuda worker: %+v", s)

	cfg, _ = testPoolConfig(t, a)
	cfg.Provider, cfg.Fallback = "tensorrt", "cpu"
	cfg.TensorRT = infer.TensorRTOptions{FP16: true, EngineCache: t.TempDir()}
	cfg.StartTimeout = 10 * time.Minute // building an engine takes minutes
	p = startPool(t, cfg)
	r := waitResult(t, dispatch(t, p, infer.Job{Camera: "messi", Letterbox: lb}, pix))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	t.Logf("tensorrt: provider %q, run %v, %d detections", p.Model().Provider, r.Run, len(r.Detections))
}
