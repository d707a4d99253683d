package worker

import (
	"cmp"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/internal/geom"
)

// yoloOutput builds a [1, 4+C, N] tensor from per-anchor rows {cx, cy, w, h, scores...}.
func yoloOutput(anchors [][]float32) []float32 {
	n, rows := len(anchors), len(anchors[0])
	out := make([]float32, rows*n)
	for i, a := range anchors {
		for r, v := range a {
			out[r*n+i] = v
		}
	}
	return out
}

func TestDecode(t *testing.T) {
	out := yoloOutput([][]float32{
		// cx, cy, w, h, class 0, 1, 2
		{100, 100, 20, 20, 0.9, 0.1, 0.0},  // kept: best of class 0
		{102, 100, 20, 20, 0.8, 0.0, 0.0},  // class 0, IoU 0.818 with the first: suppressed
		{102, 100, 20, 20, 0.0, 0.7, 0.0},  // same place, class 1: kept
		{300, 300, 10, 10, 0.1, 0.2, 0.24}, // best score below 0.25: dropped
		{500, 500, 10, 10, 0.0, 0.0, 0.6},  // alone: kept
	})
	names := []string{"a", "b", "c"}
	d := newDecoder(layoutV8, 3, 5, 0.25, 0.45, 300)
	same := geom.NewLetterbox(640, 640, 640, 640)
	got := d.decode(out, same, names, nil)
	want := []infer.Detection{
		{ClassID: 0, Label: "a", Score: 0.9, Box: geom.Box{X: 90, Y: 90, W: 20, H: 20}},
		{ClassID: 1, Label: "b", Score: 0.7, Box: geom.Box{X: 92, Y: 90, W: 20, H: 20}},
		{ClassID: 2, Label: "c", Score: 0.6, Box: geom.Box{X: 495, Y: 495, W: 10, H: 10}},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("decode:\n got %+v\nwant %+v", got, want)
	}

	// Through a letterbox: 1280x960 source, scale 0.5, pad y 80. The box centred at
	// canvas (500,500) is at source (990,840)..(1010,860).
	lb := geom.NewLetterbox(1280, 960, 640, 640)
	got = d.decode(out, lb, names, got[:0])
	if len(got) != 3 || !infertest.BoxNear(got[2].Box, geom.Box{X: 990, Y: 830, W: 20, H: 20}, 1e-6) {
		t.Fatalf("decode through letterbox: got %+v", got)
	}

	// maxDet caps the result, best first.
	d1 := newDecoder(layoutV8, 3, 5, 0.25, 0.45, 1)
	if got := d1.decode(out, same, names, nil); len(got) != 1 || got[0].Score != 0.9 {
		t.Fatalf("maxDet 1: got %+v", got)
	}
}

func TestNMSThreshold(t *testing.T) {
	// B covers half of A: IoU exactly 0.5. Boxes are dropped only above the threshold.
	a := candidate{x1: 0, y1: 0, x2: 10, y2: 10, score: 0.9}
	b := candidate{x1: 0, y1: 0, x2: 10, y2: 5, score: 0.8}
	if got := iou(a, b); got != 0.5 {
		t.Fatalf("iou = %v, want 0.5", got)
	}
	for _, tc := range []struct {
		thr  float64
		want int
	}{{0.5, 2}, {0.49, 1}, {0.51, 2}} {
		d := newDecoder(layoutV8, 1, 2, 0.25, tc.thr, 300)
		if got := d.nms([]candidate{b, a}); len(got) != tc.want || got[0] != a {
			t.Errorf("threshold %v: kept %+v, want %d starting with A", tc.thr, got, tc.want)
		}
	}
	// Disjoint and touching boxes never suppress each other.
	c := candidate{x1: 10, y1: 0, x2: 20, y2: 10, score: 0.7}
	if got := iou(a, c); got != 0 {
		t.Errorf("touching boxes: iou %v, want 0", got)
	}
}

func TestPreprocess(t *testing.T) {
	pix := []byte{255, 0, 51, 0, 102, 255} // two pixels, RGB
	dst := make([]float32, 6)
	preprocess(dst, pix, 2)
	want := []float32{1, 0, 0, 0.4, 0.2, 1} // R plane, G plane, B plane
	for i := range want {
		if d := dst[i] - want[i]; d > 1e-6 || d < -1e-6 {
			t.Fatalf("got %v, want %v", dst, want)
		}
	}
}

// messiFrame letterboxes messi5.jpg to 640x640.
func messiFrame(tb testing.TB, a infertest.Assets) ([]byte, geom.Letterbox, int, int) {
	tb.Helper()
	return infertest.MessiFrame(tb, a, LetterboxImage)
}

// newTestDetector opens the model with the CPU provider, or with $VISIOND_BENCH_PROVIDER
// (e.g. cuda, to run the benchmarks on the GPU machine).
func newTestDetector(tb testing.TB) (*Detector, infertest.Assets) {
	tb.Helper()
	a := infertest.ThirdParty(tb)
	d, err := NewDetector(infer.DetectorOptions{Model: a.Model, Library: a.Library, Threads: 2,
		Provider: infer.Provider(os.Getenv("VISIOND_BENCH_PROVIDER"))})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d, a
}

