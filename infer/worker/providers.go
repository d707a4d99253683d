package worker

/*
#cgo LDFLAGS: -ldl
#include "ortapi.h"

typedef void *(*addRunConfigEntryFn)(void *runOptions, const char *key, const char *value);
typedef void *(*bindInputFn)(void *binding, const char *name, const void *value);

// bindInput calls OrtApi's BindInput through api (ortAPI). It returns NULL, or an error
// message to free.
static char *bindInput(const void *api, void *binding, const char *name, const void *value) {
	const void *const *fn = (const void *const *)api;
	return ortStatusMessage(fn, ((bindInputFn)fn[idxBindInput])(binding, name, value));
}

// addRunConfigEntry sets key=value on runOptions through the OrtApi of the library at
// path, which must already be loaded. It returns NULL, or an error message to free.
static char *addRunConfigEntry(const char *path, void *runOptions, const char *key, const char *value) {
	const void *const *api = ortAPI(path);
	if (!api) return strdup("onnxruntime library is not loaded in this process, or has no OrtApi of version 24");
	return ortStatusMessage(api, ((addRunConfigEntryFn)api[idxAddRunConfigEntry])(runOptions, key, value));
}
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/visiond/visiond/infer"
)

// appendProvider sets the session options that keep memory flat and adds the configured
// execution provider to so: nothing more for cpu, CUDA for cuda, TensorRT then CUDA for
// tensorrt (CUDA takes the nodes TensorRT cannot, as ONNX Runtime recommends). Errors
// name the provider; falling back to cpu is the worker's decision (openDetector).
func appendProvider(so *ort.SessionOptions, o infer.DetectorOptions) error {
	// The CPU arena stays on so that a run with memory.enable_memory_arena_shrinkage
	// (ShrinkArenas) has an arena to shrink; the memory pattern plans one allocation for
	// a run, which ONNX Runtime recommends for static input shapes, the only ones the
	// detector takes.
	if err := so.SetCpuMemArena(true); err != nil {
		return fmt.Errorf("session options: cpu memory arena: %w", err)
	}
	if err := so.SetMemPattern(true); err != nil {
		return fmt.Errorf("session options: memory pattern: %w", err)
	}
	switch o.Provider {
	case "", infer.ProviderCPU:
		return nil
	case infer.ProviderCUDA:
		return appendCUDA(so, o)
	case infer.ProviderTensorRT:
		if err := appendTensorRT(so, o); err != nil {
			return err
		}
		return appendCUDA(so, o)
	}
	return fmt.Errorf("provider %q: want cpu, cuda or tensorrt", o.Provider)
}

// cudaOptions are the CUDA provider's options as ORT spells them.
func cudaOptions(o infer.DetectorOptions) map[string]string {
	maxWorkspace := "0"
	if o.CUDA.CudnnConvMaxWorkspace {
		maxWorkspace = "1"
	}
	m := map[string]string{"device_id": strconv.Itoa(o.Device), "cudnn_conv_use_max_workspace": maxWorkspace}
	if o.CUDA.GPUMemLimit > 0 {
		m["gpu_mem_limit"] = strconv.FormatInt(o.CUDA.GPUMemLimit, 10)
	}
	if o.CUDA.ArenaExtendStrategy != "" {
		m["arena_extend_strategy"] = o.CUDA.ArenaExtendStrategy
	}
	if o.CUDA.CudnnConvAlgoSearch != "" {
		m["cudnn_conv_algo_search"] = o.CUDA.CudnnConvAlgoSearch
	}
	if o.CUDA.Graph {
		m["enable_cuda_graph"] = "1"
	}
	return m
}

func appendCUDA(so *ort.SessionOptions, o infer.DetectorOptions) error {
	fail := func(err error) error {
		return fmt.Errorf("provider cuda (device %d) unavailable: %w", o.Device, err)
	}
	co, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return fail(err)
	}
	defer co.Destroy()
	if err := co.Update(cudaOptions(o)); err != nil {
		return fail(err)
	}
	if err := so.AppendExecutionProviderCUDA(co); err != nil {
		return fail(err)
	}
	return nil
}

// tensorRTOptions are the TensorRT provider's options as ORT spells them; cacheDir is
// the engine cache directory of this model, ORT and GPU ("" for none).
func tensorRTOptions(o infer.DetectorOptions, cacheDir string) map[string]string {
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	m := map[string]string{
		"device_id":       strconv.Itoa(o.Device),
		"trt_fp16_enable": b(o.TensorRT.FP16),
		"trt_int8_enable": b(o.TensorRT.INT8),
	}
	if o.TensorRT.WorkspaceSize > 0 {
		m["trt_max_workspace_size"] = strconv.FormatInt(o.TensorRT.WorkspaceSize, 10)
	}
	if cacheDir != "" {
		m["trt_engine_cache_enable"] = "1"
		m["trt_engine_cache_path"] = cacheDir
	}
	return m
}

func appendTensorRT(so *ort.SessionOptions, o infer.DetectorOptions) error {
	fail := func(err error) error {
		return fmt.Errorf("provider tensorrt (device %d) unavailable: %w", o.Device, err)
	}
	to, err := ort.NewTensorRTProviderOptions()
	if err != nil {
		return fail(err)
	}
	defer to.Destroy()
	var cacheDir string
	if o.TensorRT.EngineCache != "" {
		sum, err := fileSHA256(o.Model)
		if err != nil {
			return fmt.Errorf("tensorrt.engine_cache: %w", err)
		}
		key := engineCacheKey(sum, ort.GetVersion(), o.Device, gpuIdentity("/"), o.TensorRT)
		cacheDir = filepath.Join(o.TensorRT.EngineCache, key)
		if err := os.MkdirAll(cacheDir, 0o755); err != nil {
			return fmt.Errorf("tensorrt.engine_cache: %w", err)
		}
	}
	if err := to.Update(tensorRTOptions(o, cacheDir)); err != nil {
		return fail(err)
	}
	if err := so.AppendExecutionProviderTensorRT(to); err != nil {
		return fail(err)
	}
	return nil
}

func fileSHA256(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return h.Sum(nil), nil
}

// engineCacheKey names the engine cache subdirectory of one model (its sha256), ONNX
// Runtime version, GPU (device id and gpuIdentity) and TensorRT build settings: engines
// built for any other combination are never loaded.
func engineCacheKey(modelSHA256 []byte, ortVersion string, device int, gpu string, t infer.TensorRTOptions) string {
	h := sha256.New()
	fmt.Fprintf(h, "model=%x\nort=%s\ndevice=%d\ngpu=%s\nfp16=%t\nint8=%t\nworkspace=%d\n",
		modelSHA256, ortVersion, device, gpu, t.FP16, t.INT8, t.WorkspaceSize)
	return "ort" + ortVersion + "-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// gpuIdentity describes the machine's GPUs cheaply, from files under root ("/" but for
// tests): the models of all NVIDIA GPUs in PCI order (/proc/driver/nvidia/gpus/*/
// information; all of them, since CUDA's device order need not be PCI order), or on a
// Jetson the board model (/proc/device-tree/model). "" when neither is there.
func gpuIdentity(root string) string {
	infos, _ := filepath.Glob(filepath.Join(root, "proc/driver/nvidia/gpus/*/information"))
	slices.Sort(infos)
	var models []string
	for _, p := range infos {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Model" {
				models = append(models, strings.TrimSpace(v))
			}
		}
	}
	if len(models) > 0 {
		return strings.Join(models, ",")
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/device-tree/model")); err == nil {
		return strings.TrimRight(string(b), "\x00\n ")
	}
	return ""
}

