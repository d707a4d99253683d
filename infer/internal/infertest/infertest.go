// Package infertest holds the model-specific test helpers that the tests of infer's packages
// share: the files the detector needs, messi5.jpg letterboxed into the model's input, and
// checks of detections. The helpers every package shares are internal/testutil's. It is
// imported by tests only.
package infertest

import (
	"math"
	"testing"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
)

// Assets are the files of third_party/ that the tests run on, as absolute paths.
type Assets struct {
	Library string // libonnxruntime.so.1, or $ONNXRUNTIME_SHARED_LIBRARY_PATH
	Model   string // yolov8n.onnx
	Messi   string // media/messi5.jpg: a person and a sports ball
}

// ThirdParty returns the files scripts/setup.sh fetches; the test fails without them.
// $ONNXRUNTIME_SHARED_LIBRARY_PATH, when set, names another ONNX Runtime build (the GPU
// machine's, with the CUDA provider).
func ThirdParty(tb testing.TB) Assets {
	tb.Helper()
	return Assets{
		Library: testutil.ThirdParty(tb, "libonnxruntime.so.1"),
		Model:   testutil.ThirdParty(tb, "yolov8n.onnx"),
		Messi:   testutil.Media(tb, "messi5.jpg"),
	}
}

// LetterboxFunc scales a BGR image into a dstW x dstH RGB24 canvas: worker.LetterboxImage,
// which this package does not import so that the worker's own tests can use it.
type LetterboxFunc func(img gocv.Mat, dstW, dstH int, dst []byte) (geom.Letterbox, error)

// MessiFrame letterboxes messi5.jpg to 640x640 with letterbox, and returns the frame, its
// geometry and the image's size.
func MessiFrame(tb testing.TB, a Assets, letterbox LetterboxFunc) (pix []byte, lb geom.Letterbox, w, h int) {
	tb.Helper()
	img := gocv.IMRead(a.Messi, gocv.IMReadColor)
	if img.Empty() {
		tb.Fatalf("cannot read %s", a.Messi)
	}
	defer img.Close()
	pix = make([]byte, 640*640*3)
	lb, err := letterbox(img, 640, 640, pix)
	if err != nil {
		tb.Fatal(err)
	}
	return pix, lb, img.Cols(), img.Rows()
}

// CheckMessi asserts the detections of messi5.jpg (w x h): a person and a sports ball,
// inside the image.
func CheckMessi(t testing.TB, dets []infer.Detection, w, h int) {
	t.Helper()
	found := map[string]bool{}
	for _, d := range dets {
		found[d.Label] = true
		b := d.Box
		if b.X < 0 || b.Y < 0 || b.W <= 0 || b.H <= 0 || b.X+b.W > float64(w) || b.Y+b.H > float64(h) {
			t.Errorf("%s box %+v outside the %dx%d image", d.Label, b, w, h)
		}
		if d.Score < 0.25 || d.Score > 1 {
			t.Errorf("%s score %v", d.Label, d.Score)
		}
	}
	for _, want := range []string{"person", "sports ball"} {
		if !found[want] {
			t.Errorf("no %q among %+v", want, dets)
		}
	}
}

// SameDetections asserts that got matches want one to one: same label, box corners
// within boxTol pixels, score within scoreTol.
func SameDetections(t testing.TB, got, want []infer.Detection, boxTol float64, scoreTol float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d detections, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	used := make([]bool, len(got))
	for _, w := range want {
		found := false
		for i, g := range got {
			if !used[i] && g.Label == w.Label && g.ClassID == w.ClassID && BoxNear(g.Box, w.Box, boxTol) &&
				math.Abs(float64(g.Score-w.Score)) <= float64(scoreTol) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("no match for %+v among %+v", w, got)
		}
	}
}

// BoxNear says whether every coordinate of a and b is within eps.
func BoxNear(a, b geom.Box, eps float64) bool {
	return math.Abs(a.X-b.X) <= eps && math.Abs(a.Y-b.Y) <= eps && math.Abs(a.W-b.W) <= eps && math.Abs(a.H-b.H) <= eps
}
