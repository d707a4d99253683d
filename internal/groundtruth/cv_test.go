package groundtruth

import (
	"image"
	"math"
	"testing"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/internal/geom"
)

// The tests' pixel work goes through OpenCV: loops over every pixel in Go are slow under
// the race detector.

// rgbaMat wraps img's pixels (not copied: use it while img lives) as a 4-channel Mat.
func rgbaMat(t testing.TB, img *image.RGBA) gocv.Mat {
	t.Helper()
	m, err := gocv.NewMatFromBytes(img.Rect.Dy(), img.Rect.Dx(), gocv.MatTypeCV8UC4, img.Pix)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// letterbox scales img into a 640x640 RGB24 canvas as the daemon does (worker.LetterboxImage).
func letterbox(t testing.TB, img *image.RGBA, pix []byte) geom.Letterbox {
	t.Helper()
	m := rgbaMat(t, img)
	defer m.Close()
	bgr := gocv.NewMat()
	defer bgr.Close()
	gocv.CvtColor(m, &bgr, gocv.ColorRGBAToBGR)
	lb, err := worker.LetterboxImage(bgr, 640, 640, pix)
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

// psnr is the peak signal-to-noise ratio of b against a, over the colour channels, in dB
// (both opaque: the alpha channels add nothing to the error).
func psnr(t testing.TB, a, b *image.RGBA) float64 {
	t.Helper()
	ma, mb := rgbaMat(t, a), rgbaMat(t, b)
	defer ma.Close()
	defer mb.Close()
	l2 := gocv.NormWithMats(ma, mb, gocv.NormL2)
	mse := l2 * l2 / float64(a.Rect.Dx()*a.Rect.Dy()*3)
	return 10 * math.Log10(255*255/mse)
}

// meanAbsDiff is the mean absolute difference of two 640x640 RGB24 buffers.
func meanAbsDiff(t testing.TB, a, b []byte) float64 {
	t.Helper()
	ma, err := gocv.NewMatFromBytes(640, 640, gocv.MatTypeCV8UC3, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()
	mb, err := gocv.NewMatFromBytes(640, 640, gocv.MatTypeCV8UC3, b)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	return gocv.NormWithMats(ma, mb, gocv.NormL1) / float64(len(a))
}
