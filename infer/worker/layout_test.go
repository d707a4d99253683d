package worker

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/internal/geom"
)

func TestCheckIO(t *testing.T) {
	tensor := func(name string, dt ort.TensorElementDataType, dims ...int64) ort.InputOutputInfo {
		return ort.InputOutputInfo{Name: name, OrtValueType: ort.ONNXTypeTensor, Dimensions: dims, DataType: dt}
	}
	var f32, f16 ort.TensorElementDataType = ort.TensorElementDataTypeFloat, ort.TensorElementDataTypeFloat16
	img := tensor("images", f32, 1, 3, 640, 480)
	out := tensor("output0", f16, 1, 8400, 85)
	m, err := checkIO([]ort.InputOutputInfo{img}, []ort.InputOutputInfo{out})
	if err != nil || m.inW != 480 || m.inH != 640 || m.inF16 || !m.outF16 || m.layout != layoutV5 || m.classes != 80 {
		t.Fatalf("got %+v, %v", m, err)
	}
	// A uint8 NHWC input (visiond model prelude): the frame as it is.
	if m, err := checkIO([]ort.InputOutputInfo{tensor("images", ort.TensorElementDataTypeUint8, 1, 480, 640, 3)}, []ort.InputOutputInfo{out}); err != nil ||
		!m.inU8 || m.inF16 || m.inW != 640 || m.inH != 480 {
		t.Fatalf("uint8 input: got %+v, %v", m, err)
	}
	for _, tc := range []struct {
		name      string
		ins, outs []ort.InputOutputInfo
		wantErr   []string
	}{
		{"two outputs", []ort.InputOutputInfo{img}, []ort.InputOutputInfo{out, tensor("extra", f32, 1, 32, 160, 160)},
			[]string{"1 inputs and 2 outputs", `"extra" [1 32 160 160] float32`, `"output0" [1 8400 85] float16`}},
		{"uint8 NCHW input", []ort.InputOutputInfo{tensor("images", ort.TensorElementDataTypeUint8, 1, 3, 640, 640)}, []ort.InputOutputInfo{out},
			[]string{`input "images" has shape [1 3 640 640], want static [1,H,W,3] for uint8`}},
		{"int8 input", []ort.InputOutputInfo{tensor("images", ort.TensorElementDataTypeInt8, 1, 3, 640, 640)}, []ort.InputOutputInfo{out},
			[]string{`input "images" has element type int8`}},
		{"double output", []ort.InputOutputInfo{img}, []ort.InputOutputInfo{tensor("output0", ort.TensorElementDataTypeDouble, 1, 84, 8400)},
			[]string{`output "output0" has element type double`}},
		{"NHWC input", []ort.InputOutputInfo{tensor("images", f32, 1, 640, 640, 3)}, []ort.InputOutputInfo{out},
			[]string{`input "images" has shape [1 640 640 3], want static [1,3,H,W]`}},
		{"dynamic input", []ort.InputOutputInfo{tensor("images", f32, -1, 3, -1, -1)}, []ort.InputOutputInfo{out},
			[]string{"want static [1,3,H,W]"}},
		{"flat output", []ort.InputOutputInfo{img}, []ort.InputOutputInfo{tensor("flat", f32, 1, 705600)},
			[]string{`output "flat": shape [1 705600] is not [1,A,B]`, `inputs "images" [1 3 640 480] float32`}},
	} {
		_, err := checkIO(tc.ins, tc.outs)
		if err == nil {
			t.Errorf("%s: no error", tc.name)
			continue
		}
		for _, want := range append(tc.wantErr, "supported: ", "[1,N,5+C] (YOLOv5/v7)") {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err %q, want it to contain %q", tc.name, err, want)
			}
		}
	}
}

// v5Output builds a [1, N, 5+C] tensor from per-anchor rows {cx, cy, w, h, obj, scores...}.
func v5Output(rows [][]float32) []float32 { return slices.Concat(rows...) }