// openDetector opens the detector of o and runs it once (the first run allocates and,
// on a GPU, initializes the provider, so that a provider that cannot run fails here and
// not on the first frame). When that fails with a provider other than cpu and o.Fallback
// is "cpu", it opens the detector on the CPU instead, whose ModelInfo.Provider then says
// "cpu (fallback: <why>)"; warn is called with that reason. Option errors never fall back.
func openDetector(o infer.DetectorOptions, warn func(msg string, args ...any)) (*Detector, error) {
	o.SetDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	det, err := newWarmDetector(o)
	if err == nil || o.Provider == infer.ProviderCPU || o.Fallback != infer.ProviderCPU {
		return det, err
	}
	cpu := o
	cpu.Provider = infer.ProviderCPU
	det, cpuErr := newWarmDetector(cpu)
	if cpuErr != nil {
		return nil, fmt.Errorf("%w; fallback to cpu failed too: %v", err, cpuErr)
	}
	det.info.Provider = fmt.Sprintf("cpu (fallback: %s unavailable: %v)", o.Provider, err)
	warn("configured provider unavailable: running on the CPU (fallback cpu)", "provider", o.Provider, "err", err)
	return det, nil
}

// openSessions opens n detectors of o, each one session (openDetector for the first, whose
// fallback, if it took one, the others follow), in one ONNX Runtime environment: on a GPU
// they share the process's CUDA context and run at once. On failure none stays open.
func openSessions(o infer.DetectorOptions, n int, warn func(msg string, args ...any)) ([]*Detector, error) {
	first, err := openDetector(o, warn)
	if err != nil {
		return nil, err
	}
	dets := []*Detector{first}
	rest := first.opts // the provider the first one runs on
	for i := 1; i < n; i++ {
		det, err := newWarmDetector(rest)
		if err != nil {
			closeAll(dets)
			return nil, fmt.Errorf("session %d of %d: %w", i+1, n, err)
		}
		det.info.Provider = first.info.Provider
		dets = append(dets, det)
	}
	return dets, nil
}

