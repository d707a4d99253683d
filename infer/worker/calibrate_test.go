package worker

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	ort "github.com/yalue/onnxruntime_go"
	"google.golang.org/protobuf/proto"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/model/onnxpb"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
)

// calibrated is the real model calibrated on frames of vtest.avi, made once for the tests
// and benchmarks of this file (calibrating costs seconds per frame under -race).
var calibrated struct {
	once   sync.Once
	cal    *model.Calibration
	fp32   *onnxpb.ModelProto
	held   [][]byte // frames the calibration did not see
	err    error
	frames int
}

// calibrateYOLO calibrates the real model on 8 frames of vtest.avi (one every 5th of the
// first 80, every other one), holding out the other 8.
func calibrateYOLO(tb testing.TB) (*model.Calibration, *onnxpb.ModelProto, [][]byte) {
	tb.Helper()
	lib := testutil.ThirdParty(tb, "libonnxruntime.so.1")
	src := testutil.ThirdParty(tb, "yolov8n.onnx")
	frames := videoFrames(tb, 16, 5, 640)
	c := &calibrated
	c.once.Do(func() {
		var cal, held [][]byte
		for i, f := range frames {
			if i%2 == 0 {
				cal = append(cal, f)
			} else {
				held = append(held, f)
			}
		}
		c.held = held
		c.fp32, c.err = model.Load(src)
		if c.err != nil {
			return
		}
		names, err := model.CalibrationTensors(c.fp32)
		if err != nil {
			c.err = err
			return
		}
		c.cal = model.NewCalibration()
		c.err = Calibrate(infer.DetectorOptions{Model: src, Library: lib, Threads: 2}, c.fp32, names, cal,
			func(frame int, name string, shape []int64, data []float32) error {
				c.frames = max(c.frames, frame+1)
				return c.cal.Observe(name, shape, data)
			})
	})
	if c.err != nil {
		tb.Fatal(c.err)
	}
	return c.cal, c.fp32, c.held
}

// TestCalibrate: every activation of the real model is observed on every frame, in frame
// order, with its real shape (the input [1 3 640 640], the head's [1 84 8400]).
func TestCalibrate(t *testing.T) {
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	src := testutil.ThirdParty(t, "yolov8n.onnx")
	m, err := model.Load(src)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"images", "/model.0/conv/Conv_output_0", "/model.22/dfl/Softmax_output_0", "output0"}
	frames := videoFrames(t, 2, 10, 640)
	type seen struct {
		frame int
		name  string
		shape string
		size  int64 // product of the shape
		n     int   // values handed
	}
	var got []seen
	err = Calibrate(infer.DetectorOptions{Model: src, Library: lib, Threads: 1}, m, names, frames,
		func(frame int, name string, shape []int64, data []float32) error {
			size := int64(1)
			for _, d := range shape {
				size *= d
			}
			got = append(got, seen{frame, name, fmt.Sprint(shape), size, len(data)})
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"images":                         "[1 3 640 640]",
		"/model.0/conv/Conv_output_0":    "[1 16 320 320]",
		"/model.22/dfl/Softmax_output_0": "[1 16 4 8400]",
		"output0":                        "[1 84 8400]",
	}
	if len(got) != 2*len(names) {
		t.Fatalf("%d observations, want %d: %+v", len(got), 2*len(names), got)
	}
	for i, s := range got {
		if s.frame != i/len(names) {
			t.Errorf("observation %d is of frame %d: frames out of order", i, s.frame)
		}
		if want[s.name] != s.shape {
			t.Errorf("%s: shape %s, want %s", s.name, s.shape, want[s.name])
		}
		if int64(s.n) != s.size {
			t.Errorf("%s: %d values for shape %s", s.name, s.n, s.shape)
		}
	}

	// A frame of the wrong size is refused by index.
	err = Calibrate(infer.DetectorOptions{Model: src, Library: lib}, m, names, [][]byte{frames[0], make([]byte, 10)},
		func(int, string, []int64, []float32) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "frame 1 has 10 bytes") {
		t.Errorf("short frame: %v", err)
	}
	err = Calibrate(infer.DetectorOptions{Model: src, Library: lib, Provider: infer.ProviderCUDA}, m, names, frames,
		func(int, string, []int64, []float32) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "cpu provider") {
		t.Errorf("cuda: %v", err)
	}
}

