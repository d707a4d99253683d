package pipeline

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"gocv.io/x/gocv"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
	"github.com/visiond/visiond/sources/samplecam"
)

// BenchmarkCameraFPS measures the rate at which one camera configured for 2 fps (the 10 fps
// sample) is analysed by one CPU worker, with the frames left unscaled per turn
// (sources.Camera.NeedFrom): the rate TestUnneededFramesNotScaled leaves to benchmarks, since
// it depends on how fast the machine runs the model. b.N is ignored; VISIOND_BENCH_SECONDS
// (10) is the window, counted from the camera's second analysed frame.
func BenchmarkCameraFPS(b *testing.B) {
	seconds := 10
	if s := os.Getenv("VISIOND_BENCH_SECONDS"); s != "" {
		if _, err := fmt.Sscan(s, &seconds); err != nil {
			b.Fatalf("VISIOND_BENCH_SECONDS=%q: %v", s, err)
		}
	}
	d := startTestDaemon(b, fmt.Sprintf(`
site: bench
http: {listen: ""}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1}]}
camera_defaults: {fps: 2}
cameras:
%s`, testutil.ThirdParty(b, "yolov8n.onnx"), testutil.ThirdParty(b, "libonnxruntime.so.1"), sampleCameras(b, 1)))
	cam := d.camera("cam0")
	testutil.WaitFor(b, time.Minute, "cam0 analysing", func() bool { return cam.status().Analysed >= 2 })
	before, src0, t0 := cam.status(), cam.src.Status(), time.Now()
	time.Sleep(time.Duration(seconds) * time.Second)
	after, src1, secs := cam.status(), cam.src.Status(), time.Since(t0).Seconds()
	analysed := float64(after.Analysed - before.Analysed)
	b.ReportMetric(analysed/secs, "analysed/s")
	if analysed > 0 {
		b.ReportMetric(float64(src1.Unneeded-src0.Unneeded)/analysed, "unscaled/turn")
	}
}

