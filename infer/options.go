package infer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Provider is an ONNX Runtime execution provider a detector runs on.
type Provider string

// Execution providers.
const (
	ProviderCPU      Provider = "cpu"
	ProviderCUDA     Provider = "cuda"     // NVIDIA GPUs through CUDA
	ProviderTensorRT Provider = "tensorrt" // TensorRT, with CUDA for the nodes TensorRT cannot take
)

// Providers returns the execution providers, the default first.
func Providers() []Provider { return []Provider{ProviderCPU, ProviderCUDA, ProviderTensorRT} }

// ParseProvider returns the provider named s: cpu, cuda or tensorrt.
func ParseProvider(s string) (Provider, error) {
	if slices.Contains(Providers(), Provider(s)) {
		return Provider(s), nil
	}
	return "", fmt.Errorf("provider %q: want cpu, cuda or tensorrt", s)
}

// GPU says whether p runs on a GPU (cuda, tensorrt).
func (p Provider) GPU() bool { return p == ProviderCUDA || p == ProviderTensorRT }

// DefaultSessions is the default number of sessions in a worker process of provider p
// (WorkerFlags.Sessions, the daemon's workers.pools[].sessions): 1 on the CPU, where one-
// thread workers in processes of their own scale with the cores; DefaultGPUSessions on
// cuda and tensorrt, where sessions of one process share one CUDA context and run at once
// while processes take turns on the GPU.
func DefaultSessions(p Provider) int {
	if p.GPU() {
		return DefaultGPUSessions
	}
	return 1
}

// DefaultGPUSessions is DefaultSessions on cuda and tensorrt. Measured on an H200 (yolov8n
// FP32, one worker through the pool, docs/gpu-memory.md): 1/4/8 sessions 217/709/767 jobs/s
// at p99 15/18/46 ms; 8 adds 8% over 4 for twice the latency and ~340 MiB of GPU memory per
// added session.
const DefaultGPUSessions = 4

// Threshold defaults, for DetectorOptions and the daemon's configuration alike.
const (
	DefaultConfidence = 0.25 // DetectorOptions.Confidence
	DefaultIoU        = 0.45 // DetectorOptions.IoU
	DefaultMaxDet     = 300  // DetectorOptions.MaxDet
)

// CheckConfidence says whether c is a valid confidence threshold, the one place that
// states its range: a fraction in (0,1). Class scores are in [0,1]: 0 would keep every
// anchor of the model, 1 next to nothing. The error does not name the field, so that the
// caller names it as its users spell it (config: workers.confidence).
func CheckConfidence(c float64) error { return checkFraction(c) }

// CheckIoU says whether v is a valid NMS IoU threshold, the one place that states its
// range: a fraction in (0,1). A box that overlaps a better one of its class by more than v
// is dropped: 0 would drop every box that touches a better one, 1 none at all. The error
// does not name the field.
func CheckIoU(v float64) error { return checkFraction(v) }

func checkFraction(f float64) error {
	if !(f > 0 && f < 1) { // also catches NaN
		return fmt.Errorf("must be between 0 and 1 (exclusive), got %v", f)
	}
	return nil
}

// DetectorOptions configure a detector (infer/worker). Zero values take the documented
// defaults (SetDefaults). The daemon hands them to each worker process as JSON (the
// -detector flag, WorkerFlags).
type DetectorOptions struct {
	Model      string   `json:"model"`                // path of the .onnx file (required)
	Library    string   `json:"library,omitempty"`    // path of libonnxruntime.so (required unless ORT is already initialized in this process)
	Provider   Provider `json:"provider,omitempty"`   // default ProviderCPU; never falls back to cpu unless Fallback says so
	Device     int      `json:"device,omitempty"`     // CUDA device id
	Threads    int      `json:"threads,omitempty"`    // intra-op threads; 0: ORT's default
	Spin       bool     `json:"spin,omitempty"`       // let ORT's idle threads spin for work (lower latency, CPU burnt); default off
	Confidence float64  `json:"confidence,omitempty"` // minimum class score kept, CheckConfidence; default DefaultConfidence
	IoU        float64  `json:"iou,omitempty"`        // NMS IoU threshold, CheckIoU: a box overlapping a better one of its class by more is dropped; default DefaultIoU
	MaxDet     int      `json:"max_det,omitempty"`    // most detections returned per frame; default DefaultMaxDet
	Labels     string   `json:"labels,omitempty"`     // class names file, one per line; default: the model's metadata

	CUDA     CUDAOptions     `json:"cuda,omitempty"`     // options of the cuda provider
	TensorRT TensorRTOptions `json:"tensorrt,omitempty"` // options of the tensorrt provider
	Fallback Provider        `json:"fallback,omitempty"` // ProviderCPU: use the CPU provider when the configured one cannot be used; "" never
}