// newWarmDetector opens the detector of o and runs its session once on tensor pair 0,
// whose input is zeros (a run's cost does not depend on the pixels): the first run
// allocates the arenas and plans memory, so it fails here rather than on a frame, and the
// first frame does not pay for it. On cuda and tensorrt every other pair runs once too,
// since binding an input copies it to the device and so may fail on its own; on the CPU
// a binding only points at the tensor, and a second run would just delay the hello.
func newWarmDetector(o infer.DetectorOptions) (*Detector, error) {
	det, err := NewDetector(o)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	pairs := pipelineDepth
	if det.opts.Provider == infer.ProviderCPU {
		pairs = 1
	}
	for p := range pairs {
		if err := det.run(p); err != nil {
			det.Close()
			return nil, fmt.Errorf("warm-up run of %s (provider %s), tensor pair %d: %w", det.info.Path, det.info.Provider, p, err)
		}
	}
	det.load.WarmUp = time.Since(t0)
	return det, nil
}

// shrinkSpec is the value of memory.enable_memory_arena_shrinkage for d's session: its
// CPU arena and, on cuda or tensorrt (which runs CUDA next to it), its GPU's; "" with
// device I/O, which takes no shrinkage runs.
func (d *Detector) shrinkSpec() string {
	if d.dev != nil {
		return "" // no shrinkage: the run it takes would go around the device binding (and a CUDA graph's buffers)
	}
	if d.opts.Provider.GPU() {
		return "cpu:0;gpu:" + strconv.Itoa(d.opts.Device)
	}
	return "cpu:0"
}

// shrinkArenas runs the session once on tensor pair p with
// memory.enable_memory_arena_shrinkage set to spec, which returns the arenas' unused
// memory at the end of that run, on the Detector's thread (sessionThread). The run works
// on whatever p's input holds and overwrites p's output: call it before the run of the
// job that holds p, never between that run and its decoding.
func (d *Detector) shrinkArenas(p int, spec string) error {
	return d.thread.call(sessionCall{pair: p, shrink: spec})
}

// shrinkArenasHere is shrinkArenas on the calling thread.
func (d *Detector) shrinkArenasHere(p int, spec string) error {
	ro, err := ort.NewRunOptions()
	if err != nil {
		return fmt.Errorf("arena shrinkage: run options: %w", err)
	}
	defer ro.Destroy()
	if err := addRunConfigEntry(d.opts.Library, ro, "memory.enable_memory_arena_shrinkage", spec); err != nil {
		return fmt.Errorf("arena shrinkage %q: %w", spec, err)
	}
	t := &d.pairs[p]
	if err := d.session.RunWithOptions([]ort.Value{t.input}, []ort.Value{t.output}, ro); err != nil {
		return fmt.Errorf("arena shrinkage %q: %w", spec, err)
	}
	return nil
}

