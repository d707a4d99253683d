package model

// Static INT8 quantization in QDQ form: QuantizeLinear/DequantizeLinear pairs around the
// operators that run in int8, the explicit form that ONNX Runtime's CPU provider fuses into
// QLinearConv, QLinearMul, QLinearSigmoid, ... and that TensorRT builds INT8 engines from.
//
// Weights (Conv) are int8, symmetric, per output channel; biases int32 at the scale of input
// times weight; activations uint8, asymmetric, with ranges from calibration statistics
// (quantize_calib.go) gathered by running the FP32 model on the site's frames.
//
// The detector's head stays float: every operator that touches a tensor of rank other than
// 4. In a YOLO export the feature maps are [1, C, H, W]; once they are flattened into
// [1, C, anchors] what follows is the box decode (DFL softmax and its fixed Conv, the
// distance-to-box arithmetic) and the class scores' Sigmoid and Concat, whose outputs are
// the detections themselves: they are cheap and quantizing them costs accuracy.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/visiond/visiond/infer/model/onnxpb"
)

// QuantizeOptions configure Quantize. Zero values take the documented defaults.
type QuantizeOptions struct {
	// Method chooses activation ranges from the calibration statistics. Default
	// MethodPercentile.
	Method Method
	// Percentile is MethodPercentile's percentile, in percent, in (50, 100]. Default
	// DefaultPercentile.
	Percentile float64
	// ReduceRange quantizes weights to 7 bits ([-63, 63]) instead of 8: on x86 CPUs
	// without VNNI, ONNX Runtime's u8s8 kernels add pairs of products in 16 bits, which
	// 8-bit weights can saturate. Default false: full 8 bits.
	ReduceRange bool
	// SiLUFloor clips the range of a SiLU's input (a tensor read only by x * Sigmoid(x))
	// below at -SiLUFloor. Default DefaultSiLUFloor; negative: not clipped.
	SiLUFloor float32
	// KeepFloat names nodes left in float besides the head. Default none.
	KeepFloat []string
	// Note is recorded in the model's metadata (visiond.quantization), after the method;
	// e.g. the calibration source and frame count.
	Note string
}

// QuantizeSummary says what Quantize did.
type QuantizeSummary struct {
	Nodes       int            // nodes quantized
	ByOp        map[string]int // nodes quantized, by operator
	Float       int            // nodes left in float (head, KeepFloat, operators without an int8 form)
	Activations int            // activation tensors given a QuantizeLinear/DequantizeLinear pair
	Weights     int            // weight tensors quantized to int8
}

// qOp describes how an operator is quantized: which inputs are data (activations or
// weights) and whether its output takes its data input's quantization (an operator that
// only moves or selects values: ONNX Runtime then runs it on uint8 directly).
type qOp struct {
	dataInputs []int // input indexes quantized; nil: all
	sameAsIn   bool
}

// qdqOp says whether op is quantized and how: ONNX Runtime's CPU provider fuses the QDQ
// form of Conv, the binary and unary operators and Concat, and runs the others (which move
// or select values) on uint8 directly.
func qdqOp(op string) (qOp, bool) {
	switch op {
	case "Conv": // weights and bias handled apart
		return qOp{dataInputs: []int{0}}, true
	case "Mul", "Add", "Sigmoid", "Concat":
		return qOp{}, true
	case "MaxPool", "Resize", "Slice", "Split":
		return qOp{dataInputs: []int{0}, sameAsIn: true}, true
	}
	return qOp{}, false
}

// CheckQuantizable says why m cannot be quantized: it is already quantized, its input is
// not float32, or its opset is older than 13 (per-channel QuantizeLinear).
func CheckQuantizable(m *onnxpb.ModelProto) error {
	g := m.GetGraph()
	switch p := precisionOf(g); p {
	case INT8:
		return errors.New("already quantized (int8): quantize the FP32 model it was made from")
	case FP16:
		return errors.New("is fp16: quantize the FP32 model it was made from")
	}
	inputs := graphInputs(g)
	if len(inputs) != 1 {
		return fmt.Errorf("has %d inputs, a detector has one (the image)", len(inputs))
	}
	if t := inputs[0].GetType().GetTensorType().GetElemType(); t != int32(onnxpb.TensorProto_FLOAT) {
		return fmt.Errorf("input %s is %s, not float32: quantize the FP32 model", inputs[0].GetName(), ElemTypeName(t))
	}
	if v := opset(m); v < 13 {
		return fmt.Errorf("opset %d: per-channel quantization needs opset 13 or newer", v)
	}
	return nil
}