// CUDAOptions are options of ONNX Runtime's CUDA execution provider. They also apply to
// the CUDA provider that runs, after TensorRT, the nodes TensorRT cannot take. The zero
// value keeps GPU memory small and flat after the warm-up run (docs/gpu-memory.md): an arena
// that grows by what is asked (SetDefaults) and cuDNN convolutions within a small workspace.
type CUDAOptions struct {
	GPUMemLimit int64 `json:"gpu_mem_limit,omitempty"` // bytes the provider's arena may hold; 0: no limit
	// ArenaExtendStrategy is kSameAsRequested (the default on cuda and tensorrt,
	// SetDefaults: the arena grows by what a run asks) or kNextPowerOfTwo (ORT's own
	// default: each extension doubles, so the arena holds up to twice what runs need).
	ArenaExtendStrategy string `json:"arena_extend_strategy,omitempty"`
	CudnnConvAlgoSearch string `json:"cudnn_conv_algo_search,omitempty"` // EXHAUSTIVE (ORT's default), HEURISTIC or DEFAULT
	// CudnnConvMaxWorkspace lets cuDNN pick convolution algorithms that need its largest
	// workspace (ORT's own default, cudnn_conv_use_max_workspace=1), which the arena then
	// keeps; false (the default here) limits the workspace, as ORT did before 1.14.
	CudnnConvMaxWorkspace bool `json:"cudnn_conv_max_workspace,omitempty"`
	// DeviceIO keeps the session's input and output in GPU memory at fixed addresses: the
	// worker copies each frame in and the output out itself, from pinned host memory, on a
	// stream of its own, and ONNX Runtime no longer binds (copies) a host input into its
	// arena per run. No arena shrinkage runs then (the worker logs that it skips them).
	DeviceIO bool `json:"device_io,omitempty"`
	// Graph captures the session's kernels as a CUDA graph on its second run and replays
	// it from then on (ORT's enable_cuda_graph): one launch per frame instead of one per
	// kernel, the overhead that bounds batch=1 on a large GPU. It needs DeviceIO (set by
	// SetDefaults) and provider cuda, and every node of the model on the CUDA provider.
	Graph bool `json:"graph,omitempty"`
}

// TensorRTOptions are options of ONNX Runtime's TensorRT execution provider.
type TensorRTOptions struct {
	FP16 bool `json:"fp16,omitempty"`
	INT8 bool `json:"int8,omitempty"`
	// EngineCache is the directory of built engines; "" disables the cache. Engines go to
	// a subdirectory named by a key of the model bytes, ORT version, GPU, precision and
	// workspace, so a changed model, ORT or GPU builds a new engine instead of loading a
	// stale one. A TensorRT library upgrade under the same ORT version is not detected:
	// clear the directory then.
	EngineCache   string `json:"engine_cache,omitempty"`
	WorkspaceSize int64  `json:"workspace_size,omitempty"` // bytes; 0: ORT's default
}

// SetDefaults fills the zero fields that have a default.
func (o *DetectorOptions) SetDefaults() {
	if o.Provider == "" {
		o.Provider = ProviderCPU
	}
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if o.IoU == 0 {
		o.IoU = DefaultIoU
	}
	if o.MaxDet == 0 {
		o.MaxDet = DefaultMaxDet
	}
	if o.Provider.GPU() && o.CUDA.ArenaExtendStrategy == "" {
		o.CUDA.ArenaExtendStrategy = "kSameAsRequested"
	}
	if o.CUDA.Graph {
		o.CUDA.DeviceIO = true
	}
}

// Validate checks the options after SetDefaults; errors name the option as it is spelled
// in JSON.
func (o *DetectorOptions) Validate() error {
	if o.Model == "" {
		return errors.New("model path is empty")
	}
	if _, err := ParseProvider(string(o.Provider)); err != nil {
		return err
	}
	if err := CheckConfidence(o.Confidence); err != nil {
		return fmt.Errorf("confidence %w", err)
	}
	if err := CheckIoU(o.IoU); err != nil {
		return fmt.Errorf("iou %w", err)
	}
	if o.Threads < 0 || o.Device < 0 || o.MaxDet < 0 {
		return fmt.Errorf("threads %d, device %d and max_det %d must not be negative", o.Threads, o.Device, o.MaxDet)
	}
	switch o.Fallback {
	case "", ProviderCPU:
	default:
		return fmt.Errorf("fallback %q: want cpu or empty (no fallback)", o.Fallback)
	}
	c, t := o.CUDA, o.TensorRT
	switch c.ArenaExtendStrategy {
	case "", "kNextPowerOfTwo", "kSameAsRequested":
	default:
		return fmt.Errorf("cuda.arena_extend_strategy %q: want kNextPowerOfTwo or kSameAsRequested", c.ArenaExtendStrategy)
	}
	switch c.CudnnConvAlgoSearch {
	case "", "EXHAUSTIVE", "HEURISTIC", "DEFAULT":
	default:
		return fmt.Errorf("cuda.cudnn_conv_algo_search %q: want EXHAUSTIVE, HEURISTIC or DEFAULT", c.CudnnConvAlgoSearch)
	}
	if c.GPUMemLimit < 0 {
		return fmt.Errorf("cuda.gpu_mem_limit %d must not be negative", c.GPUMemLimit)
	}
	if t.WorkspaceSize < 0 {
		return fmt.Errorf("tensorrt.workspace_size %d must not be negative", t.WorkspaceSize)
	}
	if c.DeviceIO && !o.Provider.GPU() {
		return fmt.Errorf("cuda.device_io needs provider cuda or tensorrt, not %s", o.Provider)
	}
	if c.Graph && o.Provider != ProviderCUDA {
		return fmt.Errorf("cuda.graph needs provider cuda, not %s", o.Provider)
	}
	return nil
}

// ParseLabels parses a labels file's contents, one class name per line (the class id is the
// line's index); name is the file, for errors.
func ParseLabels(name string, data []byte) ([]string, error) {
	lines := strings.Split(strings.TrimRight(string(data), " \t\r\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
		if lines[i] == "" {
			return nil, fmt.Errorf("labels %s: line %d is empty: want one class name per line", name, i+1)
		}
	}
	return lines, nil
}
