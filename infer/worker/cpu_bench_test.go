package worker

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/internal/geom"
)

// BenchmarkDetectCPUOneThread reports the CPU time of one frame through Detect (tensor
// preparation, session run, output decoding and NMS, and the detections' appearance
// descriptors) on a one-thread CPU worker, the unit of config's default CPU worker count
// (config.cpuWorkers), and its wall time; appearance=off leaves the descriptors out, to
// measure what they cost in the same run.
func BenchmarkDetectCPUOneThread(b *testing.B) {
	a := infertest.ThirdParty(b)
	d, err := NewDetector(infer.DetectorOptions{Model: a.Model, Library: a.Library, Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	pix, lb, _, _ := messiFrame(b, a)
	if _, _, err := d.Detect(pix, lb, nil); err != nil { // warm-up
		b.Fatal(err)
	}
	for _, on := range []bool{true, false} {
		b.Run(map[bool]string{true: "appearance=on", false: "appearance=off"}[on], func(b *testing.B) {
			d.noAppearance = !on
			defer func() { d.noAppearance = false }()
			cpu0, t0, n := processCPU(), time.Now(), 0
			var dets []infer.Detection
			var post time.Duration
			for b.Loop() {
				var tm infer.Timings
				if dets, tm, err = d.Detect(pix, lb, dets[:0]); err != nil {
					b.Fatal(err)
				}
				post += tm.Post
				n++
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(n), "ms-cpu/frame")
			b.ReportMetric(float64(time.Since(t0).Microseconds())/1000/float64(n), "ms-wall/frame")
			b.ReportMetric(float64(post.Microseconds())/float64(n), "us-post/frame")
			b.ReportMetric(float64(len(dets)), "detections")
		})
	}
}

// BenchmarkDescribe reports the appearance descriptors' share of a frame (describe, in the
// worker's post stage) for the detections of a crowded frame of vtest.avi, and for 50
// detections, the frame's repeated: per frame and per detection.
func BenchmarkDescribe(b *testing.B) {
	d, _ := newTestDetector(b)
	frames := videoFrames(b, 10, 30, 640)
	lb := geom.NewLetterbox(768, 576, 640, 640)
	var pix []byte
	var most []infer.Detection
	for _, f := range frames {
		dets, _, err := d.Detect(f, lb, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(dets) > len(most) {
			pix, most = f, dets
		}
	}
	fifty := make([]infer.Detection, 50)
	for i := range fifty {
		fifty[i] = most[i%len(most)]
	}
	for _, tc := range []struct {
		name string
		dets []infer.Detection
	}{{fmt.Sprintf("vtest-%d", len(most)), most}, {"50", fifty}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				describe(tc.dets, pix, lb)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N), "us/frame")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1000/float64(b.N*len(tc.dets)), "us/detection")
		})
	}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
