package model

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer/model/onnxpb"
	"github.com/visiond/visiond/internal/testutil"
)

func loadYOLO(t *testing.T) *onnxpb.ModelProto {
	t.Helper()
	m, err := Load(testutil.ThirdParty(t, "yolov8n.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestInspectFileYOLOv8n(t *testing.T) {
	path := testutil.ThirdParty(t, "yolov8n.onnx")
	info, err := InspectFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if info.Path != path || info.SizeMiB != float64(st.Size())/(1<<20) || info.SizeMiB < 10 {
		t.Errorf("path %q, size %v MiB", info.Path, info.SizeMiB)
	}
	if info.Precision != FP32 || info.Opset != 17 || info.IRVersion != 8 || !strings.HasPrefix(info.Producer, "pytorch") {
		t.Errorf("precision %s, opset %d, IR %d, producer %q", info.Precision, info.Opset, info.IRVersion, info.Producer)
	}
	if got := info.Input.String(); got != "images [1 3 640 640] float32" || info.InputW != 640 || info.InputH != 640 || info.InputLayout != "NCHW float" {
		t.Errorf("input %s %dx%d %s", got, info.InputW, info.InputH, info.InputLayout)
	}
	if got := info.Output.String(); got != "output0 [1 84 8400] float32" || info.Layout != "yolov8 [1,4+C,N]" || info.Anchors != 8400 {
		t.Errorf("output %s, layout %s, %d anchors", got, info.Layout, info.Anchors)
	}
	if info.ClassCount != 80 || len(info.Classes) != 80 || info.Classes[0] != "person" || info.Classes[79] != "toothbrush" {
		t.Errorf("%d classes: %q", info.ClassCount, info.Classes)
	}
}

// TestInspectNotDetector: models the workers cannot run are refused with their inputs and
// outputs named.
func TestInspectNotDetector(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(g *onnxpb.GraphProto)
		want string
	}{
		{"flat output", func(g *onnxpb.GraphProto) {
			g.Node = append(g.Node, &onnxpb.NodeProto{OpType: "Flatten", Input: []string{"output0"}, Output: []string{"flat"}})
			g.Output = []*onnxpb.ValueInfoProto{testTensor("flat", tFloat, 1, 705600)}
		}, `output "flat": shape [1 705600] is not [1,A,B] (inputs images [1 3 640 640] float32; outputs flat [1 705600] float32)`},
		{"two outputs", func(g *onnxpb.GraphProto) {
			g.Output = append(g.Output, testTensor("extra", tFloat, 1, 84, 8400))
		}, "1 inputs and 2 outputs, want 1 and 1"},
		{"dynamic input", func(g *onnxpb.GraphProto) {
			g.Input = []*onnxpb.ValueInfoProto{testTensor("images", tFloat, 1, 3, -1, -1)}
		}, `input "images" has shape [1 3 -1 -1], want static [1,3,H,W]`},
		{"int input", func(g *onnxpb.GraphProto) {
			g.Input = []*onnxpb.ValueInfoProto{testTensor("images", tInt64, 1, 3, 640, 640)}
		}, `input "images" has element type int64`},
		{"square output", func(g *onnxpb.GraphProto) {
			g.Output = []*onnxpb.ValueInfoProto{testTensor("output0", tFloat, 1, 84, 84)}
		}, "ambiguous"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := loadYOLO(t)
			tc.edit(m.GetGraph())
			_, err := Inspect(m)
			if !errors.Is(err, ErrNotDetector) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrNotDetector containing %q", err, tc.want)
			}
		})
	}
}

func TestInspectNames(t *testing.T) {
	m := loadYOLO(t)
	setMeta(m, "names", "{0: 'a', 1: 'b'}")
	if _, err := Inspect(m); err == nil || !strings.Contains(err.Error(), "metadata names 2 classes, the output has 80") {
		t.Errorf("too few names: %v", err)
	}
	setMeta(m, "names", "person, car")
	if _, err := Inspect(m); err == nil || !strings.Contains(err.Error(), "metadata names: not a {id: 'name', ...} dict") {
		t.Errorf("bad names: %v", err)
	}
	m.MetadataProps = nil
	info, err := Inspect(m)
	if err != nil || info.Classes != nil || info.ClassCount != 80 {
		t.Errorf("no names: %v classes %d, err %v", info.Classes, info.ClassCount, err)
	}
}

func TestInspectFileBadInput(t *testing.T) {
	dir := t.TempDir()
	if _, err := InspectFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("folder: %v", err)
	}
	if _, err := InspectFile(filepath.Join(dir, "none.onnx")); err == nil || !strings.Contains(err.Error(), "none.onnx: no such file") {
		t.Errorf("missing: %v", err)
	}
	text := testutil.TempFile(t, "text.onnx", "this is not a model")
	if _, err := InspectFile(text); err == nil || !strings.Contains(err.Error(), "not an ONNX model") {
		t.Errorf("text: %v", err)
	}
}

// TestPrecision: int8 by the quantized operators, fp16 by the weights.
func TestPrecision(t *testing.T) {
	m := loadYOLO(t)
	if p := precisionOf(m.GetGraph()); p != FP32 {
		t.Fatalf("yolov8n: %s", p)
	}
	for _, op := range []string{"QuantizeLinear", "DequantizeLinear", "QLinearConv", "ConvInteger", "MatMulInteger"} {
		g := &onnxpb.GraphProto{Node: []*onnxpb.NodeProto{{OpType: "Conv"}, {OpType: op}}}
		if p := precisionOf(g); p != INT8 {
			t.Errorf("%s: %s, want int8", op, p)
		}
	}
	weights := func(f32, f16 int64) *onnxpb.GraphProto {
		return &onnxpb.GraphProto{Initializer: []*onnxpb.TensorProto{
			{DataType: tFloat, Dims: []int64{f32}}, {DataType: tFloat16, Dims: []int64{f16, 1}},
		}}
	}
	if p := precisionOf(weights(10, 1000)); p != FP16 {
		t.Errorf("mostly float16 weights: %s", p)
	}
	if p := precisionOf(weights(1000, 10)); p != FP32 {
		t.Errorf("mostly float32 weights: %s", p)
	}
}

func testTensor(name string, elem int32, dims ...int64) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		if d < 0 {
			shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: "dyn"}})
			continue
		}
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: elem, Shape: shape},
	}}}
}

func setMeta(m *onnxpb.ModelProto, key, value string) {
	for _, p := range m.GetMetadataProps() {
		if p.GetKey() == key {
			p.Value = value
			return
		}
	}
	m.MetadataProps = append(m.MetadataProps, &onnxpb.StringStringEntryProto{Key: key, Value: value})
}
