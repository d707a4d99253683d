package track

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
)

// BenchmarkUpdate measures one Update with n objects in view at 5 fps: people and cars
// walking and driving about, detector noise, 10% misses, 10% low scores, a false positive
// every few frames; dressed, each object's detections carry an appearance descriptor (as
// the workers' do), so that the appearance gates and stage 4b run. The frames are made
// before the timer starts. Issue 37's aim: under 0.5 ms a frame with 50 objects.
func BenchmarkUpdate(b *testing.B) {
	for _, c := range []struct {
		n       int
		dressed bool
	}{{50, false}, {50, true}, {200, true}} {
		b.Run(fmt.Sprintf("%d_objects/dressed=%v", c.n, c.dressed), func(b *testing.B) {
			frames := benchFrames(c.n, 500, c.dressed)
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
// large, so the frame is large to keep the density of a busy street. Dressed, each object
// wears two colours of its own and its detections carry descriptors of them (looksOf).
func benchFrames(n, count int, dressed bool) [][]infer.Detection {
	rng := rand.New(rand.NewPCG(3, 4))
	type obj struct {
		x, y, vx, vy, w, h float64
		looks              []appearance.Descriptor
	}
	objs := make([]obj, n)
	lookRNG := rand.New(rand.NewPCG(5, 6))
	for i := range objs {
		objs[i] = obj{x: rng.Float64() * 3700, y: rng.Float64() * 2000, vx: (rng.Float64() - 0.5) * 200, vy: (rng.Float64() - 0.5) * 100, w: 40 + 40*rng.Float64(), h: 100 + 80*rng.Float64()}
		if dressed {
			c := func() [3]uint8 {
				return [3]uint8{uint8(lookRNG.IntN(256)), uint8(lookRNG.IntN(256)), uint8(lookRNG.IntN(256))}
			}
			objs[i].looks = looksOf([2][3]uint8{c(), c()}, 4, lookRNG)
		}
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
			d := infer.Detection{ClassID: i % 2 * 2, Score: s, Box: geom.Box{X: o.x + nz(o.w), Y: o.y + nz(o.h), W: o.w + nz(o.w), H: o.h + nz(o.h)}}
			if o.looks != nil {
				d.Appearance = o.looks[k%len(o.looks)]
			}
			dets = append(dets, d)
		}
		if rng.Float64() < 0.3 {
			dets = append(dets, infer.Detection{Score: 0.65, Box: geom.Box{X: rng.Float64() * 3700, Y: rng.Float64() * 2000, W: 50, H: 120}})
		}
		frames[k] = dets
	}
	return frames
}
