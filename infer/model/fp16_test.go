package model

import (
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/visiond/visiond/infer/model/onnxpb"
	"github.com/visiond/visiond/internal/half"
)

// checkTopological fails unless every node input is a graph input, an initializer or the
// output of an earlier node, and every graph output is produced.
func checkTopological(t *testing.T, g *onnxpb.GraphProto) {
	t.Helper()
	have := map[string]bool{"": true}
	for _, v := range g.GetInput() {
		have[v.GetName()] = true
	}
	for _, i := range g.GetInitializer() {
		have[i.GetName()] = true
	}
	for _, n := range g.GetNode() {
		for _, in := range n.GetInput() {
			if !have[in] {
				t.Fatalf("node %q (%s) reads %q before anything writes it", n.GetName(), n.GetOpType(), in)
			}
		}
		for _, o := range n.GetOutput() {
			if have[o] {
				t.Fatalf("node %q (%s) writes %q a second time", n.GetName(), n.GetOpType(), o)
			}
			have[o] = true
		}
	}
	for _, o := range g.GetOutput() {
		if !have[o.GetName()] {
			t.Fatalf("graph output %q is not produced", o.GetName())
		}
	}
}

// consumers returns, per tensor, the nodes and input positions that read it.
func consumers(g *onnxpb.GraphProto) map[string][]string {
	c := map[string][]string{}
	for _, n := range g.GetNode() {
		for i, in := range n.GetInput() {
			c[in] = append(c[in], n.GetOpType()+"#"+string(rune('0'+i)))
		}
	}
	return c
}

func TestConvertFP16YOLOv8n(t *testing.T) {
	m := loadYOLO(t)
	orig := proto.Clone(m).(*onnxpb.ModelProto)
	if err := ConvertFP16(m); err != nil {
		t.Fatal(err)
	}
	g := m.GetGraph()
	checkTopological(t, g)

	info, err := Inspect(m)
	if err != nil {
		t.Fatal(err)
	}
	if info.Precision != FP16 || info.Input.String() != "images [1 3 640 640] float32" ||
		info.Output.String() != "output0 [1 84 8400] float32" || len(info.Classes) != 80 {
		t.Fatalf("converted: %s, input %s, output %s, %d classes", info.Precision, info.Input, info.Output, len(info.Classes))
	}
	// The edges: the input cast to float16 first thing, the output cast back last.
	first, last := g.GetNode()[0], g.GetNode()[len(g.GetNode())-1]
	if first.GetOpType() != "Cast" || first.GetInput()[0] != "images" || attrInt(first, "to", 0) != int64(tFloat16) {
		t.Errorf("first node %v", first)
	}
	if last.GetOpType() != "Cast" || last.GetOutput()[0] != "output0" || attrInt(last, "to", 0) != int64(tFloat) {
		t.Errorf("last node %v", last)
	}
	// Every weight is float16 but Resize's scales; each float16 weight is its float32
	// original rounded.
	origInits := map[string]*onnxpb.TensorProto{}
	for _, i := range orig.GetGraph().GetInitializer() {
		origInits[i.GetName()] = i
	}
	cons := consumers(g)
	var f16, f32 int
	for _, i := range g.GetInitializer() {
		switch i.GetDataType() {
		case tFloat:
			f32++
			for _, c := range cons[i.GetName()] {
				if c != "Resize#2" {
					t.Errorf("float32 initializer %q read by %s", i.GetName(), c)
				}
			}
		case tFloat16:
			f16++
			src := origInits[strings.TrimSuffix(i.GetName(), "_fp16")]
			want := floatValues(src)
			raw := i.GetRawData()
			if src == nil || len(raw) != 2*len(want) || !slices.Equal(i.GetDims(), src.GetDims()) {
				t.Fatalf("float16 initializer %q: %d bytes, dims %v; original %v", i.GetName(), len(raw), i.GetDims(), src.GetDims())
			}
			for k, v := range want {
				if h := binary.LittleEndian.Uint16(raw[2*k:]); h != half.FromFloat32(v) {
					t.Fatalf("%s[%d]: %#04x, want %#04x (%g)", i.GetName(), k, h, half.FromFloat32(v), v)
				}
			}
		}
	}
	if f32 != 1 || f16 < 100 {
		t.Errorf("%d float32 and %d float16 initializers", f32, f16)
	}
	for _, n := range g.GetNode() {
		if n.GetOpType() == "Conv" && !strings.HasSuffix(n.GetInput()[1], "_fp16") {
			t.Errorf("Conv %q weight %q", n.GetName(), n.GetInput()[1])
		}
	}
	// The weights are half the size.
	if a, b := proto.Size(orig), proto.Size(m); float64(b) > 0.55*float64(a) {
		t.Errorf("size %d bytes, the original %d", b, a)
	}

	err = ConvertFP16(m)
	if !errors.Is(err, ErrAlreadyConverted) || !strings.Contains(err.Error(), "fp16 already") {
		t.Errorf("second conversion: %v", err)
	}
}

