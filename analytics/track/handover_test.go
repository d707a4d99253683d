package track

import (
	"fmt"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// Issue 22, item 7 (pipeline's crowd at 10 fps): one person walks out over the frame's left
// edge while another, of the same size, walks in there. The box of the one going out shrinks
// to a sliver at the edge and, followed as it is, its track's centre stands at the edge and
// takes the newcomer's box as it grows. The edge hides the one going out as an object in
// front would (Tracker.measured): its track goes out with its centre and ends, and the
// newcomer gets an id of its own. At 5 fps, the newcomer coming in (its box's right edge
// at the frame's) as the first is half out, or 0.3 s before: before the tracker measured the
// edge as hiding, the first of these handed the id over. Not yet at 10 fps: at 6 px a frame
// the first is cut (within a tenth of its width of the edge) for 5 frames before it is half
// out, and a track whose latest 5 boxes were all cut no longer knows its width (size), so
// nothing says its box is cut; keeping the last uncut sizes instead cost TestStreet at
// 10 fps more switches than its bound.
func TestEdgeHandover(t *testing.T) {
	for _, fps := range []float64{5} {
		for _, lag := range []float64{-0.3, 0} { // when the newcomer comes in, from when the first is half out
			t.Run(fmt.Sprintf("%gfps/lag %gs", fps, lag), func(t *testing.T) {
				tr := mustNew(t, Config{FrameInterval: time.Duration(float64(time.Second) / fps)}, 1)
				const w, h, v = 60.0, 150.0, 60.0 // px, px/s
				half := (300 - 0) / v             // the first's centre, from x 300, at the edge
				var first uint64
				firstIDs, newIDs := map[uint64]bool{}, map[uint64]bool{}
				for k := 0; ; k++ {
					sec := float64(k) / fps
					if sec > half+lag+4 {
						break
					}
					var dets []infer.Detection
					// clip: sim_test's, to its frame, mustUpdate's.
					a := clip(geom.Box{X: 300 - v*sec - w/2, Y: 300, W: w, H: h})
					if a.W > 0.25*w { // the detector misses a sliver
						dets = append(dets, infer.Detection{Label: "person", Score: 0.85, Box: a})
					}
					nb := -1
					if in := sec - (half + lag); in >= 0 {
						b := clip(geom.Box{X: -w + v*in, Y: 290, W: w, H: h + 10})
						if b.W > 0.25*w {
							nb = len(dets)
							dets = append(dets, infer.Detection{Label: "person", Score: 0.85, Box: b})
						}
					}
					res := mustUpdate(t, tr, sec, dets...)
					if len(dets) > 0 && nb != 0 && res.IDs[0] != 0 {
						firstIDs[res.IDs[0]] = true
						if first == 0 {
							first = res.IDs[0]
						}
					}
					if nb >= 0 && res.IDs[nb] != 0 {
						newIDs[res.IDs[nb]] = true
					}
				}
				if first == 0 || len(firstIDs) != 1 {
					t.Errorf("the one going out had ids %v, want one", firstIDs)
				}
				if len(newIDs) != 1 || newIDs[first] {
					t.Errorf("the newcomer had ids %v, want one, not the first's %d", newIDs, first)
				}
			})
		}
	}
}
