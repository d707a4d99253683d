package groundtruth

import (
	"cmp"
	"math"
	"slices"

	"github.com/visiond/visiond/internal/assign"
	"github.com/visiond/visiond/internal/geom"
)

// Tracked is a box that a tracker reported on a frame, with its track id.
type Tracked struct {
	TrackID uint64
	Class   string // "" matches any class
	Box     geom.Box
}

// Evaluator scores a tracker's output against the truth as TrackEval does (Luiten et al.;
// github.com/JonathonLuiten/TrackEval, trackeval/metrics/{clear,identity,hota}.py and the
// distractor rule of trackeval/datasets/mot_challenge_2d_box.py): Add the frames of a run,
// then read CLEAR (MOTA, MOTP, switches, fragmentations, mostly tracked), Identity (IDF1,
// IDP, IDR) and HOTA (DetA, AssA, ...). Its zero value is ready; it is not safe for
// concurrent use.
//
// The similarity of a truth object and a tracked box is their IoU, 0 when their classes
// differ (a tracked box of class "" matches any), so several classes are scored at once as
// TrackEval's combination over classes weighted by detections would.
//
// The truth on a frame is every object that shows (Visible > 0, as MOTChallenge keeps an
// object while any part of it is visible), or with MinVisible set, every object that shows
// at least that much. The rest, and the Ignore boxes, are distractors, as TrackEval treats
// MOTChallenge's distractor classes: on each frame the tracked boxes are matched one to one
// to all of them and the truth (Hungarian method, IoU >= 0.5), and a box matched to a
// distractor is removed with it; it is then neither a match nor a false positive.
type Evaluator struct {
	// MinIoU is the IoU from which a tracked box matches a truth object in CLEAR and
	// Identity (TrackEval's THRESHOLD). Default 0.5. HOTA scores every threshold.
	MinIoU float64
	// MinVisible is the visible fraction (Truth.Visible) from which an object is in the
	// truth. Default 0: any part showing. 0.5 is the "at least half visible" variant.
	MinVisible float64
	// Ignore are boxes of things on the video that are not in its truth (the parked
	// vehicles of vtest.avi: VTestParked), distractors on every frame.
	Ignore []geom.Box

	frames []evalFrame
	gtIDs  map[int]int    // truth object id -> dense index
	trIDs  map[uint64]int // track id -> dense index
	gtOf   []int          // dense index -> truth object id
	trOf   []uint64       // dense index -> track id
}

// evalFrame is one frame after the distractors are removed: the dense ids of the truth
// objects and the tracked boxes on it, and their similarities (row-major, truth by track).
type evalFrame struct {
	gt, tr []int
	sim    []float64
}

func (f *evalFrame) at(i, j int) float64 { return f.sim[i*len(f.tr)+j] }

// npEps is numpy's float64 epsilon, which TrackEval's comparisons allow for.
const npEps = 2.220446049250313e-16

// similarity is IoU when the classes agree.
func similarity(tr Truth, g Tracked) float64 {
	if g.Class != "" && g.Class != tr.Class {
		return 0
	}
	return IoU(tr.Box, g.Box)
}

// Add scores one frame: the truth on it (Scene.Truth or Frame.Objects) and what the tracker
// reported for it.
func (e *Evaluator) Add(truth []Truth, got []Tracked) {
	if e.gtIDs == nil {
		e.gtIDs, e.trIDs = map[int]int{}, map[uint64]int{}
	}
	keep := slices.Repeat([]bool{true}, len(got))
	var gt []Truth
	var distractors []Truth // the truth's and the Ignore boxes, class "" (matching any box)
	for _, tr := range truth {
		if tr.Visible > 0 && tr.Visible >= e.MinVisible {
			gt = append(gt, tr)
		} else {
			distractors = append(distractors, tr)
		}
	}
	for _, b := range e.Ignore {
		distractors = append(distractors, Truth{ID: -1, Box: b})
	}
	if len(distractors) > 0 && len(got) > 0 {
		all := append(slices.Clone(gt), distractors...)
		w := make([][]float64, len(all))
		for i, tr := range all {
			w[i] = make([]float64, len(got))
			for j, g := range got {
				if tr.ID == -1 { // an Ignore box: any class
					g.Class = ""
				}
				if v := similarity(tr, g); v >= 0.5-npEps {
					w[i][j] = v
				}
			}
		}
		for i, j := range maxAssignment(w) {
			if j >= 0 && w[i][j] > npEps && i >= len(gt) {
				keep[j] = false
			}
		}
	}
	f := evalFrame{}
	for _, tr := range gt {
		f.gt = append(f.gt, e.gtIndex(tr.ID))
	}
	var kept []Tracked
	for j, g := range got {
		if keep[j] {
			kept = append(kept, g)
			f.tr = append(f.tr, e.trIndex(g.TrackID))
		}
	}
	f.sim = make([]float64, len(gt)*len(kept))
	for i, tr := range gt {
		for j, g := range kept {
			f.sim[i*len(kept)+j] = similarity(tr, g)
		}
	}
	e.frames = append(e.frames, f)
}

