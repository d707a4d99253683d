package worker

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
)

// Models with a uint8 input ([1,H,W,3], `visiond model prelude`) take the letterboxed
// RGB24 frame as it is: the model's first nodes convert it to float (Transpose to NCHW,
// Cast, divide by 255), on the provider's device. The worker copies the frame into the
// input tensor: no conversion on the CPU, and a quarter of the bytes of a float32 input
// cross to a GPU.

func isUint8(io ort.InputOutputInfo) bool {
	return io.OrtValueType == ort.ONNXTypeTensor && io.DataType == ort.TensorElementDataTypeUint8
}

// uint8InputSize returns the width and height of a static [1,H,W,3] shape.
func uint8InputSize(d ort.Shape) (w, h int, ok bool) {
	if len(d) != 4 || d[0] != 1 || d[1] <= 0 || d[2] <= 0 || d[3] != 3 {
		return 0, 0, false
	}
	return int(d[2]), int(d[1]), true
}

// newUint8Input creates the pair's uint8 input tensor.
func (p *tensorPair) newUint8Input(in ort.InputOutputInfo) error {
	t, err := ort.NewEmptyTensor[uint8](in.Dimensions)
	if err != nil {
		return fmt.Errorf("input tensor %v uint8: %w", in.Dimensions, err)
	}
	p.input, p.inU8 = t, t.GetData()
	return nil
}
