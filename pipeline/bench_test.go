package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gocv.io/x/gocv"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources/samplecam"
)

// BenchmarkThroughputVsBareLoop measures detections per second through the whole daemon
// (cameras of the 10 fps sample, more than the workers can take, every event counted on
// NATS) and divides by the rate of bare in-process loops of Detector.Detect on the same
// model and provider, one loop (and session) per worker, running together (tensor
// preparation, session run, decoding and NMS: the workers' own work without the daemon
// around it, on the same device). It also reports the
// events' capture-to-publish latency (p50, p99) and each worker's memory at the end.
// b.N is ignored. Environment: VISIOND_BENCH_SECONDS per side (20), VISIOND_BENCH_CAMERAS
// (4), VISIOND_BENCH_WORKERS (1), VISIOND_BENCH_PROVIDER (cpu),
// ONNXRUNTIME_SHARED_LIBRARY_PATH (third_party's).
func BenchmarkThroughputVsBareLoop(b *testing.B) {
	seconds, ncams, nworkers := 20, 4, 1
	for v, p := range map[string]*int{"VISIOND_BENCH_SECONDS": &seconds, "VISIOND_BENCH_CAMERAS": &ncams, "VISIOND_BENCH_WORKERS": &nworkers} {
		if s := os.Getenv(v); s != "" {
			if _, err := fmt.Sscan(s, p); err != nil {
				b.Fatalf("%s=%q: %v", v, s, err)
			}
		}
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

	// The bare loop: one Detector per worker, each in its own goroutine, back to back on one
	// frame (messi5.jpg), for the same window.
	img := gocv.IMRead(thirdParty(b, "media/messi5.jpg"), gocv.IMReadColor)
	pix := make([]byte, 640*640*3)
	lb, err := infer.LetterboxImage(img, 640, 640, pix)
	img.Close()
	if err != nil {
		b.Fatal(err)
	}
	dets := make([]*infer.Detector, nworkers)
	for i := range dets {
		det, err := infer.NewDetector(infer.DetectorOptions{Model: model, Library: library, Provider: provider})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := det.Detect(pix, lb, nil); err != nil { // warm-up
			b.Fatal(err)
		}
		dets[i] = det
	}
	counts := make([]int, nworkers)
	var wg sync.WaitGroup
	start := time.Now()
	for i, det := range dets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]infer.Detection, 0, 300)
			for time.Since(start) < window {
				if _, _, err := det.Detect(pix, lb, out[:0]); err != nil {
					b.Error(err)
					return
				}
				counts[i]++
			}
		}()
	}
	wg.Wait()
	runs := 0
	for _, n := range counts {
		runs += n
	}
	bare := float64(runs) / time.Since(start).Seconds()
	for _, det := range dets {
		det.Close()
	}

	// The daemon.
	video := thirdParty(b, "media/vtest.h264.ts")
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": video}}
	if err := rtsp.Start(); err != nil {
		b.Fatal(err)
	}
	defer rtsp.Close()
	var cams strings.Builder
	for i := range ncams {
		fmt.Fprintf(&cams, "  - {id: cam%d, url: %q}\n", i, rtsp.URL("cam"))
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
site: bench
http: {listen: ""}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: %d, provider: %s}]}
camera_defaults: {fps: 10}
cameras:
%s`, model, library, nworkers, provider, cams.String())))
	if err != nil {
		b.Fatal(err)
	}
	cfg.StateDir = b.TempDir()
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
	start = time.Now()
	var lat []float64
	for deadline := time.After(window); ; {
		select {
		case m := <-events:
			var ev sinks.DetectionEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, ev.LatencyMS.Total)
			continue
		case <-deadline:
		}
		break
	}
	daemon := float64(len(lat)) / time.Since(start).Seconds()
	slices.Sort(lat)
	pct := func(q float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	var rss, gpu float64
	ws := d.Workers()
	for _, w := range ws {
		rss += float64(w.RSSBytes) / (1 << 20) / float64(len(ws))
		gpu += float64(w.GPUBytes) / (1 << 20) / float64(len(ws))
	}
	b.ReportMetric(bare, "bare-runs/s")
	b.ReportMetric(daemon, "daemon-events/s")
	b.ReportMetric(daemon/bare, "ratio")
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(rss, "MiB-rss/worker")
	b.ReportMetric(gpu, "MiB-gpu/worker")
}
