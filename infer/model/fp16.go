package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/visiond/visiond/infer/model/onnxpb"
	"github.com/visiond/visiond/internal/half"
)

const (
	tFloat   = int32(onnxpb.TensorProto_FLOAT)
	tFloat16 = int32(onnxpb.TensorProto_FLOAT16)
	tInt64   = int32(onnxpb.TensorProto_INT64)
	tBool    = int32(onnxpb.TensorProto_BOOL)
)

// ErrAlreadyConverted: the model is not fp32 (already fp16, or int8).
var ErrAlreadyConverted = errors.New("not an fp32 model")

// fp16Op says whether operator op is converted to float16: one whose float inputs and
// outputs share one type variable that admits float16 (ONNX's operator schemas), so that
// feeding it float16 makes it compute and return float16. Any other operator (Range,
// ConstantOfShape, NonMaxSuppression, the com.microsoft ones, ...) runs in float32, with
// Casts around it.
func fp16Op(op string) bool {
	switch op {
	case "Abs", "Add", "ArgMax", "ArgMin", "AveragePool", "BatchNormalization", "Ceil", "Clip",
		"Concat", "Conv", "ConvTranspose", "Cos", "DepthToSpace", "Div", "Dropout", "Einsum", "Elu",
		"Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "GatherElements", "GatherND",
		"Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Greater", "GreaterOrEqual",
		"HardSigmoid", "HardSwish", "Identity", "InstanceNormalization", "LayerNormalization",
		"LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max", "MaxPool", "Mean",
		"Min", "Mish", "Mul", "Neg", "Pad", "Pow", "PRelu", "Reciprocal", "ReduceL2", "ReduceMax", "ReduceMean",
		"ReduceMin", "ReduceProd", "ReduceSum", "Relu", "Reshape", "Resize", "Selu", "Shape",
		"Sigmoid", "Sign", "Sin", "Size", "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth",
		"Split", "Sqrt", "Squeeze", "Sub", "Sum", "Tanh", "Tile", "TopK", "Transpose", "Unsqueeze",
		"Upsample", "Where":
		return true
	}
	return false
}

// float32Input says whether input i of a converted operator op stays float32: Resize's roi
// and scales, Upsample's scales (computed sizes: half precision would round them).
func float32Input(op string, i int) bool {
	switch op {
	case "Resize":
		return i == 1 || i == 2
	case "Upsample":
		return i == 1
	}
	return false
}

// ConvertFP16 rewrites an fp32 detector m to compute in float16, for GPUs (the cuda and
// tensorrt providers), keeping its float32 input and output: a Cast to float16 after the
// input and one to float32 before the output. Float32 weights become float16 (half the
// size); operators compute in float16 except
//   - those not known to take float16 (fp16Op): they run in float32, with Casts around them;
//   - the inputs that must stay float32 (float32Input: Resize's scales and roi);
//   - shape computations (whatever is computed from Shape or Size and constants alone).
//
// The model's metadata (class names) is kept. ONNX Runtime's CPU provider runs the result
// too, casting back to float32 the operators it has no float16 kernel for, slower than the
// fp32 model: the gain is on GPUs. It refuses a model that is not an fp32 detector
// (ErrNotDetector, ErrAlreadyConverted), has control flow (If, Loop, Scan) or keeps its
// weights in external files.
func ConvertFP16(m *onnxpb.ModelProto) error {
	info, err := Inspect(m)
	if err != nil {
		return err
	}
	if info.Precision != FP32 {
		return fmt.Errorf("%w: it is %s already", ErrAlreadyConverted, info.Precision)
	}
	return convertFP16Graph(m.GetGraph())
}

// convertFP16Graph is ConvertFP16 on any graph: it does not check that it is a detector.
func convertFP16Graph(g *onnxpb.GraphProto) error {
	if err := checkConvertible(g); err != nil {
		return err
	}
	c := newConverter(g)
	c.foldConstants()
	c.inferTypes()
	c.markShapeComputations()
	c.convert()
	c.castOutputs()
	c.finish()
	return nil
}

