package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/visiond/visiond/infer/model/onnxpb"
	"github.com/visiond/visiond/internal/half"
)

const tUint8 = int32(onnxpb.TensorProto_UINT8)

// ErrHasPrelude: the model takes uint8 frames already.
var ErrHasPrelude = errors.New("the model takes uint8 frames already")

// AddUint8Prelude makes a detector take the letterboxed frame as the workers have it: its
// input becomes uint8 [1,H,W,3] (NHWC: RGB24 rows, as the cameras' frames are), under the
// input's own name, and the graph's first nodes convert it to what the model took before
// (Transpose to NCHW, Cast to the input's float type, Div by 255). The worker then copies
// the frame into the input tensor as it is instead of converting it on the CPU: with cuda
// or tensorrt the conversion runs on the GPU, and a quarter of the bytes (half for a
// float16 input) cross to it.
func AddUint8Prelude(m *onnxpb.ModelProto) error {
	info, err := Inspect(m)
	if err != nil {
		return err
	}
	if info.Input.Type == "uint8" {
		return ErrHasPrelude
	}
	g := m.GetGraph()
	elem := tFloat
	if info.Input.Type == "float16" {
		elem = tFloat16
	}
	name := info.Input.Name
	c := newConverter(g) // for fresh names
	inner := c.fresh(name + "_float")
	for _, n := range g.GetNode() {
		for i, in := range n.GetInput() {
			if in == name {
				n.Input[i] = inner
			}
		}
	}
	for _, o := range g.GetOutput() {
		if o.GetName() == name {
			return fmt.Errorf("the input %q is also an output", name)
		}
	}
	for i, v := range g.GetInput() {
		if v.GetName() == name {
			g.Input[i] = tensorValue(name, tUint8, 1, int64(info.InputH), int64(info.InputW), 3)
		}
	}
	nchw, cast, scale := c.fresh(name+"_nchw"), c.fresh(name+"_cast"), c.fresh(name+"_255")
	g.Initializer = append(g.Initializer, scalar(scale, elem, 255))
	prelude := []*onnxpb.NodeProto{
		{Name: c.fresh("prelude_transpose"), OpType: "Transpose", Input: []string{name}, Output: []string{nchw},
			Attribute: []*onnxpb.AttributeProto{{Name: "perm", Type: onnxpb.AttributeProto_INTS, Ints: []int64{0, 3, 1, 2}}}},
		castNode(c.fresh("prelude_cast"), nchw, cast, elem),
		{Name: c.fresh("prelude_scale"), OpType: "Div", Input: []string{cast, scale}, Output: []string{inner}},
	}
	g.Node = append(prelude, g.Node...)
	return nil
}

// scalar returns a float32 or float16 tensor of one value.
func scalar(name string, elem int32, v float32) *onnxpb.TensorProto {
	if elem == tFloat16 {
		return &onnxpb.TensorProto{Name: name, DataType: tFloat16, RawData: binary.LittleEndian.AppendUint16(nil, half.FromFloat32(v))}
	}
	return &onnxpb.TensorProto{Name: name, DataType: tFloat, RawData: binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))}
}

// tensorValue describes a tensor of element type elem and static shape dims.
func tensorValue(name string, elem int32, dims ...int64) *onnxpb.ValueInfoProto {
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	return &onnxpb.ValueInfoProto{Name: name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
		TensorType: &onnxpb.TypeProto_Tensor{ElemType: elem, Shape: shape},
	}}}
}
