package worker

import (
	"fmt"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/proto"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/model/onnxpb"
)

// Calibrate runs the FP32 detector of opts (Model, Library, Threads; cpu provider) on each
// frame (letterboxed RGB24 HWC at the model's input size, as a Detector takes them) with
// the named intermediate tensors as extra outputs, and hands each of them to observe, one
// frame at a time: the tensors of a frame are released before the next runs, so that memory
// holds one frame's activations whatever the number of frames.
//
// The tensors are float32 activations of the model (model.CalibrationTensors). observe's
// data is valid only during the call.
func Calibrate(opts infer.DetectorOptions, m *onnxpb.ModelProto, tensors []string, frames [][]byte,
	observe func(frame int, name string, shape []int64, data []float32) error) error {
	opts.SetDefaults()
	if opts.Provider != infer.ProviderCPU {
		return fmt.Errorf("calibrate: provider %s: calibration runs on the cpu provider", opts.Provider)
	}
	if err := initORT(opts.Library); err != nil {
		return err
	}
	var inputName string
	if ins := m.GetGraph().GetInput(); len(ins) > 0 {
		inputName = ins[0].GetName()
	}
	// The input cannot be an output too: it is handed from the input tensor.
	var extra []string
	for _, t := range tensors {
		if t != inputName {
			extra = append(extra, t)
		}
	}
	aug, err := proto.Marshal(model.WithOutputs(m, extra))
	if err != nil {
		return fmt.Errorf("calibrate: encode model: %w", err)
	}
	ins, outs, err := ort.GetInputOutputInfoWithONNXData(aug)
	if err != nil {
		return fmt.Errorf("calibrate: model %s: %w", opts.Model, err)
	}
	if len(ins) != 1 {
		return fmt.Errorf("calibrate: model %s has %d inputs, want 1", opts.Model, len(ins))
	}
	in := ins[0]
	d := in.Dimensions
	if len(d) != 4 || d[0] != 1 || d[1] != 3 || d[2] <= 0 || d[3] <= 0 || in.DataType != ort.TensorElementDataTypeFloat {
		return fmt.Errorf("calibrate: model %s: input %q is %v %s, want float32 [1,3,H,W]", opts.Model, in.Name, d, elemName(in.DataType))
	}
	w, h := int(d[3]), int(d[2])
	names := make([]string, len(outs))
	for i, o := range outs {
		names[i] = o.Name
	}
	want := map[string]bool{}
	for _, t := range tensors {
		want[t] = true
	}

	so, err := sessionOptions(opts)
	if err != nil {
		return err
	}
	defer so.Destroy()
	// Every activation of a frame is an output (242 MiB for yolov8n at 640x640): ONNX
	// Runtime's memory pattern, planned for reuse that outputs prevent, only adds to that
	// (peak 1.16 -> 1.04 GB over 24 frames).
	if err := so.SetMemPattern(false); err != nil {
		return fmt.Errorf("calibrate: session options: %w", err)
	}
	// Graph optimizations are kept: a requested output is never fused away, so the values
	// are the FP32 model's as the workers compute them.
	session, err := ort.NewDynamicAdvancedSessionWithONNXData(aug, []string{in.Name}, names, so)
	if err != nil {
		return fmt.Errorf("calibrate: model %s: create session: %w", opts.Model, err)
	}
	defer session.Destroy()
	input, err := ort.NewEmptyTensor[float32](d)
	if err != nil {
		return fmt.Errorf("calibrate: input tensor %v: %w", d, err)
	}
	defer input.Destroy()

	inputs := []ort.Value{input}
	values := make([]ort.Value, len(names))
	for i, f := range frames {
		if len(f) != w*h*3 {
			return fmt.Errorf("calibrate: frame %d has %d bytes, model input %dx%d RGB24 needs %d", i, len(f), w, h, w*h*3)
		}
		preprocess(input.GetData(), f, w*h)
		clear(values)
		if err := session.Run(inputs, values); err != nil {
			return fmt.Errorf("calibrate: frame %d: %w", i, err)
		}
		err := observeAll(i, names, values, want, observe)
		if err == nil && want[in.Name] {
			err = observe(i, in.Name, d, input.GetData())
		}
		for _, v := range values {
			if v != nil {
				v.Destroy()
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// observeAll hands the wanted outputs of one run to observe.
func observeAll(frame int, names []string, values []ort.Value, want map[string]bool,
	observe func(int, string, []int64, []float32) error) error {
	for i, v := range values {
		if !want[names[i]] {
			continue
		}
		t, ok := v.(*ort.Tensor[float32])
		if !ok {
			return fmt.Errorf("calibrate: tensor %s is not float32", names[i])
		}
		if err := observe(frame, names[i], t.GetShape(), t.GetData()); err != nil {
			return err
		}
	}
	return nil
}
