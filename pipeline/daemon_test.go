package pipeline

import (
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer/worker/workertest"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources/capture"
	"github.com/visiond/visiond/sources/samplecam"
)

// workerEnv makes the test binary act as a `visiond worker` process (see TestMain), so the
// daemon under test starts real worker processes running the real worker code.
const workerEnv = workertest.Enable

func TestMain(m *testing.M) {
	workertest.Main()    // returns unless this process is a worker
	capture.RunIfChild() // returns unless this process is a gstreamer camera's capture process
	if os.Getenv(bareChildEnv) != "" {
		if err := bareLoopChild(); err != nil {
			fmt.Fprintln(os.Stderr, "bare loop:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startDaemon serves the sample video on two RTSP paths, writes a config with one camera per
// path and one camera whose server is down, loads it as the daemon would, and starts the
// daemon with one worker process.
func startDaemon(t *testing.T) (*Daemon, *samplecam.Server) {
	t.Helper()
	video := testutil.Media(t, "vtest.h264.ts")
	rtsp := &samplecam.Server{
		Listen:  "127.0.0.1:0",
		Streams: map[string]string{"east": video, "west": video},
		Logger:  testutil.Logger(t),
	}
	if err := rtsp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rtsp.Close)

	yaml := fmt.Sprintf(`
site: test
memory_limit_mib: 4096
http: {listen: "127.0.0.1:0"}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1, provider: cpu}]}
pipeline: {slice: 100ms, max_frame_age: 2s}
camera_defaults: {fps: 5}
cameras:
  - {id: east, url: %q}
  - {id: west, url: %q, fps: 3, stall_timeout: 1s}
  - {id: down, url: %q}
`, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), rtsp.URL("east"), rtsp.URL("west"),
		"rtsp://admin:hunter2@"+testutil.FreeAddr(t)+"/stream")
	cfg, err := config.Load(testutil.TempFile(t, "visiond.yaml", yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = t.TempDir()
	d := &Daemon{
		Config:        cfg,
		Logger:        testutil.Logger(t),
		WorkerCommand: []string{os.Args[0]},
		WorkerEnv:     []string{workerEnv},
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d, rtsp
}

func TestDaemonEndToEnd(t *testing.T) {
	d, rtsp := startDaemon(t)

	nc, err := nats.Connect(d.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 256)
	if _, err := nc.ChanSubscribe("visiond.test.*.detections", msgs); err != nil {
		t.Fatal(err)
	}

	// Wait until each camera has published events and people have been seen on both.
	events := map[string]int{}
	people := map[string]int{}
	deadline := time.After(2 * time.Minute)
	for people["east"] == 0 || people["west"] == 0 || events["east"] < 3 || events["west"] < 3 {
		select {
		case <-deadline:
			t.Fatalf("timed out: events per camera %v, person detections %v; cameras %+v", events, people, d.Cameras())
		case m := <-msgs:
			var ev sinks.DetectionEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatalf("event on %s is not JSON: %v", m.Subject, err)
			}
			if want := sinks.DetectionSubject("visiond", "test", ev.Camera); m.Subject != want {
				t.Fatalf("event for camera %q on subject %q, want %q", ev.Camera, m.Subject, want)
			}
			checkEvent(t, &ev)
			events[ev.Camera]++
			for _, det := range ev.Detections {
				if det.Label == "person" {
					people[ev.Camera]++
				}
			}
		}
	}

	// A camera that hangs: the stall watchdog takes it offline, and when its stream resumes
	// it comes back; both changes are published with the reason and the gap.
	status := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe("visiond.test.west.status", status); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	rtsp.Freeze("west", true)
	off := nextStatus(t, status, "offline")
	if !strings.Contains(off.Reason, "stalled") || off.Previous != "online" || off.Camera != "west" {
		t.Fatalf("status event %+v, want west offline after online, stalled", off)
	}
	rtsp.Freeze("west", false)
	on := nextStatus(t, status, "online")
	if on.GapMS < 1000 || on.Previous != "offline" {
		t.Fatalf("status event %+v, want back online with a gap of at least the 1 s stall timeout", on)
	}

	// The snapshot: the latest analysed frame as JPEG, the picture without letterbox bars
	// (640x480 for the 768x576 sample), with boxes drawn in the box colour.
	resp0, err := http.Get("http://" + d.HTTPAddr().String() + "/api/cameras/east/snapshot.jpg")
	if err != nil {
		t.Fatal(err)
	}
	img, err := jpeg.Decode(resp0.Body)
	resp0.Body.Close()
	if err != nil || resp0.Header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("snapshot: %v (content type %q)", err, resp0.Header.Get("Content-Type"))
	}
	if b := img.Bounds(); b.Dx() != 640 || b.Dy() != 480 {
		t.Fatalf("snapshot is %v, want 640x480", b)
	}
	if n := countNear(img, boxColor, 60); n < 50 {
		t.Fatalf("snapshot has %d box-coloured pixels: no boxes drawn", n)
	}
	if resp, err := http.Get("http://" + d.HTTPAddr().String() + "/api/cameras/nosuch/snapshot.jpg"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("snapshot of an unknown camera: %v %v", resp, err)
	}

	// The detector runs in a separate worker process.
	ws := d.Workers()
	if len(ws) != 1 {
		t.Fatalf("workers: %+v, want 1", ws)
	}
	if ws[0].PID == 0 || ws[0].PID == os.Getpid() {
		t.Fatalf("worker pid %d: not a separate process (daemon pid %d)", ws[0].PID, os.Getpid())
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", ws[0].PID)); err != nil {
		t.Fatalf("worker process %d not running: %v", ws[0].PID, err)
	}

	// The HTTP endpoint reports both cameras online with frames analysed. (West has a 1 s
	// stall timeout for the test above; on a loaded box it can go offline for a moment, so
	// wait for a report that has both online.)
	var cams []CameraStatus
	fetch := func() {
		resp, err := http.Get("http://" + d.HTTPAddr().String() + "/api/cameras")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		cams = nil
		if err := json.NewDecoder(resp.Body).Decode(&cams); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		fetch()
		online := 0
		for _, c := range cams {
			if c.State == "online" {
				online++
			}
		}
		if online == 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(cams) != 3 {
		t.Fatalf("/api/cameras: %d cameras, want 3", len(cams))
	}
	for _, c := range cams {
		if c.ID == "down" {
			// The camera that cannot connect is reported, with its error, and without its password.
			if c.State == "online" || c.LastError == "" || c.Analysed != 0 {
				t.Errorf("/api/cameras: %+v, want the unreachable camera offline with an error", c)
			}
			if strings.Contains(c.URL+c.LastError, "hunter2") {
				t.Errorf("/api/cameras shows a camera password: %+v", c)
			}
			continue
		}
		if c.State != "online" || c.Analysed == 0 || c.Decoded == 0 {
			t.Errorf("/api/cameras: %+v, want online with frames decoded and analysed", c)
		}
	}
}

func TestDaemonUnreachableNATS(t *testing.T) {
	cfg, err := config.Parse([]byte(fmt.Sprintf("nats: {url: 'nats://u:hunter2@%s'}\n", testutil.FreeAddr(t))))
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Config: cfg, Logger: testutil.Logger(t)}
	err = d.Start()
	if err == nil {
		d.Close()
		t.Fatal("Start succeeded with an unreachable NATS server")
	}
	if !strings.Contains(err.Error(), "NATS") || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Start: %v; want an error naming NATS, without the password", err)
	}
	d.Close() // safe after a failed start, and twice
}

// sampleCameras serves n copies of the sample video as cam0..cam<n-1> on a loopback RTSP
// server and returns them as YAML camera entries.
func sampleCameras(t testing.TB, n int) string {
	t.Helper()
	video := testutil.Media(t, "vtest.h264.ts")
	streams := map[string]string{}
	for i := range n {
		streams[fmt.Sprint("cam", i)] = video
	}
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: streams, Logger: testutil.Logger(t)}
	if err := rtsp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rtsp.Close)
	var cams strings.Builder
	for i := range n {
		fmt.Fprintf(&cams, "  - {id: cam%d, url: %q}\n", i, rtsp.URL(fmt.Sprint("cam", i)))
	}
	return cams.String()
}

