package groundtruth

import (
	"fmt"
	"image"
	"image/color"

	"github.com/visiond/visiond/internal/geom"
)

// The second class of the scenes: the white van parked at the top right of vtest.avi's
// plaza, cut out of the background itself (no frame of the video shows it elsewhere, and
// no vehicle moves in it). yolov8n sees it there as a truck (score 0.66); drawn over the
// plaza at the scales Crowd uses it is found as a car, now and then as a truck (TestLoadVTest
// checks it): its Class is car.
//
// It cannot be cut by its difference from the background (it is the background), so it is
// cut by its colour: the van is white and everything around it (brick, asphalt, the
// pavement in its shadow) is darker. The bright pixels of vanRect, closed, the largest
// part, its holes (the rear windows) filled, then each column extended down to vanFloor,
// the bottom of its wheels, to keep the bumper and the wheels, which are dark.
var (
	vanRect  = image.Rect(644, 38, 730, 106)
	vanFloor = 101 // the row below the wheels, in the background's pixels
	// vanBright is the darkest level, in every channel, of the van's paint in the shade.
	vanBright uint8 = 150
)

// VTestParked are the boxes, in vtest.avi's pixels, of the vehicles parked in its
// background, which the model sees on every frame (the van as a truck, the car cut by the
// right edge as a car): static objects that are no scene's truth. Scoring ignores what
// is detected there (ScoreOptions.Ignore).
func VTestParked() []geom.Box {
	return []geom.Box{{X: 652, Y: 44.5, W: 70.5, H: 56}, {X: 734, Y: 50, W: 34, H: 45}}
}

// cutVan cuts the van out of vtest.avi's background (768x576).
func cutVan(bg *image.RGBA) (*Sprite, error) {
	r := vanRect
	if !r.In(bg.Rect) {
		return nil, fmt.Errorf("van: background %v does not hold %v", bg.Rect, r)
	}
	w, h := r.Dx(), r.Dy()
	mask := make([]bool, w*h)
	for y := range h {
		for x := range w {
			c := bg.RGBAAt(r.Min.X+x, r.Min.Y+y)
			mask[y*w+x] = min(c.R, c.G, c.B) >= vanBright
		}
	}
	mask = erode(dilate(mask, w, h), w, h)
	mask = largestPart(mask, w, h)
	fillHoles(mask, w, h)
	floor := vanFloor - r.Min.Y
	for x := range w {
		low := -1
		for y := range h {
			if mask[y*w+x] {
				low = y
			}
		}
		for y := low + 1; low >= 0 && y < floor; y++ {
			mask[y*w+x] = true
		}
	}
	var box image.Rectangle
	n := 0
	for y := range h {
		for x := range w {
			if mask[y*w+x] {
				box = box.Union(image.Rect(x, y, x+1, y+1))
				n++
			}
		}
	}
	if n < 1000 || box.Min.X == 0 || box.Min.Y == 0 || box.Max.X == w || box.Max.Y == h {
		return nil, fmt.Errorf("van: %d bright pixels in %v, bounded by %v: not the van", n, r, box.Add(r.Min))
	}
	img := image.NewNRGBA(image.Rect(0, 0, box.Dx(), box.Dy()))
	for y := range box.Dy() {
		for x := range box.Dx() {
			if mask[(box.Min.Y+y)*w+box.Min.X+x] {
				c := bg.RGBAAt(r.Min.X+box.Min.X+x, r.Min.Y+box.Min.Y+y)
				img.SetNRGBA(x, y, color.NRGBA{c.R, c.G, c.B, 255})
			}
		}
	}
	return &Sprite{Name: "van", Class: "car", Image: img, Source: box.Add(r.Min), Facing: -1}, nil
}