func (e *Evaluator) gtIndex(id int) int    { return dense(e.gtIDs, &e.gtOf, id) }
func (e *Evaluator) trIndex(id uint64) int { return dense(e.trIDs, &e.trOf, id) }

// dense returns id's dense index in index, giving it the next one (and of its place in
// ids) the first time.
func dense[K comparable](index map[K]int, ids *[]K, id K) int {
	i, ok := index[id]
	if !ok {
		i = len(*ids)
		index[id] = i
		*ids = append(*ids, id)
	}
	return i
}

// Frames is the number of frames added.
func (e *Evaluator) Frames() int { return len(e.frames) }

// CLEAR is the CLEAR MOT tally (Bernardin and Stiefelhagen, 2008) as TrackEval computes it.
// On each frame the truth and the tracked boxes are matched one to one by the Hungarian
// method, over pairs with IoU >= MinIoU, a pair that was matched on the previous frame
// first (so a track that keeps its object is not switched by a better overlap), then the
// most overlap; a truth object matched to another track than the one it was last matched
// to, on any earlier frame, is an identity switch.
type CLEAR struct {
	Frames  int
	TP      int // matched object-frames (CLR_TP)
	FN      int // truth object-frames not matched (CLR_FN)
	FP      int // tracked boxes not matched (CLR_FP)
	IDSW    int // identity switches
	Objects int // truth objects on some frame
	// MT, PT and ML are the objects tracked on more than 80% of their frames, on 20% or
	// more (the rest), and on less than 20%.
	MT, PT, ML int
	// Frag is the number of times an object's tracking resumed after a frame on which it
	// was present and not tracked (TrackEval's Frag: each object's tracked stretches less one).
	Frag int
	// MOTA = (TP - FP - IDSW) / (TP + FN); MODA the same without IDSW; MOTP the mean IoU
	// of the matches; Recall = TP / (TP + FN), Precision = TP / (TP + FP).
	MOTA, MODA, MOTP, Recall, Precision float64
	// Tracks lists, per truth object id, the track ids it was matched to, in order of first
	// match: one per object is perfect.
	Tracks map[int][]uint64
}