func floatInit(name string, dims []int64, vals ...float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: name, DataType: tFloat, Dims: dims, FloatData: vals}
}

func node(op string, ins, outs []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: op + "_" + outs[0], OpType: op, Input: ins, Output: outs, Attribute: attrs}
}

func intAttr(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INT, I: v}
}

// TestConvertFP16KeepsFloat32 checks, on a small graph, what stays float32: a shape
// computation made in float (Shape, Cast to float, Mul, Cast back), an operator without
// float16 (Range) fed float32 and cast to float16 after, Resize's scales; and what is
// converted: a Constant node's value, a Cast to float32 inside the graph.
func TestConvertFP16KeepsFloat32(t *testing.T) {
	g := &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{testTensor("x", tFloat, 1, 4)},
		Output: []*onnxpb.ValueInfoProto{testTensor("y", tFloat, 1, 8)},
		Initializer: []*onnxpb.TensorProto{
			floatInit("two", nil, 2), floatInit("start", nil, 0), floatInit("limit", nil, 4), floatInit("delta", nil, 1),
			floatInit("scales", []int64{2}, 1, 2),
		},
		Node: []*onnxpb.NodeProto{
			node("Shape", []string{"x"}, []string{"s"}),
			node("Cast", []string{"s"}, []string{"sf"}, intAttr("to", int64(tFloat))),
			node("Mul", []string{"sf", "two"}, []string{"sm"}),
			node("Cast", []string{"sm"}, []string{"si"}, intAttr("to", int64(tInt64))),
			node("Range", []string{"start", "limit", "delta"}, []string{"r"}),
			node("Add", []string{"x", "r"}, []string{"a"}),
			node("Constant", nil, []string{"k"}, &onnxpb.AttributeProto{Name: "value_float", Type: onnxpb.AttributeProto_FLOAT, F: 0.5}),
			node("Mul", []string{"a", "k"}, []string{"b"}),
			node("Cast", []string{"b"}, []string{"bc"}, intAttr("to", int64(tFloat))),
			node("Resize", []string{"bc", "", "scales"}, []string{"y"}),
			node("Expand", []string{"bc", "si"}, []string{"unused"}),
		},
	}
	if err := convertFP16Graph(g); err != nil {
		t.Fatal(err)
	}
	checkTopological(t, g)
	byOut := map[string]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		byOut[n.GetOutput()[0]] = n
	}
	inits := map[string]*onnxpb.TensorProto{}
	for _, i := range g.GetInitializer() {
		inits[i.GetName()] = i
	}
	// The shape computation is untouched.
	if n := byOut["sf"]; attrInt(n, "to", 0) != int64(tFloat) {
		t.Errorf("shape Cast to %d", attrInt(n, "to", 0))
	}
	if n := byOut["sm"]; !slices.Equal(n.GetInput(), []string{"sf", "two"}) {
		t.Errorf("shape Mul reads %v", n.GetInput())
	}
	// Range runs on its float32 inputs; Add reads x and Range's output cast to float16.
	if n := byOut["r"]; !slices.Equal(n.GetInput(), []string{"start", "limit", "delta"}) {
		t.Errorf("Range reads %v", n.GetInput())
	}
	add := byOut["a"]
	for i, in := range add.GetInput() {
		c := byOut[in]
		if c == nil || c.GetOpType() != "Cast" || attrInt(c, "to", 0) != int64(tFloat16) || c.GetInput()[0] != []string{"x", "r"}[i] {
			t.Errorf("Add input %d is %q, not a cast to float16 of %s", i, in, []string{"x", "r"}[i])
		}
	}
	// The Constant became a float16 initializer.
	mul := byOut["b"]
	if k := inits[mul.GetInput()[1]]; k == nil || k.GetDataType() != tFloat16 || half.ToFloat32(binary.LittleEndian.Uint16(k.GetRawData())) != 0.5 {
		t.Errorf("Mul's constant %q: %v", mul.GetInput()[1], k)
	}
	// A Cast to float32 in the converted graph casts to float16.
	if n := byOut["bc"]; attrInt(n, "to", 0) != int64(tFloat16) {
		t.Errorf("inner Cast to %d", attrInt(n, "to", 0))
	}
	// Resize: float16 data, float32 scales, its output renamed and cast back to y.
	var resize *onnxpb.NodeProto
	for _, n := range g.GetNode() {
		if n.GetOpType() == "Resize" {
			resize = n
		}
	}
	if resize.GetInput()[0] != "bc" || resize.GetInput()[2] != "scales" || inits["scales"].GetDataType() != tFloat {
		t.Errorf("Resize reads %v", resize.GetInput())
	}
	if y := byOut["y"]; y.GetOpType() != "Cast" || y.GetInput()[0] != resize.GetOutput()[0] || attrInt(y, "to", 0) != int64(tFloat) {
		t.Errorf("y made by %v", y)
	}
	// Unused float32 initializers are gone (two stays: the shape computation reads it).
	if inits["two"] == nil || inits["scales"] == nil {
		t.Errorf("initializers %v", slices.Sorted(maps.Keys(inits)))
	}
}

