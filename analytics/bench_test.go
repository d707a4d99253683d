package analytics

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// benchScene is a camera with 8 zones (half of them concave), 8 lines, 2 masks and 50 objects
// walking across a 1920x1080 frame at 5 fps.
type benchScene struct {
	zones []Zone
	lines []Line
	masks []Points
	objs  []Object
	vel   []geom.Point
}

func newBenchScene(n int) *benchScene {
	s := &benchScene{masks: []Points{square(0, 0, 1, 0.05), {{0.9, 0.9}, {1, 0.8}, {1, 1}}}}
	for i := range 8 {
		x := 0.1 * float64(i)
		if i%2 == 0 {
			s.zones = append(s.zones, Zone{ID: fmt.Sprintf("z%d", i), Polygon: square(x, 0.2, x+0.25, 0.9), LoiterSeconds: 30})
		} else { // an L shape
			s.zones = append(s.zones, Zone{ID: fmt.Sprintf("z%d", i), Polygon: Points{{x, 0.1}, {x + 0.1, 0.1}, {x + 0.1, 0.6}, {x + 0.3, 0.6}, {x + 0.3, 0.8}, {x, 0.8}}})
		}
		s.lines = append(s.lines, Line{ID: fmt.Sprintf("l%d", i), Points: Points{{0.1 + x, 0.1}, {0.15 + x, 0.95}}})
	}
	rng := rand.New(rand.NewPCG(3, 4))
	labels := []string{"person", "car", "bicycle"}
	for i := range n {
		s.objs = append(s.objs, Object{TrackID: uint64(i + 1), Label: labels[i%3],
			Box: geom.Box{X: rng.Float64() * 1800, Y: rng.Float64() * 900, W: 40 + rng.Float64()*80, H: 80 + rng.Float64()*100}})
		a := rng.Float64() * 2 * math.Pi
		s.vel = append(s.vel, geom.Point{X: 15 * math.Cos(a), Y: 15 * math.Sin(a)})
	}
	return s
}

// step moves every object one frame, bouncing off the frame's edges.
func (s *benchScene) step() {
	for i := range s.objs {
		b := &s.objs[i].Box
		b.X += s.vel[i].X
		b.Y += s.vel[i].Y
		if b.X < 0 || b.X+b.W > 1920 {
			s.vel[i].X = -s.vel[i].X
		}
		if b.Y < 0 || b.Y+b.H > 1080 {
			s.vel[i].Y = -s.vel[i].Y
		}
	}
}

// BenchmarkFrame is the per-frame cost of the analytics of a camera with 50 objects, 8 zones
// and 8 lines: ZoneSet, LineSet and Motion updates.
func BenchmarkFrame(b *testing.B) {
	for _, n := range []int{50, 200} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			sc := newBenchScene(n)
			zs, err := NewZoneSet(sc.zones)
			if err != nil {
				b.Fatal(err)
			}
			ls, err := NewLineSet(sc.lines)
			if err != nil {
				b.Fatal(err)
			}
			m, err := NewMotion(0, 0, "")
			if err != nil {
				b.Fatal(err)
			}
			f := Frame{W: 1920, H: 1080, Objects: sc.objs}
			var events int
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				sc.step()
				f.Time = t0.Add(time.Duration(i) * 200 * time.Millisecond)
				i++
				ze, _ := zs.Update(f)
				le, _ := ls.Update(f)
				me, _ := m.Update(f)
				events += len(ze) + len(le) + len(me)
			}
			b.ReportMetric(float64(events)/float64(i), "events/frame")
		})
	}
}

// BenchmarkFilter is the per-frame cost of filtering 50 detections with per-class thresholds
// and 2 masks.
func BenchmarkFilter(b *testing.B) {
	sc := newBenchScene(50)
	f, err := NewFilter(Objects{Filters: []ClassFilter{{Class: "person", MinScore: 0.3, MinArea: 0.001}, {Class: "car", MaxArea: 0.5}}}, sc.masks)
	if err != nil {
		b.Fatal(err)
	}
	src := make([]infer.Detection, len(sc.objs))
	for i, o := range sc.objs {
		src[i] = infer.Detection{Label: o.Label, Score: float32(i%10) / 10, Box: o.Box}
	}
	dets := make([]infer.Detection, len(src))
	b.ReportAllocs()
	for b.Loop() {
		copy(dets, src)
		f.Apply(dets, 1920, 1080)
	}
}

// BenchmarkSceneStep is the per-frame cost of a camera's whole analytics (Scene.Step: the
// filter, the tracker, zones, lines, motion and the objects' reports) with 50 or 200
// detections of objects walking at 5 fps, 8 zones, 8 lines and 2 masks, and of the live
// listing the API serves (Scene.Live), which the result stage takes after each frame.
func BenchmarkSceneStep(b *testing.B) {
	for _, n := range []int{50, 200} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			bs := newBenchScene(n)
			sc, err := NewScene(Config{Masks: bs.masks, Zones: bs.zones, Lines: bs.lines, FrameInterval: 200 * time.Millisecond}, 1)
			if err != nil {
				b.Fatal(err)
			}
			dets := make([]infer.Detection, n)
			var reports int
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				bs.step()
				for j, o := range bs.objs {
					dets[j] = infer.Detection{Label: o.Label, Score: 0.8, Box: o.Box}
				}
				res, err := sc.Step(t0.Add(time.Duration(i)*200*time.Millisecond), 1920, 1080, dets)
				if err != nil {
					b.Fatal(err)
				}
				reports += len(res.Objects) + len(res.Zones) + len(res.Lines)
				sc.Live()
				i++
			}
			b.ReportMetric(float64(reports)/float64(i), "events/frame")
		})
	}
}
