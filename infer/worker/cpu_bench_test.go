package worker

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
)

// BenchmarkDetectCPUOneThread reports the CPU time of one frame through Detect (tensor
// preparation, session run, output decoding and NMS) on a one-thread CPU worker, the unit
// of config's default CPU worker count (config.cpuWorkers), and its wall time.
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
	cpu0, t0, n := processCPU(), time.Now(), 0
	for b.Loop() {
		if _, _, err := d.Detect(pix, lb, nil); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(n), "ms-cpu/frame")
	b.ReportMetric(float64(time.Since(t0).Microseconds())/1000/float64(n), "ms-wall/frame")
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