// checkConvertible refuses what the converter does not handle: subgraphs, external data
// and nodes without outputs (not valid ONNX).
func checkConvertible(g *onnxpb.GraphProto) error {
	for _, n := range g.GetNode() {
		if len(n.GetOutput()) == 0 {
			return fmt.Errorf("node %q (%s) has no output", n.GetName(), n.GetOpType())
		}
		for _, a := range n.GetAttribute() {
			if a.GetType() == onnxpb.AttributeProto_GRAPH || a.GetType() == onnxpb.AttributeProto_GRAPHS {
				return fmt.Errorf("node %q (%s) has a subgraph: control flow is not supported", n.GetName(), n.GetOpType())
			}
		}
	}
	for _, t := range g.GetInitializer() {
		if t.GetDataLocation() == onnxpb.TensorProto_EXTERNAL {
			return fmt.Errorf("initializer %q is stored in an external file: not supported", t.GetName())
		}
	}
	return nil
}

// converter holds the state of one ConvertFP16.
type converter struct {
	g     *onnxpb.GraphProto
	names map[string]bool // every tensor and node name in use, for fresh names
	inits map[string]*onnxpb.TensorProto
	// elem: the element type of every tensor in the original graph, as far as known.
	elem map[string]int32
	// shape: tensors computed from Shape or Size outputs and constants alone.
	shape map[string]bool
	// now: the element type of a tensor in the converted graph, where it changed.
	now map[string]int32
	// casts: the Cast already inserted for a tensor, by tensor and target type.
	casts map[[2]string]string
	// half: the float16 copy of a float32 initializer, by the initializer's name.
	half  map[string]string
	nodes []*onnxpb.NodeProto // the converted graph's nodes
}

func newConverter(g *onnxpb.GraphProto) *converter {
	c := &converter{
		g: g, names: map[string]bool{}, inits: map[string]*onnxpb.TensorProto{},
		elem: map[string]int32{}, shape: map[string]bool{}, now: map[string]int32{},
		casts: map[[2]string]string{}, half: map[string]string{},
	}
	for _, t := range g.GetInitializer() {
		c.inits[t.GetName()] = t
		c.elem[t.GetName()] = t.GetDataType()
		c.names[t.GetName()] = true
	}
	for _, vs := range [][]*onnxpb.ValueInfoProto{g.GetInput(), g.GetOutput(), g.GetValueInfo()} {
		for _, v := range vs {
			c.names[v.GetName()] = true
			if tt := v.GetType().GetTensorType(); tt != nil && tt.GetElemType() != 0 {
				c.elem[v.GetName()] = tt.GetElemType()
			}
		}
	}
	for _, n := range g.GetNode() {
		c.names[n.GetName()] = true
		for _, o := range n.GetOutput() {
			c.names[o] = true
		}
	}
	return c
}