// CLEAR returns the CLEAR figures of the frames added.
func (e *Evaluator) CLEAR() CLEAR {
	minIoU := cmp.Or(e.MinIoU, 0.5)
	c := CLEAR{Frames: len(e.frames), Tracks: map[int][]uint64{}}
	n := len(e.gtOf)
	gtCount := make([]int, n)
	matchedCount := make([]int, n)
	fragCount := make([]int, n)
	prev := slices.Repeat([]int{-1}, n)     // per object, the track it was last matched to (switches)
	prevStep := slices.Repeat([]int{-1}, n) // per object, its track on the previous frame scored
	var motpSum float64
	for _, f := range e.frames {
		if len(f.gt) == 0 {
			c.FP += len(f.tr)
			continue
		}
		if len(f.tr) == 0 {
			c.FN += len(f.gt)
			for _, g := range f.gt {
				gtCount[g]++
			}
			continue // as TrackEval: the previous frame's matches carry over this one
		}
		w := make([][]float64, len(f.gt))
		for i, g := range f.gt {
			w[i] = make([]float64, len(f.tr))
			for j, tr := range f.tr {
				s := f.at(i, j)
				if s < minIoU-npEps {
					continue
				}
				if prevStep[g] == tr {
					s += 1000
				}
				w[i][j] = s
			}
		}
		rows := maxAssignment(w)
		for _, g := range f.gt {
			gtCount[g]++
		}
		wasTracked := make([]bool, n)
		for g := range n {
			wasTracked[g] = prevStep[g] >= 0
			prevStep[g] = -1
		}
		matches := 0
		for i, j := range rows {
			if j < 0 || w[i][j] <= npEps {
				continue
			}
			g, tr := f.gt[i], f.tr[j]
			if prev[g] >= 0 && prev[g] != tr {
				c.IDSW++
			}
			matchedCount[g]++
			prev[g], prevStep[g] = tr, tr
			if !wasTracked[g] {
				fragCount[g]++
			}
			matches++
			motpSum += f.at(i, j)
			id := e.gtOf[g]
			if !slices.Contains(c.Tracks[id], e.trOf[tr]) {
				c.Tracks[id] = append(c.Tracks[id], e.trOf[tr])
			}
		}
		c.TP += matches
		c.FN += len(f.gt) - matches
		c.FP += len(f.tr) - matches
	}
	for g := range n {
		if gtCount[g] == 0 {
			continue
		}
		c.Objects++
		switch r := float64(matchedCount[g]) / float64(gtCount[g]); {
		case r > 0.8:
			c.MT++
		case r >= 0.2:
			c.PT++
		default:
			c.ML++
		}
		if fragCount[g] > 0 {
			c.Frag += fragCount[g] - 1
		}
	}
	truth := float64(max(1, c.TP+c.FN))
	c.MOTA = float64(c.TP-c.FP-c.IDSW) / truth
	c.MODA = float64(c.TP-c.FP) / truth
	c.MOTP = motpSum / float64(max(1, c.TP))
	c.Recall = float64(c.TP) / truth
	c.Precision = float64(c.TP) / float64(max(1, c.TP+c.FP))
	return c
}

// IDScore is the identity score of a tracker (Ristani et al., "Performance Measures and a
// Data Set for Multi-Target, Multi-Camera Tracking", 2016), as TrackEval computes it: each
// truth object is given at most one track and each track at most one object, once for the
// whole video, the one-to-one assignment that maximizes the object-frames on which the
// object and its track overlap (IoU >= MinIoU). Those are the identity true positives; the
// rest of the truth's object-frames are identity false negatives, the rest of the tracked
// boxes identity false positives. Unlike CLEAR's switches, a track that follows the wrong
// object for half its life costs half its frames, however few switches it made.
type IDScore struct {
	IDTP, IDFP, IDFN int
	IDP              float64 // IDTP / (IDTP + IDFP): the tracked boxes that carry their object's identity
	IDR              float64 // IDTP / (IDTP + IDFN): the truth's object-frames followed by their object's track
	IDF1             float64 // 2 IDTP / (2 IDTP + IDFP + IDFN)
	// Assigned is the assignment: truth object id to track id, objects given none absent.
	Assigned map[int]uint64
}

// overlaps returns, per pair of dense truth and track index, the frames on which they
// overlap by at least minIoU (all pairs on a frame, not one to one: TrackEval's potential
// matches), and the frames of each object and each track.
func (e *Evaluator) overlaps(minIoU float64) (pairs [][]float64, gtCount, trCount []float64) {
	pairs = make([][]float64, len(e.gtOf))
	for i := range pairs {
		pairs[i] = make([]float64, len(e.trOf))
	}
	gtCount, trCount = make([]float64, len(e.gtOf)), make([]float64, len(e.trOf))
	for _, f := range e.frames {
		for i, g := range f.gt {
			gtCount[g]++
			for j, tr := range f.tr {
				if f.at(i, j) >= minIoU {
					pairs[g][tr]++
				}
			}
		}
		for _, tr := range f.tr {
			trCount[tr]++
		}
	}
	return pairs, gtCount, trCount
}

