package model

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/visiond/visiond/infer/model/onnxpb"
)

// tinyDetector is a detector graph small enough to seed the fuzzer: input [1,3,8,8], a
// Conv to 6 channels, reshaped to a [1,6,64] YOLOv8-layout output (2 classes), with the
// operators the converter treats apart (Shape, Cast, Resize, Constant).
func tinyDetector() *onnxpb.ModelProto {
	g := &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{tensorValue("images", tFloat, 1, 3, 8, 8)},
		Output: []*onnxpb.ValueInfoProto{tensorValue("out", tFloat, 1, 6, 64)},
		Initializer: []*onnxpb.TensorProto{
			floatInit("w", []int64{6, 3, 1, 1}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18),
			floatInit("scales", []int64{4}, 1, 1, 1, 1),
			{Name: "shape", DataType: tInt64, Dims: []int64{3}, Int64Data: []int64{1, 6, 64}},
		},
		Node: []*onnxpb.NodeProto{
			node("Conv", []string{"images", "w"}, []string{"c"}),
			node("Resize", []string{"c", "", "scales"}, []string{"r"}),
			node("Shape", []string{"r"}, []string{"s"}),
			node("Cast", []string{"s"}, []string{"sf"}, intAttr("to", int64(tFloat))),
			node("Constant", nil, []string{"k"}, &onnxpb.AttributeProto{Name: "value_float", Type: onnxpb.AttributeProto_FLOAT, F: 0.5}),
			node("Mul", []string{"r", "k"}, []string{"m"}),
			node("Reshape", []string{"m", "shape"}, []string{"out"}),
		},
	}
	return &onnxpb.ModelProto{IrVersion: 8, Graph: g, OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: 17}},
		MetadataProps: []*onnxpb.StringStringEntryProto{{Key: "names", Value: "{0: 'a', 1: 'b'}"}}}
}

func TestTinyDetector(t *testing.T) {
	m := tinyDetector()
	info, err := Inspect(m)
	if err != nil || info.Layout != "yolov8 [1,4+C,N]" || info.ClassCount != 2 {
		t.Fatalf("%+v, %v", info, err)
	}
	if err := ConvertFP16(m); err != nil {
		t.Fatal(err)
	}
	checkTopological(t, m.GetGraph())
}

// FuzzModel feeds Parse, Inspect, ConvertFP16 and AddUint8Prelude any bytes: they fail
// with an error or succeed, never panic, and what they write parses again.
func FuzzModel(f *testing.F) {
	seed, err := proto.Marshal(tinyDetector())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("not a model"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			return
		}
		if _, err := Inspect(m); err != nil {
			return
		}
		for _, convert := range []func(*onnxpb.ModelProto) error{AddUint8Prelude, ConvertFP16} {
			c := proto.Clone(m).(*onnxpb.ModelProto)
			if err := convert(c); err != nil {
				continue
			}
			out, err := proto.Marshal(c)
			if err != nil {
				t.Fatalf("converted model does not encode: %v", err)
			}
			if _, err := Parse(out); err != nil {
				t.Fatalf("converted model does not parse: %v", err)
			}
		}
	})
}
