package model

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model/onnxpb"
)

// Precision is what a model computes in, as `visiond model inspect` reports it.
type Precision string

// Precisions.
const (
	FP32 Precision = "fp32"
	FP16 Precision = "fp16" // most weights float16 (visiond model fp16, or an export with half=True)
	INT8 Precision = "int8" // quantized: QuantizeLinear/DequantizeLinear (QDQ), QLinear* or *Integer operators
)

// Tensor is a graph input or output: its name, shape (-1 for a dimension that is not
// fixed, named in the file or unnamed) and element type (float32, float16, uint8, ...).
type Tensor struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
	Type  string  `json:"type"`
}

func (t Tensor) String() string {
	dims := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = fmt.Sprint(d)
		if d < 0 {
			dims[i] = "?"
		}
	}
	return fmt.Sprintf("%s [%s] %s", t.Name, strings.Join(dims, " "), t.Type)
}

// Info is what Inspect tells of a detector model.
type Info struct {
	Path      string    `json:"path"`
	SizeMiB   float64   `json:"size_mib"`  // file size
	Precision Precision `json:"precision"` // fp32, fp16 or int8
	Opset     int64     `json:"opset"`     // of the default (ai.onnx) domain
	IRVersion int64     `json:"ir_version"`
	Producer  string    `json:"producer"` // producer name and version, as the file states them
	Input     Tensor    `json:"input"`
	// InputLayout is how the input holds the image: "NCHW float" ([1,3,H,W] float32 or
	// float16, RGB in 0..1, the form every export has) or "NHWC uint8" ([1,H,W,3], the
	// letterboxed RGB24 frame as it is: AddUint8Prelude).
	InputLayout string `json:"input_layout"`
	InputW      int    `json:"input_w"`
	InputH      int    `json:"input_h"`
	Output      Tensor `json:"output"`
	// Layout is the output layout (infer.DetectLayout), e.g. "yolov8 [1,4+C,N]".
	Layout  string `json:"layout"`
	Anchors int    `json:"anchors"` // N: rows (candidate boxes) of the output
	// Classes are the class names (the "names" metadata); nil when the model has none.
	Classes []string `json:"classes"`
	// ClassCount is the number of classes the output layout says, or len(Classes) when the
	// layout does not say (end-to-end).
	ClassCount int `json:"class_count"`
}

// ErrNotDetector: the model is ONNX but not a detector the workers can run.
var ErrNotDetector = errors.New("not a detector visiond can run")

// supportedIO says what a detector's inputs and outputs must be (as the workers check
// them: infer/worker's checkIO).
const supportedIO = "want one input [1,3,H,W] float32 or float16 (or [1,H,W,3] uint8) and one output of shape [1,4+C,N] (YOLOv8/v9/v11), " +
	"[1,N,5+C] (YOLOv5/v7) or [1,N,6] (end-to-end), static"

// InspectFile loads the model at path and inspects it (Inspect).
func InspectFile(path string) (Info, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Info{}, fmt.Errorf("model: %w", err)
	}
	if !st.Mode().IsRegular() {
		return Info{}, fmt.Errorf("model %s: not a regular file", path)
	}
	m, err := Load(path)
	if err != nil {
		return Info{}, err
	}
	info, err := Inspect(m)
	if err != nil {
		return Info{}, fmt.Errorf("model %s: %w", path, err)
	}
	info.Path = path
	info.SizeMiB = float64(st.Size()) / (1 << 20)
	return info, nil
}

// Inspect tells m's input, output layout, classes, opset and precision by the rules the
// workers load a model by. An error matching ErrNotDetector says why m is not a detector
// the workers can run, naming its inputs and outputs.
func Inspect(m *onnxpb.ModelProto) (Info, error) {
	g := m.GetGraph()
	info := Info{
		Precision: precisionOf(g),
		Opset:     opset(m),
		IRVersion: m.GetIrVersion(),
		Producer:  strings.TrimSpace(m.GetProducerName() + " " + m.GetProducerVersion()),
	}
	ins, outs := graphInputs(g), g.GetOutput()
	bad := func(format string, a ...any) (Info, error) {
		return Info{}, fmt.Errorf("%w: %s (inputs %s; outputs %s); %s", ErrNotDetector,
			fmt.Sprintf(format, a...), describe(ins), describe(outs), supportedIO)
	}
	if len(ins) != 1 || len(outs) != 1 {
		return bad("%d inputs and %d outputs, want 1 and 1", len(ins), len(outs))
	}
	info.Input, info.Output = tensorOf(ins[0]), tensorOf(outs[0])
	in := info.Input
	static := len(in.Shape) == 4 && !slices.ContainsFunc(in.Shape, func(d int64) bool { return d <= 0 })
	switch {
	case in.Type == "uint8":
		if !static || in.Shape[0] != 1 || in.Shape[3] != 3 {
			return bad("input %q has shape %v, want static [1,H,W,3] for uint8", in.Name, in.Shape)
		}
		info.InputLayout = "NHWC uint8"
		info.InputH, info.InputW = int(in.Shape[1]), int(in.Shape[2])
	case in.Type != "float32" && in.Type != "float16":
		return bad("input %q has element type %s", in.Name, in.Type)
	case !static || in.Shape[0] != 1 || in.Shape[1] != 3:
		return bad("input %q has shape %v, want static [1,3,H,W]", in.Name, in.Shape)
	default:
		info.InputLayout = "NCHW float"
		info.InputH, info.InputW = int(in.Shape[2]), int(in.Shape[3])
	}
	if t := info.Output.Type; t != "float32" && t != "float16" {
		return bad("output %q has element type %s", info.Output.Name, t)
	}
	l, classes, anchors, err := infer.DetectLayout(info.Output.Shape)
	if err != nil {
		return bad("output %q: %v", info.Output.Name, err)
	}
	info.Layout, info.Anchors, info.ClassCount = l.String(), anchors, classes
	if s, ok := metadata(m, "names"); ok {
		names, err := infer.ParseNames(s)
		if err != nil {
			return Info{}, err
		}
		if classes > 0 && len(names) != classes {
			return Info{}, fmt.Errorf("metadata names %d classes, the output has %d", len(names), classes)
		}
		info.Classes = names
		info.ClassCount = len(names)
	}
	return info, nil
}

