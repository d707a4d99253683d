package pipeline

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"gocv.io/x/gocv"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/sources/samplecam"
)

// BenchmarkThroughputVsBareLoop measures detections per second through the whole daemon
// (4 cameras of the 10 fps sample, far more than one CPU worker can take, every event
// counted on NATS) and divides by the rate of a bare in-process loop of Detector.Detect on
// the same model and provider (tensor preparation, session run, decoding and NMS: the
// worker's own work, without the daemon around it). b.N is ignored: each run lasts
// $VISIOND_BENCH_SECONDS (default 20) seconds per side.
func BenchmarkThroughputVsBareLoop(b *testing.B) {
	seconds := 20
	if v := os.Getenv("VISIOND_BENCH_SECONDS"); v != "" {
		fmt.Sscan(v, &seconds)
	}
	window := time.Duration(seconds) * time.Second
	provider := os.Getenv("VISIOND_BENCH_PROVIDER")
	if provider == "" {
		provider = "cpu"
	}
	library := os.Getenv("ONNXRUNTIME_SHARED_LIBRARY_PATH")
	if library == "" {
		library = thirdParty(b, "libonnxruntime.so.1")
	}
	model := thirdParty(b, "yolov8n.onnx")

	// The bare loop, on a frame of the sample video.
	det, err := infer.NewDetector(infer.DetectorOptions{Model: model, Library: library, Provider: provider})
	if err != nil {
		b.Fatal(err)
	}
	img := gocv.IMRead(thirdParty(b, "media/messi5.jpg"), gocv.IMReadColor)
	pix := make([]byte, 640*640*3)
	lb, err := infer.LetterboxImage(img, 640, 640, pix)
	img.Close()
	if err != nil {
		b.Fatal(err)
	}
	dets := make([]infer.Detection, 0, 300)
	if _, _, err := det.Detect(pix, lb, dets); err != nil { // warm-up
		b.Fatal(err)
	}
	start, runs := time.Now(), 0
	for time.Since(start) < window {
		if _, _, err := det.Detect(pix, lb, dets[:0]); err != nil {
			b.Fatal(err)
		}
		runs++
	}
	bare := float64(runs) / time.Since(start).Seconds()
	det.Close()

	// The daemon.
	video := thirdParty(b, "media/vtest.h264.ts")
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": video}}
	if err := rtsp.Start(); err != nil {
		b.Fatal(err)
	}
	defer rtsp.Close()
	var cams strings.Builder
	for i := range 4 {
		fmt.Fprintf(&cams, "  - {id: cam%d, url: %q}\n", i, rtsp.URL("cam"))
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
site: bench
http: {listen: ""}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1, provider: %s}]}
camera_defaults: {fps: 10}
cameras:
%s`, model, library, provider, cams.String())))
	if err != nil {
		b.Fatal(err)
	}
	d := &Daemon{Config: cfg, WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
	if err := d.Start(); err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	nc, err := nats.Connect(d.NATSURL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	events := make(chan *nats.Msg, 1<<16)
	if _, err := nc.ChanSubscribe("visiond.bench.*.detections", events); err != nil {
		b.Fatal(err)
	}
	// Let every camera come online and the worker warm up, then count.
	time.Sleep(3 * time.Second)
	for len(events) > 0 {
		<-events
	}
	start, n := time.Now(), 0
	for deadline := time.After(window); ; {
		select {
		case <-events:
			n++
			continue
		case <-deadline:
		}
		break
	}
	daemon := float64(n) / time.Since(start).Seconds()
	b.ReportMetric(bare, "bare-runs/s")
	b.ReportMetric(daemon, "daemon-events/s")
	b.ReportMetric(daemon/bare, "ratio")
}
