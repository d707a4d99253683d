package worker

import (
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/internal/testutil"
)

// cudaLevers are the ways a cuda session can run: ONNX Runtime's own copies of host
// tensors, device I/O, and device I/O with a CUDA graph.
var cudaLevers = []struct {
	name string
	cuda infer.CUDAOptions
}{
	{"host", infer.CUDAOptions{}},
	{"device_io", infer.CUDAOptions{DeviceIO: true}},
	{"graph", infer.CUDAOptions{Graph: true}},
}

// TestDeviceIO runs only where VISIOND_TEST_GPU=1 says a GPU and ONNX Runtime's CUDA
// provider are there: with device I/O and with a CUDA graph, each pair of a Detector run in
// turn, as the worker runs them, finds in messi5.jpg what the host-tensor path finds, at
// the same places, on every run (a graph replayed on the addresses it captured would repeat
// one frame's output if the copies went elsewhere: the test alternates the frame with a
// blank one to see that).
func TestDeviceIO(t *testing.T) {
	if os.Getenv("VISIOND_TEST_GPU") != "1" {
		t.Skip("VISIOND_TEST_GPU=1 not set: no GPU here")
	}
	a := infertest.ThirdParty(t)
	pix, lb, w, h := messiFrame(t, a)
	blank := make([]byte, len(pix))
	var want []infer.Detection
	for _, lv := range cudaLevers {
		t.Run(lv.name, func(t *testing.T) {
			d, err := newWarmDetector(infer.DetectorOptions{Model: a.Model, Library: a.Library, Provider: infer.ProviderCUDA, CUDA: lv.cuda})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if (d.dev != nil) != lv.cuda.DeviceIO && !lv.cuda.Graph {
				t.Fatalf("device I/O %v, want %v", d.dev != nil, lv.cuda.DeviceIO)
			}
			for run := range 6 {
				p := run % pipelineDepth
				frame := pix
				if run%3 == 2 {
					frame = blank
				}
				d.prepare(p, frame)
				if err := d.run(p); err != nil {
					t.Fatal(err)
				}
				dets := d.decodeOutput(p, lb, frame, nil)
				if run%3 == 2 {
					if len(dets) != 0 {
						t.Fatalf("run %d (pair %d) on a blank frame: %d detections, want none", run, p, len(dets))
					}
					continue
				}
				infertest.CheckMessi(t, dets, w, h)
				if want == nil {
					want = dets
					continue
				}
				if !sameDetections(dets, want) {
					t.Fatalf("run %d (pair %d): %v, want the host path's %v", run, p, dets, want)
				}
			}
		})
	}
}

// sameDetections says whether a and b are the same detections, boxes within a pixel.
func sameDetections(a, b []infer.Detection) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.ClassID != y.ClassID || math.Abs(float64(x.Score-y.Score)) > 0.01 ||
			math.Abs(x.Box.X-y.Box.X) > 1 || math.Abs(x.Box.Y-y.Box.Y) > 1 ||
			math.Abs(x.Box.W-y.Box.W) > 1 || math.Abs(x.Box.H-y.Box.H) > 1 {
			return false
		}
	}
	return true
}

// BenchmarkCUDALevers measures bare runs per second of $VISIOND_BENCH_SESSIONS (4) cuda
// sessions in this process, each on a goroutine of its own filling its input from a frame
// and running, for $VISIOND_BENCH_SECONDS (10) per lever: host tensors, device I/O, device
// I/O with a CUDA graph. The model is $VISIOND_BENCH_MODEL (default yolov8n.onnx: an FP16
// or uint8-prelude model measures those levers). It skips unless VISIOND_BENCH_PROVIDER=cuda.
func BenchmarkCUDALevers(b *testing.B) {
	if os.Getenv("VISIOND_BENCH_PROVIDER") != string(infer.ProviderCUDA) {
		b.Skip("VISIOND_BENCH_PROVIDER is not cuda")
	}
	sessions, seconds := 4, 10
	testutil.EnvInts(b, map[string]*int{"VISIOND_BENCH_SESSIONS": &sessions, "VISIOND_BENCH_SECONDS": &seconds})
	a := infertest.ThirdParty(b)
	model := a.Model
	if m := os.Getenv("VISIOND_BENCH_MODEL"); m != "" {
		model = m
	}
	pix, _, _, _ := messiFrame(b, a)
	for _, lv := range cudaLevers {
		b.Run(lv.name, func(b *testing.B) {
			dets := make([]*Detector, sessions)
			for i := range dets {
				d, err := newWarmDetector(infer.DetectorOptions{Model: model, Library: a.Library, Provider: infer.ProviderCUDA, CUDA: lv.cuda})
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				dets[i] = d
			}
			for b.Loop() {
				var wg sync.WaitGroup
				runs := make([]int, sessions)
				errs := make([]error, sessions)
				end := time.Now().Add(time.Duration(seconds) * time.Second)
				t0 := time.Now()
				for i, d := range dets {
					wg.Go(func() {
						for time.Now().Before(end) && errs[i] == nil {
							d.prepare(0, pix)
							errs[i] = d.run(0)
							runs[i]++
						}
					})
				}
				wg.Wait()
				el := time.Since(t0).Seconds()
				total := 0
				for i, n := range runs {
					if errs[i] != nil {
						b.Fatal(errs[i])
					}
					total += n
				}
				b.ReportMetric(float64(total)/el, "runs/s")
				b.ReportMetric(float64(total)/el/float64(sessions), "runs/s/session")
				b.Logf("%s, %d sessions, %s: %.1f runs/s (%.1f a session) over %.1f s", lv.name, sessions, model, float64(total)/el, float64(total)/el/float64(sessions), el)
			}
		})
	}
}
