package capture

import (
	"fmt"
	"testing"
	"time"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/internal/testutil"
)

// benchPipeline is a cheap synthetic source (a solid colour made in BGR, no conversion), as
// fast as GStreamer makes it, so that the read's own cost shows.
func benchPipeline(w, h int) string {
	return fmt.Sprintf("videotestsrc pattern=solid-color ! video/x-raw,format=BGR,width=%d,height=%d,framerate=1000/1 ! "+
		"appsink max-buffers=1 drop=false", w, h)
}

// BenchmarkFrames reads frames of a synthetic pipeline through a capture process (this test
// binary) and, for comparison, in this process as the daemon used to: the cost of the
// process boundary is the difference per frame (one copy through a pipe). On the 2-core VM
// under a load average of 12 (2026-12-01): 768x576 about 1.0 ms a frame either way;
// 1920x1080 3.2-3.9 ms through the process, 1.0 ms in process, so about 2.5 ms (6 MB through
// the pipe, ~2 GB/s) a 1080p frame, 8% of a core for a 30 fps camera. Scaling down in the
// pipeline (nvvidconv on Jetson) cuts it in proportion.
func BenchmarkFrames(b *testing.B) {
	for _, size := range [][2]int{{768, 576}, {1920, 1080}} {
		w, h := size[0], size[1]
		b.Run(fmt.Sprintf("process/%dx%d", w, h), func(b *testing.B) {
			p, err := Start(Options{Pipeline: benchPipeline(w, h), Logger: testutil.Logger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			buf := make([]byte, w*h*3)
			read := func() {
				for {
					m, err := p.Next()
					if err != nil {
						b.Fatalf("%v (%s)", err, p.Ended(""))
					}
					if m.Type == MsgError {
						b.Fatal(m.Text)
					}
					if m.Type == MsgFrame {
						if err := p.ReadFrame(buf); err != nil {
							b.Fatal(err)
						}
						return
					}
				}
			}
			read() // opened, first frame
			b.SetBytes(int64(len(buf)))
			start := time.Now()
			for b.Loop() {
				read()
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
		})
		b.Run(fmt.Sprintf("inprocess/%dx%d", w, h), func(b *testing.B) {
			vc, err := gocv.OpenVideoCaptureWithAPI(benchPipeline(w, h), gocv.VideoCaptureGstreamer)
			if err != nil || !vc.IsOpened() {
				b.Fatal("pipeline did not open")
			}
			defer vc.Close()
			m := gocv.NewMat()
			defer m.Close()
			vc.Read(&m)
			b.SetBytes(int64(w * h * 3))
			start := time.Now()
			for b.Loop() {
				if !vc.Read(&m) {
					b.Fatal("read failed")
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "frames/s")
		})
	}
}