// fresh returns a name not in use, base if it is free.
func (c *converter) fresh(base string) string {
	name := base
	for i := 2; c.names[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	c.names[name] = true
	return name
}

// foldConstants turns Constant nodes holding a tensor, a float or ints into initializers,
// so that they are converted where they are used, as the other weights are.
func (c *converter) foldConstants() {
	var nodes []*onnxpb.NodeProto
	for _, n := range c.g.GetNode() {
		if t := constantTensor(n); t != nil && n.GetDomain() == "" {
			t.Name = n.GetOutput()[0]
			c.g.Initializer = append(c.g.Initializer, t)
			c.inits[t.Name] = t
			c.elem[t.Name] = t.GetDataType()
			continue
		}
		nodes = append(nodes, n)
	}
	c.g.Node = nodes
}

// constantTensor returns the value of a Constant node with one output as a tensor, nil
// for another node or a value kind it does not fold (sparse tensors, strings).
func constantTensor(n *onnxpb.NodeProto) *onnxpb.TensorProto {
	if n.GetOpType() != "Constant" || len(n.GetOutput()) != 1 || len(n.GetAttribute()) != 1 {
		return nil
	}
	a := n.GetAttribute()[0]
	switch a.GetName() {
	case "value":
		if t := a.GetT(); t != nil && t.GetDataLocation() != onnxpb.TensorProto_EXTERNAL {
			return t
		}
	case "value_float":
		return &onnxpb.TensorProto{DataType: tFloat, FloatData: []float32{a.GetF()}}
	case "value_floats":
		return &onnxpb.TensorProto{DataType: tFloat, Dims: []int64{int64(len(a.GetFloats()))}, FloatData: a.GetFloats()}
	case "value_int":
		return &onnxpb.TensorProto{DataType: tInt64, Int64Data: []int64{a.GetI()}}
	case "value_ints":
		return &onnxpb.TensorProto{DataType: tInt64, Dims: []int64{int64(len(a.GetInts()))}, Int64Data: a.GetInts()}
	}
	return nil
}

// inferTypes fills in the element types of node outputs that the file does not state
// (value_info is optional), by the operators' rules: most return the type of their first
// typed input.
func (c *converter) inferTypes() {
	for _, n := range c.g.GetNode() {
		for i, o := range n.GetOutput() {
			if _, ok := c.elem[o]; ok || o == "" {
				continue
			}
			if t := outputType(n, i, c.elem); t != 0 {
				c.elem[o] = t
			}
		}
	}
}

func outputType(n *onnxpb.NodeProto, i int, elem map[string]int32) int32 {
	switch n.GetOpType() {
	case "Shape", "Size", "NonZero", "ArgMax", "ArgMin", "NonMaxSuppression":
		return tInt64
	case "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf":
		return tBool
	case "Cast":
		return int32(attrInt(n, "to", 0))
	case "ConstantOfShape":
		if t := attrTensor(n, "value"); t != nil {
			return t.GetDataType()
		}
		return tFloat
	case "TopK":
		if i == 1 {
			return tInt64
		}
	case "Dropout":
		if i == 1 {
			return tBool
		}
	case "Where":
		if len(n.GetInput()) > 1 {
			return elem[n.GetInput()[1]]
		}
	}
	for _, in := range n.GetInput() {
		if t, ok := elem[in]; ok && in != "" {
			return t
		}
	}
	return 0
}

// markShapeComputations marks the outputs of Shape and Size, and of every node whose
// inputs are such outputs or constants (at least one of them a shape), as shape
// computations: they stay as they are.
func (c *converter) markShapeComputations() {
	for _, n := range c.g.GetNode() {
		op := n.GetOpType()
		isShape := op == "Shape" || op == "Size"
		if !isShape {
			any, all := false, true
			for _, in := range n.GetInput() {
				switch {
				case in == "":
				case c.shape[in]:
					any = true
				case c.inits[in] != nil:
				default:
					all = false
				}
			}
			isShape = any && all
		}
		if isShape {
			for _, o := range n.GetOutput() {
				c.shape[o] = true
			}
		}
	}
}

// typeNow is the element type of tensor t in the converted graph.
func (c *converter) typeNow(t string) int32 {
	if ty, ok := c.now[t]; ok {
		return ty
	}
	return c.elem[t]
}

// convert rewrites the nodes in order (a valid graph lists them topologically).
func (c *converter) convert() {
	for _, n := range c.g.GetNode() {
		op := n.GetOpType()
		toHalf := n.GetDomain() == "" && fp16Op(op)
		for _, o := range n.GetOutput() {
			if c.shape[o] {
				toHalf = false
			}
		}
		if op == "Cast" && n.GetDomain() == "" && !c.shape[n.GetOutput()[0]] && attrInt(n, "to", 0) == int64(tFloat) {
			// A cast to float32 inside the converted graph casts to float16.
			setAttrInt(n, "to", int64(tFloat16))
			c.now[n.GetOutput()[0]] = tFloat16
			c.nodes = append(c.nodes, n)
			continue
		}
		for i, in := range n.GetInput() {
			if in == "" {
				continue
			}
			want32 := !toHalf || float32Input(op, i)
			switch ty := c.typeNow(in); {
			case ty == tFloat && !want32 && c.inits[in] != nil:
				n.Input[i] = c.halfInit(in)
			case ty == tFloat && !want32:
				n.Input[i] = c.cast(in, tFloat16)
			case ty == tFloat16 && want32 && c.elem[in] == tFloat:
				n.Input[i] = c.cast(in, tFloat)
			}
		}
		if toHalf {
			for _, o := range n.GetOutput() {
				if c.elem[o] == tFloat {
					c.now[o] = tFloat16
				}
			}
		}
		c.nodes = append(c.nodes, n)
	}
}

// halfInit returns the name of the float16 copy of float32 initializer name, made once.
func (c *converter) halfInit(name string) string {
	if h, ok := c.half[name]; ok {
		return h
	}
	src := c.inits[name]
	vals := floatValues(src)
	raw := make([]byte, 2*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint16(raw[2*i:], half.FromFloat32(v))
	}
	h := c.fresh(name + "_fp16")
	c.g.Initializer = append(c.g.Initializer, &onnxpb.TensorProto{
		Name: h, Dims: slices.Clone(src.GetDims()), DataType: tFloat16, RawData: raw,
	})
	c.inits[h] = c.g.Initializer[len(c.g.Initializer)-1]
	c.elem[h] = tFloat16
	c.half[name] = h
	return h
}

// floatValues returns the values of a float32 tensor, from raw_data (little-endian) or
// float_data.
func floatValues(t *onnxpb.TensorProto) []float32 {
	if raw := t.GetRawData(); len(raw) > 0 {
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return v
	}
	return t.GetFloatData()
}

// cast returns the name of tensor t cast to type to, adding the Cast node once.
func (c *converter) cast(t string, to int32) string {
	key := [2]string{t, fmt.Sprint(to)}
	if out, ok := c.casts[key]; ok {
		return out
	}
	suffix := "_fp16"
	if to == tFloat {
		suffix = "_fp32"
	}
	out := c.fresh(t + suffix)
	c.nodes = append(c.nodes, castNode(c.fresh("Cast"+suffix+"_"+t), t, out, to))
	c.casts[key] = out
	c.now[out] = to
	return out
}

func castNode(name, in, out string, to int32) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{
		Name: name, OpType: "Cast", Input: []string{in}, Output: []string{out},
		Attribute: []*onnxpb.AttributeProto{{Name: "to", Type: onnxpb.AttributeProto_INT, I: int64(to)}},
	}
}