// graphInputs returns the graph's inputs that are not initializers (files of IR version
// 3 and older list every weight as an input too).
func graphInputs(g *onnxpb.GraphProto) []*onnxpb.ValueInfoProto {
	inits := map[string]bool{}
	for _, t := range g.GetInitializer() {
		inits[t.GetName()] = true
	}
	var ins []*onnxpb.ValueInfoProto
	for _, v := range g.GetInput() {
		if !inits[v.GetName()] {
			ins = append(ins, v)
		}
	}
	return ins
}

func tensorOf(v *onnxpb.ValueInfoProto) Tensor {
	t := Tensor{Name: v.GetName()}
	tt := v.GetType().GetTensorType()
	if tt == nil {
		t.Type = "not a tensor"
		return t
	}
	t.Type = ElemTypeName(tt.GetElemType())
	for _, d := range tt.GetShape().GetDim() {
		if dv, ok := d.GetValue().(*onnxpb.TensorShapeProto_Dimension_DimValue); ok && dv.DimValue > 0 {
			t.Shape = append(t.Shape, dv.DimValue)
		} else {
			t.Shape = append(t.Shape, -1)
		}
	}
	return t
}

func describe(vs []*onnxpb.ValueInfoProto) string {
	if len(vs) == 0 {
		return "none"
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = tensorOf(v).String()
	}
	return strings.Join(parts, ", ")
}

// ElemTypeName names an ONNX element type as visiond's messages do: float32, float16,
// uint8, int64, ...
func ElemTypeName(t int32) string {
	switch onnxpb.TensorProto_DataType(t) {
	case onnxpb.TensorProto_FLOAT:
		return "float32"
	case onnxpb.TensorProto_DOUBLE:
		return "float64"
	case onnxpb.TensorProto_UNDEFINED:
		return "undefined"
	}
	return strings.ToLower(onnxpb.TensorProto_DataType(t).String())
}

// opset returns the version of the default operator set (domain "" or "ai.onnx"), 0 when
// the model imports none.
func opset(m *onnxpb.ModelProto) int64 {
	for _, o := range m.GetOpsetImport() {
		if d := o.GetDomain(); d == "" || d == "ai.onnx" {
			return o.GetVersion()
		}
	}
	return 0
}

// metadata returns the model's metadata value for key.
func metadata(m *onnxpb.ModelProto, key string) (string, bool) {
	for _, p := range m.GetMetadataProps() {
		if p.GetKey() == key {
			return p.GetValue(), true
		}
	}
	return "", false
}

// quantOp says whether op is an operator of quantized models.
func quantOp(op string) bool {
	switch op {
	case "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger", "MatMulInteger":
		return true
	}
	return strings.HasPrefix(op, "QLinear")
}

// precisionOf tells int8 by its operators (QDQ pairs, QLinearConv and the like, the
// *Integer operators), fp16 when the float16 weights outnumber (in values) the float32
// ones, else fp32.
func precisionOf(g *onnxpb.GraphProto) Precision {
	for _, n := range g.GetNode() {
		if quantOp(n.GetOpType()) {
			return INT8
		}
	}
	var f32, f16 int64
	for _, t := range g.GetInitializer() {
		n := int64(1)
		for _, d := range t.GetDims() {
			n *= d
		}
		switch onnxpb.TensorProto_DataType(t.GetDataType()) {
		case onnxpb.TensorProto_FLOAT:
			f32 += n
		case onnxpb.TensorProto_FLOAT16:
			f16 += n
		}
	}
	if f16 > f32 {
		return FP16
	}
	return FP32
}
