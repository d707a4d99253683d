package worker

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/visiond/visiond/infer/internal/infertest"
)

// A test-only editor of ONNX models, on the protobuf wire format (onnx.proto's field
// numbers), so that tests can derive models of other output layouts and element types
// from yolov8n.onnx without Python. It keeps every field it does not edit as it was read.

// ONNX field numbers (onnx.proto).
const (
	pbModelGraph = 7

	pbGraphNode        = 1
	pbGraphInitializer = 5
	pbGraphInput       = 11
	pbGraphOutput      = 12

	pbNodeInput     = 1
	pbNodeOutput    = 2
	pbNodeName      = 3
	pbNodeOpType    = 4
	pbNodeAttribute = 5

	pbAttrName = 1
	pbAttrI    = 3
	pbAttrInts = 8
	pbAttrType = 20

	pbTensorDims     = 1
	pbTensorDataType = 2
	pbTensorName     = 8
	pbTensorRawData  = 9

	onnxFloat   = 1
	onnxInt64   = 7
	onnxFloat16 = 10

	attrINT  = 2
	attrINTS = 7
)

// pbField is one field of a message as it was on the wire: number, type and the whole
// encoding (tag included).
type pbField struct {
	num protowire.Number
	raw []byte
}

func parseFields(b []byte) ([]pbField, error) {
	var fs []pbField
	for len(b) > 0 {
		num, _, n := protowire.ConsumeField(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		fs = append(fs, pbField{num: num, raw: b[:n]})
		b = b[n:]
	}
	return fs, nil
}

// bytesValue returns the payload of a length-delimited field.
func (f pbField) bytesValue() []byte {
	_, _, n := protowire.ConsumeTag(f.raw)
	v, _ := protowire.ConsumeBytes(f.raw[n:])
	return v
}

// onnxModel is a ModelProto whose graph's nodes, initializers, inputs and outputs can be
// edited; each is kept as its encoded message (without tag).
type onnxModel struct {
	fields     []pbField // of ModelProto; the graph's place is kept
	graphOther []pbField // GraphProto fields other than the four below
	nodes      [][]byte
	inits      [][]byte
	inputs     [][]byte
	outputs    [][]byte
}

func readONNX(tb testing.TB, path string) *onnxModel {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	fs, err := parseFields(b)
	if err != nil {
		tb.Fatalf("%s: ModelProto: %v", path, err)
	}
	m := &onnxModel{fields: fs}
	for _, f := range fs {
		if f.num != pbModelGraph {
			continue
		}
		gfs, err := parseFields(f.bytesValue())
		if err != nil {
			tb.Fatalf("%s: GraphProto: %v", path, err)
		}
		for _, g := range gfs {
			switch g.num {
			case pbGraphNode:
				m.nodes = append(m.nodes, g.bytesValue())
			case pbGraphInitializer:
				m.inits = append(m.inits, g.bytesValue())
			case pbGraphInput:
				m.inputs = append(m.inputs, g.bytesValue())
			case pbGraphOutput:
				m.outputs = append(m.outputs, g.bytesValue())
			default:
				m.graphOther = append(m.graphOther, g)
			}
		}
		return m
	}
	tb.Fatalf("%s: no graph", path)
	return nil
}

func (m *onnxModel) encode() []byte {
	var g []byte
	for _, f := range m.graphOther {
		g = append(g, f.raw...)
	}
	for _, group := range []struct {
		num  protowire.Number
		msgs [][]byte
	}{{pbGraphNode, m.nodes}, {pbGraphInitializer, m.inits}, {pbGraphInput, m.inputs}, {pbGraphOutput, m.outputs}} {
		for _, msg := range group.msgs {
			g = appendBytesField(g, group.num, msg)
		}
	}
	var b []byte
	for _, f := range m.fields {
		if f.num == pbModelGraph {
			b = appendBytesField(b, pbModelGraph, g)
			continue
		}
		b = append(b, f.raw...)
	}
	return b
}

// write stores the model in a temporary directory of tb and returns its path.
func (m *onnxModel) write(tb testing.TB, name string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, m.encode(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// renameInput makes every node that reads tensor from read to instead.
func (m *onnxModel) renameInput(tb testing.TB, from, to string) {
	tb.Helper()
	renamed := 0
	for i, node := range m.nodes {
		fs, err := parseFields(node)
		if err != nil {
			tb.Fatalf("NodeProto: %v", err)
		}
		var out []byte
		for _, f := range fs {
			if f.num == pbNodeInput && string(f.bytesValue()) == from {
				out = appendBytesField(out, pbNodeInput, []byte(to))
				renamed++
				continue
			}
			out = append(out, f.raw...)
		}
		m.nodes[i] = out
	}
	if renamed == 0 {
		tb.Fatalf("no node reads %q", from)
	}
}

func appendBytesField(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// onnxNode encodes a NodeProto; attrs are encoded AttributeProtos (attrInt, attrInts).
func onnxNode(op, name string, inputs, outputs []string, attrs ...[]byte) []byte {
	var b []byte
	for _, in := range inputs {
		b = appendBytesField(b, pbNodeInput, []byte(in))
	}
	for _, out := range outputs {
		b = appendBytesField(b, pbNodeOutput, []byte(out))
	}
	b = appendBytesField(b, pbNodeName, []byte(name))
	b = appendBytesField(b, pbNodeOpType, []byte(op))
	for _, a := range attrs {
		b = appendBytesField(b, pbNodeAttribute, a)
	}
	return b
}

func attrInt(name string, v int64) []byte {
	b := appendBytesField(nil, pbAttrName, []byte(name))
	b = appendVarintField(b, pbAttrI, uint64(v))
	return appendVarintField(b, pbAttrType, attrINT)
}

func attrInts(name string, vs ...int64) []byte {
	b := appendBytesField(nil, pbAttrName, []byte(name))
	var packed []byte
	for _, v := range vs {
		packed = protowire.AppendVarint(packed, uint64(v))
	}
	b = appendBytesField(b, pbAttrInts, packed)
	return appendVarintField(b, pbAttrType, attrINTS)
}

// onnxTensor encodes a TensorProto initializer with raw little-endian data.
func onnxTensor(name string, dataType int, dims []int64, raw []byte) []byte {
	var b []byte
	for _, d := range dims {
		b = appendVarintField(b, pbTensorDims, uint64(d))
	}
	b = appendVarintField(b, pbTensorDataType, uint64(dataType))
	b = appendBytesField(b, pbTensorName, []byte(name))
	return appendBytesField(b, pbTensorRawData, raw)
}

func int64Tensor(name string, vs ...int64) []byte {
	raw := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(v))
	}
	return onnxTensor(name, onnxInt64, []int64{int64(len(vs))}, raw)
}

func floatTensor(name string, dims []int64, v float32) []byte {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	raw := make([]byte, 0, 4*n)
	for range n {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	return onnxTensor(name, onnxFloat, dims, raw)
}

// valueInfo encodes a ValueInfoProto of a tensor with a static shape.
func valueInfo(name string, elemType int, dims ...int64) []byte {
	var shape []byte
	for _, d := range dims {
		shape = appendBytesField(shape, 1, appendVarintField(nil, 1, uint64(d))) // dim { dim_value }
	}
	tensor := appendVarintField(nil, 1, uint64(elemType)) // elem_type
	tensor = appendBytesField(tensor, 2, shape)           // shape
	typ := appendBytesField(nil, 1, tensor)               // TypeProto.tensor_type
	b := appendBytesField(nil, 1, []byte(name))           // ValueInfoProto.name
	return appendBytesField(b, 2, typ)                    // ValueInfoProto.type
}

// The derived models. Each starts from yolov8n.onnx: input "images" [1,3,640,640]
// float32, output "output0" [1,84,8400] float32.

// slice appends a Slice of x along axis 2 from start to end, named out.
func (m *onnxModel) slice(x, out string, start, end int64) {
	m.inits = append(m.inits, int64Tensor(out+"_starts", start), int64Tensor(out+"_ends", end), int64Tensor(out+"_axes", 2))
	m.nodes = append(m.nodes, onnxNode("Slice", out, []string{x, out + "_starts", out + "_ends", out + "_axes"}, []string{out}))
}

// transposed appends output0 transposed to [1,8400,84] as "t_out".
func (m *onnxModel) transposed() string {
	m.nodes = append(m.nodes, onnxNode("Transpose", "t_out", []string{"output0"}, []string{"t_out"}, attrInts("perm", 0, 2, 1)))
	return "t_out"
}

// yolov5Model: [1,8400,85] = boxes, objectness 1 (a constant), the 80 class scores.
func yolov5Model(tb testing.TB, a infertest.Assets) string {
	m := readONNX(tb, a.Model)
	t := m.transposed()
	m.slice(t, "v5_box", 0, 4)
	m.slice(t, "v5_cls", 4, 84)
	m.inits = append(m.inits, floatTensor("v5_obj", []int64{1, 8400, 1}, 1))
	m.nodes = append(m.nodes, onnxNode("Concat", "v5_out", []string{"v5_box", "v5_obj", "v5_cls"}, []string{"v5_out"}, attrInt("axis", 2)))
	m.outputs = [][]byte{valueInfo("v5_out", onnxFloat, 1, 8400, 85)}
	return m.write(tb, "yolov5-layout.onnx")
}

// e2eModel: [1,300,6] = x1,y1,x2,y2, best class score, its class id (float), the 300
// best rows by score (TopK + Gather), as YOLOv10 exports; no NMS.
func e2eModel(tb testing.TB, a infertest.Assets) string {
	m := readONNX(tb, a.Model)
	t := m.transposed()
	m.slice(t, "e2e_xy", 0, 2)
	m.slice(t, "e2e_wh", 2, 4)
	m.slice(t, "e2e_cls", 4, 84)
	m.inits = append(m.inits,
		onnxTensor("e2e_two", onnxFloat, nil, binary.LittleEndian.AppendUint32(nil, math.Float32bits(2))),
		int64Tensor("e2e_k", 300),
		int64Tensor("e2e_flat", 1, 8400),
		int64Tensor("e2e_idx_shape", 300),
	)
	m.nodes = append(m.nodes,
		onnxNode("Div", "e2e_half", []string{"e2e_wh", "e2e_two"}, []string{"e2e_half"}),
		onnxNode("Sub", "e2e_x1y1", []string{"e2e_xy", "e2e_half"}, []string{"e2e_x1y1"}),
		onnxNode("Add", "e2e_x2y2", []string{"e2e_xy", "e2e_half"}, []string{"e2e_x2y2"}),
		// ReduceMax with an axes attribute: opset < 18 (yolov8n.onnx is opset 17).
		onnxNode("ReduceMax", "e2e_score", []string{"e2e_cls"}, []string{"e2e_score"}, attrInts("axes", 2), attrInt("keepdims", 1)),
		onnxNode("ArgMax", "e2e_argmax", []string{"e2e_cls"}, []string{"e2e_argmax"}, attrInt("axis", 2), attrInt("keepdims", 1)),
		onnxNode("Cast", "e2e_class", []string{"e2e_argmax"}, []string{"e2e_class"}, attrInt("to", onnxFloat)),
		onnxNode("Concat", "e2e_all", []string{"e2e_x1y1", "e2e_x2y2", "e2e_score", "e2e_class"}, []string{"e2e_all"}, attrInt("axis", 2)),
		onnxNode("Reshape", "e2e_score_flat", []string{"e2e_score", "e2e_flat"}, []string{"e2e_score_flat"}),
		onnxNode("TopK", "e2e_topk", []string{"e2e_score_flat", "e2e_k"}, []string{"e2e_topv", "e2e_topi"}, attrInt("axis", 1)),
		onnxNode("Reshape", "e2e_idx", []string{"e2e_topi", "e2e_idx_shape"}, []string{"e2e_idx"}),
		onnxNode("Gather", "e2e_out", []string{"e2e_all", "e2e_idx"}, []string{"e2e_out"}, attrInt("axis", 1)),
	)
	m.outputs = [][]byte{valueInfo("e2e_out", onnxFloat, 1, 300, 6)}
	return m.write(tb, "e2e-layout.onnx")
}

// fp16Model: input "images" float16, cast to float32 before the original graph; with
// halfOut also the output, cast to float16 as "output16".
func fp16Model(tb testing.TB, a infertest.Assets, halfOut bool) string {
	m := readONNX(tb, a.Model)
	m.renameInput(tb, "images", "images_f32")
	m.nodes = append([][]byte{onnxNode("Cast", "images_cast", []string{"images"}, []string{"images_f32"}, attrInt("to", onnxFloat))}, m.nodes...)
	m.inputs = [][]byte{valueInfo("images", onnxFloat16, 1, 3, 640, 640)}
	name := "fp16-input.onnx"
	if halfOut {
		m.nodes = append(m.nodes, onnxNode("Cast", "output16", []string{"output0"}, []string{"output16"}, attrInt("to", onnxFloat16)))
		m.outputs = [][]byte{valueInfo("output16", onnxFloat16, 1, 84, 8400)}
		name = "fp16-input-output.onnx"
	}
	return m.write(tb, name)
}

// flatModel: output0 flattened to "flat" [1,705600], a layout no decoder knows.
func flatModel(tb testing.TB, a infertest.Assets) string {
	m := readONNX(tb, a.Model)
	m.nodes = append(m.nodes, onnxNode("Flatten", "flat", []string{"output0"}, []string{"flat"}, attrInt("axis", 1)))
	m.outputs = [][]byte{valueInfo("flat", onnxFloat, 1, 84*8400)}
	return m.write(tb, "flat-output.onnx")
}

// Check that the helper round-trips the model unchanged when nothing is edited.
func TestONNXEditorRoundTrip(t *testing.T) {
	a := infertest.ThirdParty(t)
	orig, err := os.ReadFile(a.Model)
	if err != nil {
		t.Fatal(err)
	}
	m := readONNX(t, a.Model)
	if len(m.nodes) == 0 || len(m.inputs) != 1 || len(m.outputs) != 1 {
		t.Fatalf("read %d nodes, %d inputs, %d outputs", len(m.nodes), len(m.inputs), len(m.outputs))
	}
	if got := m.encode(); len(got) != len(orig) {
		t.Fatalf("re-encoded %d bytes, read %d", len(got), len(orig))
	}
}

// noNamesModel: yolov8n.onnx without its metadata (ModelProto.metadata_props = 14), so
// without class names.
func noNamesModel(tb testing.TB, a infertest.Assets) string {
	m := readONNX(tb, a.Model)
	m.fields = slices.DeleteFunc(m.fields, func(f pbField) bool { return f.num == 14 })
	return m.write(tb, "no-names.onnx")
}

// ONNX element types and the fields of the QDQ rewrite (onnx.proto).
const (
	onnxUint8 = 2
	onnxInt8  = 3
	onnxInt32 = 6

	pbTensorFloatData = 4
	pbValueInfoName   = 1
	pbValueInfoType   = 2
)

// onnxNodeInfo is a NodeProto with its inputs and outputs decoded; rest keeps every
// other field as it was read (name, op_type, attributes, domain).
type onnxNodeInfo struct {
	op              string
	inputs, outputs []string
	rest            []pbField
}

func parseNode(tb testing.TB, b []byte) onnxNodeInfo {
	tb.Helper()
	fs, err := parseFields(b)
	if err != nil {
		tb.Fatalf("NodeProto: %v", err)
	}
	var n onnxNodeInfo
	for _, f := range fs {
		switch f.num {
		case pbNodeInput:
			n.inputs = append(n.inputs, string(f.bytesValue()))
		case pbNodeOutput:
			n.outputs = append(n.outputs, string(f.bytesValue()))
		default:
			if f.num == pbNodeOpType {
				n.op = string(f.bytesValue())
			}
			n.rest = append(n.rest, f)
		}
	}
	return n
}

func (n onnxNodeInfo) encode() []byte {
	var b []byte
	for _, in := range n.inputs {
		b = appendBytesField(b, pbNodeInput, []byte(in))
	}
	for _, out := range n.outputs {
		b = appendBytesField(b, pbNodeOutput, []byte(out))
	}
	for _, f := range n.rest {
		b = append(b, f.raw...)
	}
	return b
}

// floatInitializer decodes a float32 TensorProto (raw_data or float_data).
func floatInitializer(tb testing.TB, b []byte) (name string, dims []int64, data []float32) {
	tb.Helper()
	fs, err := parseFields(b)
	if err != nil {
		tb.Fatalf("TensorProto: %v", err)
	}
	dataType := 0
	for _, f := range fs {
		_, typ, n := protowire.ConsumeTag(f.raw)
		v := f.raw[n:]
		switch f.num {
		case pbTensorName:
			name = string(f.bytesValue())
		case pbTensorDataType:
			x, _ := protowire.ConsumeVarint(v)
			dataType = int(x)
		case pbTensorDims:
			if typ == protowire.BytesType { // packed
				p := f.bytesValue()
				for len(p) > 0 {
					x, k := protowire.ConsumeVarint(p)
					dims, p = append(dims, int64(x)), p[k:]
				}
			} else {
				x, _ := protowire.ConsumeVarint(v)
				dims = append(dims, int64(x))
			}
		case pbTensorRawData:
			raw := f.bytesValue()
			for i := 0; i+4 <= len(raw); i += 4 {
				data = append(data, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
			}
		case pbTensorFloatData:
			if typ == protowire.BytesType {
				p := f.bytesValue()
				for i := 0; i+4 <= len(p); i += 4 {
					data = append(data, math.Float32frombits(binary.LittleEndian.Uint32(p[i:])))
				}
			} else {
				x, _ := protowire.ConsumeFixed32(v)
				data = append(data, math.Float32frombits(x))
			}
		}
	}
	if dataType != onnxFloat {
		tb.Fatalf("initializer %q: data type %d, want float32", name, dataType)
	}
	return name, dims, data
}

// outputOnly encodes a ValueInfoProto of a float32 tensor of unknown shape.
func outputOnly(name string) []byte {
	tensor := appendVarintField(nil, 1, onnxFloat)
	typ := appendBytesField(nil, 1, tensor)
	b := appendBytesField(nil, pbValueInfoName, []byte(name))
	return appendBytesField(b, pbValueInfoType, typ)
}

// convTensors returns the nodes of m decoded and the activations around its Conv nodes:
// every tensor a Conv reads as its input (X) and every tensor one writes, in graph order.
func convTensors(tb testing.TB, m *onnxModel) ([]onnxNodeInfo, []string) {
	nodes := make([]onnxNodeInfo, len(m.nodes))
	var acts []string
	seen := map[string]bool{}
	for i, b := range m.nodes {
		nodes[i] = parseNode(tb, b)
		if n := nodes[i]; n.op == "Conv" {
			for _, x := range []string{n.inputs[0], n.outputs[0]} {
				if !seen[x] {
					seen[x] = true
					acts = append(acts, x)
				}
			}
		}
	}
	return nodes, acts
}

// activationRanges runs yolov8n.onnx on the letterboxed frame pix with every tensor of
// acts as an extra output and returns each one's min and max: the calibration of a static
// quantization, on one frame.
func activationRanges(tb testing.TB, a infertest.Assets, acts []string, pix []byte) map[string][2]float32 {
	tb.Helper()
	if err := initORT(a.Library); err != nil {
		tb.Fatal(err)
	}
	m := readONNX(tb, a.Model)
	for _, x := range acts {
		m.outputs = append(m.outputs, outputOnly(x))
	}
	path := m.write(tb, "calibration.onnx")
	s, err := ort.NewDynamicAdvancedSession(path, []string{"images"}, append([]string{"output0"}, acts...), nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Destroy()
	in, err := ort.NewEmptyTensor[float32](ort.NewShape(1, 3, 640, 640))
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Destroy()
	preprocess(in.GetData(), pix, 640*640)
	outs := make([]ort.Value, 1+len(acts))
	if err := s.Run([]ort.Value{in}, outs); err != nil {
		tb.Fatal(err)
	}
	ranges := map[string][2]float32{}
	for i, v := range outs {
		defer v.Destroy()
		if i == 0 {
			continue
		}
		t, ok := v.(*ort.Tensor[float32])
		if !ok {
			tb.Fatalf("output %q is a %T", acts[i-1], v)
		}
		lo, hi := float32(0), float32(0) // the range holds 0, which must be exact
		for _, x := range t.GetData() {
			lo, hi = min(lo, x), max(hi, x)
		}
		ranges[acts[i-1]] = [2]float32{lo, hi}
	}
	return ranges
}

// qdqModel: yolov8n.onnx statically quantized to int8 in the QDQ format that ONNX
// Runtime's quantize_static writes (its Python tools are not available here), for the
// Conv nodes, which hold nearly all of the weights and the compute: every Conv has its
// weights stored as int8 with one scale per output channel (symmetric) and its bias as
// int32 (scale = input scale x weight scale), each read through a DequantizeLinear, and
// its input and output activations pass through a QuantizeLinear/DequantizeLinear pair
// of uint8 with a per-tensor scale and zero point calibrated on pix (asymmetric min/max).
// The graph's input and output stay float32, as quantize_static keeps them: a Detector
// takes it like any model, and ONNX Runtime runs each Conv group as one QLinearConv.
func qdqModel(tb testing.TB, a infertest.Assets, pix []byte) string {
	tb.Helper()
	m := readONNX(tb, a.Model)
	nodes, acts := convTensors(tb, m)
	ranges := activationRanges(tb, a, acts, pix)

	inits := map[string]int{}
	for i, b := range m.inits {
		fs, err := parseFields(b)
		if err != nil {
			tb.Fatal(err)
		}
		for _, f := range fs {
			if f.num == pbTensorName {
				inits[string(f.bytesValue())] = i
			}
		}
	}
	removed := map[int]bool{}
	scalar := func(name string, dataType int, raw []byte) []byte { return onnxTensor(name, dataType, nil, raw) }
	actScale := map[string]float32{}
	var qdq [][]byte // Q and DQ nodes of each activation, emitted after its producer
	qdqOf := map[string][][]byte{}
	for _, x := range acts {
		lo, hi := ranges[x][0], ranges[x][1]
		scale := (hi - lo) / 255
		if scale == 0 {
			scale = 1
		}
		zp := byte(min(255, max(0, math.Round(float64(-lo/scale)))))
		actScale[x] = scale
		m.inits = append(m.inits,
			scalar(x+"_scale", onnxFloat, binary.LittleEndian.AppendUint32(nil, math.Float32bits(scale))),
			scalar(x+"_zp", onnxUint8, []byte{zp}))
		qdqOf[x] = [][]byte{
			onnxNode("QuantizeLinear", x+"_Q", []string{x, x + "_scale", x + "_zp"}, []string{x + "_q"}),
			onnxNode("DequantizeLinear", x+"_DQ", []string{x + "_q", x + "_scale", x + "_zp"}, []string{x + "_dq"}),
		}
	}
	// The graph input's pair comes first; each other one right after the node writing it.
	for _, x := range acts {
		if x == "images" {
			qdq = append(qdq, qdqOf[x]...)
		}
	}
	for _, n := range nodes {
		for i, in := range n.inputs {
			if _, ok := qdqOf[in]; ok {
				n.inputs[i] = in + "_dq"
			}
		}
		if n.op == "Conv" {
			n.inputs = slices.Clone(n.inputs)
			wName := n.inputs[1]
			wi, ok := inits[wName]
			if !ok {
				tb.Fatalf("Conv weight %q is not an initializer", wName)
			}
			_, dims, w := floatInitializer(tb, m.inits[wi])
			removed[wi] = true
			out := int(dims[0])
			per := len(w) / out
			wq := make([]byte, len(w))
			scales := make([]float32, out)
			var scaleRaw, zpRaw []byte
			for c := range out {
				var absMax float32
				for _, v := range w[c*per : (c+1)*per] {
					absMax = max(absMax, float32(math.Abs(float64(v))))
				}
				scales[c] = absMax / 127
				if scales[c] == 0 {
					scales[c] = 1
				}
				for k, v := range w[c*per : (c+1)*per] {
					wq[c*per+k] = byte(int8(min(127, max(-127, math.Round(float64(v/scales[c]))))))
				}
				scaleRaw = binary.LittleEndian.AppendUint32(scaleRaw, math.Float32bits(scales[c]))
				zpRaw = append(zpRaw, 0)
			}
			m.inits = append(m.inits,
				onnxTensor(wName+"_q", onnxInt8, dims, wq),
				onnxTensor(wName+"_scale", onnxFloat, []int64{int64(out)}, scaleRaw),
				onnxTensor(wName+"_zp", onnxInt8, []int64{int64(out)}, zpRaw))
			qdq = append(qdq, onnxNode("DequantizeLinear", wName+"_DQ", []string{wName + "_q", wName + "_scale", wName + "_zp"},
				[]string{wName + "_dq"}, attrInt("axis", 0)))
			n.inputs[1] = wName + "_dq"
			if len(n.inputs) > 2 {
				bName := n.inputs[2]
				bi, ok := inits[bName]
				if !ok {
					tb.Fatalf("Conv bias %q is not an initializer", bName)
				}
				_, _, bias := floatInitializer(tb, m.inits[bi])
				removed[bi] = true
				xScale := actScale[strings.TrimSuffix(n.inputs[0], "_dq")]
				var bq, bScale, bZP []byte
				for c, v := range bias {
					s := xScale * scales[c]
					bq = binary.LittleEndian.AppendUint32(bq, uint32(int32(math.Round(float64(v/s)))))
					bScale = binary.LittleEndian.AppendUint32(bScale, math.Float32bits(s))
					bZP = binary.LittleEndian.AppendUint32(bZP, 0)
				}
				m.inits = append(m.inits,
					onnxTensor(bName+"_q", onnxInt32, []int64{int64(len(bias))}, bq),
					onnxTensor(bName+"_scale", onnxFloat, []int64{int64(len(bias))}, bScale),
					onnxTensor(bName+"_zp", onnxInt32, []int64{int64(len(bias))}, bZP))
				qdq = append(qdq, onnxNode("DequantizeLinear", bName+"_DQ", []string{bName + "_q", bName + "_scale", bName + "_zp"},
					[]string{bName + "_dq"}, attrInt("axis", 0)))
				n.inputs[2] = bName + "_dq"
			}
		}
		qdq = append(qdq, n.encode())
		for _, out := range n.outputs {
			qdq = append(qdq, qdqOf[out]...)
		}
	}
	m.nodes = qdq
	var kept [][]byte
	for i, b := range m.inits {
		if !removed[i] {
			kept = append(kept, b)
		}
	}
	m.inits = kept
	return m.write(tb, "yolov8n-qdq.onnx")
}