func TestDecodeV5(t *testing.T) {
	out := v5Output([][]float32{
		// cx, cy, w, h, obj, class 0, 1
		{100, 100, 20, 20, 0.9, 0.9, 0.1},  // 0.81 class 0: kept
		{102, 100, 20, 20, 1.0, 0.8, 0.0},  // 0.8 class 0, IoU 0.818 with the first: suppressed
		{102, 100, 20, 20, 0.5, 0.0, 0.6},  // 0.3 class 1: kept
		{300, 300, 10, 10, 0.5, 0.4, 0.45}, // 0.225 < 0.25 though both parts pass: dropped
		{400, 400, 10, 10, 0.2, 1.0, 1.0},  // objectness below 0.25: dropped
		{500, 500, 10, 10, 0.5, 0.0, 0.5},  // 0.25 exactly, class 1: kept
	})
	d := newDecoder(layoutV5, 2, 6, 0.25, 0.45, 300)
	got := d.decode(out, geom.NewLetterbox(640, 640, 640, 640), []string{"a", "b"}, nil)
	want := []infer.Detection{
		{ClassID: 0, Label: "a", Score: mul32(0.9, 0.9), Box: geom.Box{X: 90, Y: 90, W: 20, H: 20}},
		{ClassID: 1, Label: "b", Score: mul32(0.5, 0.6), Box: geom.Box{X: 92, Y: 90, W: 20, H: 20}},
		{ClassID: 1, Label: "b", Score: 0.25, Box: geom.Box{X: 495, Y: 495, W: 10, H: 10}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("decode:\n got %+v\nwant %+v", got, want)
	}
	// Through a letterbox (1280x960 source: scale 0.5, pad y 80) and maxDet.
	d = newDecoder(layoutV5, 2, 6, 0.25, 0.45, 1)
	got = d.decode(out, geom.NewLetterbox(1280, 960, 640, 640), []string{"a", "b"}, got[:0])
	if len(got) != 1 || !infertest.BoxNear(got[0].Box, geom.Box{X: 180, Y: 20, W: 40, H: 40}, 1e-6) {
		t.Fatalf("letterbox, maxDet 1: got %+v", got)
	}
}

func TestDecodeE2E(t *testing.T) {
	nan := float32(math.NaN())
	out := v5Output([][]float32{
		// x1, y1, x2, y2, score, class
		{10, 10, 50, 50, 0.9, 0},
		{12, 10, 52, 50, 0.8, 0}, // overlaps the first, same class: kept (no NMS)
		{100, 100, 150, 120, 0.3, 2},
		{0, 0, 10, 10, 0.2, 1},       // below conf: dropped
		{0, 0, 10, 10, 0.95, 3},      // class beyond the names: dropped
		{0, 0, 10, 10, 0.95, 1.5},    // not an integer class: dropped
		{0, 0, 10, 10, nan, 1},       // NaN score: dropped
		{200, 200, 210, 220, 0.5, 1}, // out of order: sorted
	})
	names := []string{"a", "b", "c"}
	d := newDecoder(layoutE2E, 0, 8, 0.25, 0.45, 300)
	got := d.decode(out, geom.NewLetterbox(640, 640, 640, 640), names, nil)
	want := []infer.Detection{
		{ClassID: 0, Label: "a", Score: 0.9, Box: geom.Box{X: 10, Y: 10, W: 40, H: 40}},
		{ClassID: 0, Label: "a", Score: 0.8, Box: geom.Box{X: 12, Y: 10, W: 40, H: 40}},
		{ClassID: 1, Label: "b", Score: 0.5, Box: geom.Box{X: 200, Y: 200, W: 10, H: 20}},
		{ClassID: 2, Label: "c", Score: 0.3, Box: geom.Box{X: 100, Y: 100, W: 50, H: 20}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("decode:\n got %+v\nwant %+v", got, want)
	}
	d = newDecoder(layoutE2E, 0, 8, 0.25, 0.45, 2)
	if got := d.decode(out, geom.NewLetterbox(640, 640, 640, 640), names, nil); len(got) != 2 || got[1].Score != 0.8 {
		t.Fatalf("maxDet 2: got %+v", got)
	}
	// Without names, class ids are named class<id>, the 3 now kept too.
	d = newDecoder(layoutE2E, 0, 8, 0.25, 0.45, 300)
	got = d.decode(out, geom.NewLetterbox(640, 640, 640, 640), nil, nil)
	if len(got) != 5 || got[0].Label != "class3" || got[0].ClassID != 3 || got[1].Label != "class0" {
		t.Fatalf("no names: got %+v", got)
	}
	if allocs := testing.AllocsPerRun(10, func() { got = d.decode(out, geom.NewLetterbox(640, 640, 640, 640), nil, got[:0]) }); allocs != 0 {
		t.Errorf("decode allocates %v times", allocs)
	}
}

func TestDecodeNoAllocs(t *testing.T) {
	lb := geom.NewLetterbox(1280, 960, 640, 640)
	v8 := newDecoder(layoutV8, 3, 5, 0.25, 0.45, 300)
	v8out := yoloOutput([][]float32{{100, 100, 20, 20, 0.9, 0.1, 0}, {102, 100, 20, 20, 0.8, 0, 0}, {500, 500, 10, 10, 0, 0, 0.6}, {1, 1, 1, 1, 0, 0, 0}, {9, 9, 9, 9, 0, 0, 0}})
	v5 := newDecoder(layoutV5, 2, 2, 0.25, 0.45, 300)
	v5out := v5Output([][]float32{{100, 100, 20, 20, 0.9, 0.9, 0.1}, {102, 100, 20, 20, 1.0, 0.8, 0.0}})
	dst := make([]infer.Detection, 0, 300)
	for name, f := range map[string]func(){
		"v8": func() { dst = v8.decode(v8out, lb, []string{"a", "b", "c"}, dst[:0]) },
		"v5": func() { dst = v5.decode(v5out, lb, []string{"a", "b"}, dst[:0]) },
	} {
		if allocs := testing.AllocsPerRun(10, f); allocs != 0 {
			t.Errorf("%s decode allocates %v times", name, allocs)
		}
	}
}

func TestReadLabels(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.txt", "person\r\n  bicycle \ntraffic light\n\n")
	if got, err := readLabels(good); err != nil || !slices.Equal(got, []string{"person", "bicycle", "traffic light"}) {
		t.Fatalf("good: %q, %v", got, err)
	}
	if _, err := readLabels(write("hole.txt", "a\n\nb\n")); err == nil || !strings.Contains(err.Error(), "line 2 is empty") {
		t.Errorf("empty line: %v", err)
	}
	if _, err := readLabels(write("empty.txt", "\n")); err == nil || !strings.Contains(err.Error(), "line 1 is empty") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := readLabels(filepath.Join(dir, "missing.txt")); err == nil || !strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("missing file: %v", err)
	}
	// Counts checked against the layout's classes; any count for end-to-end (0).
	if _, err := classNames(infer.DetectorOptions{Model: "m.onnx", Labels: good}, 80, nil); err == nil ||
		!strings.Contains(err.Error(), "3 names, model m.onnx has 80 classes") {
		t.Errorf("wrong count: %v", err)
	}
	if got, err := classNames(infer.DetectorOptions{Model: "m.onnx", Labels: good}, 0, nil); err != nil || len(got) != 3 {
		t.Errorf("end-to-end: %q, %v", got, err)
	}
}

// TestPreprocessF16: the pre-processing levels match float32 pre-processing rounded.
func TestPreprocessF16(t *testing.T) {
	pix := []byte{0, 114, 255}
	dst := make([]uint16, 3)
	preprocessF16(dst, pix, 1)
	for i, want := range []float32{0, 114.0 / 255, 1} {
		if got := f16ToF32(dst[i]); math.Abs(float64(got-want)) > 1e-3 {
			t.Errorf("level %d: %v, want %v", pix[i], got, want)
		}
	}
}

// mul32 multiplies in float32, as the decoder does.
func mul32(a, b float32) float32 { return a * b }

// detectModel opens model with the CPU provider, runs it on messi5.jpg, checks that a
// second run allocates nothing, and returns the detections.
func detectModel(t *testing.T, a infertest.Assets, model string) ([]infer.Detection, infer.ModelInfo, int, int) {
	t.Helper()
	d, err := NewDetector(infer.DetectorOptions{Model: model, Library: a.Library, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pix, lb, w, h := messiFrame(t, a)
	dets, _, err := d.Detect(pix, lb, make([]infer.Detection, 0, 300))
	if err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(2, func() { dets, _, _ = d.Detect(pix, lb, dets) }); allocs != 0 {
		t.Errorf("%s: Detect allocates %v times per frame", filepath.Base(model), allocs)
	}
	return slices.Clone(dets), d.Model(), w, h
}

// boxIoU is the intersection over union of two boxes.
func boxIoU(a, b geom.Box) float64 {
	iw := min(a.X+a.W, b.X+b.W) - max(a.X, b.X)
	ih := min(a.Y+a.H, b.Y+b.H) - max(a.Y, b.Y)
	if iw <= 0 || ih <= 0 {
		return 0
	}
	return iw * ih / (a.W*a.H + b.W*b.H - iw*ih)
}

// optimizedOps counts the operators of model's graph as ONNX Runtime optimizes it for the
// CPU (the graph it runs), by op type.
func optimizedOps(t *testing.T, a infertest.Assets, model string) map[string]int {
	t.Helper()
	if err := initORT(a.Library); err != nil {
		t.Fatal(err)
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		t.Fatal(err)
	}
	defer so.Destroy()
	opt := filepath.Join(t.TempDir(), "optimized.onnx")
	if err := so.SetOptimizedModelFilePath(opt); err != nil {
		t.Fatal(err)
	}
	s, err := ort.NewDynamicAdvancedSession(model, []string{"images"}, []string{"output0"}, so)
	if err != nil {
		t.Fatal(err)
	}
	s.Destroy()
	ops := map[string]int{}
	for _, n := range readONNX(t, opt).nodes {
		ops[parseNode(t, n).op]++
	}
	return ops
}

// TestDerivedModels runs models derived from yolov8n.onnx (testmodels_test.go) in each
// supported layout and element type, and compares them with the original.
func TestDerivedModels(t *testing.T) {
	a := infertest.ThirdParty(t)
	ref, _, w, h := detectModel(t, a, a.Model)
	infertest.CheckMessi(t, ref, w, h)

	t.Run("yolov5 layout", func(t *testing.T) {
		dets, info, _, _ := detectModel(t, a, yolov5Model(t, a))
		if len(info.Classes) != 80 || info.Classes[32] != "sports ball" {
			t.Fatalf("classes %q", info.Classes)
		}
		infertest.SameDetections(t, dets, ref, 1, 1e-4)
	})
	t.Run("end-to-end layout", func(t *testing.T) {
		dets, info, _, _ := detectModel(t, a, e2eModel(t, a))
		if len(info.Classes) != 80 {
			t.Fatalf("classes %q", info.Classes)
		}
		// No NMS: overlapping boxes of one object stay, so there are more than after
		// NMS. The person and the ball are there, inside the image, and the best
		// detection is the best one of the original.
		infertest.CheckMessi(t, dets, w, h)
		if len(dets) <= len(ref) {
			t.Errorf("%d detections, want more than the %d after NMS", len(dets), len(ref))
		}
		if dets[0].Label != ref[0].Label || math.Abs(float64(dets[0].Score-ref[0].Score)) > 1e-4 || !infertest.BoxNear(dets[0].Box, ref[0].Box, 1) {
			t.Errorf("best %+v, want %+v", dets[0], ref[0])
		}
		if !slices.IsSortedFunc(dets, func(a, b infer.Detection) int { return -cmpScore(a, b) }) {
			t.Errorf("not best first: %+v", dets)
		}
	})
	t.Run("fp16 input", func(t *testing.T) {
		dets, _, _, _ := detectModel(t, a, fp16Model(t, a, false))
		infertest.SameDetections(t, dets, ref, 2, 1e-2)
	})
	t.Run("fp16 input and output", func(t *testing.T) {
		dets, _, _, _ := detectModel(t, a, fp16Model(t, a, true))
		infertest.SameDetections(t, dets, ref, 2, 1e-2)
	})
	t.Run("quantized qdq", func(t *testing.T) {
		pix, _, _, _ := messiFrame(t, a)
		model := qdqModel(t, a, pix)
		// The weights are stored as int8: the file is about a quarter of the original.
		orig, err := os.Stat(a.Model)
		if err != nil {
			t.Fatal(err)
		}
		q, err := os.Stat(model)
		if err != nil {
			t.Fatal(err)
		}
		if q.Size() > orig.Size()/3 {
			t.Errorf("quantized model has %d bytes, original %d", q.Size(), orig.Size())
		}
		// ONNX Runtime runs every Conv as an int8 QLinearConv, none in float32.
		ops := optimizedOps(t, a, model)
		if ops["QLinearConv"] != 64 || ops["Conv"] != 0 || ops["FusedConv"] != 0 {
			t.Errorf("optimized graph ops %v, want 64 QLinearConv and no float Conv", ops)
		}
		dets, info, _, _ := detectModel(t, a, model)
		if info.InputW != 640 || info.InputH != 640 || len(info.Classes) != 80 || info.Classes[0] != "person" {
			t.Errorf("model info %+v", info)
		}
		infertest.CheckMessi(t, dets, w, h)
		// Every clear detection of the float model is found again, in the same place with
		// about the same score; quantization may add or drop a few marginal ones.
		for _, r := range ref {
			if r.Score < 0.45 {
				continue
			}
			if !slices.ContainsFunc(dets, func(d infer.Detection) bool {
				return d.ClassID == r.ClassID && boxIoU(d.Box, r.Box) >= 0.85 && math.Abs(float64(d.Score-r.Score)) <= 0.1
			}) {
				t.Errorf("float detection %+v not found among the quantized model's %+v", r, dets)
			}
		}
		if len(dets) < len(ref)-2 || len(dets) > len(ref)+4 {
			t.Errorf("%d detections, float model %d", len(dets), len(ref))
		}
		if slices.EqualFunc(dets, ref, func(a, b infer.Detection) bool { return a == b }) {
			t.Error("the quantized model gives exactly the float model's detections: not quantized")
		}
	})
	t.Run("unsupported output", func(t *testing.T) {
		d, err := NewDetector(infer.DetectorOptions{Model: flatModel(t, a), Library: a.Library})
		if err == nil {
			d.Close()
			t.Fatal("no error")
		}
		for _, want := range []string{`output "flat": shape [1 705600] is not [1,A,B]`,
			`inputs "images" [1 3 640 640] float32`, `outputs "flat" [1 705600] float32`, "[1,4+C,N] (YOLOv8/v9/v11)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err %q, want it to contain %q", err, want)
			}
		}
	})
	t.Run("no names", func(t *testing.T) {
		dets, info, _, _ := detectModel(t, a, noNamesModel(t, a))
		if len(info.Classes) != 80 || info.Classes[0] != "class0" || info.Classes[79] != "class79" {
			t.Fatalf("classes %q", info.Classes)
		}
		if len(dets) != len(ref) || dets[0].Label != "class"+strconv.Itoa(ref[0].ClassID) {
			t.Errorf("got %+v, want the classes of %+v", dets, ref)
		}
	})
	t.Run("labels file", func(t *testing.T) {
		dir := t.TempDir()
		names := make([]string, 80)
		for i := range names {
			names[i] = "L" + strconv.Itoa(i)
		}
		good := filepath.Join(dir, "good.txt")
		short := filepath.Join(dir, "short.txt")
		if err := os.WriteFile(good, []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(short, []byte("a\nb\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := NewDetector(infer.DetectorOptions{Model: a.Model, Library: a.Library, Labels: good})
		if err != nil {
			t.Fatal(err)
		}
		if c := d.Model().Classes; !slices.Equal(c, names) {
			t.Errorf("classes %q", c)
		}
		d.Close()
		for _, tc := range []struct{ labels, wantErr string }{
			{short, "2 names, model " + a.Model + " has 80 classes"},
			{filepath.Join(dir, "missing.txt"), "missing.txt"},
		} {
			d, err := NewDetector(infer.DetectorOptions{Model: a.Model, Library: a.Library, Labels: tc.labels})
			if err == nil {
				d.Close()
				t.Errorf("labels %s: no error", tc.labels)
			} else if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("labels %s: err %q, want %q", tc.labels, err, tc.wantErr)
			}
		}
	})
}

func cmpScore(a, b infer.Detection) int {
	switch {
	case a.Score < b.Score:
		return -1
	case a.Score > b.Score:
		return 1
	}
	return 0
}

// BenchmarkPostprocessV5 decodes the messi5.jpg output of yolov8n rearranged, in Go, to
// the YOLOv5 layout [1, 8400, 85] with objectness 1: every row passes the objectness test,
// the worst case of the objectness shortcut.
func BenchmarkPostprocessV5(b *testing.B) {
	d, a := newTestDetector(b)
	pix, lb, _, _ := messiFrame(b, a)
	if _, _, err := d.Detect(pix, lb, nil); err != nil {
		b.Fatal(err)
	}
	v8, n := d.pairs[0].outF32, d.dec.anchors
	out := make([]float32, 0, n*85)
	for i := range n {
		out = append(out, v8[i], v8[n+i], v8[2*n+i], v8[3*n+i], 1)
		for c := range 80 {
			out = append(out, v8[(4+c)*n+i])
		}
	}
	dec := newDecoder(layoutV5, 80, n, 0.25, 0.45, 300)
	dst := make([]infer.Detection, 0, 300)
	b.ReportAllocs()
	for b.Loop() {
		dst = dec.decode(out, lb, d.info.Classes, dst[:0])
	}
	if len(dst) == 0 {
		b.Fatal("no detections")
	}
}

// BenchmarkFP16 converts a 640x640 frame to float16 CHW and a [1,84,8400] float16
// output back to float32, the per-frame extra work of a half=True model.
func BenchmarkFP16(b *testing.B) {
	pix := make([]byte, 640*640*3)
	for i := range pix {
		pix[i] = byte(i)
	}
	in := make([]uint16, 3*640*640)
	out16 := make([]uint16, 84*8400)
	for i := range out16 {
		out16[i] = f32ToF16(float32(i%1000) / 7)
	}
	out := make([]float32, len(out16))
	table := f16Table()
	b.Run("preprocess", func(b *testing.B) {
		b.SetBytes(int64(len(pix)))
		for b.Loop() {
			preprocessF16(in, pix, 640*640)
		}
	})
	b.Run("output", func(b *testing.B) {
		b.SetBytes(int64(2 * len(out16)))
		for b.Loop() {
			f16Decode(out, out16, table)
		}
	})
}
