package geom

import (
	"math"
	"strings"
	"testing"
)

func TestNewLetterbox(t *testing.T) {
	for _, tc := range []struct {
		name       string
		srcW, srcH int
		want       Letterbox
	}{
		{"768x576", 768, 576, Letterbox{SrcW: 768, SrcH: 576, DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 480, PadX: 0, PadY: 80}},
		{"1920x1080", 1920, 1080, Letterbox{SrcW: 1920, SrcH: 1080, DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 360, PadX: 0, PadY: 140}},
		{"portrait 1080x1920", 1080, 1920, Letterbox{SrcW: 1080, SrcH: 1920, DstW: 640, DstH: 640, ScaledW: 360, ScaledH: 640, PadX: 140, PadY: 0}},
		{"square", 320, 320, Letterbox{SrcW: 320, SrcH: 320, DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 640}},
		{"odd pad 1000x999", 1000, 999, Letterbox{SrcW: 1000, SrcH: 999, DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 639, PadX: 0, PadY: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NewLetterbox(tc.srcW, tc.srcH, 640, 640); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestToSource(t *testing.T) {
	lb := NewLetterbox(768, 576, 640, 640) // scale 5/6, pad y 80
	for _, tc := range []struct {
		name string
		in   Box
		want Box
	}{
		{"inside", Box{X: 100, Y: 180, W: 64, H: 48}, Box{X: 120, Y: 120, W: 76.8, H: 57.6}},
		{"origin", Box{X: 0, Y: 80, W: 640, H: 480}, Box{X: 0, Y: 0, W: 768, H: 576}},
		{"clipped", Box{X: -10, Y: 50, W: 700, H: 700}, Box{X: 0, Y: 0, W: 768, H: 576}},
		{"in padding", Box{X: 10, Y: 0, W: 20, H: 40}, Box{X: 12, Y: 0, W: 24, H: 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lb.ToSource(tc.in); !boxNear(got, tc.want, 1e-9) {
				t.Errorf("ToSource(%+v) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}

	// Round trip: a source box mapped onto the canvas and back is unchanged.
	lb = NewLetterbox(1920, 1080, 640, 640)
	src := Box{X: 300, Y: 600, W: 150, H: 90}
	s := float64(lb.ScaledW) / float64(lb.SrcW)
	canvas := Box{X: src.X*s + float64(lb.PadX), Y: src.Y*s + float64(lb.PadY), W: src.W * s, H: src.H * s}
	if got := lb.ToSource(canvas); !boxNear(got, src, 1e-9) {
		t.Errorf("round trip: got %+v, want %+v", got, src)
	}
}

func boxNear(a, b Box, eps float64) bool {
	return math.Abs(a.X-b.X) <= eps && math.Abs(a.Y-b.Y) <= eps && math.Abs(a.W-b.W) <= eps && math.Abs(a.H-b.H) <= eps
}

func TestCheck(t *testing.T) {
	lb := NewLetterbox(768, 576, 640, 640)
	for _, tc := range []struct {
		name    string
		lb      Letterbox
		wantErr string
	}{
		{"ok", lb, ""},
		{"other canvas", NewLetterbox(768, 576, 320, 320), "letterbox canvas 320x320 does not match model input 640x640"},
		{"zero source", Letterbox{DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 640}, "source size 0x0 is not positive"},
		{"scaled too big", Letterbox{SrcW: 10, SrcH: 10, DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 640, PadY: 1}, "scaled 640x640 at (0,1) does not fit the 640x640 canvas"},
		{"negative pad", Letterbox{SrcW: 10, SrcH: 10, DstW: 640, DstH: 640, ScaledW: 64, ScaledH: 64, PadX: -1}, "does not fit"},
	} {
		err := tc.lb.Check(640, 640)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}
