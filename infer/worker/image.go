package worker

import (
	"fmt"
	"image"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/internal/geom"
)

// LetterboxImage scales a BGR image into a dstW x dstH canvas with the geometry of
// geom.NewLetterbox (aspect kept, centred, geom.PadValue gray around it) and writes it to dst as
// RGB24 HWC, the layout a pool.Pool and a Detector take. dst needs dstW*dstH*3 bytes. It
// allocates OpenCV buffers per call: it is meant for still images, not per-frame paths.
func LetterboxImage(img gocv.Mat, dstW, dstH int, dst []byte) (geom.Letterbox, error) {
	if img.Empty() {
		return geom.Letterbox{}, fmt.Errorf("letterbox image: empty image")
	}
	if img.Type() != gocv.MatTypeCV8UC3 {
		return geom.Letterbox{}, fmt.Errorf("letterbox image: Mat type %v, want 8-bit BGR (CV_8UC3)", img.Type())
	}
	if dstW <= 0 || dstH <= 0 {
		return geom.Letterbox{}, fmt.Errorf("letterbox image: canvas %dx%d is not positive", dstW, dstH)
	}
	if need := dstW * dstH * 3; len(dst) < need {
		return geom.Letterbox{}, fmt.Errorf("letterbox image: dst has %d bytes, %dx%d RGB24 needs %d", len(dst), dstW, dstH, need)
	}
	lb := geom.NewLetterbox(img.Cols(), img.Rows(), dstW, dstH)
	scaled := gocv.NewMat()
	defer scaled.Close()
	gocv.Resize(img, &scaled, image.Pt(lb.ScaledW, lb.ScaledH), 0, 0, gocv.InterpolationLinear)
	rgb := gocv.NewMat()
	defer rgb.Close()
	gocv.CvtColor(scaled, &rgb, gocv.ColorBGRToRGB)
	if !rgb.IsContinuous() || rgb.Cols() != lb.ScaledW || rgb.Rows() != lb.ScaledH {
		return geom.Letterbox{}, fmt.Errorf("letterbox image: unexpected resized Mat %dx%d", rgb.Cols(), rgb.Rows())
	}
	src, err := rgb.DataPtrUint8()
	if err != nil {
		return geom.Letterbox{}, fmt.Errorf("letterbox image: %w", err)
	}
	dst = dst[:dstW*dstH*3]
	for i := range dst {
		dst[i] = geom.PadValue
	}
	row := lb.ScaledW * 3
	for y := range lb.ScaledH {
		off := ((lb.PadY+y)*dstW + lb.PadX) * 3
		copy(dst[off:off+row], src[y*row:(y+1)*row])
	}
	return lb, nil
}