// startTestDaemon parses yaml, gives it a fresh state directory and starts a daemon whose
// workers are this test binary; the test's cleanup closes it.
func startTestDaemon(t testing.TB, yaml string) *Daemon {
	t.Helper()
	return startTestDaemonIn(t, yaml, t.TempDir())
}

// startTestDaemonIn is startTestDaemon with the state directory given (a restart reuses it).
func startTestDaemonIn(t testing.TB, yaml, stateDir string) *Daemon {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = stateDir
	if cfg.NATS.URL == "" && !strings.Contains(yaml, "nats:") {
		// The embedded server's default port (4222) is a fixed one: another test, or a
		// daemon on the machine, may hold it. A free one instead, as every test names.
		cfg.NATS.Listen = "127.0.0.1:0"
	}
	d := &Daemon{Config: cfg, Logger: testutil.Logger(t), WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// countNear counts pixels within tol (per channel) of c.
func countNear(img image.Image, c color.RGBA, tol int) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if abs(int(r>>8)-int(c.R)) <= tol && abs(int(g>>8)-int(c.G)) <= tol && abs(int(bl>>8)-int(c.B)) <= tol {
				n++
			}
		}
	}
	return n
}

func abs(v int) int { return max(v, -v) }

// nextStatus returns the next status event into state.
func nextStatus(t *testing.T, msgs chan *nats.Msg, state string) sinks.StatusEvent {
	t.Helper()
	timeout := time.After(time.Minute) // an RTSP session's end and a new one, on a loaded machine
	for {
		select {
		case m := <-msgs:
			var ev sinks.StatusEvent
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				t.Fatalf("status event %s: %v", m.Data, err)
			}
			if ev.Version != sinks.Version || ev.Site != "test" {
				t.Fatalf("status event %s", m.Data)
			}
			if ev.State == state {
				return ev
			}
		case <-timeout:
			t.Fatalf("no status event %q in a minute", state)
		}
	}
}