// BenchmarkThroughputVsBareLoop measures detections per second through the whole daemon
// (cameras of the 10 fps sample, more than the workers can take, every event counted on
// NATS) and divides by the rate of bare loops of Detector.Detect on the same model and
// provider, one process per worker with as many Detectors (sessions) as a worker has, each
// in its own goroutine, running together (tensor preparation, session run, decoding and
// NMS: the workers' own work without the daemon around it, on the same device). It also reports the same loops as goroutines of one process. It also reports the
// events' capture-to-publish latency (p50, p99) and each worker's memory at the end.
// b.N is ignored. Environment: VISIOND_BENCH_SECONDS per side (20), VISIOND_BENCH_CAMERAS
// (4), VISIOND_BENCH_WORKERS (1), VISIOND_BENCH_SESSIONS per worker (the provider's
// default, infer.DefaultSessions), VISIOND_BENCH_JETSTREAM (true; false publishes on core
// NATS), VISIOND_BENCH_PROVIDER (cpu), VISIOND_BENCH_DECODER (the cameras' decoder: cpu), VISIOND_BENCH_THREADS (the provider's default),
// ONNXRUNTIME_SHARED_LIBRARY_PATH (third_party's), VISIOND_BENCH_CPUPROFILE (a file for a CPU
// profile of this process over the daemon's counted window).
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
	sessions := infer.DefaultSessions(infer.Provider(provider))
	if v := os.Getenv("VISIOND_BENCH_SESSIONS"); v != "" {
		if _, err := fmt.Sscan(v, &sessions); err != nil || sessions < 1 {
			b.Fatalf("VISIOND_BENCH_SESSIONS=%q: want a number of sessions", v)
		}
	}
	library := testutil.ThirdParty(b, "libonnxruntime.so.1") // or $ONNXRUNTIME_SHARED_LIBRARY_PATH
	model := testutil.ThirdParty(b, "yolov8n.onnx")

	// The daemon's config first: the bare loops take its pool's threads (VISIOND_BENCH_THREADS,
	// else the provider's default).
	video := testutil.Media(b, "vtest.h264.ts")
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": video}}
	if err := rtsp.Start(); err != nil {
		b.Fatal(err)
	}
	defer rtsp.Close()
	var cams strings.Builder
	for i := range ncams {
		fmt.Fprintf(&cams, "  - {id: cam%d, url: %q}\n", i, rtsp.URL("cam"))
	}
	threads := ""
	if s := os.Getenv("VISIOND_BENCH_THREADS"); s != "" {
		threads = ", threads: " + s
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
site: bench
http: {listen: ""}
nats: {listen: "127.0.0.1:0", jetstream: %s}
workers: {model: %q, library: %q, pools: [{count: %d, provider: %s, sessions: %d%s}]}
camera_defaults: {fps: 10, decoder: %s}
cameras:
%s`, cmp.Or(os.Getenv("VISIOND_BENCH_JETSTREAM"), "true"), model, library, nworkers, provider, sessions, threads,
		cmp.Or(os.Getenv("VISIOND_BENCH_DECODER"), "cpu"), cams.String())))
	if err != nil {
		b.Fatal(err)
	}
	spec := bareSpec{Opts: infer.DetectorOptions{Model: model, Library: library, Provider: infer.Provider(provider), Threads: cfg.Workers.Pools[0].Threads},
		Image: testutil.Media(b, "messi5.jpg"), Window: window, Sessions: sessions}
	b.Logf("%d worker(s) of %d session(s), provider %s, %d intra-op thread(s) each (0: ONNX Runtime's default)",
		nworkers, sessions, provider, spec.Opts.Threads)

	// The bare loops: one process per worker, like the workers, each with one Detector per
	// session running back to back on one frame, in goroutines of its own, all started
	// together once all are warm.
	bare, err := bareLoops(nworkers, spec)
	if err != nil {
		b.Fatal(err)
	}
	// The same in one process: one Detector per session of every worker, each in its own
	// goroutine (on a GPU, sessions of one process share one context; those of several
	// processes take turns).
	// In a child process too, so that this one (the daemon's) holds no CUDA context of its
	// own, as visiond's does not: decoder cuda shares the device's primary context.
	one := spec
	one.Sessions = nworkers * sessions
	shared, err := bareLoops(1, one)
	if err != nil {
		b.Fatal(err)
	}

	// The daemon.
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
	stopProfile := func() {}
	if f := os.Getenv("VISIOND_BENCH_CPUPROFILE"); f != "" { // the counted window only
		stop, err := startCPUProfile(f)
		if err != nil {
			b.Fatal(err)
		}
		defer stop()
		stopProfile = stop
	}
	start := time.Now()
	cpu0 := benchCPU(b, d)
	src0 := benchSources(d)
	var lat []float64
	var queue, pre, run, post, rest float64 // sums of the events' latency parts, ms
	for deadline := time.After(window); ; {
		select {
		case m := <-events:
			var ev sinks.DetectionEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, ev.LatencyMS.Total)
			l := ev.LatencyMS
			queue, pre, run, post = queue+l.Queue, pre+l.Pre, run+l.Infer, post+l.Post
			rest += l.Total - l.Queue - l.Pre - l.Infer - l.Post
			continue
		case <-deadline:
		}
		break
	}
	elapsed := time.Since(start)
	cpu1 := benchCPU(b, d)
	src1 := benchSources(d)
	stopProfile()
	for _, e := range benchErrors(d) {
		b.Logf("a camera's error: %s", e)
	}
	daemon := float64(len(lat)) / elapsed.Seconds()
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
	b.ReportMetric(float64(sessions), "sessions")
	b.ReportMetric(bare, "bare-runs/s")
	b.ReportMetric(shared, "one-process-bare-runs/s")
	b.ReportMetric(daemon, "daemon-events/s")
	b.ReportMetric(daemon/bare, "ratio")
	b.ReportMetric((cpu1[0]-cpu0[0]).Seconds()/elapsed.Seconds(), "daemon-cores")
	b.ReportMetric((cpu1[1]-cpu0[1]).Seconds()/elapsed.Seconds(), "worker-cores")
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(rss, "MiB-rss/worker")
	b.ReportMetric(gpu, "MiB-gpu/worker")
	// Where an event's time went, on average: capture to dispatch (decode, scaling, the
	// mailbox), the worker's preparation, run and decoding, and the rest (the slot's copy,
	// the pipes, waiting for a session, the result's callback and publishing).
	if n := float64(len(lat)); n > 0 {
		b.ReportMetric(queue/n, "queue-ms")
		b.ReportMetric(pre/n, "pre-ms")
		b.ReportMetric(run/n, "run-ms")
		b.ReportMetric(post/n, "post-ms")
		b.ReportMetric(rest/n, "rest-ms")
	}
	// The cameras' work: frames decoded and scaled (letterboxed) per second.
	b.ReportMetric(float64(src1.Frames-src0.Frames)/elapsed.Seconds(), "decoded/s")
	b.ReportMetric(float64(src1.Delivered-src0.Delivered)/elapsed.Seconds(), "scaled/s")
}

// startCPUProfile writes a CPU profile of this process (the daemon, the bench's RTSP and NATS
// servers) to file until stop is called.
func startCPUProfile(file string) (stop func(), err error) {
	f, err := os.Create(file)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		f.Close()
	}), nil
}

// benchErrors returns the distinct last errors of the daemon's cameras.
func benchErrors(d *Daemon) []string {
	var errs []string
	for _, c := range d.Cameras() {
		if c.LastError != "" && !slices.Contains(errs, c.LastError) {
			errs = append(errs, c.LastError)
		}
	}
	return errs
}

// benchSources returns the counters of the daemon's cameras, summed.
func benchSources(d *Daemon) sources.Status {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var sum sources.Status
	for _, c := range d.cams {
		st := c.src.Status()
		sum.Frames += st.Frames
		sum.Delivered += st.Delivered
	}
	return sum
}

// benchCPU returns the CPU time used so far by this process (the daemon, the bench's RTSP
// server and NATS server with it) and by the daemon's worker processes together.
func benchCPU(b *testing.B, d *Daemon) [2]time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	var workers time.Duration
	for _, w := range d.Workers() {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", w.PID))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and stime are the 12th and
		// 13th, in clock ticks (100 a second on Linux).
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 12 {
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			workers += time.Duration(ut+st) * 10 * time.Millisecond
		}
	}
	return [2]time.Duration{self, workers}
}

// bareChildEnv makes the test binary a bare-loop process (see TestMain and bareLoops).
const bareChildEnv = "VISIOND_BENCH_BARE_CHILD"

// bareLoops runs n bare-loop processes at once and returns their runs per second together.
// Each child loads the model, warms up, says "ready", waits for a line on stdin, runs for
// window and prints its count.
func bareLoops(n int, spec bareSpec) (float64, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return 0, err
	}
	type child struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
	}
	var kids []child
	defer func() {
		for _, k := range kids {
			_ = k.cmd.Process.Kill()
			_ = k.cmd.Wait()
		}
	}()
	for range n {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), bareChildEnv+"="+string(js))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		kids = append(kids, child{cmd, in, bufio.NewScanner(out)})
	}
	for _, k := range kids {
		if !k.out.Scan() || k.out.Text() != "ready" {
			return 0, fmt.Errorf("bare loop child did not get ready: %q", k.out.Text())
		}
	}
	for _, k := range kids {
		fmt.Fprintln(k.in, "go")
	}
	total := 0.0
	for _, k := range kids {
		var rate float64
		if !k.out.Scan() {
			return 0, fmt.Errorf("bare loop child gave no count")
		}
		if _, err := fmt.Sscan(k.out.Text(), &rate); err != nil {
			return 0, fmt.Errorf("bare loop child: %q: %w", k.out.Text(), err)
		}
		total += rate
	}
	return total, nil
}

// bareSpec is what a bare loop runs: Sessions Detectors with Opts on Image, for Window.
type bareSpec struct {
	Opts     infer.DetectorOptions
	Image    string
	Window   time.Duration
	Sessions int // Detectors of each bare-loop process, each in its own goroutine; 0: 1
}

// bareLoopChild is a bare-loop process: see bareLoops.
func bareLoopChild() error {
	var spec bareSpec
	if err := json.Unmarshal([]byte(os.Getenv(bareChildEnv)), &spec); err != nil {
		return fmt.Errorf("%s: %w", bareChildEnv, err)
	}
	rate, err := bareLoopRuns(max(1, spec.Sessions), spec, func() {
		fmt.Println("ready")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	})
	if err != nil {
		return err
	}
	fmt.Println(rate)
	return nil
}

// bareLoopRuns runs n Detectors in n goroutines of this process, back to back on one frame,
// for spec.Window, and returns their runs per second together. ready, if not nil, is called
// once all are warm, before the clock starts.
func bareLoopRuns(n int, spec bareSpec, ready func()) (float64, error) {
	img := gocv.IMRead(spec.Image, gocv.IMReadColor)
	pix := make([]byte, 640*640*3)
	lb, err := worker.LetterboxImage(img, 640, 640, pix)
	img.Close()
	if err != nil {
		return 0, err
	}
	dets := make([]*worker.Detector, n)
	defer func() {
		for _, det := range dets {
			if det != nil {
				det.Close()
			}
		}
	}()
	for i := range dets {
		det, err := worker.NewDetector(spec.Opts)
		if err != nil {
			return 0, err
		}
		dets[i] = det
		if _, _, err := det.Detect(pix, lb, nil); err != nil { // warm-up
			return 0, err
		}
	}
	if ready != nil {
		ready()
	}
	counts := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i, det := range dets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]infer.Detection, 0, 300)
			for time.Since(start) < spec.Window {
				if _, _, err := det.Detect(pix, lb, out[:0]); err != nil {
					errs[i] = err
					return
				}
				counts[i]++
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	runs := 0
	for i, c := range counts {
		if errs[i] != nil {
			return 0, errs[i]
		}
		runs += c
	}
	return float64(runs) / elapsed.Seconds(), nil
}
