package infer

import (
	"math"
	"strings"
	"testing"
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
		{"confidence 1", func(o *DetectorOptions) { o.Confidence = 1 }, "confidence must be between 0 and 1 (exclusive), got 1"},
		{"confidence negative", func(o *DetectorOptions) { o.Confidence = -0.5 }, "confidence must be between 0 and 1 (exclusive), got -0.5"},
		{"iou 1", func(o *DetectorOptions) { o.IoU = 1 }, "iou must be between 0 and 1 (exclusive), got 1"},
		{"negative threads", func(o *DetectorOptions) { o.Threads = -1 }, "threads -1"},
		{"cuda graph", func(o *DetectorOptions) { o.Provider, o.CUDA.Graph = "cuda", true }, ""},
		{"tensorrt device io", func(o *DetectorOptions) { o.Provider, o.CUDA.DeviceIO = "tensorrt", true }, ""},
		{"cpu device io", func(o *DetectorOptions) { o.CUDA.DeviceIO = true }, "cuda.device_io needs provider cuda or tensorrt, not cpu"},
		{"tensorrt graph", func(o *DetectorOptions) { o.Provider, o.CUDA.Graph, o.CUDA.DeviceIO = "tensorrt", true, true }, "cuda.graph needs provider cuda, not tensorrt"},
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

func TestParseProvider(t *testing.T) {
	for _, s := range []string{"cpu", "cuda", "tensorrt"} {
		if p, err := ParseProvider(s); err != nil || string(p) != s {
			t.Errorf("ParseProvider(%q) = %q, %v", s, p, err)
		}
	}
	for _, s := range []string{"", "CPU", "rocm"} {
		if _, err := ParseProvider(s); err == nil || !strings.Contains(err.Error(), "want cpu, cuda or tensorrt") {
			t.Errorf("ParseProvider(%q): %v", s, err)
		}
	}
	if ProviderCPU.GPU() || !ProviderCUDA.GPU() || !ProviderTensorRT.GPU() {
		t.Error("Provider.GPU")
	}
}

func TestCheckThresholds(t *testing.T) {
	for _, v := range []float64{0.01, DefaultConfidence, DefaultIoU, 0.99} {
		if CheckConfidence(v) != nil || CheckIoU(v) != nil {
			t.Errorf("%v refused", v)
		}
	}
	for _, v := range []float64{0, 1, -0.1, 1.5, math.NaN()} {
		if CheckConfidence(v) == nil || CheckIoU(v) == nil {
			t.Errorf("%v accepted", v)
		}
	}
}

// A CUDA graph needs the session's input and output at fixed device addresses: SetDefaults
// turns device I/O on with it.
func TestGraphImpliesDeviceIO(t *testing.T) {
	o := DetectorOptions{Model: "m.onnx", Provider: ProviderCUDA, CUDA: CUDAOptions{Graph: true}}
	o.SetDefaults()
	if !o.CUDA.DeviceIO {
		t.Fatal("cuda.graph without cuda.device_io after SetDefaults")
	}
	o = DetectorOptions{Model: "m.onnx", Provider: ProviderCUDA}
	o.SetDefaults()
	if o.CUDA.DeviceIO {
		t.Fatal("cuda.device_io on by default")
	}
}