// checkEvent asserts what every detection event must satisfy.
func checkEvent(t *testing.T, ev *sinks.DetectionEvent) {
	t.Helper()
	if ev.Version != sinks.Version || ev.Site != "test" || ev.Model != "yolov8n" {
		t.Fatalf("event header: version %d site %q model %q", ev.Version, ev.Site, ev.Model)
	}
	if ev.Frame.Width != 768 || ev.Frame.Height != 576 || ev.Frame.Seq == 0 {
		t.Fatalf("event %s frame %+v, want 768x576 with a sequence number", ev.ID, ev.Frame)
	}
	if !strings.HasSuffix(ev.ID, fmt.Sprintf(".%s.%d", ev.Camera, ev.Frame.Seq)) {
		t.Fatalf("event id %q does not name camera %q and frame %d", ev.ID, ev.Camera, ev.Frame.Seq)
	}
	if ev.PublishedAt.Before(ev.CapturedAt) || ev.LatencyMS.Total <= 0 || ev.LatencyMS.Infer <= 0 {
		t.Fatalf("event %s times: captured %v published %v latency %+v", ev.ID, ev.CapturedAt, ev.PublishedAt, ev.LatencyMS)
	}
	for _, det := range ev.Detections {
		b := det.Box
		if det.Label == "" || det.Score < 0.25 || det.Score > 1 {
			t.Fatalf("event %s: detection %+v", ev.ID, det)
		}
		if b.X < 0 || b.Y < 0 || b.W <= 0 || b.H <= 0 || b.X+b.W > 768.001 || b.Y+b.H > 576.001 {
			t.Fatalf("event %s: box %+v not inside the 768x576 frame", ev.ID, b)
		}
		n := det.BoxNorm // rounded to 4 decimals, box to 0.1 px: within 0.05 + 768/20000 px
		if diff := n.X*768 - b.X; diff > 0.1 || diff < -0.1 {
			t.Fatalf("event %s: box_norm %+v does not match box %+v", ev.ID, n, b)
		}
	}
}

