package groundtruth

import (
	"image"
	"image/color"
	"math"
	"math/rand/v2"
)

// The props of Crowd are drawn here, not cut out: vtest.avi has no pillar or sign that
// stands free on the plaza (its lamp post is part of the background, and everyone walks in
// front of it).

// pillarSprite draws a round concrete pillar w x h pixels: a gray of the seed's tone,
// lit from the left, a darker band at its foot and a cap at its top.
func pillarSprite(r *rand.Rand, w, h int) *Sprite {
	w, h = max(w, 4), max(h, 8)
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	tone := 110 + r.Float64()*70
	warm := r.Float64() * 12 // concrete a little yellow, or gray
	capH, footH := max(2, h/14), max(2, h/20)
	for x := range w {
		// A cylinder lit from the left: brightest a third of the way across.
		u := (float64(x)+0.5)/float64(w)*2 - 1
		shade := 0.55 + 0.55*math.Max(0, math.Cos((u+0.35)*math.Pi/2.3))
		for y := range h {
			v := tone * shade
			switch {
			case y < capH:
				v *= 0.8
			case y >= h-footH:
				v *= 0.6
			}
			img.SetNRGBA(x, y, color.NRGBA{clamp8(v + warm), clamp8(v + warm/2), clamp8(v), 255})
		}
	}
	return &Sprite{Name: "pillar", Image: img}
}

// signSprite draws a signpost w x h pixels: a gray pole and, on top, a panel of the seed's
// colour (blue, green, red or brown) with a white border and white lines of text.
func signSprite(r *rand.Rand, w, h int) *Sprite {
	w, h = max(w, 6), max(h, 12)
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	faces := []color.NRGBA{{20, 60, 150, 255}, {10, 110, 70, 255}, {170, 30, 30, 255}, {110, 70, 30, 255}}
	face := faces[r.IntN(len(faces))]
	panelH := int(float64(h) * (0.35 + 0.15*r.Float64()))
	pole := max(2, w/10)
	border := max(1, w/25)
	for y := range h {
		for x := range w {
			switch {
			case y < panelH:
				c := face
				if x < border || x >= w-border || y < border || y >= panelH-border {
					c = color.NRGBA{235, 235, 235, 255}
				} else if row := (y - 3*border) * 5 / max(1, panelH-4*border); row >= 0 && row < 5 && row%2 == 1 && x > 3*border && x < w-3*border-(row*w/17) {
					c = color.NRGBA{230, 230, 230, 255} // a line of text
				}
				img.SetNRGBA(x, y, c)
			case x >= (w-pole)/2 && x < (w+pole)/2:
				v := uint8(120 + 40*(x-(w-pole)/2)/pole)
				img.SetNRGBA(x, y, color.NRGBA{v, v, v, 255})
			}
		}
	}
	return &Sprite{Name: "sign", Image: img}
}

func clamp8(v float64) uint8 { return uint8(max(0, min(255, math.Round(v)))) }
