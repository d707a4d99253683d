package groundtruth

import (
	"cmp"
	"slices"

	"github.com/visiond/visiond/internal/geom"
)

// Tracked is a box that a tracker reported on a frame, with its track id.
type Tracked struct {
	TrackID uint64
	Class   string // "" matches any class
	Box     geom.Box
}

// Evaluator scores a tracker's output against the truth, frame by frame, CLEAR-MOT style
// (Score) and by identity (IDScore):
// on each frame, truth objects and tracked boxes of the same class overlapping by at least
// MinIoU are matched one to one (a pair matched on the previous frame is kept while it
// still overlaps enough; the rest greedily by IoU). Its zero value is ready; it is not safe
// for concurrent use.
type Evaluator struct {
	// MinIoU is the overlap that matches a tracked box to a truth object. Default 0.5.
	MinIoU float64
	// MinVisible is the visible fraction (Truth.Visible) from which an object that no track
	// matches counts as missed; objects less visible may be matched but are not required.
	// Default 0.5.
	MinVisible float64

	score  Score
	ids    idCounts       // for IDScore
	last   map[int]uint64 // per truth object, the track it was last matched to
	gapped map[int]bool   // per truth object: unmatched since its last match
}

// Score is the tally of an Evaluator.
type Score struct {
	Frames         int // frames added
	Required       int // object-frames that had to be matched (visible >= MinVisible)
	Matched        int // object-frames matched to a track (required or not)
	Missed         int // required object-frames that no track matched
	FalsePositives int // tracked boxes that matched no truth object
	// IDSwitches counts the times a truth object was matched to another track than the one
	// it was last matched to.
	IDSwitches int
	// Fragmentations counts the times a truth object's matching resumed after frames on
	// which it was present and unmatched.
	Fragmentations int
	// Tracks lists, per truth object id, the track ids it was matched to, in order of first
	// match: one per object is perfect.
	Tracks map[int][]uint64
}

// Add scores one frame: the truth on it (Scene.Truth or Frame.Objects) and what the
// tracker reported for it.
func (e *Evaluator) Add(truth []Truth, got []Tracked) {
	minIoU := cmp.Or(e.MinIoU, 0.5)
	minVisible := cmp.Or(e.MinVisible, 0.5)
	if e.last == nil {
		e.last, e.gapped = map[int]uint64{}, map[int]bool{}
		e.score.Tracks = map[int][]uint64{}
	}
	e.score.Frames++
	e.ids.add(truth, got, minIoU, minVisible)
	type pair struct {
		ti, gi int
		iou    float64
		kept   bool // the pair matched on the previous frame
	}
	var pairs []pair
	for ti, tr := range truth {
		for gi, g := range got {
			if g.Class != "" && g.Class != tr.Class {
				continue
			}
			if v := IoU(tr.Box, g.Box); v >= minIoU {
				last, ok := e.last[tr.ID]
				pairs = append(pairs, pair{ti, gi, v, ok && last == g.TrackID})
			}
		}
	}
	slices.SortStableFunc(pairs, func(a, b pair) int {
		if a.kept != b.kept {
			if a.kept {
				return -1
			}
			return 1
		}
		return cmp.Compare(b.iou, a.iou)
	})
	tm := make([]int, len(truth)) // matched tracked index + 1
	gm := make([]bool, len(got))
	for _, p := range pairs {
		if tm[p.ti] == 0 && !gm[p.gi] {
			tm[p.ti], gm[p.gi] = p.gi+1, true
		}
	}
	for ti, tr := range truth {
		if tm[ti] == 0 {
			if tr.Visible >= minVisible {
				e.score.Required++
				e.score.Missed++
			}
			if _, seen := e.last[tr.ID]; seen {
				e.gapped[tr.ID] = true
			}
			continue
		}
		if tr.Visible >= minVisible {
			e.score.Required++
		}
		e.score.Matched++
		id := got[tm[ti]-1].TrackID
		if last, seen := e.last[tr.ID]; seen && last != id {
			e.score.IDSwitches++
		}
		if e.gapped[tr.ID] {
			e.score.Fragmentations++
			e.gapped[tr.ID] = false
		}
		e.last[tr.ID] = id
		if !slices.Contains(e.score.Tracks[tr.ID], id) {
			e.score.Tracks[tr.ID] = append(e.score.Tracks[tr.ID], id)
		}
	}
	for _, m := range gm {
		if !m {
			e.score.FalsePositives++
		}
	}
}

// Score returns the tally so far. Its Tracks map is the Evaluator's: read, do not change.
func (e *Evaluator) Score() Score { return e.score }

// IDScore returns the identity score (IDF1) of the frames added so far, by the same
// matching rule (class, MinIoU; objects less visible than MinVisible neither required nor
// counted against a track that follows them).
func (e *Evaluator) IDScore() IDScore { return e.ids.score() }

// MOTA is CLEAR-MOT's accuracy: 1 - (misses + false positives + identity switches) /
// required object-frames; 1 when nothing was required and nothing found.
func (s Score) MOTA() float64 {
	if s.Required == 0 {
		return 1 - float64(s.FalsePositives+s.IDSwitches)
	}
	return 1 - float64(s.Missed+s.FalsePositives+s.IDSwitches)/float64(s.Required)
}