// Eight cameras at 5 fps against one CPU worker that manages far fewer jobs per second:
// every camera gets about the same share (Jain's fairness index >= 0.95), frame age stays
// bounded by max_frame_age, and no job is lost.
func TestDaemonFairUnderOverload(t *testing.T) {
	d := startTestDaemon(t, fmt.Sprintf(`
site: test
http: {listen: ""}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1, threads: 1}]}
pipeline: {max_frame_age: 1s}
camera_defaults: {fps: 5}
cameras:
%s`, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), sampleCameras(t, 8)))

	// Count from the moment every camera is online, so start-up differences do not count.
	testutil.WaitFor(t, 2*time.Minute, "every camera online", func() bool {
		for _, c := range d.Cameras() {
			if c.State != "online" {
				return false
			}
		}
		return true
	})
	base := map[string]uint64{}
	for _, c := range d.Cameras() {
		base[c.ID] = c.Analysed
	}
	// Count what the slicer did in a fixed window, however fast the machine is: the fair
	// queue shares the one worker equally between cameras that always have a frame, so the
	// counts differ by about one turn whether the worker ran 10 jobs or 200.
	const window = 20 * time.Second
	time.Sleep(window)
	cs := d.Cameras()
	var sum, sumSq float64
	var counts []uint64
	for _, c := range cs {
		n := c.Analysed - base[c.ID]
		counts = append(counts, n)
		x := float64(n)
		sum += x
		sumSq += x * x
		if c.FrameAgeMax > 1000 {
			t.Errorf("camera %s: frame age up to %.0f ms, want <= max_frame_age (1 s)", c.ID, c.FrameAgeMax)
		}
		if c.Drops.WorkerLost+c.Drops.Timeout+c.Drops.Rejected != 0 {
			t.Errorf("camera %s: jobs lost %+v", c.ID, c.Drops)
		}
	}
	if sum < float64(len(cs)) {
		t.Fatalf("only %.0f frames analysed in %v for %d cameras: too few to judge the share (per camera: %v)", sum, window, len(cs), counts)
	}
	jain := sum * sum / (float64(len(cs)) * sumSq)
	spread := slices.Max(counts) - slices.Min(counts)
	t.Logf("analysed per camera in %v: %v; Jain's index %.3f, spread %d", window, counts, jain, spread)
	// With few jobs a spread of two turns already lowers Jain's index below 0.95.
	if jain < 0.95 && spread > 2 {
		t.Fatalf("unfair share: Jain's index %.3f < 0.95 and spread %d > 2 turns (per camera: %v)", jain, spread, counts)
	}
}

// SIGTERM's path: Close stops intake, lets the jobs in flight finish and publishes their
// events before it stops the workers; nothing analysed goes unpublished.
func TestDaemonCloseFinishesJobsInFlight(t *testing.T) {
	// An external server with JetStream, which outlives the daemon, so late events can be counted.
	srv := &sinks.Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "ext"}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	video := testutil.Media(t, "vtest.h264.ts")
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": video}, Logger: testutil.Logger(t)}
	if err := rtsp.Start(); err != nil {
		t.Fatal(err)
	}
	defer rtsp.Close()
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
site: test
http: {listen: ""}
nats: {url: %q}
workers: {model: %q, library: %q}
cameras:
  - {id: a, url: %q, fps: 10}
  - {id: b, url: %q, fps: 10}
