package infer

import (
	"fmt"
	"strconv"

	ort "github.com/yalue/onnxruntime_go"
)

// CUDAOptions are options of ONNX Runtime's CUDA execution provider; zero values leave
// ONNX Runtime's defaults.
type CUDAOptions struct {
	GPUMemLimit         int64  `json:"gpu_mem_limit,omitempty"`          // bytes the provider's arena may hold
	ArenaExtendStrategy string `json:"arena_extend_strategy,omitempty"`  // kNextPowerOfTwo or kSameAsRequested
	CudnnConvAlgoSearch string `json:"cudnn_conv_algo_search,omitempty"` // EXHAUSTIVE, HEURISTIC or DEFAULT
}

// TensorRTOptions are options of ONNX Runtime's TensorRT execution provider.
type TensorRTOptions struct {
	FP16          bool   `json:"fp16,omitempty"`
	INT8          bool   `json:"int8,omitempty"`
	EngineCache   string `json:"engine_cache,omitempty"`   // directory of built engines; "" disables the cache
	WorkspaceSize int64  `json:"workspace_size,omitempty"` // bytes
}

// appendProvider adds the configured execution provider to so (cpu needs nothing).
func appendProvider(so *ort.SessionOptions, o DetectorOptions) error {
	if o.Provider != "cuda" {
		return nil
	}
	return appendCUDA(so, o.Device)
}

func appendCUDA(so *ort.SessionOptions, device int) error {
	co, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return fmt.Errorf("provider cuda (device %d) unavailable: %w", device, err)
	}
	defer co.Destroy()
	if err := co.Update(map[string]string{"device_id": strconv.Itoa(device)}); err != nil {
		return fmt.Errorf("provider cuda (device %d) unavailable: %w", device, err)
	}
	if err := so.AppendExecutionProviderCUDA(co); err != nil {
		return fmt.Errorf("provider cuda (device %d) unavailable: %w", device, err)
	}
	return nil
}
