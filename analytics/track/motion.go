package track

import (
	"math"
	"slices"

	"github.com/visiond/visiond/internal/geom"
)

// update corrects tr's filter with box b.
func (t *Tracker) update(tr *track, b geom.Box) {
	mw, mh := t.cfg.MeasureNoise*b.W, t.cfg.MeasureNoise*b.H
	tr.cx.update(b.X+b.W/2, mw*mw)
	tr.cy.update(b.Y+b.H/2, mh*mh)
	tr.cw.update(b.W, mw*mw)
	tr.ch.update(b.H, mh*mh)
}

// predict moves tr's filter dt seconds ahead and sets its box to the prediction.
func (t *Tracker) predict(tr *track, dt float64) {
	// Motion in the image does not care for the box's shape: one scale for both axes.
	q := sq(t.cfg.AccelNoise) * max(tr.cw.p, 1) * max(tr.ch.p, 1)
	qw, qh := q, q
	tr.cx.predict(dt, qw)
	tr.cy.predict(dt, qh)
	tr.cw.predict(dt, qw)
	tr.ch.predict(dt, qh)
	tr.Box = tr.predicted()
	tr.pred = tr.Box
	tr.VX, tr.VY = tr.cx.v, tr.cy.v
}

// predicted returns the filter's box, at least one pixel wide and high.
func (tr *track) predicted() geom.Box {
	w, h := max(tr.cw.p, 1), max(tr.ch.p, 1)
	return geom.Box{X: tr.cx.p - w/2, Y: tr.cy.p - h/2, W: w, H: h}
}

func (t *Tracker) rescale(sx, sy float64) {
	for _, tr := range t.tracks {
		tr.cx.scale(sx)
		tr.cw.scale(sx)
		tr.cy.scale(sy)
		tr.ch.scale(sy)
		tr.Box = tr.predicted()
		tr.BestBox = scaleBox(tr.BestBox, sx, sy)
		tr.seen = scaleBox(tr.seen, sx, sy)
		for k := range tr.sizes {
			tr.sizes[k].w *= sx
			tr.sizes[k].h *= sy
		}
	}
}

func scaleBox(b geom.Box, sx, sy float64) geom.Box {
	return geom.Box{X: b.X * sx, Y: b.Y * sy, W: b.W * sx, H: b.H * sy}
}

// outside says whether b's centre lies outside the frame. Detections are clipped to the
// frame, so a track's box leaves it only by prediction: such a track's object has gone
// (or is about to), and kept, it would take the detection of the next object to come in
// where it left.
func (t *Tracker) outside(b geom.Box) bool {
	cx, cy := b.X+b.W/2, b.Y+b.H/2
	return cx < 0 || cy < 0 || cx > float64(t.w) || cy > float64(t.h)
}

func sq(f float64) float64 { return f * f }

// measured returns the box the filter and the size checks take from detection i of the
// frame, of box b: b itself, or, where b is much narrower (or lower) than the track's size,
// another detection's box covers the side b lacks and b's other edge is where the
// prediction's is, a box of the track's size from that edge. That is an object partly hidden behind
// another: the edge on the other's side is the other's, and following it would shrink the
// track and stop it (the centre of what is left of it stands still while the other comes
// over it), to lose it behind the other for good (TestWalkThrough).
func (t *Tracker) measured(tr *track, i int, b geom.Box) geom.Box {
	w, h := tr.size()
	p := tr.Box // the prediction
	if w > 0 && b.W*maxSizeRatio < w && (h == 0 || !ratioOver(b.H, h, maxSizeRatio)) {
		switch t.hidden(i, b, true, w) {
		case -1: // the low side hidden: the high edge is the object's
			if near(b.X+b.W, p.X+p.W, w) {
				b.X, b.W = b.X+b.W-w, w
			}
		case 1:
			if near(b.X, p.X, w) {
				b.W = w
			}
		}
	}
	if h > 0 && b.H*maxSizeRatio < h && (w == 0 || !ratioOver(b.W, w, maxSizeRatio)) {
		switch t.hidden(i, b, false, h) {
		case -1:
			if near(b.Y+b.H, p.Y+p.H, h) {
				b.Y, b.H = b.Y+b.H-h, h
			}
		case 1:
			if near(b.Y, p.Y, h) {
				b.H = h
			}
		}
	}
	return b
}

