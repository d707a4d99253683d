// Package geom is the frame geometry shared by the camera reader (sources), which scales
// each frame into the model's input, and the inference side (infer and its pool and worker),
// which maps the boxes found there back to source pixels. It is a leaf: no cgo, nothing but
// the standard library, so that importing it pulls neither ONNX Runtime nor libav into a build.
package geom

import (
	"fmt"
	"math"
)

// Letterbox is the geometry of one source frame scaled into the model's input: the frame is
// resized keeping its aspect ratio to ScaledW x ScaledH and placed at (PadX, PadY) on a
// DstW x DstH canvas filled with gray. It maps boxes found on the canvas back to source pixels.
type Letterbox struct {
	SrcW    int `json:"src_w"` // source frame size in pixels
	SrcH    int `json:"src_h"`
	DstW    int `json:"dst_w"` // model input size in pixels
	DstH    int `json:"dst_h"`
	ScaledW int `json:"scaled_w"` // size of the scaled frame on the canvas
	ScaledH int `json:"scaled_h"`
	PadX    int `json:"pad_x"` // offset of the scaled frame on the canvas
	PadY    int `json:"pad_y"`
}

// PadValue is the gray that fills the canvas around the scaled frame (Ultralytics' value).
const PadValue = 114

// NewLetterbox returns the geometry that fits a srcW x srcH frame into a dstW x dstH input,
// centred, keeping the aspect ratio. Sizes must be positive.
func NewLetterbox(srcW, srcH, dstW, dstH int) Letterbox {
	r := math.Min(float64(dstW)/float64(srcW), float64(dstH)/float64(srcH))
	sw := min(dstW, max(1, int(math.Round(float64(srcW)*r))))
	sh := min(dstH, max(1, int(math.Round(float64(srcH)*r))))
	return Letterbox{
		SrcW: srcW, SrcH: srcH,
		DstW: dstW, DstH: dstH,
		ScaledW: sw, ScaledH: sh,
		PadX: (dstW - sw) / 2, PadY: (dstH - sh) / 2,
	}
}

// Box is an axis-aligned rectangle: top-left corner and size, in pixels.
type Box struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	W float64 `json:"w"`
	H float64 `json:"h"`
}

// ToSource maps a box on the model's input canvas to source-frame pixels, clipped to the frame.
func (l Letterbox) ToSource(b Box) Box {
	sx := float64(l.ScaledW) / float64(l.SrcW)
	sy := float64(l.ScaledH) / float64(l.SrcH)
	x1 := clamp((b.X-float64(l.PadX))/sx, 0, float64(l.SrcW))
	y1 := clamp((b.Y-float64(l.PadY))/sy, 0, float64(l.SrcH))
	x2 := clamp((b.X+b.W-float64(l.PadX))/sx, 0, float64(l.SrcW))
	y2 := clamp((b.Y+b.H-float64(l.PadY))/sy, 0, float64(l.SrcH))
	return Box{X: x1, Y: y1, W: x2 - x1, H: y2 - y1}
}

// Check says whether l is a well-formed letterbox onto a w x h canvas: positive sizes, and
// the scaled frame inside the canvas. Errors say what does not fit.
func (l Letterbox) Check(w, h int) error {
	switch {
	case l.DstW != w || l.DstH != h:
		return fmt.Errorf("letterbox canvas %dx%d does not match model input %dx%d", l.DstW, l.DstH, w, h)
	case l.SrcW <= 0 || l.SrcH <= 0:
		return fmt.Errorf("letterbox source size %dx%d is not positive", l.SrcW, l.SrcH)
	case l.ScaledW <= 0 || l.ScaledH <= 0 || l.PadX < 0 || l.PadY < 0 ||
		l.PadX+l.ScaledW > w || l.PadY+l.ScaledH > h:
		return fmt.Errorf("letterbox scaled %dx%d at (%d,%d) does not fit the %dx%d canvas",
			l.ScaledW, l.ScaledH, l.PadX, l.PadY, w, h)
	}
	return nil
}

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }
