package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/sources/samplecam"
)

// daemonFlags are the settings of the daemon under test, shared by the measuring commands.
type daemonFlags struct {
	Bin      string  `json:"bin"`
	Model    string  `json:"model"`
	Library  string  `json:"library"`
	Provider string  `json:"provider"`
	Device   int     `json:"device"`
	Workers  setting `json:"workers"`            // worker processes of the pool (-1: the daemon's default)
	Threads  setting `json:"threads"`            // ONNX Runtime intra-op threads per session (-1: the daemon's default)
	Sessions setting `json:"sessions,omitempty"` // sessions per worker process (-1 or 0: the daemon's default)
	FPS      float64 `json:"fps"`
	Decoder  string  `json:"decoder,omitempty"` // camera_defaults.decoder ("": not written, the daemon's default)
	CPUs     string  `json:"cpus,omitempty"`    // taskset -c list for the daemon and its workers; "" all
	Video    string  `json:"video"`
	Phases   int     `json:"phases"`                // camera servers started 1/phases of a frame apart
	URLs     string  `json:"camera_urls,omitempty"` // cameras served by another process (visiond-bench serve)
	Clips    string  `json:"clips,omitempty"`       // camera_defaults.clips, a YAML flow mapping ("": not written, clips off)
	CUDA     string  `json:"cuda,omitempty"`        // the pool's cuda options, a YAML flow mapping ("": not written)
	// Analytics gives every camera one zone (the lower half, person) and one line (vertical,
	// the middle, person and car), as users run it (docs/config.md "Analytics").
	Analytics bool `json:"analytics"`
	JetStream bool `json:"jetstream"` // nats.jetstream, written either way
	// Leaf is nats.leaf.url, the embedded server's link to a hub ("": none); ClipStoreMiB
	// clip_store.max_bytes_mib (0: not written). The soak sets them.
	Leaf         string `json:"leaf,omitempty"`
	ClipStoreMiB int    `json:"clip_store_mib,omitempty"`
	Dir          string `json:"-"`
	// Pprof serves Go's profiles (http.pprof): memory -profiles sets it.
	Pprof bool `json:"pprof,omitempty"`
	// zoneTop is the top edge of the cameras' zone (0: 0.5); the soak moves it.
	zoneTop float64
}

func (f *daemonFlags) register(fs *flag.FlagSet) {
	lib := os.Getenv("ONNXRUNTIME_SHARED_LIBRARY_PATH")
	if lib == "" {
		lib = "third_party/libonnxruntime.so.1"
	}
	fs.StringVar(&f.Bin, "visiond", "bin/visiond", "the visiond binary")
	fs.StringVar(&f.Model, "model", "third_party/yolov8n.onnx", "model")
	fs.StringVar(&f.Library, "library", lib, "libonnxruntime.so (default $ONNXRUNTIME_SHARED_LIBRARY_PATH)")
	fs.StringVar(&f.Provider, "provider", "cpu", "worker provider: cpu, cuda, tensorrt")
	fs.IntVar(&f.Device, "device", 0, "GPU id")
	f.Workers, f.Threads, f.Sessions = unset, unset, unset
	fs.Var(&f.Workers, "workers", "worker processes of the pool (`N`; auto: not written, the daemon's default)")
	fs.Var(&f.Threads, "threads", "ONNX Runtime intra-op threads per session (`N`, 0 = ONNX Runtime's default; auto: not written, the daemon's default)")
	fs.Var(&f.Sessions, "sessions", "ONNX Runtime sessions per worker process, the pool's `sessions: N` (auto or 0: not written, the daemon's default)")
	fs.Float64Var(&f.FPS, "fps", 5, "frames analysed per second per camera")
	fs.StringVar(&f.Decoder, "decoder", "", "the cameras' `decoder`: cpu or cuda (\"\": not written, the daemon's default)")
	fs.StringVar(&f.CPUs, "cpus", "", "run the daemon and its workers under `taskset -c CPUS` (\"\": every CPU)")
	fs.StringVar(&f.Video, "video", "third_party/media/vtest.h264.ts", "the MPEG-TS file every camera plays (looped, in real time)")
	fs.IntVar(&f.Phases, "phases", 4, "camera servers, started a fraction of a frame apart so that cameras are not all in phase; camera i reads server i mod phases")
	fs.StringVar(&f.URLs, "camera-urls", "", "a file of camera URLs (from visiond-bench serve), camera i reading URL i mod their number; default: serve the cameras in this process")
	fs.StringVar(&f.CUDA, "cuda", "", "the pool's `cuda` options, a YAML flow mapping such as '{graph: true}' (\"\": not written, the daemon's defaults)")
	fs.StringVar(&f.Clips, "clips", "", "the cameras' `clips` settings, a YAML flow mapping such as '{enabled: true}' (\"\": not written, clips off)")
	fs.BoolVar(&f.Analytics, "analytics", true, "give every camera a zone (lower half, person) and a line (vertical middle, person and car), as users run it")
	fs.BoolVar(&f.JetStream, "jetstream", true, "nats.jetstream in the config: every event stored in the stream, as users run it")
	fs.StringVar(&f.Dir, "dir", "", "work directory for the config, state and daemon log (default: a temporary one)")
}

