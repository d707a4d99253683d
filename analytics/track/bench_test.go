package track

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// BenchmarkUpdate measures one Update with n objects in view at 5 fps: people and cars
// walking and driving about, detector noise, 10% misses, 10% low scores, a false positive
// every few frames. The frames are made before the timer starts.
func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{50, 200} {
		b.Run(fmt.Sprintf("%d_objects", n), func(b *testing.B) {
			frames := benchFrames(n, 500)
			tr, err := New(Config{}, 1)
			if err != nil {
				b.Fatal(err)
			}
			// Warm up: the tracks exist and are confirmed.
			for k := range 20 {
				if _, err := tr.Update(at(float64(k)*0.2), 3840, 2160, frames[k]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			k := 20
			for b.Loop() {
				if _, err := tr.Update(at(float64(k)*0.2), 3840, 2160, frames[k%len(frames)]); err != nil {
					b.Fatal(err)
				}
				k++
				if k%len(frames) == 0 {
					// Past the recorded frames: start over with fresh tracks.
					b.StopTimer()
					tr.EndAll()
					b.StartTimer()
				}
			}
		})
	}
}

// benchFrames returns frames of n objects wandering in a 3840x2160 frame at 5 fps; n is
// large, so the frame is large to keep the density of a busy street.
func benchFrames(n, count int) [][]infer.Detection {
	rng := rand.New(rand.NewPCG(3, 4))
	type obj struct{ x, y, vx, vy, w, h float64 }
	objs := make([]obj, n)
	for i := range objs {
		objs[i] = obj{x: rng.Float64() * 3700, y: rng.Float64() * 2000, vx: (rng.Float64() - 0.5) * 200, vy: (rng.Float64() - 0.5) * 100, w: 40 + 40*rng.Float64(), h: 100 + 80*rng.Float64()}
	}
	frames := make([][]infer.Detection, count)
	for k := range frames {
		var dets []infer.Detection
		for i := range objs {
			o := &objs[i]
			o.x, o.y = o.x+o.vx*0.2, o.y+o.vy*0.2
			if o.x < 0 || o.x > 3700 {
				o.vx = -o.vx
			}
			if o.y < 0 || o.y > 2000 {
				o.vy = -o.vy
			}
			if rng.Float64() < 0.1 {
				continue
			}
			s := float32(0.6 + 0.3*rng.Float64())
			if rng.Float64() < 0.1 {
				s = 0.3
			}
			nz := func(size float64) float64 { return 0.04 * size * rng.NormFloat64() }
			dets = append(dets, infer.Detection{ClassID: i % 2 * 2, Score: s, Box: geom.Box{X: o.x + nz(o.w), Y: o.y + nz(o.h), W: o.w + nz(o.w), H: o.h + nz(o.h)}})
		}
		if rng.Float64() < 0.3 {
			dets = append(dets, infer.Detection{Score: 0.65, Box: geom.Box{X: rng.Float64() * 3700, Y: rng.Float64() * 2000, W: 50, H: 120}})
		}
		frames[k] = dets
	}
	return frames
}
