package track

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
)

// A small simulator of a camera scene and a detector, to measure the tracker against
// ground truth: objects with known paths, seen through a detector that adds noise to
// boxes, misses, scores some detections low, and makes false positives.

const simW, simH = 1280, 720

// object is one ground-truth object. Its centre starts at (x, y) at time enter and moves
// with velocity (vx, vy) px/s, which turns at turn rad/s (0: a straight line). It exists
// from enter to leave (seconds); the detector does not see it during hidden.
type object struct {
	class  int
	w, h   float64
	x, y   float64
	vx, vy float64
	turn   float64
	enter  float64
	leave  float64
	hidden [][2]float64
	// behind is 1 + the index of an object in front of this one (0: none): the detector
	// sees only the larger part of this one's box that the other's does not cover.
	behind int
	// wears, if set, are the colours of its upper and lower half (RGB): its detections
	// carry the appearance descriptor of a noisy picture of them (looksOf), as the worker's
	// would. Unset: no descriptor.
	wears *[2][3]uint8
}

// looksOf returns n descriptors of pictures of an object wearing c (upper and lower half),
// each with its own per-pixel noise of about 12 levels, as frames of one person differ.
func looksOf(c [2][3]uint8, n int, rng *rand.Rand) []appearance.Descriptor {
	const w, h = 24, 60
	img := make([]byte, w*h*3)
	var out []appearance.Descriptor
	for range n {
		for y := range h {
			col := c[0]
			if y >= h/2 {
				col = c[1]
			}
			for x := range w {
				for k := range 3 {
					v := float64(col[k]) + 12*rng.NormFloat64()
					img[(y*w+x)*3+k] = uint8(min(max(v, 0), 255))
				}
			}
		}
		out = append(out, appearance.Compute(img, w, h, geom.Box{W: w, H: h}))
	}
	return out
}

func (o *object) centre(t float64) (float64, float64) {
	tau := t - o.enter
	if o.turn == 0 {
		return o.x + o.vx*tau, o.y + o.vy*tau
	}
	s, c := math.Sincos(o.turn * tau)
	return o.x + (o.vx*s-o.vy*(1-c))/o.turn, o.y + (o.vx*(1-c)+o.vy*s)/o.turn
}

// detector is the simulated detector's behaviour.
type detector struct {
	noise   float64 // standard deviation of box coordinates, fraction of the size
	miss    float64 // probability of missing a visible object
	low     float64 // probability that a detection has a low score (0.2-0.5)
	fpRate  float64 // false positives per frame (Poisson mean)
	skip    float64 // probability that a frame is skipped (not analysed)
	classes []int   // classes of false positives
}

func label(class int) string {
	if class == 2 {
		return "car"
	}
	return "person"
}

// simStats counts what the tracker did against the ground truth.
type simStats struct {
	frames     int
	objects    int // ground-truth objects detected at least once
	followed   int // of those, objects that got a track id at least once
	gtDets     int // detections of ground-truth objects
	gtWithID   int // of those, with a track id
	switches   int // a ground-truth object's id changed from one id to another
	frags      int // an object's id interrupted (detected, no id) then resumed
	fpIDs      int // ids given to false positives' detections (frames)
	tracks     int // ids confirmed
	idsPerObj  map[int]map[uint64]bool
	objsPerID  map[uint64]map[int]bool
	ended      int
	swaps      int // switches to an id that followed another object before
	changed    int // objects whose last id is not their first
	debug      bool
	maxEndLate float64 // longest time from an object's leaving to its track's end, s
}

// add sums o's counts into s.
func (s *simStats) add(o simStats) {
	s.frames += o.frames
	s.objects += o.objects
	s.followed += o.followed
	s.gtDets += o.gtDets
	s.gtWithID += o.gtWithID
	s.switches += o.switches
	s.frags += o.frags
	s.fpIDs += o.fpIDs
	s.tracks += o.tracks
	s.ended += o.ended
	s.swaps += o.swaps
	s.changed += o.changed
}

func (s simStats) switchesPer100() float64 {
	if s.objects == 0 {
		return 0
	}
	return 100 * float64(s.switches) / float64(s.objects)
}

