package track

import (
	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
)

// lookCost is the appearance term of a pair's overlap cost: lookWeight x its appearance
// distance, or x lookUnknown when there is nothing to compare. With it, two tracks whose
// predictions overlap two detections nearly alike (two people walking side by side, or
// meeting) take the detections they look like, where overlap alone would decide by a few
// pixels of the detector's noise.
func (t *Tracker) lookCost(tr *track, i int) float64 {
	d, ok := t.appearance(tr, i)
	if !ok {
		d = lookUnknown
	}
	return lookWeight * d
}

// byAppearance costs the appearance distance of the detection from the track's looks; a
// pair with nothing to compare is not matched.
func byAppearance(t *Tracker, tr *track, i int) (float64, bool) {
	return t.appearance(tr, i)
}

// Appearance: what a detection must look like to be a track's object.
const (
	// lookRing is how many of a track's latest clean looks a detection is compared with
	// (the nearest counts): a person turning, or in another light, looks a little different.
	lookRing = 6
	// minLooks is how many clean looks a track must have before appearance gates it: a
	// track's first boxes may be cut by the frame's edge or another object.
	minLooks = 2
	// appearanceKeep widens the gate for a confirmed track, followed by overlap with its
	// prediction: only a detection that looks nothing like it (a swap with the object it
	// meets) is refused.
	appearanceKeep = 1.5
	// appearanceFind narrows the gate where appearance alone finds a lost track's object
	// (stage 4b), 0.3: on the synthetic crowd's tuning seeds, the looks of one person
	// 0.5-3 s apart were within 0.336 of each other in 95 pairs of 100 (median 0.166),
	// two people's on one frame as near as 0.275 in 5 (median 0.600); pipeline's
	// TestCrowdDets logs both.
	appearanceFind = 0.6
	// lookWeight weighs a pair's appearance distance against its overlap (1 - IoU) or its
	// distance (a fraction of the gate) in the stages matched by motion (lookCost). On the
	// crowd's tuning seeds, 0.5 to 2 gave the same figures within 0.005 of IDF1; 1 (the
	// one taken) against none: IDF1 0.721 against 0.708 at 2 fps, 0.614 against 0.595 at
	// 1, 0.744 against 0.742 at 5, the crossings no worse.
	lookWeight = 1.0
	// lookUnknown is the distance taken for a pair with nothing to compare: about what
	// one person's looks are from each other (median 0.17, 75% within 0.23 on the tuning
	// seeds), so that a track with no looks yet is neither favoured nor pushed aside.
	lookUnknown = 0.25
)

// appearance returns the appearance distance of detection i from track tr: the least
// distance of its descriptor from the track's latest clean looks; ok false when either has
// none to compare (the gate then lets the pair be).
func (t *Tracker) appearance(tr *track, i int) (dist float64, ok bool) {
	d := t.dets[i].Appearance
	if t.cfg.AppearanceGate < 0 || tr.nlooks < minLooks || d.IsZero() {
		return 0, false
	}
	dist = 1
	for k := range min(tr.nlooks, lookRing) {
		dist = min(dist, appearance.Distance(tr.looks[k], d))
	}
	return dist, true
}

// looksLike says whether detection i looks like track tr's object: its appearance distance
// is at most gate, or there is nothing to compare.
func (t *Tracker) looksLike(tr *track, i int, gate float64) bool {
	d, ok := t.appearance(tr, i)
	return !ok || d <= gate
}

// clean says whether detection i shows one object whole: not cut by the frame's edge, and
// not overlapping another detection (whose pixels would be in its descriptor). Only clean
// looks are kept (track.looks).
func (t *Tracker) clean(i int) bool {
	b := t.dets[i].Box
	if t.dets[i].Appearance.IsZero() || float64(t.dets[i].Score) < t.cfg.HighScore {
		return false
	}
	if w, h := t.uncut(b); w == 0 || h == 0 {
		return false
	}
	for j, o := range t.dets {
		if j != i && float64(o.Score) >= t.cfg.LowScore && overlapOf(b, o.Box) > cleanOverlap {
			return false
		}
	}
	return true
}

// cleanOverlap is the most of a box another detection's may cover for its look to be kept.
const cleanOverlap = 0.1

// overlapOf is the fraction of a's area that b covers.
func overlapOf(a, b geom.Box) float64 {
	if a.W <= 0 || a.H <= 0 {
		return 0
	}
	return intersection(a, b) / (a.W * a.H)
}
