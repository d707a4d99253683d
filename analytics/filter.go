package analytics

import (
	"fmt"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// Drop says why Filter drops a detection, or that it keeps it.
type Drop int

// Reasons to drop a detection, in the order Filter tests them.
const (
	Keep      Drop = iota // kept
	DropClass             // its class is not tracked
	DropScore             // its score is below its class's min_score
	DropArea              // its box is smaller than min_area or larger than max_area
	DropMask              // its anchor lies in a mask
	numDrops
)

func (d Drop) String() string {
	switch d {
	case Keep:
		return "keep"
	case DropClass:
		return "class"
	case DropScore:
		return "score"
	case DropArea:
		return "area"
	case DropMask:
		return "mask"
	}
	return fmt.Sprintf("Drop(%d)", int(d))
}

// Dropped counts the detections a Filter dropped, by reason (indexed by Drop; Dropped[Keep]
// counts those kept).
type Dropped [numDrops]int

// Filter drops the detections a camera does not want tracked: classes not tracked, scores
// below a class's min_score, boxes outside its min_area..max_area, anchors in a mask. It holds
// no state: on a reload, build a new one. Safe for concurrent use.
type Filter struct {
	track   map[string]bool // nil: every class
	byClass map[string]ClassFilter
	masks   []geom.Polygon
	anchor  Anchor
}

// NewFilter returns the filter of objects and masks. It checks them (not their classes, which
// Config.Check does against the model's labels) and returns a Problems error if they are bad.
func NewFilter(objects Objects, masks []Points) (*Filter, error) {
	var ps problems
	objects.check(&ps)
	checkMasks(&ps, masks)
	if err := ps.err(); err != nil {
		return nil, err
	}
	f := &Filter{
		track:   classSet(objects.Track),
		byClass: make(map[string]ClassFilter, len(objects.Filters)),
		anchor:  anchorOr(objects.Anchor),
	}
	for _, c := range objects.Filters {
		f.byClass[c.Class] = c
	}
	for _, m := range masks {
		f.masks = append(f.masks, toPolygon(m))
	}
	return f, nil
}

// Test says whether a detection of label, score and box (pixels of a w x h frame) is kept,
// or why it is dropped.
func (f *Filter) Test(label string, score float32, box geom.Box, w, h int) Drop {
	if f.track != nil && !f.track[label] {
		return DropClass
	}
	if c, ok := f.byClass[label]; ok {
		if float64(score) < c.MinScore {
			return DropScore
		}
		if c.MinArea > 0 || c.MaxArea > 0 {
			area := box.W * box.H / (float64(w) * float64(h))
			if area < c.MinArea || (c.MaxArea > 0 && area > c.MaxArea) {
				return DropArea
			}
		}
	}
	if len(f.masks) > 0 {
		p := f.anchor.Point(box)
		p = geom.Point{X: p.X / float64(w), Y: p.Y / float64(h)}
		for _, m := range f.masks {
			if m.Contains(p) {
				return DropMask
			}
		}
	}
	return Keep
}

// Apply keeps the detections of a w x h frame that pass Test, in order, moving them to the
// front of dets, and returns them (dets[:n], sharing dets' array) with the counts by reason.
func (f *Filter) Apply(dets []infer.Detection, w, h int) ([]infer.Detection, Dropped) {
	var counts Dropped
	n := 0
	for _, d := range dets {
		r := f.Test(d.Label, d.Score, d.Box, w, h)
		counts[r]++
		if r == Keep {
			dets[n] = d
			n++
		}
	}
	return dets[:n], counts
}
