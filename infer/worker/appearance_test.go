package worker

import (
	"math"
	"slices"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
)

// Every detection Detect returns carries a descriptor of its box; none without them.
func TestDetectAppearance(t *testing.T) {
	d, a := newTestDetector(t)
	pix, lb, _, _ := messiFrame(t, a)
	dets, _, err := d.Detect(pix, lb, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(dets) == 0 {
		t.Fatal("no detections")
	}
	for _, det := range dets {
		checkAppearance(t, det)
	}
	d.noAppearance = true
	plain, _, err := d.Detect(pix, lb, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, det := range plain {
		if !det.Appearance.IsZero() {
			t.Errorf("%s: a descriptor with noAppearance", det.Label)
		}
		det.Appearance = dets[i].Appearance
		if det != dets[i] {
			t.Errorf("detection %d without descriptors %+v, with %+v", i, det, dets[i])
		}
	}
}

// checkAppearance fails unless det carries a descriptor: every stripe's bytes are the
// square roots of a histogram (squares summing to about 255^2).
func checkAppearance(t testing.TB, det infer.Detection) {
	t.Helper()
	d := det.Appearance
	for s := range appearance.Stripes {
		var sum int
		for _, v := range d[s*appearance.Bins : (s+1)*appearance.Bins] {
			sum += int(v) * int(v)
		}
		if math.Abs(float64(sum)-255*255) > 255*appearance.Bins {
			t.Errorf("%s at %+v: stripe %d of its descriptor sums to %d, want about %d: %v", det.Label, det.Box, s, sum, 255*255, d)
		}
	}
}

// On vtest.avi's pedestrians, the descriptor tells a person two seconds later from the
// others in that frame. Who is who comes from the boxes: people are followed from frame to
// frame while their box overlaps one box of the next frame, and only that one, by an IoU of
// 0.3 or more; a person whose box is ambiguous on the way is not counted. Each person
// followed for the whole gap is then looked for among every person detected in the later
// frame, by appearance alone.
func TestAppearanceReidentifies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the model on 101 frames")
	}
	d, _ := newTestDetector(t)
	const n, gap = 101, 20 // frames of 10 fps: 2 s between the frames compared
	frames := videoFrames(t, n, 1, 640)
	lb := geom.NewLetterbox(768, 576, 640, 640)
	people := make([][]infer.Detection, n)
	for i, pix := range frames {
		dets, _, err := d.Detect(pix, lb, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, det := range dets {
			if det.Label == "person" && det.Box.H >= 30 {
				checkAppearance(t, det)
				people[i] = append(people[i], det)
			}
		}
	}
	// next[i][k] is the index in frame i+1 of person k of frame i, -1 when ambiguous.
	next := make([][]int, n-1)
	for i := range n - 1 {
		for _, p := range people[i] {
			next[i] = append(next[i], follow(p, people[i], people[i+1]))
		}
	}
	var hits, total int
	var same, other []float64
	for i := 0; i+gap < n; i += 5 {
		for k, p := range people[i] {
			j := k
			for f := i; f < i+gap && j >= 0; f++ {
				j = next[f][j]
			}
			if j < 0 {
				continue
			}
			later := people[i+gap]
			total++
			ds := appearance.Distance(p.Appearance, later[j].Appearance)
			same = append(same, ds)
			best := true
			for m, q := range later {
				if m == j {
					continue
				}
				do := appearance.Distance(p.Appearance, q.Appearance)
				other = append(other, do)
				if do <= ds {
					best = false
				}
			}
			if best {
				hits++
			}
		}
	}
	if total < 20 {
		t.Fatalf("only %d people followed for %d frames: the test needs more", total, gap)
	}
	rate := float64(hits) / float64(total)
	t.Logf("%d of %d people found again by appearance after %d frames (%.0f%%); distance to themselves: median %.3f, p90 %.3f; to the others: p10 %.3f, median %.3f",
		hits, total, gap, 100*rate, quantile(same, 0.5), quantile(same, 0.9), quantile(other, 0.1), quantile(other, 0.5))
	if rate < 0.8 {
		t.Errorf("%d of %d people found again by appearance (%.0f%%), want at least 80%%", hits, total, 100*rate)
	}
	if quantile(same, 0.5) >= quantile(other, 0.1) {
		t.Errorf("median distance to the same person %.3f, not below the 10th percentile to others %.3f", quantile(same, 0.5), quantile(other, 0.1))
	}
}

// follow returns the index in next of the one box that p overlaps by an IoU of 0.3 or more
// and that overlaps no other box of cur as much; -1 when there is none or more than one.
func follow(p infer.Detection, cur, next []infer.Detection) int {
	found := -1
	for j, q := range next {
		if boxIoU(p.Box, q.Box) < 0.3 {
			continue
		}
		if found >= 0 {
			return -1
		}
		found = j
	}
	if found < 0 {
		return -1
	}
	for _, o := range cur {
		if o != p && boxIoU(o.Box, next[found].Box) >= 0.3 {
			return -1
		}
	}
	return found
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(v))
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
