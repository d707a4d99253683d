package track

import (
	"math"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// distanceMaxLost is the longest a lost track may have gone unmatched and still be
// matched by distance (stage 3).
const distanceMaxLost = time.Second

// predictMaxLost is the longest a lost track may have gone unmatched and still be matched
// by overlap with its prediction (stages 1 and 2); after that it is matched only where it
// was last seen (stage 4). A prediction carried at the last velocity for seconds drifts
// across the frame and takes whoever appears there (a newcomer 3.4 s after a walker
// vanished, in pipeline's TestLostTrackTakesNewcomer).
const predictMaxLost = 3 * time.Second

// costFunc returns the cost of matching track tr with detection d, or ok false when the
// pair is outside the stage's gate.
type costFunc func(t *Tracker, tr *track, i int) (cost float64, ok bool)

// byIoU costs 1 - IoU of a high detection with the predicted box, plus the pair's
// appearance term (lookCost), for an IoU of at least MinIoU; byIoULow the same for a low
// detection, at least MinIoULow. A lost track may not take a detection that a confirmed
// track claims by a larger overlap (claimOf).
func byIoU(t *Tracker, tr *track, i int) (float64, bool) { return t.overlapCost(tr, i, t.cfg.MinIoU) }

func byIoULow(t *Tracker, tr *track, i int) (float64, bool) {
	return t.overlapCost(tr, i, t.cfg.MinIoULow)
}

func (t *Tracker) overlapCost(tr *track, i int, minIoU float64) (float64, bool) {
	v := iou(tr.Box, t.dets[i].Box)
	if v < minIoU || tr.State == Lost && v <= t.claimOf(i) {
		return 0, false
	}
	return 1 - v + t.lookCost(tr, i), true
}

// distanceLimit is the cost limit of a stage matched by distance (byDistance), as
// overlapLimit's.
const distanceLimit = 1 + lookWeight

// overlapLimit is the cost limit of a stage matched by overlap of at least minIoU (byIoU):
// above any pair's cost, so that the gate is the IoU's, and leaving a track and a
// detection unmatched costs as much as a pair of IoU minIoU that looks nothing alike.
func overlapLimit(minIoU float64) float64 { return 1 - minIoU + lookWeight }

// claimOf returns the claim on detection i by the confirmed tracks: the largest IoU of a
// confirmed track's prediction with it among those (of its match key) that overlap it more
// than any other detection, the detection most likely their own; 0 when none. A lost
// track's prediction, carried on at the speed it had, may come over a standing object (one
// it walked behind) and overlap that one's detection nearly as well as its own track does:
// the two would then swap, the standing one's track taking the walker's box as it comes out,
// for an assignment of two pairs where one would do (seen at 10 fps, where frames are
// close and overlaps alike). A confirmed track's prediction is the surer one. Worked out
// when a lost track asks, once a frame (claim, bestOf): lost tracks are few.
func (t *Tracker) claimOf(i int) float64 {
	if c := t.claim[i]; c >= 0 {
		return c
	}
	c, b := 0.0, t.dets[i].Box
	for _, tr := range t.tracks {
		if tr.State != Confirmed || tr.key != t.keys[i] {
			continue
		}
		if v := iou(tr.pred, b); v > c && t.bestOf(tr) == i {
			c = v
		}
	}
	t.claim[i] = c
	return c
}

// bestOf returns the index of the detection that confirmed track tr's prediction overlaps
// most (the first of equals), -1 when none.
func (t *Tracker) bestOf(tr *track) int {
	if tr.bestFrame == t.frame {
		return tr.best
	}
	best, bv := -1, 0.0
	for i, d := range t.dets {
		if t.keys[i] != tr.key || d.Box.W <= 0 || d.Box.H <= 0 || float64(d.Score) < t.cfg.LowScore {
			continue
		}
		if v := iou(tr.pred, d.Box); v > bv {
			best, bv = i, v
		}
	}
	tr.best, tr.bestFrame = best, t.frame
	return best
}

// bySeen costs 1 - IoU of the detection with the box where the track was last seen.
func bySeen(t *Tracker, tr *track, i int) (float64, bool) {
	return 1 - iou(tr.seen, t.dets[i].Box), true
}

// byDistance costs the squared Mahalanobis distance of the detection's centre from the
// predicted centre, as a fraction of DistanceGate (its gate), plus the pair's appearance
// term (lookCost); it gates the size.
func byDistance(t *Tracker, tr *track, i int) (float64, bool) {
	b := t.dets[i].Box
	p := tr.Box
	if b.W > 2*p.W || p.W > 2*b.W || b.H > 2*p.H || p.H > 2*b.H {
		return 0, false
	}
	mw, mh := t.cfg.MeasureNoise*b.W, t.cfg.MeasureNoise*b.H
	yx, sx := tr.cx.innovation(b.X+b.W/2, mw*mw)
	yy, sy := tr.cy.innovation(b.Y+b.H/2, mh*mh)
	m := yx*yx/sx + yy*yy/sy
	if m >= t.cfg.DistanceGate {
		return 0, false
	}
	return m/t.cfg.DistanceGate + t.lookCost(tr, i), true
}

// stage matches the detections of idx not yet taken against the tracks that pick
// accepts and that have not matched yet, at costs below limit.
func (t *Tracker) stage(dets []infer.Detection, idx []int, pick func(*track) bool, cost costFunc, limit float64, at time.Time) {
	t.rows = t.rows[:0]
	for _, tr := range t.tracks {
		if !tr.Matched && pick(tr) && !t.outside(tr.Box) { // gone: see outside
			t.rows = append(t.rows, tr)
		}
	}
	nr, nc := len(t.rows), len(idx)
	if nr == 0 || nc == 0 {
		return
	}
	t.m.reset(nr, nc, limit)
	for r, tr := range t.rows {
		for c, i := range idx {
			if t.taken[i] || t.keys[i] != tr.key {
				continue
			}
			// The cost's gate first: it is cheap, and leaves few pairs for canBe's checks
			// (appearance: a few hundred nanoseconds a pair).
			if v, ok := cost(t, tr, i); ok && v < limit && t.canBe(tr, i, at) {
				t.m.allow(nc, r, c, v)
			}
		}
	}
	t.m.solve(nr, nc, limit, func(r, c int) {
		i := idx[c]
		t.taken[i] = true
		t.hit(t.rows[r], dets[i], at, i, false)
	})
}

// iou is the intersection over union of two boxes.
func iou(a, b geom.Box) float64 {
	inter := intersection(a, b)
	if inter == 0 {
		return 0
	}
	return inter / (a.W*a.H + b.W*b.H - inter)
}

// intersection is the area two boxes share.
func intersection(a, b geom.Box) float64 {
	iw := min(a.X+a.W, b.X+b.W) - max(a.X, b.X)
	ih := min(a.Y+a.H, b.Y+b.H) - max(a.Y, b.Y)
	if iw <= 0 || ih <= 0 {
		return 0
	}
	return iw * ih
}

// Reacquisition: what a lost track asks of a detection before it takes it (every stage).
// Overlap alone is not enough: at a doorway, the next person through appears where the
// previous one was last seen and overlaps that box as well as the previous one would.
const (
	// maxSizeRatio bounds how much a detection's width and height may differ from the
	// track's (the medians of its latest detections), either way, and so its area by the
	// square: the detector's noise (MeasureNoise, 5%) gives a few percent, another object of
	// the class commonly more. A side cut by the frame's edge is not compared.
	maxSizeRatio = 1.25
	// sizeRing is how many of a track's latest detections its size is the median of: one
	// odd box among them changes nothing, and an object that grows as it comes nearer is
	// followed with a lag of two frames.
	sizeRing = 5
	// reachSlack is the distance a detection's centre may be from the prediction however
	// short the loss, in sizes of the track's box (its larger side): noise, and an object
	// that turned in the frame it was missed.
	reachSlack = 0.5
	// minReach is the least speed a lost object is taken to be able to reach, in sizes of
	// its box per second: a track that stood still, or was just started, may walk off.
	minReach = 1.0
)

// reacquires says whether detection d, in the frame at at, can be the object of lost track
// tr: of nearly the size it was seen with, and no further from the prediction than its
// speed (at least minReach) could have taken it either way in the time since it was lost
// (twice the speed by the time: the prediction goes on at the last velocity, and the object
// may have turned back).
func (t *Tracker) reacquires(tr *track, i int, at time.Time) bool {
	p, b := tr.Box, t.measured(tr, i, t.dets[i].Box)
	w, h := tr.size()
	dw, dh := t.uncut(b)
	if w > 0 && dw > 0 && ratioOver(dw, w, maxSizeRatio) || h > 0 && dh > 0 && ratioOver(dh, h, maxSizeRatio) {
		return false
	}
	size := max(p.W, p.H)
	speed := max(math.Hypot(tr.cx.v, tr.cy.v), minReach*size)
	reach := reachSlack*size + 2*speed*at.Sub(tr.LastSeen).Seconds()
	dx, dy := b.X+b.W/2-(p.X+p.W/2), b.Y+b.H/2-(p.Y+p.H/2)
	return dx*dx+dy*dy <= reach*reach
}

// canBe says whether detection i, in the frame at at, can be track tr's object at all: a
// lost track's must be of its size and within its reach (reacquires), a confirmed track's
// low one no merged box (outgrows).
func (t *Tracker) canBe(tr *track, i int, at time.Time) bool {
	switch tr.State {
	case Lost:
		return t.reacquires(tr, i, at) && t.looksLike(tr, i, t.cfg.AppearanceGate)
	case Confirmed:
		return (float64(t.dets[i].Score) >= t.cfg.HighScore || !t.outgrows(tr, i)) && t.looksLike(tr, i, t.cfg.AppearanceGate*appearanceKeep)
	}
	return true
}

// maxGrowth bounds how much larger than a confirmed track's size (the medians of its latest
// boxes) a detection it takes may be, in width or in height (a side cut by the frame's edge
// not compared): a box much taller or wider than the track's is not the object grown in a
// frame but two objects seen as one (a person at the frame's edge merged with the one
// behind would take the first one's track over to the second). An object
// coming nearer grows by a few percent a frame; one coming in over the frame's edge has that
// side cut.
const maxGrowth = 2

// outgrows says whether detection i is too large to be confirmed track tr's object. Only
// low detections are asked (stage 2): a merged box is commonly one, and a high detection
// that has grown is more often the object come nearer between two frames far apart (at
// 0.5 fps, gating high ones too lost crossings of people walking towards the camera).
func (t *Tracker) outgrows(tr *track, i int) bool {
	w, h := tr.size()
	dw, dh := t.uncut(t.dets[i].Box)
	return w > 0 && dw > maxGrowth*w || h > 0 && dh > maxGrowth*h
}

// associate matches the frame's detections (t.dets) with the tracks, stage by stage (the
// package's doc says which and why), and starts tentative tracks at the high ones left.
func (t *Tracker) associate(at time.Time) {
	dets := t.dets
	t.high, t.low = t.high[:0], t.low[:0]
	for i, d := range dets {
		s := float64(d.Score)
		switch {
		case d.Box.W <= 0 || d.Box.H <= 0 || s < t.cfg.LowScore:
		case s >= t.cfg.HighScore:
			t.high = append(t.high, i)
		default:
			t.low = append(t.low, i)
		}
	}

	isActive := func(tr *track) bool {
		return tr.State == Confirmed || tr.State == Lost && at.Sub(tr.LastSeen) <= t.times.predictMaxLost
	}
	isTentative := func(tr *track) bool { return tr.State == Tentative }
	gate := t.cfg.DistanceGate
	t.frame++
	t.claim = grow(t.claim, len(dets))
	for i := range t.claim {
		t.claim[i] = -1 // not worked out yet (claimOf)
	}
	// 1. high against confirmed and lost, by overlap.
	t.stage(dets, t.high, isActive, byIoU, overlapLimit(t.cfg.MinIoU), at)
	// 2. low against confirmed and lost left, by overlap.
	t.stage(dets, t.low, isActive, byIoULow, overlapLimit(t.cfg.MinIoULow), at)
	if gate > 0 {
		// 3. high left against confirmed and recently lost left, by distance.
		t.stage(dets, t.high, func(tr *track) bool {
			return tr.State == Confirmed || tr.State == Lost && at.Sub(tr.LastSeen) <= t.times.distanceMaxLost
		}, byDistance, distanceLimit, at)
	}
	// 4. high and low left against lost, by overlap with where they were last seen.
	isLost := func(tr *track) bool { return tr.State == Lost }
	t.stage(dets, t.high, isLost, bySeen, 1-t.cfg.MinIoU, at)
	t.stage(dets, t.low, isLost, bySeen, 1-t.cfg.MinIoULow, at)
	if t.cfg.AppearanceGate > 0 {
		// 4b. high left against lost, by appearance, within their reach.
		t.stage(dets, t.high, isLost, byAppearance, t.cfg.AppearanceGate*appearanceFind, at)
	}
	// 5. high left against tentative, by overlap then distance.
	t.stage(dets, t.high, isTentative, byIoU, overlapLimit(t.cfg.MinIoU), at)
	if gate > 0 {
		t.stage(dets, t.high, isTentative, byDistance, distanceLimit, at)
	}
	// 6. new tentative tracks.
	for _, i := range t.high {
		if !t.taken[i] && float64(dets[i].Score) >= t.cfg.NewScore {
			t.start(dets[i], at, i)
		}
	}
}