// hidden says which side of box b, of detection i, is hidden (as covered says): by another
// detection's box, or else by the frame's edge, which hides an object going out as another
// object in front would. An object half out of the frame is then measured with its centre
// outside it, and its track ends in the next frame (outside) instead of shrinking with the
// part left in view until it takes the box of the next object to come in there (at 5 and
// 10 fps, where an object goes out over several frames).
func (t *Tracker) hidden(i int, b geom.Box, across bool, size float64) int {
	if s := t.covered(i, b, across, size); s != 0 {
		return s
	}
	lo, hi, end := b.X, b.X+b.W, float64(t.w)
	if !across {
		lo, hi, end = b.Y, b.Y+b.H, float64(t.h)
	}
	eps := 2 + 0.1*(hi-lo) // as uncut's
	switch {
	case lo < eps && hi > end-eps:
		return 0
	case lo < eps:
		return -1
	case hi > end-eps:
		return 1
	}
	return 0
}

// near says whether two edges of boxes of size size are within their noise of each other:
// that of the part of an object left in view and of its prediction, say.
func near(a, b, size float64) bool { return math.Abs(a-b) <= 2+0.25*size }

// covered says which side of box b, of detection i, another detection's box covers or
// touches (within the noise of boxes of size pixels): along x (across, false: along y), -1
// the lower side, +1 the upper side, 0 neither or both. The other must span most of b the
// other way, and at least half of what b lacks of size this way.
func (t *Tracker) covered(i int, b geom.Box, across bool, size float64) int {
	lo, hi, s0, s1 := b.X, b.X+b.W, b.Y, b.Y+b.H
	if !across {
		lo, hi, s0, s1 = b.Y, b.Y+b.H, b.X, b.X+b.W
	}
	eps := 2 + 0.15*size // the boxes' noise
	side := 0
	for j, d := range t.dets {
		o := d.Box
		olo, ohi, os0, os1 := o.X, o.X+o.W, o.Y, o.Y+o.H
		if !across {
			olo, ohi, os0, os1 = o.Y, o.Y+o.H, o.X, o.X+o.W
		}
		if j == i || o.W <= 0 || o.H <= 0 || float64(d.Score) < t.cfg.LowScore || min(s1, os1)-max(s0, os0) < 0.5*(s1-s0) {
			continue
		}
		half := (size - (hi - lo)) / 2 // of what b lacks, which the other must cover
		var s int
		switch {
		case olo < lo+eps && ohi > lo-eps && ohi < hi && olo <= lo-half:
			s = -1
		case ohi > hi-eps && olo < hi+eps && olo > lo && ohi >= hi+half:
			s = 1
		default:
			continue
		}
		if side != 0 && side != s {
			return 0
		}
		side = s
	}
	return side
}

// uncut returns b's width and height, each 0 where the frame's edge may have cut it: the
// box is within a tenth of its size (and 2 pixels) of it, a detector's boxes being that
// loose.
func (t *Tracker) uncut(b geom.Box) (w, h float64) {
	w, h = b.W, b.H
	if mx := 2 + 0.1*b.W; b.X < mx || b.X+b.W > float64(t.w)-mx {
		w = 0
	}
	if my := 2 + 0.1*b.H; b.Y < my || b.Y+b.H > float64(t.h)-my {
		h = 0
	}
	return w, h
}

// size returns the medians of the widths and of the heights of tr's latest detections
// that the frame's edge did not cut, 0 when none.
func (tr *track) size() (w, h float64) {
	var ws, hs [sizeRing]float64
	nw, nh := 0, 0
	for i := range min(tr.Hits, sizeRing) {
		if v := tr.sizes[i].w; v > 0 {
			ws[nw] = v
			nw++
		}
		if v := tr.sizes[i].h; v > 0 {
			hs[nh] = v
			nh++
		}
	}
	return median(ws[:nw]), median(hs[:nh])
}

// median returns the median of v (the upper one of an even count), sorting it; 0 if empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// ratioOver says whether a and b differ by more than a factor r.
func ratioOver(a, b, r float64) bool { return a > r*b || b > r*a }