// castOutputs keeps float32 graph outputs float32: an output the converted graph computes
// in float16 is renamed inside the graph and cast back under its own name.
func (c *converter) castOutputs() {
	for _, o := range c.g.GetOutput() {
		name := o.GetName()
		if c.typeNow(name) != tFloat16 || c.elem[name] != tFloat {
			continue
		}
		inner := c.fresh(name + "_fp16")
		for _, n := range c.nodes {
			for i, in := range n.Input {
				if in == name {
					n.Input[i] = inner
				}
			}
			for i, out := range n.Output {
				if out == name {
					n.Output[i] = inner
				}
			}
		}
		for _, v := range c.g.GetValueInfo() {
			if v.GetName() == name {
				v.Name = inner
			}
		}
		c.now[inner] = tFloat16
		c.elem[inner] = tFloat
		c.nodes = append(c.nodes, castNode(c.fresh("Cast_fp32_"+name), inner, name, tFloat))
	}
}

// finish installs the nodes, drops the float32 initializers no node uses any more, and
// states the new types in value_info.
func (c *converter) finish() {
	c.g.Node = c.nodes
	used := map[string]bool{}
	for _, n := range c.nodes {
		for _, in := range n.GetInput() {
			used[in] = true
		}
	}
	for _, o := range c.g.GetOutput() {
		used[o.GetName()] = true
	}
	c.g.Initializer = slices.DeleteFunc(c.g.Initializer, func(t *onnxpb.TensorProto) bool { return !used[t.GetName()] })
	// Inputs listing initializers (old IR versions) lose the dropped ones too.
	c.g.Input = slices.DeleteFunc(c.g.Input, func(v *onnxpb.ValueInfoProto) bool {
		_, isInit := c.inits[v.GetName()]
		return isInit && !used[v.GetName()]
	})
	for _, v := range c.g.GetValueInfo() {
		if tt := v.GetType().GetTensorType(); tt != nil && c.now[v.GetName()] == tFloat16 {
			tt.ElemType = tFloat16
		}
	}
}

func attrInt(n *onnxpb.NodeProto, name string, def int64) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}

func setAttrInt(n *onnxpb.NodeProto, name string, v int64) {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			a.I = v
			return
		}
	}
	n.Attribute = append(n.Attribute, &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INT, I: v})
}

func attrTensor(n *onnxpb.NodeProto, name string) *onnxpb.TensorProto {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetT()
		}
	}
	return nil
}