// cameraServers are the simulated cameras: samplecam servers playing the same file, each
// started a fraction of the frame interval after the previous one.
type cameraServers struct {
	srvs []*samplecam.Server
	urls []string // cameras served elsewhere (-camera-urls)
}

func startCameras(video string, phases int) (*cameraServers, error) {
	phases = max(1, phases)
	cs := &cameraServers{}
	for i := range phases {
		if i > 0 {
			time.Sleep(100 * time.Millisecond / time.Duration(phases)) // the sample is 10 fps
		}
		s := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": video},
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if err := s.Start(); err != nil {
			cs.Close()
			return nil, err
		}
		cs.srvs = append(cs.srvs, s)
	}
	return cs, nil
}

// camerasFor serves the cameras, or reads their URLs from f.URLs when set.
func camerasFor(f daemonFlags) (*cameraServers, error) {
	if f.URLs == "" {
		return startCameras(f.Video, f.Phases)
	}
	data, err := os.ReadFile(f.URLs)
	if err != nil {
		return nil, err
	}
	cs := &cameraServers{urls: strings.Fields(string(data))}
	if len(cs.urls) == 0 {
		return nil, fmt.Errorf("%s: no URLs", f.URLs)
	}
	return cs, nil
}

// URL is camera i's URL.
func (cs *cameraServers) URL(i int) string {
	if len(cs.urls) > 0 {
		return cs.urls[i%len(cs.urls)]
	}
	return cs.srvs[i%len(cs.srvs)].URL("cam")
}

func (cs *cameraServers) Close() {
	for _, s := range cs.srvs {
		s.Close()
	}
}

// event is what the bench keeps of a detection event.
type event struct {
	cam        string
	at         time.Time // received
	total, age float64   // decode to publish, decode to dispatch (ms; latency_ms.total, .queue)
	dets       int
	// published and received are published_at - captured_at and the bench's clock at
	// receipt - captured_at (ms); hasCapture says the event carried captured_at.
	published, received float64
	hasCapture          bool
	pre, infer, post    float64 // latency_ms' worker stages (ms)
}

// wireEvent is the part of a detection event (docs/events.md) the bench reads.
type wireEvent struct {
	Camera      string            `json:"camera"`
	Detections  []json.RawMessage `json:"detections"`
	CapturedAt  time.Time         `json:"captured_at"`
	PublishedAt time.Time         `json:"published_at"`
	LatencyMS   struct {
		Queue float64 `json:"queue"`
		Pre   float64 `json:"pre"`
		Infer float64 `json:"infer"`
		Post  float64 `json:"post"`
		Total float64 `json:"total"`
	} `json:"latency_ms"`
}

// toEvent is what the bench keeps of w, received at now.
func (w *wireEvent) toEvent(now time.Time) event {
	e := event{cam: w.Camera, at: now, total: w.LatencyMS.Total, age: w.LatencyMS.Queue, dets: len(w.Detections),
		pre: w.LatencyMS.Pre, infer: w.LatencyMS.Infer, post: w.LatencyMS.Post}
	if !w.CapturedAt.IsZero() {
		e.hasCapture = true
		e.received = ms(now.Sub(w.CapturedAt))
		if !w.PublishedAt.IsZero() {
			e.published = ms(w.PublishedAt.Sub(w.CapturedAt))
		}
	}
	return e
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// collector keeps every detection event received.
type collector struct {
	mu     sync.Mutex
	events []event
	bad    int
}

func (c *collector) handle(m *nats.Msg) {
	var w wireEvent
	now := time.Now()
	err := json.Unmarshal(m.Data, &w)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.bad++
		return
	}
	c.events = append(c.events, w.toEvent(now))
}

// between returns the events received in [from, to).
func (c *collector) between(from, to time.Time) []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := sort.Search(len(c.events), func(i int) bool { return !c.events[i].at.Before(from) })
	j := sort.Search(len(c.events), func(i int) bool { return !c.events[i].at.Before(to) })
	return append([]event(nil), c.events[i:j]...)
}

// daemon is a `visiond run` process under test.
type daemon struct {
	f        daemonFlags
	dir      string
	cfgPath  string
	httpAddr string
	natsAddr string
	cmd      *exec.Cmd
	exited   chan struct{}
	log      *os.File
	nc       *nats.Conn
	events   *collector
	configs  *configCounter
	cams     []string       // camera ids in the config now
	servers  *cameraServers // what the cameras read; closed by Stop
	tempDir  bool
}

// configCounter counts config reload attempts (visiond.<site>.config events).
type configCounter struct {
	mu                sync.Mutex
	applied, rejected int
	lastErr           string
}

const site = "bench"

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startDaemon writes the config with the given cameras, starts the daemon, waits for its
// HTTP endpoint and subscribes to its events.
func startDaemon(f daemonFlags, n int) (*daemon, error) {
	servers, err := camerasFor(f)
	if err != nil {
		return nil, err
	}
	d := &daemon{f: f, dir: f.Dir, servers: servers, events: &collector{}, configs: &configCounter{}, exited: make(chan struct{})}
	if err := d.start(n); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// start writes the config with n cameras, starts `visiond run` on it and subscribes to its
// events; on an error the caller stops d.
func (d *daemon) start(n int) error {
	f := d.f
	if d.dir == "" {
		dir, err := os.MkdirTemp("", "visiond-bench-")
		if err != nil {
			return err
		}
		d.dir, d.tempDir = dir, true
	}
	if err := os.MkdirAll(filepath.Join(d.dir, "state"), 0o755); err != nil {
		return err
	}
	var err error
	if d.httpAddr, err = freePort(); err != nil {
		return err
	}
	if d.natsAddr, err = freePort(); err != nil {
		return err
	}
	d.cfgPath = filepath.Join(d.dir, "visiond.yaml")
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("cam%03d", i)
	}
	if err := d.writeConfig(ids); err != nil {
		return err
	}
	if d.log, err = os.Create(filepath.Join(d.dir, "daemon.log")); err != nil {
		return err
	}
	args := []string{f.Bin, "run", "-config", d.cfgPath}
	_, lookErr := exec.LookPath("taskset")
	if f.CPUs != "" && lookErr == nil {
		args = append([]string{"taskset", "-c", f.CPUs}, args...)
	}
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if f.CPUs != "" && lookErr != nil {
		err = startPinned(d.cmd, f.CPUs) // no taskset: the same from this process
	} else {
		err = d.cmd.Start()
	}
	if err != nil {
		d.cmd = nil // never started: nothing for Stop to wait for
		return err
	}
	go func() { _ = d.cmd.Wait(); close(d.exited) }()
	if err := d.waitHTTP(3 * time.Minute); err != nil {
		return err
	}
	d.nc, err = nats.Connect("nats://"+d.natsAddr, nats.Name("visiond-bench"))
	if err != nil {
		return err
	}
	if _, err := d.nc.Subscribe("visiond."+site+".*.detections", d.events.handle); err != nil {
		return err
	}
	_, err = d.nc.Subscribe("visiond."+site+".config", func(m *nats.Msg) {
		var ev struct {
			Result string `json:"result"`
			Error  string `json:"error"`
		}
		_ = json.Unmarshal(m.Data, &ev)
		d.configs.mu.Lock()
		defer d.configs.mu.Unlock()
		if ev.Result == "applied" {
			d.configs.applied++
		} else {
			d.configs.rejected++
			d.configs.lastErr = ev.Error
		}
	})
	if err != nil {
		return err
	}
	return d.nc.Flush()
}

// writeConfig writes the config with these cameras (atomically: a temporary file renamed
// over it, as deploy tools do; the daemon reloads on the rename).
func (d *daemon) writeConfig(ids []string) error {
	f := d.f
	var b strings.Builder
	fmt.Fprintf(&b, "# written by visiond-bench\nsite: %s\nlog_level: warn\nstate_dir: %q\n", site, filepath.Join(d.dir, "state"))
	leaf := ""
	if f.Leaf != "" {
		leaf = fmt.Sprintf(", leaf: {url: %q}", f.Leaf)
	}
	fmt.Fprintf(&b, "http: {listen: %q, pprof: %t}\nnats: {listen: %q, jetstream: %t%s}\n", d.httpAddr, f.Pprof, d.natsAddr, f.JetStream, leaf)
	if f.ClipStoreMiB > 0 {
		fmt.Fprintf(&b, "clip_store: {max_bytes_mib: %d}\n", f.ClipStoreMiB)
	}
	fmt.Fprintf(&b, "workers: {model: %q, library: %q, pools: [{%s}]}\n", abs(f.Model), abs(f.Library), f.pool())
	defaults := "" // camera_defaults' fields besides fps: only those set, so the daemon's defaults apply
	if f.Decoder != "" {
		defaults = ", decoder: " + f.Decoder
	}
	if f.Clips != "" {
		defaults += ", clips: " + f.Clips
	}
	fmt.Fprintf(&b, "camera_defaults: {fps: %g%s}\ncameras:\n", f.FPS, defaults)
	if len(ids) == 0 {
		b.WriteString("  []\n")
	}
	for _, id := range ids {
		n, _ := strconv.Atoi(strings.TrimLeft(id, "abcdefghijklmnopqrstuvwxyz"))
		fmt.Fprintf(&b, "  - {id: %s, url: %q%s}\n", id, d.servers.URL(n), f.analytics())
	}
	tmp := d.cfgPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, d.cfgPath); err != nil {
		return err
	}
	d.cams = append([]string(nil), ids...)
	return nil
}

// analytics is a camera's zone and line as more fields of its YAML flow mapping, or "" with
// -analytics=false. The detection events stay the daemon's default (events.detections: all).
func (f daemonFlags) analytics() string {
	if !f.Analytics {
		return ""
	}
	top := f.zoneTop
	if top == 0 {
		top = 0.5
	}
	return fmt.Sprintf(", zones: [{id: lower-half, polygon: [[0, %g], [1, %g], [1, 1], [0, 1]], classes: [person]}]", top, top) +
		", lines: [{id: middle, points: [[0.5, 0], [0.5, 1]], classes: [person, car]}]"
}

// pool is the config's one worker pool, as a YAML flow mapping's fields: the settings left
// unset are not written, so that the daemon's defaults apply.
func (f daemonFlags) pool() string {
	fields := []string{"provider: " + f.Provider, fmt.Sprintf("device: %d", f.Device)}
	for _, s := range []struct {
		key string
		v   setting
	}{{"count", f.Workers}, {"threads", f.Threads}, {"sessions", f.Sessions}} {
		if s.v.set() && (s.key != "sessions" || s.v > 0) {
			fields = append(fields, fmt.Sprintf("%s: %d", s.key, s.v))
		}
	}
	if f.CUDA != "" {
		fields = append(fields, "cuda: "+f.CUDA)
	}
	return strings.Join(fields, ", ")
}

// setting is a pool setting that the bench may leave to the daemon: unset (flag value
// "auto") writes nothing to the config, so the daemon's default applies.
type setting int

const unset setting = -1

func (s setting) set() bool { return s >= 0 }

func (s *setting) String() string {
	if s == nil || !s.set() {
		return "auto"
	}
	return strconv.Itoa(int(*s))
}

func (s *setting) Set(v string) error {
	if v == "auto" {
		*s = unset
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return fmt.Errorf("want a count >= 0 or auto, got %q", v)
	}
	*s = setting(n)
	return nil
}

// describe is the setting for people: its value, or "default" with what the daemon chose
// (seen > 0) when it was left to the daemon.
func (s setting) describe(seen int) string {
	switch {
	case s.set():
		return strconv.Itoa(int(s))
	case seen > 0:
		return fmt.Sprintf("default (%d)", seen)
	}
	return "default"
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// setCameras rewrites the config with these cameras and waits until the daemon runs
// exactly them, all online.
func (d *daemon) setCameras(ids []string, timeout time.Duration) error {
	if err := d.writeConfig(ids); err != nil {
		return err
	}
	return d.waitCameras(ids, timeout)
}

func (d *daemon) waitHTTP(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return fmt.Errorf("visiond exited at start: %s", d.logTail())
		default:
		}
		resp, err := http.Get("http://" + d.httpAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("visiond's HTTP endpoint did not come up in %v: %s", timeout, d.logTail())
}

func (d *daemon) logTail() string {
	data, _ := os.ReadFile(d.log.Name())
	if len(data) > 2000 {
		data = data[len(data)-2000:]
	}
	return string(data)
}

// camStatus is the part of /api/cameras the bench reads.
type camStatus struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Error    string `json:"last_error"`
	Decoded  uint64 `json:"frames_decoded"`
	Analysed uint64 `json:"frames_analysed"`
	Drops    struct {
		Superseded uint64 `json:"superseded"`
		Stale      uint64 `json:"stale"`
		Source     uint64 `json:"source"`
		WorkerLost uint64 `json:"worker_lost"`
		Timeout    uint64 `json:"timeout"`
		Rejected   uint64 `json:"rejected"`
		Shutdown   uint64 `json:"shutdown"`
	} `json:"frames_dropped"`
	Reconnects uint64  `json:"reconnects"`
	FrameAgeMS float64 `json:"frame_age_ms"`
	// Decoder is the camera's session's decoder; DecoderFallback says why it is the CPU's in
	// place of the GPU's ("" when it is not), DecoderFallbacks how often that happened.
	Decoder          string `json:"decoder"`
	DecoderFallback  string `json:"decoder_fallback"`
	DecoderFallbacks uint64 `json:"decoder_fallbacks"`
	Decode           struct {
		Calls  uint64  `json:"calls"`
		Wait   float64 `json:"wait_s"`
		Busy   float64 `json:"busy_s"`
		Scaled uint64  `json:"scaled"`
		Copy   float64 `json:"copy_s"`
		Scale  float64 `json:"scale_s"`
	} `json:"decode"`
}

// workerStatus is the part of /api/workers the bench reads.
type workerStatus struct {
	Index    int    `json:"index"`
	PID      int    `json:"pid"`
	State    string `json:"state"`
	Provider string `json:"provider"`
	Jobs     uint64 `json:"jobs"`
	Lost     uint64 `json:"lost"`
	Restarts uint64 `json:"restarts"`
	RSS      int64  `json:"rss_bytes"`
	GPU      int64  `json:"gpu_bytes"`
}

func (d *daemon) getJSON(path string, v any) error {
	data, err := d.get(path, 10*time.Second)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

// save writes what the daemon serves at path to the file out.
func (d *daemon) save(path, out string) error {
	data, err := d.get(path, time.Minute)
	if err != nil {
		return err
	}
	return os.WriteFile(out, data, 0o644)
}

// get returns the body of the daemon's answer to GET path, which must be a 200 within timeout.
func (d *daemon) get(path string, timeout time.Duration) ([]byte, error) {
	c := http.Client{Timeout: timeout}
	resp, err := c.Get("http://" + d.httpAddr + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// metric returns the value of an unlabelled series of /metrics, or 0.
func (d *daemon) metric(name string) float64 {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f
		}
	}
	return 0
}

// buildInfo is the part of the daemon's /api/version the bench records: what was measured.
type buildInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
	Modified bool   `json:"modified"`
}

// String is the revision, short, and whether the tree had uncommitted changes.
func (b *buildInfo) String() string {
	if b == nil || b.Revision == "" {
		return ""
	}
	s := b.Revision[:min(len(b.Revision), 7)]
	if b.Modified {
		s += " with uncommitted changes"
	}
	return s
}

// version is the daemon's build (/api/version); nil when it cannot be read.
func (d *daemon) version() *buildInfo {
	var b buildInfo
	if err := d.getJSON("/api/version", &b); err != nil {
		return nil
	}
	return &b
}

func (d *daemon) cameras() ([]camStatus, error) {
	var cs []camStatus
	err := d.getJSON("/api/cameras", &cs)
	return cs, err
}

// reconnects is each camera's reconnect count now (/api/cameras); nil when it cannot be read.
func (d *daemon) reconnects() map[string]uint64 {
	cs, err := d.cameras()
	if err != nil {
		return nil
	}
	m := make(map[string]uint64, len(cs))
	for _, c := range cs {
		m[c.ID] = c.Reconnects
	}
	return m
}

// reconnectsSince is the reconnects between two readings of the cameras in now (a camera
// not in then counts from 0; a counter that went down, a camera re-added, counts from 0).
func reconnectsSince(then, now map[string]uint64) int {
	n := 0
	for id, v := range now {
		if p, ok := then[id]; ok && p <= v {
			v -= p
		}
		n += int(v)
	}
	return n
}

func (d *daemon) workers() ([]workerStatus, error) {
	var ws []workerStatus
	err := d.getJSON("/api/workers", &ws)
	return ws, err
}

// onlineStall is how long waitCameras waits for one more camera to come online before it
// gives up early: cameras held back by a limit (descriptors, the GPU) do not come later.
const onlineStall = time.Minute

// waitCameras waits until /api/cameras lists exactly ids, each online, for at most timeout
// or onlineStall without one more camera online.
func (d *daemon) waitCameras(ids []string, timeout time.Duration) error {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.Now().Add(timeout)
	last, most, rose := "", -1, time.Now()
	for time.Now().Before(deadline) {
		if time.Since(rose) > onlineStall {
			return fmt.Errorf("cameras not all online, none more for %v: %s%s", onlineStall, last, openFiles(d.cmd.Process.Pid))
		}
		select {
		case <-d.exited:
			return fmt.Errorf("visiond exited: %s", d.logTail())
		default:
		}
		cs, err := d.cameras()
		if err == nil {
			online, other := 0, 0
			for _, c := range cs {
				switch {
				case !want[c.ID]:
					other++
				case c.State == "online":
					online++
				}
			}
			if online == len(ids) && other == 0 && len(cs) == len(ids) {
				return nil
			}
			if online > most {
				most, rose = online, time.Now()
			}
			last = fmt.Sprintf("%d of %d online, %d not in the config%s", online, len(ids), other, notOnline(cs))
		} else {
			last = err.Error()
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("cameras not all online after %v: %s%s", timeout, last, openFiles(d.cmd.Process.Pid))
}

// openFiles is "; N open files of a limit of M" for process pid, or "" where /proc does
// not say (a daemon short of descriptors fails to open cameras).
func openFiles(pid int) string {
	fds, ok := fdCount(pid)
	if !ok {
		return ""
	}
	limit := "?"
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid)); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); strings.HasPrefix(line, "Max open files") && len(f) >= 5 {
				limit = f[3] // soft limit
			}
		}
	}
	return fmt.Sprintf("; %d open files of a limit of %s", fds, limit)
}