func (s simStats) String() string {
	return fmt.Sprintf("%d frames, %d objects (%d followed), %d tracks; id switches %d (%.1f per 100 objects), fragmentations %d, switches to another object's id %d, objects that left with another id than their first %d; detections with an id %.1f%%; false-positive frames with an id %d",
		s.frames, s.objects, s.followed, s.tracks, s.switches, s.switchesPer100(), s.frags, s.swaps, s.changed,
		100*float64(s.gtWithID)/float64(max(s.gtDets, 1)), s.fpIDs)
}

// simulate runs the tracker over objs for duration seconds at fps analysed frames per
// second, with detector det, random source seed.
func simulate(t testing.TB, cfg Config, objs []object, det detector, fps, duration float64, seed uint64) simStats {
	t.Helper()
	return simulateDebug(t, cfg, objs, det, fps, duration, seed, false)
}

func simulateDebug(t testing.TB, cfg Config, objs []object, det detector, fps, duration float64, seed uint64, debug bool) simStats {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	tr, err := New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := simStats{debug: debug, idsPerObj: map[int]map[uint64]bool{}, objsPerID: map[uint64]map[int]bool{}}
	lastID := map[int]uint64{}
	gap := map[int]bool{} // detected without an id since its last id
	idObj := map[uint64]int{}
	firstID := map[int]uint64{}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var dets []infer.Detection
	var truth []int // ground-truth object of each detection, -1 for a false positive
	looks := make([][]appearance.Descriptor, len(objs))
	lookRNG := rand.New(rand.NewPCG(seed, 0x100c5)) // apart: dressed or not, the same detections
	for oi, o := range objs {
		if o.wears != nil {
			looks[oi] = looksOf(*o.wears, 8, lookRNG)
		}
	}
	for k := 0; float64(k)/fps < duration; k++ {
		if k > 0 && rng.Float64() < det.skip {
			continue
		}
		// Capture times jitter by up to 10% of a frame period.
		ts := float64(k)/fps + (rng.Float64()-0.5)*0.1/fps
		if ts < 0 {
			ts = 0
		}
		dets, truth = dets[:0], truth[:0]
		for oi := range objs {
			o := &objs[oi]
			if ts < o.enter || ts > o.leave {
				continue
			}
			cx, cy := o.centre(ts)
			full := geom.Box{X: cx - o.w/2, Y: cy - o.h/2, W: o.w, H: o.h}
			vis := clip(full)
			if o.behind > 0 {
				f := &objs[o.behind-1]
				if ts >= f.enter && ts <= f.leave {
					fx, fy := f.centre(ts)
					vis = uncovered(vis, clip(geom.Box{X: fx - f.w/2, Y: fy - f.h/2, W: f.w, H: f.h}))
				}
			}
			if vis.W*vis.H < 0.3*o.w*o.h || hiddenAt(o.hidden, ts) || rng.Float64() < det.miss {
				continue
			}
			n := func(size float64) float64 { return rng.NormFloat64() * det.noise * size }
			b := clip(geom.Box{X: vis.X + n(o.w), Y: vis.Y + n(o.h), W: vis.W + n(o.w), H: vis.H + n(o.h)})
			if b.W <= 1 || b.H <= 1 {
				continue
			}
			score := 0.55 + 0.4*rng.Float64()
			if rng.Float64() < det.low {
				score = 0.2 + 0.3*rng.Float64()
			}
			d := infer.Detection{ClassID: o.class, Label: label(o.class), Score: float32(score), Box: b}
			if l := looks[oi]; l != nil {
				d.Appearance = l[lookRNG.IntN(len(l))]
			}
			dets = append(dets, d)
			truth = append(truth, oi)
		}
		dets, truth = nms(dets, truth)
		for range poisson(rng, det.fpRate) {
			c := det.classes[rng.IntN(len(det.classes))]
			w, h := 40+80*rng.Float64(), 60+120*rng.Float64()
			b := clip(geom.Box{X: rng.Float64() * (simW - w), Y: rng.Float64() * (simH - h), W: w, H: h})
			dets = append(dets, infer.Detection{ClassID: c, Label: label(c), Score: float32(0.3 + 0.4*rng.Float64()), Box: b})
			truth = append(truth, -1)
		}
		// The detector's order says nothing of identity.
		rng.Shuffle(len(dets), func(i, j int) {
			dets[i], dets[j] = dets[j], dets[i]
			truth[i], truth[j] = truth[j], truth[i]
		})
		at := t0.Add(time.Duration(ts * float64(time.Second)))
		res, err := tr.Update(at, simW, simH, dets)
		if err != nil {
			t.Fatalf("frame %d: %v", k, err)
		}
		st.frames++
		st.tracks += len(res.New)
		for _, e := range res.Ended {
			st.ended++
			if oi, ok := idObj[e.ID]; ok && ts > objs[oi].leave {
				st.maxEndLate = max(st.maxEndLate, ts-objs[oi].leave)
			}
		}
		for i, id := range res.IDs {
			g := truth[i]
			if g < 0 {
				if id != 0 {
					st.fpIDs++
				}
				continue
			}
			if st.idsPerObj[g] == nil {
				st.idsPerObj[g] = map[uint64]bool{}
				st.objects++
			}
			st.gtDets++
			if id == 0 {
				if lastID[g] != 0 {
					gap[g] = true
					if st.debug {
						for _, tk := range res.Tracks {
							if tk.ID == lastID[g] {
								t.Logf("t=%.1f obj %d: det %+v score %.2f, track %d %v box %+v iou %.2f", ts, g, dets[i].Box, dets[i].Score, tk.ID, tk.State, tk.Box, iou(tk.Box, dets[i].Box))
							}
						}
					}
				}
				continue
			}
			st.gtWithID++
			if len(st.idsPerObj[g]) == 0 {
				st.followed++
				firstID[g] = id
			}
			st.idsPerObj[g][id] = true
			if st.objsPerID[id] == nil {
				st.objsPerID[id] = map[int]bool{}
			}
			st.objsPerID[id][g] = true
			idObj[id] = g
			if prev := lastID[g]; prev != 0 && prev != id {
				st.switches++
				if len(st.objsPerID[id]) > 1 {
					st.swaps++
				}
				if st.debug {
					t.Logf("t=%.1f obj %d: id %d -> %d (objects of %d: %v)", ts, g, prev, id, id, st.objsPerID[id])
				}
			} else if prev == id && gap[g] {
				st.frags++
			}
			lastID[g] = id
			gap[g] = false
		}
	}
	for g, first := range firstID {
		if lastID[g] != first {
			st.changed++
		}
	}
	return st
}