func TestConvertFP16Refuses(t *testing.T) {
	m := loadYOLO(t)
	m.GetGraph().Node = append(m.GetGraph().Node, &onnxpb.NodeProto{Name: "loop", OpType: "Loop", Output: []string{"looped"},
		Attribute: []*onnxpb.AttributeProto{{Name: "body", Type: onnxpb.AttributeProto_GRAPH, G: &onnxpb.GraphProto{}}}})
	if err := ConvertFP16(m); err == nil || !strings.Contains(err.Error(), `node "loop" (Loop) has a subgraph`) {
		t.Errorf("subgraph: %v", err)
	}
	m = loadYOLO(t)
	m.GetGraph().Node = append(m.GetGraph().Node, &onnxpb.NodeProto{Name: "nothing", OpType: "Cast", Input: []string{"images"}})
	if err := ConvertFP16(m); err == nil || !strings.Contains(err.Error(), `node "nothing" (Cast) has no output`) {
		t.Errorf("node without output: %v", err)
	}
	m = loadYOLO(t)
	m.GetGraph().GetInitializer()[0].DataLocation = onnxpb.TensorProto_EXTERNAL
	if err := ConvertFP16(m); err == nil || !strings.Contains(err.Error(), "stored in an external file") {
		t.Errorf("external data: %v", err)
	}
	m = loadYOLO(t)
	m.GetGraph().Node = append(m.GetGraph().Node, &onnxpb.NodeProto{OpType: "DequantizeLinear"})
	if err := ConvertFP16(m); !errors.Is(err, ErrAlreadyConverted) || !strings.Contains(err.Error(), "int8") {
		t.Errorf("int8: %v", err)
	}
	m = loadYOLO(t)
	m.GetGraph().Output = nil
	if err := ConvertFP16(m); !errors.Is(err, ErrNotDetector) {
		t.Errorf("no output: %v", err)
	}
}
