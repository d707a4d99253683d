package testutil

import (
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// WalkerFrames is a person's box walking from left to right across a 1000x500 frame at 150
// px/s, seen at fps from t0, its feet at y = 400: through a zone over the lower half and
// across a vertical line at x = 0.5, then out of the frame. It returns each frame's time and
// box; the last frame is the last with the box inside.
func WalkerFrames(t0 time.Time, fps float64) (times []time.Time, boxes []geom.Box) {
	for i := 0; ; i++ {
		x := float64(i) * 150 / fps
		if x > 960 { // the box leaves the frame
			return times, boxes
		}
		times = append(times, t0.Add(time.Duration(float64(i)/fps*float64(time.Second))))
		boxes = append(boxes, geom.Box{X: x, Y: 300, W: 40, H: 100})
	}
}
