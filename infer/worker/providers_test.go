package worker

import (
	"crypto/sha256"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
)

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
	trt := infer.TensorRTOptions{FP16: true}
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
	a := infertest.ThirdParty(t)
	d, err := NewDetector(infer.DetectorOptions{Model: a.Model, Library: a.Library, Threads: 2})
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
	infertest.CheckMessi(t, dets, w, h)
	if (&Detector{opts: infer.DetectorOptions{Provider: "tensorrt", Device: 3}}).shrinkSpec() != "cpu:0;gpu:3" {
		t.Error("tensorrt shrinkSpec")
	}
}

// Bad option values stop a worker before it opens a session, with an error naming the
// option: the pool checks them too (TestPoolBadProviderOption in infer/pool), this is for
// options that reach a worker another way.
func TestOpenDetectorBadProviderOption(t *testing.T) {
	a := infertest.ThirdParty(t)
	o := infer.DetectorOptions{Model: a.Model, Library: a.Library, Provider: "tensorrt", Fallback: "cpu"}
	o.TensorRT.WorkspaceSize = -1
	if _, err := openDetector(o, t.Logf); err == nil || !strings.Contains(err.Error(), "tensorrt.workspace_size -1") {
		t.Fatalf("openDetector: %v", err)
	}
}

// Spinning is off unless asked for, in both thread pools, and the session still runs.
func TestSessionOptionsSpinning(t *testing.T) {
	a := infertest.ThirdParty(t)
	d, err := NewDetector(infer.DetectorOptions{Model: a.Model, Library: a.Library, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, spin := range []bool{false, true} {
		so, err := sessionOptions(infer.DetectorOptions{Provider: "cpu", Threads: 2, Spin: spin})
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
	infertest.CheckMessi(t, dets, w, h)
}

// The CUDA provider's options as ORT gets them: by default an arena that grows by what is
// asked and a cuDNN workspace kept small (GPU memory flat after warm-up), ORT's own
// defaults only when asked for; the CPU provider gets no CUDA defaults.
func TestCUDAOptions(t *testing.T) {
	o := infer.DetectorOptions{Model: "m", Provider: infer.ProviderCUDA, Device: 1}
	o.SetDefaults()
	want := map[string]string{"device_id": "1", "arena_extend_strategy": "kSameAsRequested", "cudnn_conv_use_max_workspace": "0"}
	if got := cudaOptions(o); !maps.Equal(got, want) {
		t.Errorf("defaults: %v, want %v", got, want)
	}
	o.CUDA = infer.CUDAOptions{ArenaExtendStrategy: "kNextPowerOfTwo", CudnnConvMaxWorkspace: true, CudnnConvAlgoSearch: "HEURISTIC", GPUMemLimit: 1 << 30}
	o.SetDefaults()
	want = map[string]string{"device_id": "1", "arena_extend_strategy": "kNextPowerOfTwo", "cudnn_conv_use_max_workspace": "1",
		"cudnn_conv_algo_search": "HEURISTIC", "gpu_mem_limit": "1073741824"}
	if got := cudaOptions(o); !maps.Equal(got, want) {
		t.Errorf("set: %v, want %v", got, want)
	}
	o.CUDA = infer.CUDAOptions{Graph: true}
	o.SetDefaults()
	want = map[string]string{"device_id": "1", "arena_extend_strategy": "kSameAsRequested", "cudnn_conv_use_max_workspace": "0", "enable_cuda_graph": "1"}
	if got := cudaOptions(o); !maps.Equal(got, want) {
		t.Errorf("graph: %v, want %v", got, want)
	}
	cpu := infer.DetectorOptions{Model: "m"}
	cpu.SetDefaults()
	if cpu.CUDA != (infer.CUDAOptions{}) {
		t.Errorf("cpu options took CUDA defaults: %+v", cpu.CUDA)
	}
}