`, srv.ClientURL(), testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), rtsp.URL("cam"), rtsp.URL("cam"))))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("visiond.test.*.detections")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Config: cfg, Logger: testutil.Logger(t), WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 2*time.Minute, "a job in flight after a few were analysed", func() bool {
		var analysed uint64
		for _, c := range d.Cameras() {
			analysed += c.Analysed
		}
		ws := d.Workers()
		return analysed >= 3 && len(ws) > 0 && ws[0].InFlight > 0
	})
	d.Close()

	var analysed, lost uint64
	for _, c := range d.Cameras() {
		analysed += c.Analysed
		lost += c.Drops.WorkerLost + c.Drops.Timeout + c.Drops.Shutdown
	}
	if lost != 0 {
		t.Fatalf("%d jobs lost or cut off at shutdown", lost)
	}
	// Close returned once the server had acknowledged every event; they reach this
	// subscriber soon after, later on a loaded machine: count until all have come, or none
	// has for 30 s, then for a second more (for one too many).
	var got uint64
	for wait := 30 * time.Second; ; {
		if _, err := sub.NextMsg(wait); err != nil {
			break
		}
		if got++; got >= analysed {
			wait = time.Second
		}
	}
	if got != analysed {
		t.Fatalf("%d frames analysed, %d events received: the jobs in flight at Close were not all published", analysed, got)
	}
}

// A camera analysed at 2 fps from the 10 fps sample: the frames that a newer one replaces
// before the camera's turn are not scaled (sources.Camera.NeedFrom), and they count as
// superseded. (Whether the camera gets its 2 fps depends on how fast the machine runs the
// model: BenchmarkCameraFPS measures it.)
func TestUnneededFramesNotScaled(t *testing.T) {
	d := startTestDaemon(t, fmt.Sprintf(`
site: test
http: {listen: ""}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1}]}
camera_defaults: {fps: 0.5}
cameras:
%s`, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), sampleCameras(t, 1)))
	status := func() CameraStatus {
		for _, c := range d.Cameras() {
			if c.ID == "cam0" {
				return c
			}
		}
		t.Fatal("cam0 missing")
		return CameraStatus{}
	}
	testutil.WaitFor(t, 2*time.Minute, "cam0 analysing", func() bool { return status().Analysed >= 2 })
	// Six turns of the camera. Frames are left unscaled between a turn and shortly before
	// the next one is due: at 10 fps and a turn every 2 s, about 17 a turn while the worker
	// answers within the turn (~0.1 s here idle, ~0.6 s with every core busy). A worker
	// slower than the camera's turn leaves the camera always due, and then every frame is
	// rightly scaled; one unscaled frame a turn is the margin for that.
	const turns = 6
	before, src0, t0 := status(), d.camera("cam0").src.Status(), time.Now()
	testutil.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d turns of cam0", turns), func() bool { return status().Analysed >= before.Analysed+turns })
	// The source's counters first: superseded, read after, counts at least those not scaled.
	src1, secs := d.camera("cam0").src.Status(), time.Since(t0).Seconds()
	after := status()

	decoded, unneeded := src1.Frames-src0.Frames, src1.Unneeded-src0.Unneeded
	analysed := after.Analysed - before.Analysed
	t.Logf("%.1f s: %d analysed (%.2f/s, the camera's fps is 0.5), %d frames decoded, %d not scaled, %d scaled; superseded %d",
		secs, analysed, float64(analysed)/secs, decoded, unneeded, src1.Delivered-src0.Delivered, after.Drops.Superseded-before.Drops.Superseded)
	if unneeded < analysed {
		t.Errorf("%d decoded frames not scaled in %d turns, want at least one a turn", unneeded, analysed)
	}
	if after.Drops.Superseded < src1.Unneeded {
		t.Errorf("superseded %d does not count the %d frames not scaled", after.Drops.Superseded, src1.Unneeded)
	}
	if src1.Delivered+src1.Unneeded+src1.Dropped < src1.Frames-1 { // a frame may be between the counters
		t.Errorf("frames %d: delivered %d + not scaled %d + dropped %d do not add up", src1.Frames, src1.Delivered, src1.Unneeded, src1.Dropped)
	}
}