// notOnline says what the cameras not online are doing: how many in each state, and their
// most common last errors (most first, at most three).
func notOnline(cs []camStatus) string {
	states, errs := map[string]int{}, map[string]int{}
	for _, c := range cs {
		if c.State != "online" {
			states[c.State]++
			if c.Error != "" {
				errs[c.Error]++
			}
		}
	}
	if len(states) == 0 {
		return ""
	}
	count := func(m map[string]int) []string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
		out := make([]string, 0, len(keys))
		for _, k := range keys {
			out = append(out, fmt.Sprintf("%d %q", m[k], k))
		}
		return out
	}
	s := "; not online: " + strings.Join(count(states), ", ")
	if e := count(errs); len(e) > 0 {
		s += "; their last errors: " + strings.Join(e[:min(3, len(e))], ", ")
	}
	return s
}

// daemonRSS is the daemon process's resident memory in bytes (the taskset wrapper execs it,
// so the pid is the daemon's).
func (d *daemon) daemonRSS() int64 { return procRSS(d.cmd.Process.Pid) }

func procRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuSeconds is the CPU time (user + system) that a process and its reaped children used.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+2:]
	}
	f := strings.Fields(s) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0
	}
	var t float64
	for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		v, _ := strconv.ParseFloat(f[k], 64)
		t += v
	}
	return t / 100 // USER_HZ
}

// Stop stops the daemon (SIGINT, then SIGKILL after 20 s) and closes the connection.
func (d *daemon) Stop() {
	if d.nc != nil {
		d.nc.Close()
	}
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	}
	if d.log != nil {
		d.log.Close()
	}
	if d.tempDir {
		os.RemoveAll(d.dir)
	}
	d.servers.Close()
}

// warmUp waits until every configured camera is online, then for warmup.
func (d *daemon) warmUp(warmup time.Duration) error {
	if err := d.waitCameras(d.cams, 2*time.Minute); err != nil {
		return err
	}
	time.Sleep(warmup)
	return nil
}

// alive reports an error if the daemon has exited.
func (d *daemon) alive() error {
	select {
	case <-d.exited:
		return errors.New("visiond exited: " + d.logTail())
	default:
		return nil
	}
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if path == "" || path == "-" {
		_, err = os.Stdout.Write(append(data, '\n'))
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, v)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// startPinned starts cmd on the CPUs of list ("0-3,8"): the child inherits the CPU mask of
// the thread that forks it, so this thread takes the mask for the fork and gets its own back.
func startPinned(cmd *exec.Cmd, list string) error {
	var set unix.CPUSet
	for _, part := range strings.Split(list, ",") {
		a, b, _ := strings.Cut(part, "-")
		lo, err := strconv.Atoi(a)
		if err != nil {
			return fmt.Errorf("cpus %q: %w", list, err)
		}
		hi := lo
		if b != "" {
			if hi, err = strconv.Atoi(b); err != nil {
				return fmt.Errorf("cpus %q: %w", list, err)
			}
		}
		for c := lo; c <= hi; c++ {
			set.Set(c)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return err
	}
	defer unix.SchedSetaffinity(0, &old)
	return cmd.Start()
}
