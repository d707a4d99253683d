package worker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/visiond/visiond/infer"
)

// layout is infer.Layout, the arrangement of a detector's output, under the names the
// decoder uses.
type layout = infer.Layout

const (
	layoutV8  = infer.LayoutV8
	layoutV5  = infer.LayoutV5
	layoutE2E = infer.LayoutE2E
)

// supportedIO is appended to every error about a model's inputs and outputs.
const supportedIO = "supported: one input [1,3,H,W] float32 or float16 (or [1,H,W,3] uint8: visiond model prelude), and one output, float32 or float16, " +
	"of shape [1,4+C,N] (YOLOv8/v9/v11), [1,N,5+C] (YOLOv5/v7) or [1,N,6] (YOLOv10, end-to-end: x1,y1,x2,y2,score,class), " +
	"static, with N anchors the larger dimension"

// detectLayout is infer.DetectLayout: the layout, class count and anchor count of an
// output shape.
func detectLayout(shape []int64) (layout, int, int, error) { return infer.DetectLayout(shape) }

// modelIO is what NewDetector learns from a model's declared inputs and outputs.
type modelIO struct {
	in, out          ort.InputOutputInfo
	inW, inH         int
	inF16, outF16    bool // element type float16 (else float32)
	inU8             bool // input uint8 [1,H,W,3]: the frame as it is (uint8input.go)
	layout           layout
	classes, anchors int // classes: 0 when the layout does not say
}

// checkIO accepts one [1,3,H,W] input and one output of a known layout, each float32 or
// float16. Quantized (QDQ) models need nothing more: they keep float32 inputs and outputs
// and quantize inside the graph. Its error names every input and output with its shape
// and element type, and lists what is supported.
func checkIO(ins, outs []ort.InputOutputInfo) (modelIO, error) {
	var m modelIO
	bad := func(format string, a ...any) (modelIO, error) {
		return modelIO{}, fmt.Errorf("%s (model inputs %s; outputs %s); %s",
			fmt.Sprintf(format, a...), describeIO(ins), describeIO(outs), supportedIO)
	}
	if len(ins) != 1 || len(outs) != 1 {
		return bad("has %d inputs and %d outputs, want 1 and 1", len(ins), len(outs))
	}
	m.in, m.out = ins[0], outs[0]
	in, out := m.in, m.out
	var ok bool
	if m.outF16, ok = floatType(out); !ok {
		return bad("output %q has element type %s", out.Name, elemName(out.DataType))
	}
	d := in.Dimensions
	if isUint8(in) {
		if m.inW, m.inH, ok = uint8InputSize(d); !ok {
			return bad("input %q has shape %v, want static [1,H,W,3] for uint8", in.Name, d)
		}
		m.inU8 = true
	} else {
		if m.inF16, ok = floatType(in); !ok {
			return bad("input %q has element type %s", in.Name, elemName(in.DataType))
		}
		if len(d) != 4 || d[0] != 1 || d[1] != 3 || d[2] <= 0 || d[3] <= 0 {
			return bad("input %q has shape %v, want static [1,3,H,W]", in.Name, d)
		}
		m.inW, m.inH = int(d[3]), int(d[2])
	}
	var err error
	if m.layout, m.classes, m.anchors, err = detectLayout(out.Dimensions); err != nil {
		return bad("output %q: %v", out.Name, err)
	}
	return m, nil
}

func floatType(io ort.InputOutputInfo) (f16, ok bool) {
	if io.OrtValueType != ort.ONNXTypeTensor {
		return false, false
	}
	switch io.DataType {
	case ort.TensorElementDataTypeFloat:
		return false, true
	case ort.TensorElementDataTypeFloat16:
		return true, true
	}
	return false, false
}

// elemName shortens ORT's ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 to float16.
func elemName(t ort.TensorElementDataType) string {
	s := strings.ToLower(strings.TrimPrefix(t.String(), "ONNX_TENSOR_ELEMENT_DATA_TYPE_"))
	if s == "float" {
		return "float32"
	}
	return s
}

// describeIO renders inputs or outputs as `images [1 3 640 640] float32, ...`.
func describeIO(ios []ort.InputOutputInfo) string {
	if len(ios) == 0 {
		return "none"
	}
	parts := make([]string, len(ios))
	for i, io := range ios {
		if io.OrtValueType != ort.ONNXTypeTensor {
			parts[i] = fmt.Sprintf("%q (%s)", io.Name, io.OrtValueType)
			continue
		}
		parts[i] = fmt.Sprintf("%q %v %s", io.Name, io.Dimensions, elemName(io.DataType))
	}
	return strings.Join(parts, ", ")
}

// candidatesV5 keeps, per row of a [1, N, 5+C] output, the best class if objectness *
// class score reaches conf. Scores are probabilities (sigmoid outputs, <= 1), so a row
// whose objectness alone is below conf is skipped without reading its classes.
func (d *decoder) candidatesV5(out []float32) []candidate {
	stride := 5 + d.classes
	out = out[:d.anchors*stride]
	cands := d.cands[:0]
	for i := 0; i < len(out); i += stride {
		row := out[i : i+stride]
		obj := row[4]
		if obj < d.conf {
			continue
		}
		best, bestC := row[5], 0
		for c, s := range row[6:] {
			if s > best {
				best, bestC = s, c+1
			}
		}
		s := obj * best
		if s < d.conf {
			continue
		}
		cx, cy, w, h := row[0], row[1], row[2], row[3]
		cands = append(cands, candidate{
			x1: cx - w/2, y1: cy - h/2, x2: cx + w/2, y2: cy + h/2,
			score: s, class: bestC,
		})
	}
	d.cands = cands
	return cands
}

// maxE2EClass bounds the class ids of an end-to-end model without class names: rows with
// a larger id are dropped rather than named.
const maxE2EClass = 1 << 12

// candidatesE2E keeps the rows of a [1, N, 6] output whose score reaches conf and whose
// class id is an integer in range (below len(names), or below maxE2EClass when the names
// are unknown), best first, at most maxDet. The model did the NMS: none here.
func (d *decoder) candidatesE2E(out []float32, names []string) []candidate {
	limit := len(names)
	if limit == 0 {
		limit = maxE2EClass
	}
	out = out[:d.anchors*6]
	cands := d.cands[:0]
	for i := 0; i < len(out); i += 6 {
		row := out[i : i+6]
		s, c := row[4], row[5]
		// !(s >= conf) also drops NaN scores.
		if !(s >= d.conf) || !(c >= 0 && c < float32(limit)) || c != float32(math.Trunc(float64(c))) {
			continue
		}
		cands = append(cands, candidate{x1: row[0], y1: row[1], x2: row[2], y2: row[3], score: s, class: int(c)})
	}
	d.cands = cands
	// Exports sort by score already (TopK); sorting again costs little and makes the
	// maxDet cut right for those that do not.
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
	return cands[:min(len(cands), d.maxDet)]
}

// label names class c: names[c], or "class<c>" when the model has no names (end-to-end
// models without names; the strings are made once per class id and kept).
func (d *decoder) label(names []string, c int) string {
	if c < len(names) {
		return names[c]
	}
	for len(d.genNames) <= c {
		d.genNames = append(d.genNames, "class"+strconv.Itoa(len(d.genNames)))
	}
	return d.genNames[c]
}