// nonFloat says whether operator op produces no float tensor from float inputs.
func nonFloat(op string) bool {
	switch op {
	case "Shape", "Size", "NonZero", "ArgMax", "ArgMin", "Equal", "Less", "Greater", "LessOrEqual",
		"GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf":
		return true
	}
	return false
}

// CalibrationTensors returns the float32 activations of m whose statistics Quantize needs:
// the graph's input and every float node output, in graph order. A tensor is float when it
// derives from the float input through operators that keep the type (not Shape, ArgMax,
// comparisons, a Cast to another type).
func CalibrationTensors(m *onnxpb.ModelProto) ([]string, error) {
	if err := CheckQuantizable(m); err != nil {
		return nil, err
	}
	g := m.GetGraph()
	in := graphInputs(g)[0].GetName()
	float := map[string]bool{in: true}
	for _, t := range g.GetInitializer() {
		if t.GetDataType() == int32(onnxpb.TensorProto_FLOAT) {
			float[t.GetName()] = true
		}
	}
	names := []string{in}
	derived := map[string]bool{in: true} // reachable from the input
	for _, n := range g.GetNode() {
		fromInput := false
		for _, i := range n.GetInput() {
			fromInput = fromInput || derived[i]
		}
		if !fromInput {
			continue
		}
		keeps := !nonFloat(n.GetOpType())
		if n.GetOpType() == "Cast" {
			keeps = qAttrInt(n, "to", 0) == int64(onnxpb.TensorProto_FLOAT)
		}
		for i, o := range n.GetOutput() {
			if o == "" {
				continue
			}
			derived[o] = true
			if keeps && (n.GetOpType() != "TopK" || i == 0) && (len(n.GetInput()) == 0 || float[n.GetInput()[0]]) {
				float[o] = true
				names = append(names, o)
			}
		}
	}
	return names, nil
}

func qAttrInt(n *onnxpb.NodeProto, name string, def int64) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}

// WithOutputs returns a copy of m with the named tensors added to its outputs (as float32,
// shape left to the runtime), so that a run returns them: how calibration reads the
// activations.
func WithOutputs(m *onnxpb.ModelProto, names []string) *onnxpb.ModelProto {
	c := proto.Clone(m).(*onnxpb.ModelProto)
	g := c.GetGraph()
	have := map[string]bool{}
	for _, o := range g.GetOutput() {
		have[o.GetName()] = true
	}
	for _, n := range names {
		if have[n] {
			continue
		}
		have[n] = true
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: n, Type: qFloatType()})
	}
	return c
}

func qFloatType() *onnxpb.TypeProto {
	return &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
		ElemType: int32(onnxpb.TensorProto_FLOAT)}}}
}

// qparams are a tensor's uint8 quantization.
type qparams struct {
	scale float32
	zero  uint8
}

// DefaultSiLUFloor is QuantizeOptions.SiLUFloor's default: SiLU(x) = x * sigmoid(x) is
// within 0.015 of 0 below -6, less than a quantization step of its output, while a
// pre-activation's negative tail reaches -40 and more: clipping it there halves the step of
// the range that matters. With 8-bit weights it raised mAP@0.5 against the FP32 model from
// 0.83 to 1.00 on 20 held-out vtest frames; with 7-bit weights (ReduceRange) it changed
// nothing measurable (0.957 either way on 40).
const DefaultSiLUFloor = 6

