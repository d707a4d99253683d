package worker

import (
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
)

// describe sets the appearance descriptor of each detection (infer/appearance) from pix, the
// letterboxed frame (lb.DstW x lb.DstH RGB24) its box was found on, whose picture is the
// scaled frame (the padding left out of its mean intensity). A box is in source pixels,
// clipped to the source frame (geom.Letterbox.ToSource): mapped back onto the canvas it lies
// within the scaled frame, so that its descriptor takes no padding either.
func describe(dets []infer.Detection, pix []byte, lb geom.Letterbox) {
	if len(dets) == 0 {
		return
	}
	f := appearance.NewFrame(pix, lb.DstW, lb.DstH, geom.Box{X: float64(lb.PadX), Y: float64(lb.PadY), W: float64(lb.ScaledW), H: float64(lb.ScaledH)})
	sx := float64(lb.ScaledW) / float64(lb.SrcW)
	sy := float64(lb.ScaledH) / float64(lb.SrcH)
	for i := range dets {
		b := dets[i].Box
		canvas := geom.Box{X: b.X*sx + float64(lb.PadX), Y: b.Y*sy + float64(lb.PadY), W: b.W * sx, H: b.H * sy}
		dets[i].Appearance = f.Describe(canvas)
	}
}