// Identity returns the identity score (IDF1) of the frames added.
func (e *Evaluator) Identity() IDScore {
	pairs, gtCount, trCount := e.overlaps(cmp.Or(e.MinIoU, 0.5))
	s := IDScore{Assigned: map[int]uint64{}}
	for i, j := range maxAssignment(pairs) {
		if j >= 0 && pairs[i][j] > 0 {
			s.IDTP += int(pairs[i][j])
			s.Assigned[e.gtOf[i]] = e.trOf[j]
		}
	}
	var truth, tracked int
	for _, n := range gtCount {
		truth += int(n)
	}
	for _, n := range trCount {
		tracked += int(n)
	}
	s.IDFN, s.IDFP = truth-s.IDTP, tracked-s.IDTP
	s.IDP = ratio(s.IDTP, s.IDTP+s.IDFP)
	s.IDR = ratio(s.IDTP, s.IDTP+s.IDFN)
	s.IDF1 = ratio(2*s.IDTP, 2*s.IDTP+s.IDFP+s.IDFN)
	return s
}

// handovers is the number of tracks that overlapped more than one object (IoU >= minIoU),
// each on at least minFrames frames.
func (e *Evaluator) handovers(minIoU float64, minFrames int) int {
	pairs, _, _ := e.overlaps(minIoU)
	objs := make([]int, len(e.trOf))
	for _, row := range pairs {
		for tr, n := range row {
			if n >= float64(minFrames) {
				objs[tr]++
			}
		}
	}
	h := 0
	for _, n := range objs {
		if n > 1 {
			h++
		}
	}
	return h
}

// HOTA is the higher order tracking accuracy (Luiten et al., "HOTA: A Higher Order Metric
// for Evaluating Multi-Object Tracking", IJCV 2021) as TrackEval computes it: for each
// localisation threshold alpha of 0.05, 0.10, ..., 0.95, truth and tracked boxes are matched
// on each frame one to one (Hungarian method on IoU weighted by how much the two ids overlap
// over the whole run), pairs with IoU >= alpha count; detection accuracy DetA = TP / (TP + FN
// + FP), association accuracy AssA = the mean over matches of the Jaccard index of their two
// ids' matches, HOTA = sqrt(DetA x AssA). Each figure is the mean over the thresholds.
type HOTA struct {
	HOTA, DetA, AssA float64
	DetRe, DetPr     float64 // detection recall TP / (TP + FN), precision TP / (TP + FP)
	AssRe, AssPr     float64 // association recall and precision
	LocA             float64 // the mean IoU of the matches
	// HOTA0 and LocA0 are HOTA and LocA at the lowest threshold (0.05).
	HOTA0, LocA0 float64
}

// hotaAlphas are TrackEval's thresholds, as numpy's arange(0.05, 0.99, 0.05) makes them.
func hotaAlphas() []float64 {
	a := make([]float64, 19)
	for k := range a {
		a[k] = 0.05 + float64(k)*0.05
	}
	return a
}