// siluInputs returns the tensors whose only readers are a Sigmoid and the Mul of that
// tensor by the Sigmoid's output: the SiLU of YOLOv5 and later, exported as two nodes.
func siluInputs(g *onnxpb.GraphProto) map[string]bool {
	readers := map[string][]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		for _, in := range n.GetInput() {
			readers[in] = append(readers[in], n)
		}
	}
	out := map[string]bool{}
	for x, rs := range readers {
		if len(rs) != 2 {
			continue
		}
		sig, mul := rs[0], rs[1]
		if sig.GetOpType() != "Sigmoid" {
			sig, mul = mul, sig
		}
		if sig.GetOpType() != "Sigmoid" || mul.GetOpType() != "Mul" || len(sig.GetOutput()) != 1 || len(mul.GetInput()) != 2 {
			continue
		}
		s := sig.GetOutput()[0]
		if in := mul.GetInput(); (in[0] == x && in[1] == s) || (in[0] == s && in[1] == x) {
			out[x] = true
		}
	}
	return out
}

// uint8Params returns the asymmetric uint8 quantization of [lo, hi] (lo <= 0 <= hi).
func uint8Params(lo, hi float32) qparams {
	scale := (hi - lo) / 255
	if !(scale > 0) || math.IsInf(float64(scale), 0) {
		return qparams{scale: 1, zero: 0} // a tensor that is always 0
	}
	z := math.Round(float64(-lo / scale))
	return qparams{scale: scale, zero: uint8(min(max(z, 0), 255))}
}

// Quantize returns m quantized to INT8 in QDQ form with the activation ranges of cal, which
// must hold every tensor of CalibrationTensors(m) (frames run through the FP32 model).
func Quantize(m *onnxpb.ModelProto, cal *Calibration, o QuantizeOptions) (*onnxpb.ModelProto, QuantizeSummary, error) {
	var sum QuantizeSummary
	if err := CheckQuantizable(m); err != nil {
		return nil, sum, err
	}
	if o.Method == "" {
		o.Method = MethodPercentile
	}
	if _, err := ParseMethod(string(o.Method)); err != nil {
		return nil, sum, err
	}
	if o.Percentile == 0 {
		o.Percentile = DefaultPercentile
	}
	switch {
	case o.SiLUFloor == 0:
		o.SiLUFloor = DefaultSiLUFloor
	case o.SiLUFloor < 0:
		o.SiLUFloor = float32(math.Inf(1))
	}
	if !(o.Percentile > 50 && o.Percentile <= 100) {
		return nil, sum, fmt.Errorf("percentile %v: want more than 50 and at most 100", o.Percentile)
	}
	q := &quantizer{
		m:      proto.Clone(m).(*onnxpb.ModelProto),
		cal:    cal,
		opts:   o,
		params: map[string]qparams{},
		sum:    QuantizeSummary{ByOp: map[string]int{}},
	}
	if err := q.run(); err != nil {
		return nil, sum, err
	}
	return q.m, q.sum, nil
}

type quantizer struct {
	m      *onnxpb.ModelProto
	cal    *Calibration
	opts   QuantizeOptions
	inits  map[string]*onnxpb.TensorProto
	names  map[string]bool    // every tensor and node name in use
	params map[string]qparams // activations that get a QDQ pair
	quant  []bool             // per node: quantized
	outs   map[string]bool    // graph outputs
	newIni []*onnxpb.TensorProto
	silu   map[string]bool // tensors read only by a SiLU, x * Sigmoid(x)
	sum    QuantizeSummary
}

func (q *quantizer) run() error {
	g := q.m.GetGraph()
	q.inits = map[string]*onnxpb.TensorProto{}
	q.names = map[string]bool{}
	for _, t := range g.GetInitializer() {
		q.inits[t.GetName()] = t
		q.names[t.GetName()] = true
	}
	for _, v := range g.GetInput() {
		q.names[v.GetName()] = true
	}
	q.outs = map[string]bool{}
	for _, v := range g.GetOutput() {
		q.outs[v.GetName()] = true
	}
	for _, n := range g.GetNode() {
		q.names[n.GetName()] = true
		for _, o := range n.GetOutput() {
			q.names[o] = true
		}
	}
	q.silu = siluInputs(g)
	if err := q.choose(); err != nil {
		return err
	}
	return q.rewrite()
}

// dataInputs returns the indexes of n's inputs that are quantized.
func dataInputs(n *onnxpb.NodeProto, op qOp) []int {
	if op.dataInputs != nil {
		return op.dataInputs
	}
	idx := make([]int, len(n.GetInput()))
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// choose decides which nodes are quantized and the parameters of every activation that
// gets a QDQ pair.
func (q *quantizer) choose() error {
	nodes := q.m.GetGraph().GetNode()
	q.quant = make([]bool, len(nodes))
	names, err := CalibrationTensors(q.m)
	if err != nil {
		return err
	}
	float := map[string]bool{}
	for _, n := range names {
		float[n] = true
	}
	missing := 0
	head := q.headTensors(float, &missing)
	for i, n := range nodes {
		op, ok := qdqOp(n.GetOpType())
		if !ok || slices.Contains(q.opts.KeepFloat, n.GetName()) || !q.floatData(n, op, float) {
			continue
		}
		q.quant[i] = !q.inHead(n, op, head)
	}
	if missing > 0 {
		return fmt.Errorf("calibration lacks %d activation tensors of the model: calibrate on this model", missing)
	}
	for i, n := range nodes {
		if !q.quant[i] {
			continue
		}
		op, _ := qdqOp(n.GetOpType())
		for _, k := range dataInputs(n, op) {
			if k >= len(n.GetInput()) || n.GetInput()[k] == "" {
				continue
			}
			name := n.GetInput()[k]
			if _, isInit := q.inits[name]; isInit {
				if n.GetOpType() == "Conv" {
					continue
				}
				if err := q.constParams(name); err != nil {
					return fmt.Errorf("node %s: %w", n.GetName(), err)
				}
				continue
			}
			if err := q.activationParams(name); err != nil {
				return err
			}
		}
		for _, out := range n.GetOutput() {
			if out == "" || q.outs[out] {
				continue
			}
			if op.sameAsIn {
				q.params[out] = q.params[n.GetInput()[0]]
				continue
			}
			if err := q.activationParams(out); err != nil {
				return err
			}
		}
	}
	return nil
}

// floatData says whether every activation n reads as data and writes is a float32 one
// (float, from CalibrationTensors): a Mul or Concat of a shape computation is not quantized.
func (q *quantizer) floatData(n *onnxpb.NodeProto, op qOp, float map[string]bool) bool {
	for _, k := range dataInputs(n, op) {
		if k >= len(n.GetInput()) {
			continue
		}
		in := n.GetInput()[k]
		if _, isInit := q.inits[in]; !isInit && in != "" && !float[in] {
			return false
		}
	}
	return !slices.ContainsFunc(n.GetOutput(), func(o string) bool { return o != "" && !float[o] })
}

// headTensors returns the activations of the head: those whose rank (as calibration saw
// it) is not 4, and every tensor computed from one. missing counts float activations
// (float) read by a quantizable node that the calibration never saw.
func (q *quantizer) headTensors(float map[string]bool, missing *int) map[string]bool {
	head := map[string]bool{}
	notMap := func(name string) bool {
		shape, seen := q.cal.Shape(name)
		return seen && len(shape) != 4
	}
	for _, n := range q.m.GetGraph().GetNode() {
		_, quantizable := qdqOp(n.GetOpType())
		fromHead := false
		for _, in := range n.GetInput() {
			if _, isInit := q.inits[in]; isInit || in == "" {
				continue
			}
			if _, seen := q.cal.Shape(in); !seen && quantizable && float[in] {
				*missing++
			}
			fromHead = fromHead || head[in] || notMap(in)
		}
		for _, o := range n.GetOutput() {
			if fromHead || notMap(o) || q.outs[o] {
				head[o] = true
			}
		}
	}
	return head
}

// inHead says whether n reads (as data) or writes a tensor of the head.
func (q *quantizer) inHead(n *onnxpb.NodeProto, op qOp, head map[string]bool) bool {
	for _, k := range dataInputs(n, op) {
		if k < len(n.GetInput()) && head[n.GetInput()[k]] {
			return true
		}
	}
	return slices.ContainsFunc(n.GetOutput(), func(o string) bool { return head[o] })
}

func (q *quantizer) activationParams(name string) error {
	if _, done := q.params[name]; done {
		return nil
	}
	lo, hi, ok := q.cal.Range(name, q.opts.Method, q.opts.Percentile)
	if !ok {
		return fmt.Errorf("calibration has no values of tensor %s", name)
	}
	if q.silu[name] {
		lo = max(lo, -q.opts.SiLUFloor)
	}
	q.params[name] = uint8Params(lo, hi)
	return nil
}

// constParams quantizes a float initializer read as an activation (a Mul's constant) by its
// own minimum and maximum.
func (q *quantizer) constParams(name string) error {
	if _, done := q.params[name]; done {
		return nil
	}
	v, err := qFloats(q.inits[name])
	if err != nil {
		return err
	}
	var lo, hi float32
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	q.params[name] = uint8Params(lo, hi)
	return nil
}

// rewrite builds the QDQ graph: weights' DequantizeLinear first, then each node, followed by
// the QuantizeLinear/DequantizeLinear pair of each output that has one; every reader of a
// quantized tensor reads its DequantizeLinear output.
func (q *quantizer) rewrite() error {
	g := q.m.GetGraph()
	old := g.GetNode()
	var head, body []*onnxpb.NodeProto
	dq := map[string]string{} // activation -> its DequantizeLinear output

	// The graph input first: its pair precedes every node.
	for _, in := range graphInputs(g) {
		if p, ok := q.params[in.GetName()]; ok {
			head = append(head, q.qdq(in.GetName(), p, dq)...)
		}
	}
	for i, n := range old {
		n = proto.Clone(n).(*onnxpb.NodeProto)
		if q.quant[i] {
			q.sum.Nodes++
			q.sum.ByOp[n.GetOpType()]++
			if n.GetOpType() == "Conv" {
				nodes, err := q.convWeights(n)
				if err != nil {
					return err
				}
				head = append(head, nodes...)
			}
			// Constant inputs read as activations get their pair up front.
			op, _ := qdqOp(n.GetOpType())
			for _, k := range dataInputs(n, op) {
				if k >= len(n.GetInput()) {
					continue
				}
				name := n.GetInput()[k]
				if _, isInit := q.inits[name]; isInit && n.GetOpType() != "Conv" {
					if _, done := dq[name]; !done {
						head = append(head, q.qdq(name, q.params[name], dq)...)
					}
				}
			}
		} else {
			q.sum.Float++
		}
		for k, in := range n.GetInput() {
			if d, ok := dq[in]; ok {
				n.Input[k] = d
			}
		}
		body = append(body, n)
		for _, out := range n.GetOutput() {
			if p, ok := q.params[out]; ok {
				body = append(body, q.qdq(out, p, dq)...)
			}
		}
	}
	// A reader that came before its tensor's pair was made (none in a sorted graph) would
	// still read the float tensor: check.
	for _, n := range body {
		for _, in := range n.GetInput() {
			if d, ok := dq[in]; ok && n.GetOpType() != "QuantizeLinear" {
				return fmt.Errorf("node %s reads %s, not its dequantized %s: the graph is not sorted", n.GetName(), in, d)
			}
		}
	}
	g.Node = append(head, body...)
	g.Initializer = append(g.Initializer, q.newIni...)
	q.dropUnused()
	q.sum.Activations = len(dq)
	q.setMetadata()
	return nil
}

// unique returns base, or base with a numeric suffix, not yet used in the graph.
func (q *quantizer) unique(base string) string {
	name := base
	for i := 1; q.names[name]; i++ {
		name = base + "_" + strconv.Itoa(i)
	}
	q.names[name] = true
	return name
}

// scalar adds a scalar initializer.
func (q *quantizer) addInit(t *onnxpb.TensorProto) string {
	t.Name = q.unique(t.Name)
	q.newIni = append(q.newIni, t)
	return t.Name
}

// qdq returns the QuantizeLinear/DequantizeLinear pair of activation name and records its
// dequantized output in dq.
func (q *quantizer) qdq(name string, p qparams, dq map[string]string) []*onnxpb.NodeProto {
	scale := q.addInit(&onnxpb.TensorProto{Name: name + "_scale", DataType: int32(onnxpb.TensorProto_FLOAT),
		RawData: qF32Bytes([]float32{p.scale})})
	zero := q.addInit(&onnxpb.TensorProto{Name: name + "_zero_point", DataType: int32(onnxpb.TensorProto_UINT8),
		RawData: []byte{p.zero}})
	quantized := q.unique(name + "_quantized")
	out := q.unique(name + "_dequantized")
	dq[name] = out
	return []*onnxpb.NodeProto{
		{Name: q.unique(name + "_QuantizeLinear"), OpType: "QuantizeLinear",
			Input: []string{name, scale, zero}, Output: []string{quantized}},
		{Name: q.unique(name + "_DequantizeLinear"), OpType: "DequantizeLinear",
			Input: []string{quantized, scale, zero}, Output: []string{out}},
	}
}

// convWeights quantizes conv n's weight (int8, symmetric per output channel) and bias (int32
// at input scale times weight scale) and points n at their DequantizeLinear outputs, which
// it returns.
func (q *quantizer) convWeights(n *onnxpb.NodeProto) ([]*onnxpb.NodeProto, error) {
	in := n.GetInput()
	if len(in) < 2 {
		return nil, fmt.Errorf("conv %s has no weight", n.GetName())
	}
	wt, ok := q.inits[in[1]]
	if !ok {
		return nil, fmt.Errorf("conv %s: weight %s is not a constant", n.GetName(), in[1])
	}
	w, err := qFloats(wt)
	if err != nil {
		return nil, fmt.Errorf("conv %s: %w", n.GetName(), err)
	}
	dims := wt.GetDims()
	if len(dims) < 2 || dims[0] <= 0 || len(w)%int(dims[0]) != 0 {
		return nil, fmt.Errorf("conv %s: weight %s has shape %v", n.GetName(), in[1], dims)
	}
	chans := int(dims[0])
	per := len(w) / chans
	qmax := float32(127)
	if q.opts.ReduceRange {
		qmax = 63
	}
	scales := make([]float32, chans)
	qw := make([]byte, len(w))
	for c := range chans {
		var amax float32
		for _, v := range w[c*per : (c+1)*per] {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		s := amax / qmax
		if !(s > 0) {
			s = 1
		}
		scales[c] = s
		for j, v := range w[c*per : (c+1)*per] {
			x := math.Round(float64(v / s))
			qw[c*per+j] = byte(int8(min(max(x, -float64(qmax)), float64(qmax))))
		}
	}
	axis := &onnxpb.AttributeProto{Name: "axis", Type: onnxpb.AttributeProto_INT, I: 0}
	wq := q.addInit(&onnxpb.TensorProto{Name: in[1] + "_quantized", Dims: dims, DataType: int32(onnxpb.TensorProto_INT8), RawData: qw})
	ws := q.addInit(&onnxpb.TensorProto{Name: in[1] + "_scale", Dims: []int64{int64(chans)}, DataType: int32(onnxpb.TensorProto_FLOAT), RawData: qF32Bytes(scales)})
	wz := q.addInit(&onnxpb.TensorProto{Name: in[1] + "_zero_point", Dims: []int64{int64(chans)}, DataType: int32(onnxpb.TensorProto_INT8), RawData: make([]byte, chans)})
	wOut := q.unique(in[1] + "_dequantized")
	nodes := []*onnxpb.NodeProto{{Name: q.unique(in[1] + "_DequantizeLinear"), OpType: "DequantizeLinear",
		Input: []string{wq, ws, wz}, Output: []string{wOut}, Attribute: []*onnxpb.AttributeProto{axis}}}
	n.Input[1] = wOut
	q.sum.Weights++
	if len(in) < 3 || in[2] == "" {
		return nodes, nil
	}
	bt, ok := q.inits[in[2]]
	if !ok {
		return nil, fmt.Errorf("conv %s: bias %s is not a constant", n.GetName(), in[2])
	}
	b, err := qFloats(bt)
	if err != nil {
		return nil, fmt.Errorf("conv %s: %w", n.GetName(), err)
	}
	if len(b) != chans {
		return nil, fmt.Errorf("conv %s: bias has %d values for %d channels", n.GetName(), len(b), chans)
	}
	sx := q.params[in[0]].scale
	bs := make([]float32, chans)
	qb := make([]byte, 4*chans)
	for c := range chans {
		bs[c] = sx * scales[c]
		x := math.Round(float64(b[c] / bs[c]))
		binary.LittleEndian.PutUint32(qb[4*c:], uint32(int32(min(max(x, math.MinInt32), math.MaxInt32))))
	}
	bq := q.addInit(&onnxpb.TensorProto{Name: in[2] + "_quantized", Dims: []int64{int64(chans)}, DataType: int32(onnxpb.TensorProto_INT32), RawData: qb})
	bsn := q.addInit(&onnxpb.TensorProto{Name: in[2] + "_scale", Dims: []int64{int64(chans)}, DataType: int32(onnxpb.TensorProto_FLOAT), RawData: qF32Bytes(bs)})
	bOut := q.unique(in[2] + "_dequantized")
	nodes = append(nodes, &onnxpb.NodeProto{Name: q.unique(in[2] + "_DequantizeLinear"), OpType: "DequantizeLinear",
		Input: []string{bq, bsn}, Output: []string{bOut}, Attribute: []*onnxpb.AttributeProto{proto.Clone(axis).(*onnxpb.AttributeProto)}})
	n.Input[2] = bOut
	return nodes, nil
}

// dropUnused removes the initializers no node reads any longer (the float weights).
func (q *quantizer) dropUnused() {
	g := q.m.GetGraph()
	used := map[string]bool{}
	for _, n := range g.GetNode() {
		for _, in := range n.GetInput() {
			used[in] = true
		}
	}
	for _, o := range g.GetOutput() {
		used[o.GetName()] = true
	}
	g.Initializer = slices.DeleteFunc(g.Initializer, func(t *onnxpb.TensorProto) bool { return !used[t.GetName()] })
	// Older exports list initializers among the graph inputs.
	g.Input = slices.DeleteFunc(g.Input, func(v *onnxpb.ValueInfoProto) bool {
		_, wasInit := q.inits[v.GetName()]
		return wasInit && !used[v.GetName()]
	})
}

// MetadataQuantization is the metadata key Quantize records how the model was quantized
// under.
const MetadataQuantization = "visiond.quantization"

func (q *quantizer) setMetadata() {
	desc := "int8 qdq, method " + string(q.opts.Method)
	if q.opts.Method == MethodPercentile {
		desc += " " + strconv.FormatFloat(q.opts.Percentile, 'g', -1, 64)
	}
	if q.opts.ReduceRange {
		desc += ", 7-bit weights"
	}
	if q.opts.Note != "" {
		desc += ", " + q.opts.Note
	}
	q.m.MetadataProps = slices.DeleteFunc(q.m.MetadataProps, func(p *onnxpb.StringStringEntryProto) bool {
		return p.GetKey() == MetadataQuantization
	})
	q.m.MetadataProps = append(q.m.MetadataProps, &onnxpb.StringStringEntryProto{Key: MetadataQuantization, Value: desc})
}

// qFloats returns a float32 initializer's values.
func qFloats(t *onnxpb.TensorProto) ([]float32, error) {
	if t.GetDataType() != int32(onnxpb.TensorProto_FLOAT) {
		return nil, fmt.Errorf("initializer %s is %s, not float32", t.GetName(), ElemTypeName(t.GetDataType()))
	}
	if len(t.GetExternalData()) > 0 || t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
		return nil, fmt.Errorf("initializer %s is stored outside the model file (external data): not supported", t.GetName())
	}
	if raw := t.GetRawData(); len(raw) > 0 {
		if len(raw)%4 != 0 {
			return nil, fmt.Errorf("initializer %s has %d bytes of float32 data", t.GetName(), len(raw))
		}
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return v, nil
	}
	if fd := t.GetFloatData(); len(fd) > 0 {
		return slices.Clone(fd), nil
	}
	n := int64(1)
	for _, d := range t.GetDims() {
		n *= d
	}
	if n == 0 {
		return nil, nil
	}
	return nil, errors.New("initializer " + t.GetName() + " has no data")
}

func qF32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