// nms drops a detection that overlaps one of its class with a higher score by IoU over
// 0.45, as the workers do (infer.DefaultIoU): two objects of a class that overlap that
// much are one detection, as with a real detector, where the nearer also hides the other.
func nms(dets []infer.Detection, truth []int) ([]infer.Detection, []int) {
	keep := func(i int) bool {
		for j := range dets {
			if j != i && dets[j].ClassID == dets[i].ClassID && iou(dets[i].Box, dets[j].Box) > infer.DefaultIoU &&
				(dets[j].Score > dets[i].Score || dets[j].Score == dets[i].Score && j < i) {
				return false
			}
		}
		return true
	}
	var outD []infer.Detection
	var outT []int
	for i := range dets {
		if keep(i) {
			outD = append(outD, dets[i])
			outT = append(outT, truth[i])
		}
	}
	return outD, outT
}

// uncovered returns the larger part of b left or right of front, when front covers b's
// height (most of it); else b.
func uncovered(b, front geom.Box) geom.Box {
	top, bottom := max(b.Y, front.Y), min(b.Y+b.H, front.Y+front.H)
	x1, x2 := max(b.X, front.X), min(b.X+b.W, front.X+front.W)
	if bottom-top < 0.8*b.H || x2 <= x1 {
		return b
	}
	left, right := x1-b.X, b.X+b.W-x2
	if left >= right {
		return geom.Box{X: b.X, Y: b.Y, W: left, H: b.H}
	}
	return geom.Box{X: x2, Y: b.Y, W: right, H: b.H}
}

func clip(b geom.Box) geom.Box {
	x1, y1 := math.Max(b.X, 0), math.Max(b.Y, 0)
	x2, y2 := math.Min(b.X+b.W, simW), math.Min(b.Y+b.H, simH)
	return geom.Box{X: x1, Y: y1, W: math.Max(x2-x1, 0), H: math.Max(y2-y1, 0)}
}

func hiddenAt(iv [][2]float64, t float64) bool {
	for _, h := range iv {
		if t >= h[0] && t < h[1] {
			return true
		}
	}
	return false
}