// HOTA returns the HOTA figures of the frames added.
func (e *Evaluator) HOTA() HOTA {
	alphas := hotaAlphas()
	nA := len(alphas)
	tp, fn, fp := make([]float64, nA), make([]float64, nA), make([]float64, nA)
	loc := make([]float64, nA)
	ng, nt := len(e.gtOf), len(e.trOf)
	var gtDets, trDets int
	for _, f := range e.frames {
		gtDets += len(f.gt)
		trDets += len(f.tr)
	}
	if trDets == 0 || gtDets == 0 {
		// TrackEval: nothing tracked or nothing to track scores 0, LocA 1.
		return HOTA{LocA: 1, LocA0: 1}
	}
	potential := make([][]float64, ng)
	for i := range potential {
		potential[i] = make([]float64, nt)
	}
	gtCount, trCount := make([]float64, ng), make([]float64, nt)
	for _, f := range e.frames {
		rowSum := make([]float64, len(f.gt))
		colSum := make([]float64, len(f.tr))
		for i := range f.gt {
			for j := range f.tr {
				rowSum[i] += f.at(i, j)
				colSum[j] += f.at(i, j)
			}
		}
		for i, g := range f.gt {
			for j, tr := range f.tr {
				s := f.at(i, j)
				if d := rowSum[i] + colSum[j] - s; d > npEps {
					potential[g][tr] += s / d
				}
			}
			gtCount[g]++
		}
		for _, tr := range f.tr {
			trCount[tr]++
		}
	}
	// The ids' global alignment: the Jaccard index of their (soft) matches.
	align := make([][]float64, ng)
	for g := range align {
		align[g] = make([]float64, nt)
		for tr := range align[g] {
			align[g][tr] = potential[g][tr] / (gtCount[g] + trCount[tr] - potential[g][tr])
		}
	}
	matches := make([][][]float64, nA)
	for a := range matches {
		matches[a] = make([][]float64, ng)
		for g := range matches[a] {
			matches[a][g] = make([]float64, nt)
		}
	}
	for _, f := range e.frames {
		if len(f.gt) == 0 || len(f.tr) == 0 {
			for a := range alphas {
				fp[a] += float64(len(f.tr))
				fn[a] += float64(len(f.gt))
			}
			continue
		}
		w := make([][]float64, len(f.gt))
		for i, g := range f.gt {
			w[i] = make([]float64, len(f.tr))
			for j, tr := range f.tr {
				w[i][j] = align[g][tr] * f.at(i, j)
			}
		}
		rows := maxAssignment(w)
		for a, alpha := range alphas {
			n := 0
			for i, j := range rows {
				if j < 0 || f.at(i, j) < alpha-npEps {
					continue
				}
				n++
				loc[a] += f.at(i, j)
				matches[a][f.gt[i]][f.tr[j]]++
			}
			tp[a] += float64(n)
			fn[a] += float64(len(f.gt) - n)
			fp[a] += float64(len(f.tr) - n)
		}
	}
	var h HOTA
	for a := range alphas {
		var assA, assRe, assPr float64
		for g := range ng {
			for tr := range nt {
				m := matches[a][g][tr]
				if m == 0 {
					continue
				}
				assA += m * m / max(1, gtCount[g]+trCount[tr]-m)
				assRe += m * m / max(1, gtCount[g])
				assPr += m * m / max(1, trCount[tr])
			}
		}
		assA /= max(1, tp[a])
		assRe /= max(1, tp[a])
		assPr /= max(1, tp[a])
		detRe := tp[a] / max(1, tp[a]+fn[a])
		detPr := tp[a] / max(1, tp[a]+fp[a])
		detA := tp[a] / max(1, tp[a]+fn[a]+fp[a])
		locA := max(1e-10, loc[a]) / max(1e-10, tp[a])
		hota := math.Sqrt(detA * assA)
		if a == 0 {
			h.HOTA0, h.LocA0 = hota, locA
		}
		h.HOTA += hota
		h.DetA += detA
		h.AssA += assA
		h.DetRe += detRe
		h.DetPr += detPr
		h.AssRe += assRe
		h.AssPr += assPr
		h.LocA += locA
	}
	k := float64(nA)
	h.HOTA, h.DetA, h.AssA, h.DetRe, h.DetPr, h.AssRe, h.AssPr, h.LocA = h.HOTA/k, h.DetA/k, h.AssA/k, h.DetRe/k, h.DetPr/k, h.AssRe/k, h.AssPr/k, h.LocA/k
	return h
}

// ratio is a/b, and 1 for 0/0: nothing to find, nothing wrongly found.
func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// maxAssignment returns, for each row of the weight matrix w, the column assigned to it
// (-1: none), one to one, maximizing the sum of the assigned weights (assign.Min on the
// costs max(w) - w). A row may be given a column of weight 0: callers check.
func maxAssignment(w [][]float64) []int {
	n := len(w)
	if n == 0 {
		return nil
	}
	m := len(w[0])
	top := 0.0
	for _, row := range w {
		for _, v := range row {
			top = max(top, v)
		}
	}
	cost := make([]float64, 0, n*m)
	for _, row := range w {
		for _, v := range row {
			cost = append(cost, top-v)
		}
	}
	return assign.Min(cost, n, m)
}
