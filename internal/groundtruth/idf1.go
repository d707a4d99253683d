package groundtruth

import (
	"slices"

	"github.com/visiond/visiond/internal/assign"
)

// IDScore is the identity score of a tracker (Ristani et al., "Performance Measures and a
// Data Set for Multi-Target, Multi-Camera Tracking", 2016): each truth object is given at
// most one track and each track at most one object, once for the whole video, the
// one-to-one assignment that maximizes the object-frames on which the object and its
// track overlap (IoU >= MinIoU). Those are the identity true positives; the rest of the
// truth's object-frames are identity false negatives, the rest of the tracked boxes
// identity false positives. Unlike CLEAR-MOT's switches, a track that follows the wrong
// object for half its life costs half its frames, however few switches it made.
type IDScore struct {
	IDTP, IDFP, IDFN int
	IDP              float64 // IDTP / (IDTP + IDFP): the tracked boxes that carry their object's identity
	IDR              float64 // IDTP / (IDTP + IDFN): the truth's object-frames followed by their object's track
	IDF1             float64 // 2 IDTP / (2 IDTP + IDFP + IDFN)
	// Assigned is the assignment: truth object id to track id, objects given none absent.
	Assigned map[int]uint64
}

// idCounts accumulates what IDScore is computed from, frame by frame.
type idCounts struct {
	overlap map[idPair]int // object-frames on which the object and the track overlap
	truth   int            // required object-frames
	tracked int            // tracked boxes counted
}

type idPair struct {
	obj   int
	track uint64
}

// add counts one frame. Required objects (Visible >= minVisible) count as truth; a
// tracked box counts unless it overlaps only objects that are not required (mostly
// hidden or outside the frame: a tracker may follow them, and need not), as Evaluator
// does not count it a false positive either.
func (c *idCounts) add(truth []Truth, got []Tracked, minIoU, minVisible float64) {
	if c.overlap == nil {
		c.overlap = map[idPair]int{}
	}
	for _, tr := range truth {
		if tr.Visible >= minVisible {
			c.truth++
		}
	}
	for _, g := range got {
		required, other := false, false
		for _, tr := range truth {
			if (g.Class != "" && g.Class != tr.Class) || IoU(tr.Box, g.Box) < minIoU {
				continue
			}
			if tr.Visible >= minVisible {
				required = true
				c.overlap[idPair{tr.ID, g.TrackID}]++
			} else {
				other = true
			}
		}
		if required || !other {
			c.tracked++
		}
	}
}

// score solves the assignment and returns the figures.
func (c *idCounts) score() IDScore {
	var objs []int
	var tracks []uint64
	for p := range c.overlap {
		objs, tracks = append(objs, p.obj), append(tracks, p.track)
	}
	slices.Sort(objs)
	objs = slices.Compact(objs)
	slices.Sort(tracks)
	tracks = slices.Compact(tracks)
	w := make([][]float64, len(objs))
	for i, o := range objs {
		w[i] = make([]float64, len(tracks))
		for j, tr := range tracks {
			w[i][j] = float64(c.overlap[idPair{o, tr}])
		}
	}
	s := IDScore{Assigned: map[int]uint64{}}
	for i, j := range maxAssignment(w) {
		if j >= 0 && w[i][j] > 0 {
			s.IDTP += int(w[i][j])
			s.Assigned[objs[i]] = tracks[j]
		}
	}
	s.IDFN, s.IDFP = c.truth-s.IDTP, c.tracked-s.IDTP
	s.IDP = ratio(s.IDTP, s.IDTP+s.IDFP)
	s.IDR = ratio(s.IDTP, s.IDTP+s.IDFN)
	s.IDF1 = ratio(2*s.IDTP, 2*s.IDTP+s.IDFP+s.IDFN)
	return s
}

// ratio is a/b, and 1 for 0/0: nothing to find, nothing wrongly found.
func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

// maxAssignment returns, for each row of the weight matrix w, the column assigned to it
// (-1: none), one to one, maximizing the sum of the assigned weights: assign.Min on the
// costs max(w) - w.
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