func poisson(rng *rand.Rand, mean float64) int {
	l, k, p := math.Exp(-mean), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// scene returns a busy street for duration seconds: people and cars entering from the
// edges and crossing the frame, some on curving paths, some hidden for a while, and a few
// parked cars; about 8 moving objects at a time.
func scene(rng *rand.Rand, duration float64) []object {
	var objs []object
	for i := range 4 { // parked cars along the bottom
		objs = append(objs, object{class: 2, w: 180, h: 100, x: 150 + float64(i)*300, y: 640, enter: 0, leave: duration})
	}
	for t := 0.0; t < duration-5; t += 0.5 + rng.Float64()*1.5 {
		o := object{enter: t, leave: duration}
		speed := 0.0
		if rng.Float64() < 0.7 {
			o.class, o.w, o.h = 0, 40+30*rng.Float64(), 100+80*rng.Float64()
			speed = 60 + 100*rng.Float64() // walking: 0.5-2 m/s
		} else {
			o.class, o.w, o.h = 2, 140+80*rng.Float64(), 80+40*rng.Float64()
			speed = 150 + 250*rng.Float64()
		}
		// Enter from the left or right edge, at a random height, heading across.
		o.y = 150 + rng.Float64()*400
		o.vx, o.vy = speed, (rng.Float64()-0.5)*0.4*speed
		o.x = -o.w / 3
		if rng.Float64() < 0.5 {
			o.x, o.vx = simW+o.w/3, -o.vx
		}
		if rng.Float64() < 0.3 {
			o.turn = (rng.Float64() - 0.5) * 0.6 // gentle curves, up to 0.3 rad/s
		}
		if rng.Float64() < 0.3 { // hidden behind something for 0.5-2 s
			h0 := t + 1 + rng.Float64()*3
			o.hidden = [][2]float64{{h0, h0 + 0.5 + 1.5*rng.Float64()}}
		}
		// Leaves when it is past the far edge (or at the end).
		for tt := t; tt < duration; tt += 0.1 {
			cx, cy := o.centre(tt)
			if tt > t+1 && (cx < -o.w || cx > simW+o.w || cy < -o.h || cy > simH+o.h) {
				o.leave = tt
				break
			}
		}
		objs = append(objs, o)
	}
	return objs
}

func street() detector {
	return detector{noise: 0.04, miss: 0.1, low: 0.1, fpRate: 0.3, skip: 0.1, classes: []int{0, 2}}
}

// TestStreet follows a busy synthetic street at 2, 5 and 10 analysed fps and bounds the
// identity switches and fragmentations, counted by comparing each ground-truth object's
// track id over time. Its log lines are the figures for BENCHMARKS.md.
func TestStreet(t *testing.T) {
	const duration = 300
	for _, tc := range []struct {
		fps          float64
		maxSwitches  float64 // per 100 objects
		maxFragments float64 // per 100 objects
		minWithID    float64 // fraction of ground-truth detections with an id
	}{
		{2, 18, 5, 0.8},
		{5, 18, 5, 0.9},
		{10, 18, 5, 0.95},
	} {
		t.Run(fmt.Sprintf("%gfps", tc.fps), func(t *testing.T) {
			var all simStats
			for seed := uint64(1); seed <= 3; seed++ {
				objs := scene(rand.New(rand.NewPCG(seed, 7)), duration)
				all.add(simulate(t, Config{}, objs, street(), tc.fps, duration, seed))
			}
			t.Logf("street at %g fps: %v", tc.fps, all)
			if got := all.switchesPer100(); got > tc.maxSwitches {
				t.Errorf("%.1f id switches per 100 objects, want at most %g", got, tc.maxSwitches)
			}
			if got := 100 * float64(all.frags) / float64(all.objects); got > tc.maxFragments {
				t.Errorf("%.1f fragmentations per 100 objects, want at most %g", got, tc.maxFragments)
			}
			if got := float64(all.gtWithID) / float64(all.gtDets); got < tc.minWithID {
				t.Errorf("%.2f of the objects' detections carry an id, want at least %g", got, tc.minWithID)
			}
			if got := 100 * float64(all.swaps) / float64(all.objects); got > 6 {
				t.Errorf("%.1f ids per 100 objects passed from one object to another, want at most 6", got)
			}
			if all.followed < all.objects*9/10 {
				t.Errorf("%d of %d objects were followed, want 90%%", all.followed, all.objects)
			}
		})
	}
}
