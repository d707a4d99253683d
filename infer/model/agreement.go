package model

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// MatchIoU is the overlap at which a candidate detection matches a reference one in MAP50.
const MatchIoU = 0.5

// MAP50 scores a candidate model's detections against a reference model's, frame by
// frame (ref[i] and cand[i] are the detections of frame i): the reference's detections are
// taken as the ground truth, and the result is their mean average precision at IoU 0.5,
// in [0,1] (1: the candidate finds every reference box and nothing else).
//
// As COCO and Pascal VOC score a detector:
//   - classes are told apart by ClassID; the mean is over the classes the reference
//     detects in at least one frame. A candidate detection of a class the reference never
//     detects is not counted (no class has a reference box to score it against);
//   - per class, the candidate's detections of all frames are taken best score first (ties
//     in frame order); each matches the unmatched reference box of its class and frame it
//     overlaps most, if that overlap (IoU) is at least MatchIoU; otherwise it is a false
//     positive. Every reference box matches at most one detection;
//   - AP is the area under the precision-recall curve interpolated at all points: the
//     precision at recall r is the best precision at any recall >= r.
//
// With no reference detection at all it returns 1 when the candidate has none either, else
// 0. It panics when ref and cand do not hold the same number of frames: that is the
// caller's mistake, not a measurement.
func MAP50(ref, cand [][]infer.Detection) float64 {
	if len(ref) != len(cand) {
		panic(fmt.Sprintf("model.MAP50: %d reference frames, %d candidate frames", len(ref), len(cand)))
	}
	refCount := map[int]int{} // reference boxes per class
	for _, dets := range ref {
		for _, d := range dets {
			refCount[d.ClassID]++
		}
	}
	if len(refCount) == 0 {
		for _, dets := range cand {
			if len(dets) > 0 {
				return 0
			}
		}
		return 1
	}
	classes := make([]int, 0, len(refCount))
	for c := range refCount {
		classes = append(classes, c)
	}
	slices.Sort(classes)
	var sum float64
	for _, c := range classes {
		sum += classAP(ref, cand, c, refCount[c])
	}
	return sum / float64(len(classes))
}

// scored is one candidate detection of a class: its frame and its place there.
type scored struct {
	frame int
	score float32
	box   geom.Box
}

// classAP is the all-point interpolated average precision of class c, which the reference
// detects nRef times over all frames.
func classAP(ref, cand [][]infer.Detection, c, nRef int) float64 {
	var dets []scored
	for f, ds := range cand {
		for _, d := range ds {
			if d.ClassID == c {
				dets = append(dets, scored{frame: f, score: d.Score, box: d.Box})
			}
		}
	}
	slices.SortStableFunc(dets, func(a, b scored) int { return cmp.Compare(b.score, a.score) })

	// matched[f][i]: reference detection i of frame f has been matched.
	matched := make([][]bool, len(ref))
	for f := range ref {
		matched[f] = make([]bool, len(ref[f]))
	}
	// Precision at each rank and the recall it reaches.
	prec := make([]float64, len(dets))
	rec := make([]float64, len(dets))
	tp := 0
	for k, d := range dets {
		best, bestIoU := -1, MatchIoU
		for i, r := range ref[d.frame] {
			if r.ClassID != c || matched[d.frame][i] {
				continue
			}
			if v := boxIoU(d.box, r.Box); v >= bestIoU {
				best, bestIoU = i, v
			}
		}
		if best >= 0 {
			matched[d.frame][best] = true
			tp++
		}
		prec[k] = float64(tp) / float64(k+1)
		rec[k] = float64(tp) / float64(nRef)
	}
	// Precision envelope: at each rank, the best precision at that rank or any later one
	// (later ranks have equal or higher recall).
	for k := len(prec) - 2; k >= 0; k-- {
		prec[k] = max(prec[k], prec[k+1])
	}
	// Area: each rank where recall rises adds the rise times the envelope there.
	var ap, prevRec float64
	for k := range dets {
		if rec[k] > prevRec {
			ap += (rec[k] - prevRec) * prec[k]
			prevRec = rec[k]
		}
	}
	return ap
}

// boxIoU is the intersection over union of two boxes; 0 when either is empty.
func boxIoU(a, b geom.Box) float64 {
	iw := min(a.X+a.W, b.X+b.W) - max(a.X, b.X)
	ih := min(a.Y+a.H, b.Y+b.H) - max(a.Y, b.Y)
	if iw <= 0 || ih <= 0 {
		return 0
	}
	inter := iw * ih
	union := a.W*a.H + b.W*b.H - inter
	if union <= 0 {
		return 0
	}
	return inter / union
}