func TestLetterboxImage(t *testing.T) {
	a := infertest.ThirdParty(t)
	pix, lb, w, h := messiFrame(t, a)
	if lb != geom.NewLetterbox(w, h, 640, 640) {
		t.Fatalf("geometry %+v differs from NewLetterbox", lb)
	}
	if lb.PadY == 0 {
		t.Fatalf("messi5.jpg is landscape, want vertical padding: %+v", lb)
	}
	// Padding rows are gray, the first image row is not all gray.
	for i := range lb.PadY * 640 * 3 {
		if pix[i] != geom.PadValue {
			t.Fatalf("padding byte %d = %d, want %d", i, pix[i], geom.PadValue)
		}
	}
	img := gocv.NewMatWithSize(10, 10, gocv.MatTypeCV8UC1)
	defer img.Close()
	if _, err := LetterboxImage(img, 640, 640, pix); err == nil || !strings.Contains(err.Error(), "want 8-bit BGR") {
		t.Errorf("gray Mat: err %v", err)
	}
	if _, err := LetterboxImage(gocv.NewMat(), 640, 640, pix); err == nil || !strings.Contains(err.Error(), "empty image") {
		t.Errorf("empty Mat: err %v", err)
	}
}

func TestDetectorInProcess(t *testing.T) {
	d, a := newTestDetector(t)
	m := d.Model()
	provider := cmp.Or(os.Getenv("VISIOND_BENCH_PROVIDER"), "cpu")
	if m.InputW != 640 || m.InputH != 640 || len(m.Classes) != 80 || m.Classes[0] != "person" || m.Provider != provider {
		t.Fatalf("model info %+v", m)
	}
	pix, lb, w, h := messiFrame(t, a)
	dets, tm, err := d.Detect(pix, lb, make([]infer.Detection, 0, 300))
	if err != nil {
		t.Fatal(err)
	}
	infertest.CheckMessi(t, dets, w, h)
	if tm.Run <= 0 {
		t.Errorf("timings %+v", tm)
	}
	// The hot path allocates nothing once dst has room.
	if allocs := testing.AllocsPerRun(2, func() { dets, _, _ = d.Detect(pix, lb, dets) }); allocs != 0 {
		t.Errorf("Detect allocates %v times per frame", allocs)
	}
	if _, _, err := d.Detect(pix[:100], lb, dets); err == nil || !strings.Contains(err.Error(), "frame has 100 bytes") {
		t.Errorf("short frame: %v", err)
	}
	bad := lb
	bad.DstW = 320
	if _, _, err := d.Detect(pix, bad, dets); err == nil || !strings.Contains(err.Error(), "does not match model input 640x640") {
		t.Errorf("letterbox mismatch: %v", err)
	}
}

func TestNewDetectorErrors(t *testing.T) {
	a := infertest.ThirdParty(t)
	garbage := t.TempDir() + "/garbage.onnx"
	if err := os.WriteFile(garbage, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		opts    infer.DetectorOptions
		wantErr string
	}{
		{"missing model", infer.DetectorOptions{Model: "/nonexistent/m.onnx", Library: a.Library}, "/nonexistent/m.onnx"},
		{"garbage model", infer.DetectorOptions{Model: garbage, Library: a.Library}, garbage},
		{"bad provider", infer.DetectorOptions{Model: a.Model, Library: a.Library, Provider: "tpu"}, `provider "tpu"`},
		{"cuda", infer.DetectorOptions{Model: a.Model, Library: a.Library, Provider: "cuda"}, "provider cuda (device 0) unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDetector(tc.opts)
			if err == nil {
				d.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %q, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func BenchmarkPreprocess(b *testing.B) {
	pix := make([]byte, 640*640*3)
	for i := range pix {
		pix[i] = byte(i)
	}
	dst := make([]float32, 3*640*640)
	preprocess(dst, pix, 640*640) // fault dst's pages in
	b.SetBytes(int64(len(pix)))
	for b.Loop() {
		preprocess(dst, pix, 640*640)
	}
}

func BenchmarkSessionRun(b *testing.B) {
	d, a := newTestDetector(b)
	pix, _, _, _ := messiFrame(b, a)
	d.prepare(0, pix)
	if err := d.run(0); err != nil { // warm-up
		b.Fatal(err)
	}
	for b.Loop() {
		if err := d.run(0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPostprocess(b *testing.B) {
	d, a := newTestDetector(b)
	pix, lb, _, _ := messiFrame(b, a)
	if _, _, err := d.Detect(pix, lb, nil); err != nil {
		b.Fatal(err)
	}
	out := slices.Clone(d.pairs[0].outF32)
	dst := make([]infer.Detection, 0, 300)
	b.ReportAllocs()
	for b.Loop() {
		dst = d.dec.decode(out, lb, d.info.Classes, dst[:0])
	}
	if len(dst) == 0 {
		b.Fatal(errors.New("no detections"))
	}
}
