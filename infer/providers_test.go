package infer

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestValidateDetectorOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*DetectorOptions)
		wantErr string // "" for valid
	}{
		{"cpu defaults", func(o *DetectorOptions) {}, ""},
		{"cuda full", func(o *DetectorOptions) {
			o.Provider = "cuda"
			o.CUDA = CUDAOptions{GPUMemLimit: 2 << 30, ArenaExtendStrategy: "kSameAsRequested", CudnnConvAlgoSearch: "HEURISTIC"}
		}, ""},
		{"tensorrt full", func(o *DetectorOptions) {
			o.Provider, o.Fallback = "tensorrt", "cpu"
			o.TensorRT = TensorRTOptions{FP16: true, EngineCache: "/var/cache/visiond", WorkspaceSize: 1 << 30}
		}, ""},
		{"unknown provider", func(o *DetectorOptions) { o.Provider = "rocm" }, `provider "rocm": want cpu, cuda or tensorrt`},
		{"unknown fallback", func(o *DetectorOptions) { o.Fallback = "cuda" }, `fallback "cuda"`},
		{"arena huge", func(o *DetectorOptions) { o.CUDA.ArenaExtendStrategy = "huge" }, `cuda.arena_extend_strategy "huge": want kNextPowerOfTwo or kSameAsRequested`},
		{"arena case", func(o *DetectorOptions) { o.CUDA.ArenaExtendStrategy = "ksameasrequested" }, `cuda.arena_extend_strategy "ksameasrequested"`},
		{"conv search", func(o *DetectorOptions) { o.CUDA.CudnnConvAlgoSearch = "FAST" }, `cuda.cudnn_conv_algo_search "FAST"`},
		{"negative mem limit", func(o *DetectorOptions) { o.CUDA.GPUMemLimit = -1 }, "cuda.gpu_mem_limit -1"},
		{"negative workspace", func(o *DetectorOptions) { o.TensorRT.WorkspaceSize = -5 }, "tensorrt.workspace_size -5"},
		{"no model", func(o *DetectorOptions) { o.Model = "" }, "model path is empty"},
		{"confidence 1", func(o *DetectorOptions) { o.Confidence = 1 }, "confidence 1 must be in (0,1)"},
		{"confidence negative", func(o *DetectorOptions) { o.Confidence = -0.5 }, "confidence -0.5 must be in (0,1)"},
		{"iou 1", func(o *DetectorOptions) { o.IoU = 1 }, "iou 1 must be in (0,1)"},
		{"negative threads", func(o *DetectorOptions) { o.Threads = -1 }, "threads -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DetectorOptions{Model: "m.onnx"}
			o.SetDefaults()
			tc.edit(&o)
			err := o.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// Bad option values stop Start before any worker runs, with an error naming the option.
func TestPoolBadProviderOption(t *testing.T) {
	a := thirdParty(t)
	cfg, _ := testPoolConfig(t, a)
	cfg.Provider = "cuda"
	cfg.CUDA.ArenaExtendStrategy = "huge"
	p := NewPool(cfg)
	defer p.Close()
	err := p.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `cuda.arena_extend_strategy "huge"`) {
		t.Fatalf("Start: %v", err)
	}
	// The same check runs in the worker, for options that reach it another way.
	o := DetectorOptions{Model: a.model, Library: a.library, Provider: "tensorrt", Fallback: "cpu"}
	o.TensorRT.WorkspaceSize = -1
	if _, err := openDetector(o, t.Logf); err == nil || !strings.Contains(err.Error(), "tensorrt.workspace_size -1") {
		t.Fatalf("openDetector: %v", err)
	}
}

// On this GPU-less box cuda and tensorrt cannot run: without a fallback a worker fails
// to start with an error naming the provider; with fallback "cpu" it runs on the CPU and
// says so in its hello, hence in Pool.Model and Workers.
func TestPoolProviderFallback(t *testing.T) {
	a := thirdParty(t)
	pix, lb, _, _ := messiFrame(t, a)
	for _, provider := range []string{"cuda", "tensorrt"} {
		t.Run(provider+" without fallback", func(t *testing.T) {
			cfg, _ := testPoolConfig(t, a)
			cfg.Provider = Provider(provider)
			cfg.TensorRT.EngineCache = t.TempDir()
			p := NewPool(cfg)
			defer p.Close()
			err := p.Start(context.Background())
			if err == nil || !strings.Contains(err.Error(), "provider "+provider+" (device 0) unavailable") {
				t.Fatalf("Start: %v", err)
			}
			t.Log(err)
		})
		t.Run(provider+" with fallback cpu", func(t *testing.T) {
			cfg, log := testPoolConfig(t, a)
			cfg.Provider, cfg.Fallback = Provider(provider), ProviderCPU
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
			r := waitResult(t, dispatch(t, p, Job{Camera: "messi", Letterbox: lb}, pix))
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

func TestEngineCacheKey(t *testing.T) {
	dir := t.TempDir()
	m1, m2 := filepath.Join(dir, "a.onnx"), filepath.Join(dir, "b.onnx")
	if err := os.WriteFile(m1, []byte("model one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m2, []byte("model two"), 0o644); err != nil {
		t.Fatal(err)
	}
	s1, err := fileSHA256(m1)
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256([]byte("model one")); string(s1) != string(want[:]) {
		t.Fatalf("fileSHA256 %x", s1)
	}
	s2, err := fileSHA256(m2)
	if err != nil {
		t.Fatal(err)
	}
	trt := TensorRTOptions{FP16: true}
	base := engineCacheKey(s1, "1.29.0", 0, "NVIDIA H200", trt)
	if again := engineCacheKey(s1, "1.29.0", 0, "NVIDIA H200", trt); again != base {
		t.Fatalf("key not stable: %s %s", base, again)
	}
	if !strings.HasPrefix(base, "ort1.29.0-") || strings.ContainsAny(base, "/ ") {
		t.Errorf("key %q is not a plain directory name", base)
	}
	fp32 := trt
	fp32.FP16 = false
	for name, k := range map[string]string{
		"model bytes": engineCacheKey(s2, "1.29.0", 0, "NVIDIA H200", trt),
		"ort version": engineCacheKey(s1, "1.30.0", 0, "NVIDIA H200", trt),
		"device":      engineCacheKey(s1, "1.29.0", 1, "NVIDIA H200", trt),
		"gpu":         engineCacheKey(s1, "1.29.0", 0, "NVIDIA A100", trt),
		"precision":   engineCacheKey(s1, "1.29.0", 0, "NVIDIA H200", fp32),
	} {
		if k == base {
			t.Errorf("a changed %s keeps the key %s", name, k)
		}
	}
	if _, err := fileSHA256(filepath.Join(dir, "missing.onnx")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing model: %v", err)
	}
}

func TestGPUIdentity(t *testing.T) {
	write := func(root, rel, s string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dgx := t.TempDir()
	write(dgx, "proc/driver/nvidia/gpus/0000:1b:00.0/information", "Model: \t\t NVIDIA H200\nIRQ:   42\nGPU UUID: GPU-1\n")
	write(dgx, "proc/driver/nvidia/gpus/0000:0a:00.0/information", "Model: \t\t NVIDIA A100 80GB PCIe\nIRQ:   41\n")
	jetson := t.TempDir()
	write(jetson, "proc/device-tree/model", "NVIDIA Jetson AGX Orin Developer Kit\x00")
	for root, want := range map[string]string{
		dgx:         "NVIDIA A100 80GB PCIe,NVIDIA H200", // PCI order
		jetson:      "NVIDIA Jetson AGX Orin Developer Kit",
		t.TempDir(): "",
	} {
		if got := gpuIdentity(root); got != want {
			t.Errorf("gpuIdentity(%s) = %q, want %q", root, got, want)
		}
	}
}

// The arena shrinkage run option reaches ONNX Runtime: "cpu:0" shrinks the CPU session's
// arena, "gpu:0" is refused by it (no GPU arena), which a dropped option would not be.
func TestShrinkArenasRunOption(t *testing.T) {
	a := thirdParty(t)
	d, err := NewDetector(DetectorOptions{Model: a.model, Library: a.library, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if spec := d.shrinkSpec(); spec != "cpu:0" {
		t.Fatalf("shrinkSpec %q", spec)
	}
	if err := d.shrinkArenas(0, "cpu:0"); err != nil {
		t.Fatal(err)
	}
	err = d.shrinkArenas(1, "gpu:0")
	if err == nil || !strings.Contains(err.Error(), `arena shrinkage "gpu:0"`) {
		t.Fatalf("gpu:0 on a CPU session: %v", err)
	}
	t.Log(err)
	pix, lb, w, h := messiFrame(t, a)
	dets, _, err := d.Detect(pix, lb, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkMessi(t, dets, w, h)
	if (&Detector{opts: DetectorOptions{Provider: "tensorrt", Device: 3}}).shrinkSpec() != "cpu:0;gpu:3" {
		t.Error("tensorrt shrinkSpec")
	}
}

// Pool.ShrinkArenas rides on the next job of each worker, once.
func TestPoolShrinkArenas(t *testing.T) {
	a := thirdParty(t)
	cfg, log := testPoolConfig(t, a)
	p := startPool(t, cfg)
	pix, lb, w, h := messiFrame(t, a)
	p.ShrinkArenas()
	for seq := range uint64(3) {
		r := waitResult(t, dispatch(t, p, Job{Camera: "messi", Seq: seq, Letterbox: lb}, pix))
		if r.Err != nil {
			t.Fatalf("job %d: %v", seq, r.Err)
		}
		checkMessi(t, r.Detections, w, h)
	}
	if n := strings.Count(log.String(), "arenas shrunk"); n != 1 {
		t.Fatalf("%d shrinks logged, want 1", n)
	}
	if strings.Contains(log.String(), "arena shrinkage failed") {
		t.Fatal("shrinkage failed")
	}
}

// TestGPUProviders runs only where VISIOND_TEST_GPU=1 says a GPU and ONNX Runtime's CUDA
// provider are there (shared/gpu/README.md): the cuda provider with every option, arena
// shrinkage of its GPU arena, GPU memory per worker from nvidia-smi, and tensorrt with
// fallback cpu (which runs TensorRT where its provider library is present).
func TestGPUProviders(t *testing.T) {
	if os.Getenv("VISIOND_TEST_GPU") != "1" {
		t.Skip("VISIOND_TEST_GPU=1 not set: no GPU here")
	}
	a := thirdParty(t)
	pix, lb, w, h := messiFrame(t, a)
	cfg, log := testPoolConfig(t, a)
	cfg.Provider = "cuda"
	cfg.CUDA = CUDAOptions{GPUMemLimit: 2 << 30, ArenaExtendStrategy: "kSameAsRequested", CudnnConvAlgoSearch: "HEURISTIC"}
	cfg.MemoryInterval = 100 * time.Millisecond
	p := startPool(t, cfg)
	if m := p.Model(); m.Provider != "cuda" {
		t.Fatalf("provider %q", m.Provider)
	}
	p.ShrinkArenas()
	for seq := range uint64(3) {
		r := waitResult(t, dispatch(t, p, Job{Camera: "messi", Seq: seq, Letterbox: lb}, pix))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		checkMessi(t, r.Detections, w, h)
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
	cfg.TensorRT = TensorRTOptions{FP16: true, EngineCache: t.TempDir()}
	cfg.StartTimeout = 10 * time.Minute // building an engine takes minutes
	p = startPool(t, cfg)
	r := waitResult(t, dispatch(t, p, Job{Camera: "messi", Letterbox: lb}, pix))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	t.Logf("tensorrt: provider %q, run %v, %d detections", p.Model().Provider, r.Run, len(r.Detections))
}

// Spinning is off unless asked for, in both thread pools, and the session still runs.
func TestSessionOptionsSpinning(t *testing.T) {
	a := thirdParty(t)
	d, err := NewDetector(DetectorOptions{Model: a.model, Library: a.library, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, spin := range []bool{false, true} {
		so, err := sessionOptions(DetectorOptions{Provider: "cpu", Threads: 2, Spin: spin})
		if err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{false: "0", true: "1"}[spin]
		for _, k := range []string{"session.intra_op.allow_spinning", "session.inter_op.allow_spinning"} {
			if v, err := so.GetSessionConfigEntry(k); err != nil || v != want {
				t.Errorf("spin %v: %s = %q (%v), want %q", spin, k, v, err, want)
			}
		}
		so.Destroy()
	}
	pix, lb, w, h := messiFrame(t, a)
	dets, _, err := d.Detect(pix, lb, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkMessi(t, dets, w, h)
}
