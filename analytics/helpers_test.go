package analytics

import (
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// The frames of these tests are 1000x500 pixels: not square, so that normalized coordinates
// and pixel distances differ.
const frameW, frameH = 1000, 500

var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// at returns the time ms milliseconds after t0.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// obj returns track id's 40x80 px box whose bottom centre (the default anchor) is at the
// normalized point (x, y).
func obj(id uint64, label string, x, y float64) Object {
	return Object{TrackID: id, Label: label, Box: boxAt(x, y)}
}

func boxAt(x, y float64) geom.Box {
	return geom.Box{X: x*frameW - 20, Y: y*frameH - 80, W: 40, H: 80}
}

func frame(ms int, objs ...Object) Frame {
	return Frame{Time: at(ms), W: frameW, H: frameH, Objects: objs}
}

func ended(ms int, ids ...uint64) Frame {
	return Frame{Time: at(ms), W: frameW, H: frameH, Ended: ids}
}
