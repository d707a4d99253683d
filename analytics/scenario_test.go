package analytics

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// walker is a synthetic object with a known path: its anchor goes in a straight line from
// (x0, y0) to (x1, y1) (normalized) at a constant speed, between start and end; if turn is
// set it walks to (x1, y1) and back to its start instead.
type walker struct {
	id         uint64
	label      string
	x0, y0     float64
	x1, y1     float64
	start, end time.Duration
	turn       bool
	speed      float64 // of the frame's width per second
}

// at returns the walker's true anchor at time d, and whether it is in the scene.
func (w walker) at(d time.Duration) (geom.Point, bool) {
	if d < w.start || d > w.end {
		return geom.Point{}, false
	}
	f := float64(d-w.start) / float64(w.end-w.start)
	if w.turn {
		f = 1 - math.Abs(1-2*f)
	}
	return geom.Point{X: w.x0 + f*(w.x1-w.x0), Y: w.y0 + f*(w.y1-w.y0)}, true
}

// TestScenario runs walkers with known paths through a vertical line and a zone over the
// right half of the frame, at 2, 5 and 10 analysed fps, with box noise (σ 4 px) and 20% of
// detections missed, and checks the exact crossing counts by direction and every zone visit
// and its dwell.
func TestScenario(t *testing.T) {
	for _, fps := range []int{2, 5, 10} {
		t.Run(fmt.Sprintf("%dfps", fps), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(fps), 14))
			var walkers []walker
			walking := 0 // walkers through the line, in or out
			for i := range 60 {
				w := walker{id: uint64(i + 1), label: []string{"person", "car"}[i%2]}
				w.start = time.Duration(i) * 3 * time.Second
				w.y0, w.y1 = 0.2+0.6*rng.Float64(), 0.2+0.6*rng.Float64()
				speed := 0.08 + 0.12*rng.Float64() // of the width per second
				w.speed = speed
				switch i % 3 {
				case 0: // left to right, through the line: in
					w.x0, w.x1 = 0.05, 0.95
					walking++
				case 1: // right to left: out
					w.x0, w.x1 = 0.95, 0.05
					walking++
				case 2: // up to 5 px short of the line and back: nothing
					w.x0, w.x1, w.turn = 0.1, 0.495, true
					w.y1 = w.y0
				}
				dist := math.Abs(w.x1 - w.x0)
				if w.turn {
					dist *= 2
				}
				w.end = w.start + time.Duration(dist/speed*float64(time.Second))
				walkers = append(walkers, w)
			}

			zs, err := NewZoneSet([]Zone{{ID: "right", Polygon: square(0.5, 0, 1, 1)}})
			if err != nil {
				t.Fatal(err)
			}
			ls, err := NewLineSet([]Line{vertical("gate")})
			if err != nil {
				t.Fatal(err)
			}
			period := time.Second / time.Duration(fps)
			last := walkers[len(walkers)-1].end + 2*time.Second
			seen := map[uint64]bool{}
			var in, out int
			crossed := map[uint64]int{}
			// Where each walker was observed, true anchors: beyond the band plus 3σ of noise
			// on the left (-1) and on the right (+1), and beyond the band less 3σ.
			band := DefaultBand * math.Hypot(frameW, frameH)
			sureSides := map[uint64]map[int]bool{}
			maybeSides := map[uint64]map[int]bool{}
			dwell := map[uint64]time.Duration{}
			// What the analytics could see: the first and last observed frames with the true
			// anchor inside, and the first observed outside after being inside; and the
			// observations just before first and just after out, which box noise near the
			// edge may take for inside.
			type seenInside struct{ first, last, out time.Duration }
			observed := map[uint64]*seenInside{}
			lastObs := map[uint64]time.Duration{}
			maxGap := map[uint64]time.Duration{} // the longest gap between its observations
			enters := map[uint64]int{}
			for d := time.Duration(0); d <= last; d += period {
				f := Frame{Time: t0.Add(d), W: frameW, H: frameH}
				for _, w := range walkers {
					p, ok := w.at(d)
					if !ok {
						if seen[w.id] && d-period <= w.end {
							f.Ended = append(f.Ended, w.id)
						}
						continue
					}
					seen[w.id] = true
					if rng.Float64() < 0.2 {
						continue // missed
					}
					if o := observed[w.id]; p.X >= 0.5 {
						if o == nil {
							observed[w.id] = &seenInside{first: d, last: d, out: -1}
						} else if o.out < 0 {
							o.last = d
						}
					} else if o != nil && o.out < 0 {
						o.out = d
					}
					if prev, ok := lastObs[w.id]; ok {
						maxGap[w.id] = max(maxGap[w.id], d-prev)
					}
					lastObs[w.id] = d
					if sureSides[w.id] == nil {
						sureSides[w.id], maybeSides[w.id] = map[int]bool{}, map[int]bool{}
					}
					px := (p.X - 0.5) * frameW
					if math.Abs(px) > band+12 {
						sureSides[w.id][sign(px)] = true
					}
					if math.Abs(px) > band-12 {
						maybeSides[w.id][sign(px)] = true
					}
					b := boxAt(p.X+rng.NormFloat64()*4/frameW, p.Y+rng.NormFloat64()*4/frameH)
					f.Objects = append(f.Objects, Object{TrackID: w.id, Label: w.label, Box: b})
				}
				ze, err := zs.Update(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range ze {
					switch e.Type {
					case ZoneEnter:
						enters[e.TrackID]++
					case ZoneExit:
						dwell[e.TrackID] += e.Dwell
					}
				}
				le, err := ls.Update(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range le {
					w := walkers[e.TrackID-1]
					crossed[e.TrackID]++
					if e.Direction == In {
						in++
						if w.x0 > w.x1 || w.turn {
							t.Errorf("track %d counted in, walking %v -> %v", e.TrackID, w.x0, w.x1)
						}
					} else {
						out++
						if w.x0 < w.x1 || w.turn {
							t.Errorf("track %d counted out, walking %v -> %v", e.TrackID, w.x0, w.x1)
						}
					}
				}
			}
			// A walker seen well beyond the band on both sides is counted once; one never seen
			// near beyond it on one side is not counted (every observation on that side
			// missed); in between, box noise decides.
			sure := 0
			for _, w := range walkers {
				switch {
				case len(sureSides[w.id]) == 2:
					sure++
					if crossed[w.id] != 1 {
						t.Errorf("track %d seen on both sides crossed %d times", w.id, crossed[w.id])
					}
				case len(maybeSides[w.id]) < 2 && crossed[w.id] != 0:
					t.Errorf("track %d not seen on both sides crossed %d times", w.id, crossed[w.id])
				case crossed[w.id] > 1:
					t.Errorf("track %d crossed %d times", w.id, crossed[w.id])
				}
			}
			var worst, worstTrue time.Duration
			for _, w := range walkers {
				o := observed[w.id]
				if o == nil {
					if enters[w.id] != 0 {
						t.Errorf("track %d never seen inside but entered", w.id)
					}
					continue
				}
				// The visit as observed: to the first frame seen outside, or to the last
				// seen inside when the track ended there.
				seen := o.last - o.first
				if o.out >= 0 {
					seen = o.out - o.first
				}
				// Box noise (σ 4 px) can take the observations within 3σ of the edge for the
				// other side: each crossing of the edge may be decided that much plus one gap
				// between observations earlier or later.
				edge := maxGap[w.id] + time.Duration(3*4/(w.speed*frameW)*float64(time.Second))
				tol := edge
				if o.out >= 0 {
					tol += edge
				}
				switch {
				case seen >= time.Second+tol && enters[w.id] != 1:
					t.Errorf("track %d seen inside for %v entered %d times", w.id, seen, enters[w.id])
				case seen < time.Second-tol && enters[w.id] != 0:
					t.Errorf("track %d seen inside for %v entered %d times", w.id, seen, enters[w.id])
				}
				if enters[w.id] == 0 {
					continue
				}
				if e := (dwell[w.id] - seen).Abs(); e > tol {
					t.Errorf("track %d dwell %v, seen inside for %v", w.id, dwell[w.id], seen)
				}
				// Against the true time inside, from crossing x = 0.5 to leaving the scene:
				// the observed visit's error plus the misses, a figure for the log.
				f := math.Abs(0.5-w.x0) / math.Abs(w.x1-w.x0)
				cross := w.start + time.Duration(f*float64(w.end-w.start))
				inside := w.end - cross
				if w.x0 > w.x1 {
					inside = cross - w.start
				}
				worst = max(worst, (dwell[w.id] - seen).Abs())
				worstTrue = max(worstTrue, (dwell[w.id] - inside).Abs())
			}
			for _, w := range walkers {
				if w.turn && enters[w.id] != 0 {
					t.Errorf("track %d never crossed into the zone but entered", w.id)
				}
			}
			t.Logf("%d fps: %d walkers, %d through the line, %d of them seen on both sides, counted %d (in %d, out %d), dwell error at most %v against the visit seen, %v against the true one (20%% misses)",
				fps, len(walkers), walking, sure, in+out, in, out, worst, worstTrue)
		})
	}
}