// addRunConfigEntry calls OrtApi's AddRunConfigEntry, which onnxruntime_go does not wrap,
// on ro. library is the path ORT was loaded from in this process.
func addRunConfigEntry(library string, ro *ort.RunOptions, key, value string) error {
	if library == "" {
		return errors.New("onnxruntime library path is empty")
	}
	ptr, err := runOptionsHandle(ro)
	if err != nil {
		return err
	}
	cLib, cKey, cVal := C.CString(library), C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(cLib))
	defer C.free(unsafe.Pointer(cKey))
	defer C.free(unsafe.Pointer(cVal))
	if msg := C.addRunConfigEntry(cLib, ptr, cKey, cVal); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return errors.New(C.GoString(msg))
	}
	return nil
}

// runOptionsHandle returns the OrtRunOptions pointer inside ro, the only field of
// onnxruntime_go's RunOptions; an error if that layout ever changes.
func runOptionsHandle(ro *ort.RunOptions) (unsafe.Pointer, error) {
	v := reflect.ValueOf(ro).Elem()
	if v.NumField() != 1 || v.Field(0).Kind() != reflect.Pointer || v.Field(0).IsNil() {
		return nil, errors.New("onnxruntime_go's RunOptions is not the single pointer this code knows")
	}
	return v.Field(0).UnsafePointer(), nil
}

// inputBinder binds the input tensor of a tensor pair to its IoBinding before each run
// (Detector.run) without allocating Go memory, which ort.IoBinding.BindInput does (one
// allocation per call, in GetInternals): it calls OrtApi's BindInput with the pointers
// taken once here. Without the library path (ORT initialized elsewhere in the process)
// the binder is nil and run falls back to ort.IoBinding.BindInput.
type inputBinder struct {
	api    unsafe.Pointer // the OrtApi table
	name   *C.char        // the input's name
	ptrs   [pipelineDepth]struct{ binding, value unsafe.Pointer }
	closed bool
}

func newInputBinder(library, name string, pairs *[pipelineDepth]tensorPair) (*inputBinder, error) {
	if library == "" {
		return nil, nil
	}
	cLib := C.CString(library)
	defer C.free(unsafe.Pointer(cLib))
	api := C.ortAPI(cLib)
	if api == nil {
		return nil, fmt.Errorf("onnxruntime library %s: no OrtApi of version %d", library, C.ortApiVersion)
	}
	b := &inputBinder{api: unsafe.Pointer(api)}
	for i := range pairs {
		var err error
		if b.ptrs[i].binding, err = singlePointer(pairs[i].binding, "IoBinding"); err != nil {
			return nil, err
		}
		if b.ptrs[i].value, err = singlePointer(pairs[i].input.GetInternals(), "ValueInternalData"); err != nil {
			return nil, err
		}
	}
	b.name = C.CString(name)
	return b, nil
}

// bind binds pair p's input tensor to its IoBinding.
func (b *inputBinder) bind(p int) error {
	if msg := C.bindInput(b.api, b.ptrs[p].binding, b.name, b.ptrs[p].value); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return errors.New(C.GoString(msg))
	}
	return nil
}

func (b *inputBinder) close() {
	if b != nil && !b.closed {
		C.free(unsafe.Pointer(b.name))
		b.closed = true
	}
}

// singlePointer returns the C pointer inside x, an onnxruntime_go struct whose first field
// is that pointer (IoBinding.o, ValueInternalData.ortValue); an error if that layout ever
// changes.
func singlePointer(x any, what string) (unsafe.Pointer, error) {
	v := reflect.ValueOf(x)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct || v.Elem().NumField() < 1 ||
		v.Elem().Field(0).Kind() != reflect.Pointer || v.Elem().Field(0).IsNil() {
		return nil, fmt.Errorf("onnxruntime_go's %s is not the C pointer this code knows", what)
	}
	return v.Elem().Field(0).UnsafePointer(), nil
}