// TestQuantizedModelDetects quantizes the real model calibrated on real frames and runs it
// through the workers' Detector: it is int8 (QDQ), its backbone convolutions read int8
// per-channel weights, its head is left in float, and it finds the people the FP32 model
// finds on frames the calibration did not see.
func TestQuantizedModelDetects(t *testing.T) {
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	src := testutil.ThirdParty(t, "yolov8n.onnx")
	cal, fp32, held := calibrateYOLO(t)
	q, sum, err := model.Quantize(fp32, cal, model.QuantizeOptions{ReduceRange: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ByOp["Conv"] != 63 || sum.Weights != 63 {
		t.Errorf("%d convolutions quantized (%d weights), want the 63 of the backbone, neck and heads (not the DFL's)", sum.ByOp["Conv"], sum.Weights)
	}
	checkQDQGraph(t, q)
	out := filepath.Join(t.TempDir(), "q.onnx")
	if err := model.Save(q, out); err != nil {
		t.Fatal(err)
	}
	info, err := model.InspectFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Precision != model.INT8 {
		t.Errorf("inspect says %s, want int8", info.Precision)
	}

	persons := func(path string) []int {
		d, err := NewDetector(infer.DetectorOptions{Model: path, Library: lib, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		lb := geom.NewLetterbox(640, 640, 640, 640)
		var n []int
		for _, f := range held {
			dets, _, err := d.Detect(f, lb, nil)
			if err != nil {
				t.Fatal(err)
			}
			k := 0
			for _, det := range dets {
				if det.Label == "person" {
					k++
				}
			}
			n = append(n, k)
		}
		return n
	}
	ref, got := persons(src), persons(out)
	var sumRef, sumGot int
	for i := range ref {
		sumRef += ref[i]
		sumGot += got[i]
		if got[i] == 0 && ref[i] > 0 {
			t.Errorf("held-out frame %d: the int8 model finds no person, FP32 finds %d", i, ref[i])
		}
	}
	t.Logf("people per held-out frame: FP32 %v, INT8 %v", ref, got)
	if sumGot < sumRef*3/4 || sumGot > sumRef*5/4 {
		t.Errorf("the int8 model finds %d people on the held-out frames, FP32 %d", sumGot, sumRef)
	}
	a, err := Compare(infer.DetectorOptions{Model: src, Library: lib}, infer.DetectorOptions{Model: out, Library: lib}, held)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agreement: %v", a)
	if a.MAP50 < 0.8 {
		t.Errorf("mAP@0.5 against FP32 %.3f on %d held-out frames, want at least 0.8 (calibrated on only 8 frames)", a.MAP50, a.Frames)
	}
}

// checkQDQGraph checks the QDQ form: every quantized Conv reads a DequantizeLinear of int8
// weights per output channel (axis 0) and of an int32 bias; the DFL's Softmax, the class
// scores' Sigmoid and the final Concat read and write float, not a dequantized tensor.
func checkQDQGraph(t *testing.T, m *onnxpb.ModelProto) {
	t.Helper()
	g := m.GetGraph()
	producer := map[string]*onnxpb.NodeProto{}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			producer[o] = n
		}
	}
	inits := map[string]*onnxpb.TensorProto{}
	for _, i := range g.GetInitializer() {
		inits[i.GetName()] = i
	}
	convs := 0
	for _, n := range g.GetNode() {
		switch {
		case n.GetOpType() == "Conv" && strings.HasPrefix(n.GetName(), "/model.22/dfl"):
			if p := producer[n.GetInput()[0]]; p == nil || p.GetOpType() != "Softmax" {
				t.Errorf("the DFL conv reads %v, want the float Softmax", p)
			}
			if _, float := inits[n.GetInput()[1]]; !float || inits[n.GetInput()[1]].GetDataType() != int32(onnxpb.TensorProto_FLOAT) {
				t.Errorf("the DFL conv's weight is not a float initializer")
			}
		case n.GetOpType() == "Conv":
			convs++
			for k, want := range map[int]onnxpb.TensorProto_DataType{1: onnxpb.TensorProto_INT8, 2: onnxpb.TensorProto_INT32} {
				dq := producer[n.GetInput()[k]]
				if dq == nil || dq.GetOpType() != "DequantizeLinear" {
					t.Fatalf("conv %s input %d comes from %v, not a DequantizeLinear", n.GetName(), k, dq)
				}
				if w := inits[dq.GetInput()[0]]; w == nil || w.GetDataType() != int32(want) {
					t.Errorf("conv %s input %d: quantized initializer %v, want %s", n.GetName(), k, w, want)
				}
				if len(dq.GetAttribute()) != 1 || dq.GetAttribute()[0].GetName() != "axis" || dq.GetAttribute()[0].GetI() != 0 {
					t.Errorf("conv %s input %d: DequantizeLinear not per output channel (axis 0)", n.GetName(), k)
				}
			}
			if p := producer[n.GetInput()[0]]; p == nil || p.GetOpType() != "DequantizeLinear" {
				t.Errorf("conv %s reads %v, not a DequantizeLinear", n.GetName(), p)
			}
		case n.GetName() == "/model.22/Sigmoid" || n.GetName() == "/model.22/Concat_5" || n.GetOpType() == "Softmax":
			for _, in := range n.GetInput() {
				if p := producer[in]; p != nil && (p.GetOpType() == "DequantizeLinear" || p.GetOpType() == "QuantizeLinear") {
					t.Errorf("head node %s reads %s from %s: the head must stay float", n.GetName(), in, p.GetOpType())
				}
			}
		}
	}
	if convs != 63 {
		t.Errorf("%d convs outside the DFL, want 63", convs)
	}
}

// BenchmarkDetectINT8 runs the workers' Detector, one thread, on a frame of vtest.avi with
// the FP32 model and with the model quantized here (calibrated on 8 frames): frames per
// second of one saturated one-thread CPU worker is 1/(ns/op).
func BenchmarkDetectINT8(b *testing.B) {
	lib := testutil.ThirdParty(b, "libonnxruntime.so.1")
	src := testutil.ThirdParty(b, "yolov8n.onnx")
	cal, fp32, held := calibrateYOLO(b)
	q, _, err := model.Quantize(fp32, cal, model.QuantizeOptions{ReduceRange: true})
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "q.onnx")
	if err := model.Save(q, out); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, path string }{{"fp32", src}, {"int8", out}} {
		b.Run(bc.name, func(b *testing.B) {
			d, err := NewDetector(infer.DetectorOptions{Model: bc.path, Library: lib, Threads: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			lb := geom.NewLetterbox(640, 640, 640, 640)
			dst := make([]infer.Detection, 0, 300)
			if _, _, err := d.Detect(held[0], lb, dst); err != nil { // warm-up
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, _, err := d.Detect(held[i%len(held)], lb, dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQuantizedModelFuses: ONNX Runtime's CPU provider turns every QDQ group of the
// quantized model into its int8 kernel (QLinearConv, QLinearMul, QLinearSigmoid,
// QLinearAdd, QLinearConcat) at load; what is left of QuantizeLinear/DequantizeLinear is the
// input's quantization and the head's dequantization, where float resumes.
func TestQuantizedModelFuses(t *testing.T) {
	if err := initORT(testutil.ThirdParty(t, "libonnxruntime.so.1")); err != nil {
		t.Fatal(err)
	}
	cal, fp32, _ := calibrateYOLO(t)
	q, _, err := model.Quantize(fp32, cal, model.QuantizeOptions{ReduceRange: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, optimized := filepath.Join(dir, "q.onnx"), filepath.Join(dir, "q-optimized.onnx")
	if err := model.Save(q, path); err != nil {
		t.Fatal(err)
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer so.Destroy()
	if err := so.SetIntraOpNumThreads(1); err != nil {
		t.Fatal(err)
	}
	if err := so.SetOptimizedModelFilePath(optimized); err != nil {
		t.Fatal(err)
	}
	s, err := ort.NewDynamicAdvancedSession(path, []string{"images"}, []string{"output0"}, so)
	if err != nil {
		t.Fatal(err)
	}
	s.Destroy()
	m, err := model.Load(optimized)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, n := range m.GetGraph().GetNode() {
		ops[n.GetOpType()]++
	}
	t.Logf("operators after ONNX Runtime's optimizations: %v", ops)
	for op, want := range map[string]int{"QLinearConv": 63, "QLinearMul": 57, "QLinearSigmoid": 57, "QLinearAdd": 6, "QLinearConcat": 16} {
		if ops[op] != want {
			t.Errorf("%d %s, want %d", ops[op], op, want)
		}
	}
	if ops["QuantizeLinear"] > 1 || ops["DequantizeLinear"] > 3 {
		t.Errorf("%d QuantizeLinear and %d DequantizeLinear left unfused, want the input's and the head's (1 and 3)",
			ops["QuantizeLinear"], ops["DequantizeLinear"])
	}
}

// TestQuantizeLeavesShapeMath: a Mul of integers (a shape computation, as exports with
// dynamic reshapes have) is not an activation: it is neither asked of the calibration nor
// quantized, and the rest is quantized as before.
func TestQuantizeLeavesShapeMath(t *testing.T) {
	cal, fp32, _ := calibrateYOLO(t)
	m := proto.Clone(fp32).(*onnxpb.ModelProto)
	g := m.GetGraph()
	g.Node = append([]*onnxpb.NodeProto{
		{Name: "shape", OpType: "Shape", Input: []string{"images"}, Output: []string{"dims"}},
		{Name: "dims2", OpType: "Mul", Input: []string{"dims", "dims"}, Output: []string{"dims_squared"}},
	}, g.Node...)
	q, sum, err := model.Quantize(m, cal, model.QuantizeOptions{ReduceRange: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum.ByOp["Mul"] != 57 || sum.ByOp["Conv"] != 63 {
		t.Errorf("quantized %v, want the 57 SiLU Muls and 63 Convs, not the shape's Mul", sum.ByOp)
	}
	for _, n := range q.GetGraph().GetNode() {
		if n.GetName() == "dims2" && (n.GetInput()[0] != "dims" || n.GetInput()[1] != "dims") {
			t.Errorf("the shape's Mul reads %v", n.GetInput())
		}
	}
}
