package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// memOwners is the daemon's /api/memory (pipeline.MemoryStatus), in MiB.
type memOwners struct {
	Resident        float64 `json:"resident"`
	Go              float64 `json:"go"`
	NATSCaches      float64 `json:"nats_store_caches,omitempty"`
	FrameBuffers    float64 `json:"frame_buffers"`
	SnapshotBuffers float64 `json:"snapshot_buffers"`
	ClipRings       float64 `json:"clip_rings"`
	CHeap           float64 `json:"c_heap"`
	GPUDriver       float64 `json:"gpu_driver,omitempty"`
	Code            float64 `json:"code"`
	Shared          float64 `json:"shared"`
}

// procMem is a process's resident memory (RSS) and its proportional share (PSS: a page shared
// by k processes counts 1/k in each), from /proc/<pid>/smaps_rollup, in MiB.
type procMem struct {
	PID int     `json:"pid"`
	RSS float64 `json:"rss_mib"`
	PSS float64 `json:"pss_mib"`
}

type memSample struct {
	T       float64   `json:"t_s"`
	Owners  memOwners `json:"daemon_owners_mib"`
	Daemon  procMem   `json:"daemon"`
	Workers []procMem `json:"workers"`
}

// memStep is one daemon run at a number of cameras: its samples over the window and their
// medians.
type memStep struct {
	Cameras    int         `json:"cameras"`
	Samples    []memSample `json:"samples"`
	Window     window      `json:"window"`
	Owners     memOwners   `json:"daemon_owners_mib"` // medians over the samples
	DaemonRSS  float64     `json:"daemon_rss_mib"`
	DaemonPSS  float64     `json:"daemon_pss_mib"`
	WorkersRSS float64     `json:"workers_rss_mib"` // all workers together
	WorkersPSS float64     `json:"workers_pss_mib"`
	Workers    int         `json:"workers"`
}

// TotalPSS is what the daemon and its workers cost together: the sum of their proportional
// shares, which counts the pages they share (the executable and libraries they all map) once.
func (s memStep) TotalPSS() float64 { return s.DaemonPSS + s.WorkersPSS }

// TotalRSS adds up resident memory, the pages the processes share counted in each.
func (s memStep) TotalRSS() float64 { return s.DaemonRSS + s.WorkersRSS }

type memResult struct {
	Command []string    `json:"command,omitempty"`
	Daemon  daemonFlags `json:"daemon"`
	Label   string      `json:"label"`
	Width   int         `json:"width"` // the video's picture
	Height  int         `json:"height"`
	WarmupS float64     `json:"warmup_s"`
	WindowS float64     `json:"window_s"`
	Steps   []memStep   `json:"steps"`
	Load    loadAvg     `json:"load"`
	Started time.Time   `json:"started"`
}

// perCamera is what a further camera costs: the least-squares slope of the daemon's resident
// memory (and of every process's PSS together) over the steps' camera counts, in MiB.
func (r memResult) perCamera() (daemon, total float64) {
	var n, d, t []float64
	for _, s := range r.Steps {
		n, d, t = append(n, float64(s.Cameras)), append(d, s.DaemonRSS), append(t, s.TotalPSS())
	}
	return slope(n, d), slope(n, t)
}

// ownerPerCamera is what a further camera costs an owner of the daemon's memory (get): the
// least-squares slope of its medians over the steps, in MiB.
func (r memResult) ownerPerCamera(get func(memOwners) float64) float64 {
	var n, v []float64
	for _, s := range r.Steps {
		n, v = append(n, float64(s.Cameras)), append(v, get(s.Owners))
	}
	return slope(n, v)
}

// memoryCmd runs the daemon at each camera count in turn (a fresh daemon each), waits for
// the warm-up, then samples every process's memory through the window: the daemon's by owner
// (/api/memory), its resident and proportional memory and its workers' (/proc).
func memoryCmd(args []string) error {
	fs := flag.NewFlagSet("memory", flag.ContinueOnError)
	var f daemonFlags
	f.register(fs)
	out := fs.String("o", "-", "output JSON")
	label := fs.String("label", "", "what the run shows, for the report")
	counts := fs.String("cameras", "1,16", "camera counts, comma-separated: a daemon run each")
	warmup := fs.Duration("warmup", 30*time.Second, "wait after every camera is online")
	dur := fs.Duration("window", 60*time.Second, "sampling window")
	every := fs.Duration("sample-every", 5*time.Second, "between samples")
	profiles := fs.String("profiles", "", "a `DIR` for the daemon's Go heap profile at the end of each window (heap-N.pb.gz, N cameras; go tool pprof reads them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f.Pprof = *profiles != ""
	var ns []int
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-cameras %q: want positive counts, comma-separated", *counts)
		}
		ns = append(ns, n)
	}
	w, h, err := videoSize(f.Video)
	if err != nil { // the GPU machine has no ffprobe: the run goes on, its size unknown (0x0)
		logf("memory: the video's size unknown: %v", err)
	}
	res := memResult{Command: os.Args, Daemon: f, Label: *label, Width: w, Height: h, WarmupS: warmup.Seconds(),
		WindowS: dur.Seconds(), Load: readLoad(), Started: time.Now()}
	for _, n := range ns {
		step, err := memoryStep(f, n, *warmup, *dur, *every, *profiles)
		if err != nil {
			return fmt.Errorf("%d cameras: %w", n, err)
		}
		logf("memory %s, %d cameras: daemon %.0f MiB (PSS %.0f), workers %.0f MiB (PSS %.0f), all PSS %.0f MiB; %.2f frames/s a camera",
			res.Label, n, step.DaemonRSS, step.DaemonPSS, step.WorkersRSS, step.WorkersPSS, step.TotalPSS(), float64(step.Window.Events)/step.Window.Seconds/float64(n))
		res.Steps = append(res.Steps, step)
	}
	if d, t := res.perCamera(); len(res.Steps) > 1 {
		logf("memory %s: %.1f MiB a further camera in the daemon, %.1f MiB in all processes (PSS)", res.Label, d, t)
	}
	return writeJSON(*out, res)
}

func memoryStep(f daemonFlags, n int, warmup, dur, every time.Duration, profiles string) (memStep, error) {
	d, err := startDaemon(f, n)
	if err != nil {
		return memStep{}, err
	}
	defer d.Stop()
	if err := d.warmUp(warmup); err != nil {
		return memStep{}, err
	}
	step := memStep{Cameras: n}
	o := d.openWindow()
	for t := time.Duration(0); t <= dur; t += every {
		if t > 0 {
			time.Sleep(every)
		}
		s, err := d.memSample(o.from)
		if err != nil {
			return step, err
		}
		step.Samples = append(step.Samples, s)
	}
	step.Window = d.closeWindow(o)
	if err := d.alive(); err != nil {
		return step, err
	}
	if profiles != "" {
		if err := os.MkdirAll(profiles, 0o755); err != nil {
			return step, err
		}
		if err := d.save("/debug/pprof/heap", filepath.Join(profiles, fmt.Sprintf("heap-%d.pb.gz", n))); err != nil {
			return step, fmt.Errorf("heap profile: %w", err)
		}
	}
	med := func(get func(memSample) float64) float64 {
		var xs []float64
		for _, s := range step.Samples {
			xs = append(xs, get(s))
		}
		return pct(xs, .5)
	}
	step.Owners = memOwners{
		Resident:        med(func(s memSample) float64 { return s.Owners.Resident }),
		Go:              med(func(s memSample) float64 { return s.Owners.Go }),
		NATSCaches:      med(func(s memSample) float64 { return s.Owners.NATSCaches }),
		FrameBuffers:    med(func(s memSample) float64 { return s.Owners.FrameBuffers }),
		SnapshotBuffers: med(func(s memSample) float64 { return s.Owners.SnapshotBuffers }),
		ClipRings:       med(func(s memSample) float64 { return s.Owners.ClipRings }),
		CHeap:           med(func(s memSample) float64 { return s.Owners.CHeap }),
		GPUDriver:       med(func(s memSample) float64 { return s.Owners.GPUDriver }),
		Code:            med(func(s memSample) float64 { return s.Owners.Code }),
		Shared:          med(func(s memSample) float64 { return s.Owners.Shared }),
	}
	step.DaemonRSS = med(func(s memSample) float64 { return s.Daemon.RSS })
	step.DaemonPSS = med(func(s memSample) float64 { return s.Daemon.PSS })
	sum := func(ps []procMem, get func(procMem) float64) float64 {
		var t float64
		for _, p := range ps {
			t += get(p)
		}
		return t
	}
	step.WorkersRSS = med(func(s memSample) float64 { return sum(s.Workers, func(p procMem) float64 { return p.RSS }) })
	step.WorkersPSS = med(func(s memSample) float64 { return sum(s.Workers, func(p procMem) float64 { return p.PSS }) })
	step.Workers = len(step.Samples[len(step.Samples)-1].Workers)
	return step, nil
}

// memSample reads the daemon's memory by owner and every process's memory now.
func (d *daemon) memSample(from time.Time) (memSample, error) {
	var m struct {
		Resident int64 `json:"resident_bytes"`
		Go       int64 `json:"go_bytes"`
		NATS     int64 `json:"nats_store_caches_bytes"`
		Frames   int64 `json:"frame_buffers_bytes"`
		Snaps    int64 `json:"snapshot_buffers_bytes"`
		Rings    int64 `json:"clip_rings_bytes"`
		CHeap    int64 `json:"c_heap_bytes"`
		Driver   int64 `json:"gpu_driver_bytes"`
		Code     int64 `json:"code_bytes"`
		Shared   int64 `json:"shared_bytes"`
	}
	if err := d.getJSON("/api/memory", &m); err != nil {
		return memSample{}, err
	}
	s := memSample{T: time.Since(from).Seconds(), Owners: memOwners{Resident: mib(m.Resident), Go: mib(m.Go), NATSCaches: mib(m.NATS),
		FrameBuffers: mib(m.Frames), SnapshotBuffers: mib(m.Snaps), ClipRings: mib(m.Rings), CHeap: mib(m.CHeap),
		GPUDriver: mib(m.Driver), Code: mib(m.Code), Shared: mib(m.Shared)}}
	s.Daemon = readProcMem(d.cmd.Process.Pid)
	ws, err := d.workers()
	if err != nil {
		return s, err
	}
	for _, w := range ws {
		if w.PID > 0 {
			s.Workers = append(s.Workers, readProcMem(w.PID))
		}
	}
	return s, nil
}

// readProcMem reads a process's Rss and Pss from /proc/<pid>/smaps_rollup; zeros when it is
// gone.
func readProcMem(pid int) procMem {
	p := procMem{PID: pid}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return p
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "Rss:":
			p.RSS = kb / 1024
		case "Pss:":
			p.PSS = kb / 1024
		}
	}
	return p
}

// videoSize is the picture size of the H.264 video every camera plays, from ffprobe.
func videoSize(path string) (w, h int, err error) {
	data, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "stream=width,height", "-of", "csv=p=0", path).Output()
	if err != nil {
		return 0, 0, fmt.Errorf("ffprobe %s: %w", path, err)
	}
	out, _, _ := strings.Cut(strings.TrimSpace(string(data)), "\n") // a line per program of a transport stream
	parts := strings.Split(strings.TrimSpace(out), ",")
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("ffprobe %s: %q: no size", path, out)
	}
	w, err1 := strconv.Atoi(parts[0])
	h, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("ffprobe %s: %q: no size", path, out)
	}
	return w, h, nil
}

// memoryAims are the issue's: a further camera's host memory in the daemon (576p or 720p,
// decode included, clips off) and all processes together at 16 cameras of 720p.
const (
	aimMiBPerCamera = 8
	aimMiBAt16x720  = 800
)

// sortedSteps returns r's steps by camera count.
func (r memResult) sortedSteps() []memStep {
	s := slices.Clone(r.Steps)
	slices.SortFunc(s, func(a, b memStep) int { return a.Cameras - b.Cameras })
	return s
}

// memoryRuns are the run's memory results (memory-*.json), by file name.
func memoryRuns(ru *run) []memResult {
	files, _ := filepath.Glob(filepath.Join(ru.dir, "memory-*.json"))
	sort.Strings(files)
	var rs []memResult
	for _, f := range files {
		var m memResult
		if readJSON(f, &m) == nil && len(m.Steps) > 0 {
			rs = append(rs, m)
		}
	}
	return rs
}

// memorySummary is the summary's rows of the memory results: a further camera's memory in
// the daemon, and all processes at the largest step.
func (r *report) memorySummary(local *run) [][]string {
	ms := memoryRuns(local)
	if len(ms) == 0 {
		return [][]string{{"memory: the daemon's host memory per camera", local.name(), r.notRun(local, "memory")}}
	}
	var rows [][]string
	for _, m := range ms {
		s := m.sortedSteps()
		last := s[len(s)-1]
		d, t := m.perCamera()
		met := "met"
		if d > aimMiBPerCamera {
			met = "**not met**"
		}
		rows = append(rows, []string{fmt.Sprintf("memory: the daemon's resident memory a further camera (%s, %dx%d H.264, clips off), %d to %d cameras",
			m.Label, m.Width, m.Height, s[0].Cameras, last.Cameras), local.name(),
			fmt.Sprintf("**%s MiB** (aim ≤ %d: %s); all processes %s MiB a camera (PSS); at %d cameras daemon %s MiB, workers %s MiB (PSS %s), all %s MiB PSS",
				f1(d), aimMiBPerCamera, met, f1(t), last.Cameras, f0(last.DaemonRSS), f0(last.WorkersRSS), f0(last.WorkersPSS), f0(last.TotalPSS()))})
	}
	return rows
}

// memorySection is the report's section of the memory results.
func (r *report) memorySection(local *run) {
	r.p("## Memory: per camera and by owner")
	r.p("")
	ms := memoryRuns(local)
	if len(ms) == 0 {
		r.p("`visiond-bench memory` (cmd/visiond-bench/memory.go; `make bench PARTS=memory`). Not run here: %s.", r.notRun(local, "memory"))
		r.p("")
		return
	}
	m0 := ms[0]
	r.p("`visiond-bench memory` (cmd/visiond-bench/memory.go) runs a fresh daemon (`visiond run` on the bench's config: workers %s, %s,", m0.Daemon.Workers.describe(0), m0.Daemon.Provider)
	r.p("analytics on, JetStream on, clips off) at each camera count, every camera the same H.264 file served over RTSP on loopback,")
	r.p("waits %s s after every camera is online, then samples every %s through %s s: the daemon's memory by owner (`/api/memory`,",
		f0(m0.WarmupS), "5 s", f0(m0.WindowS))
	r.p("also `visiond_memory_bytes` on /metrics), and the resident (RSS) and proportional (PSS) memory of the daemon and each worker")
	r.p("(/proc/<pid>/smaps_rollup). The figures are the samples' medians. A page that k processes share counts whole in each one's RSS and")
	r.p("1/k in each one's PSS: the sum of PSS is what the processes cost together (the daemon and its workers map the same executable")
	r.p("and libraries). A further camera's cost is the least-squares slope over the steps. Owners: go, the Go runtime (the daemon, the")
	r.p("embedded NATS server, RTSP sessions); nats caches, the embedded NATS server's file-store block buffers (in the Go heap: a")
	r.p("block's cache while its stream writes to it, up to 8 MB, and for 10 s after a read); frames, the cameras' decoded frames (shared pools outside")
	r.p("the Go heap holding the frames in flight, each waiting in YUV 4:2:0 at its scaled size where it can); snapshots, frames kept for")
	r.p("snapshots and evidence; c heap, the C libraries' memory (FFmpeg's")
	r.p("decoders above all); gpu driver, the GPU driver's mappings of its device files (page-locked memory, NVDEC's host state);")
	r.p("code, the executable's and libraries' pages.")
	r.p("")
	var rows [][]string
	for _, m := range ms {
		for _, s := range m.sortedSteps() {
			o := s.Owners
			rows = append(rows, []string{m.Label, fmt.Sprintf("%dx%d", m.Width, m.Height), fmt.Sprint(s.Cameras),
				f2(float64(s.Window.Events) / s.Window.Seconds / float64(s.Cameras)),
				f0(s.DaemonRSS), f0(o.Go), f0(o.NATSCaches), f0(o.FrameBuffers), f0(o.SnapshotBuffers), f0(o.CHeap), f0(o.GPUDriver), f0(o.Code), f0(o.Shared),
				fmt.Sprintf("%d: %s (%s)", s.Workers, f0(s.WorkersRSS), f0(s.WorkersPSS)), f0(s.TotalRSS()), f0(s.TotalPSS())})
		}
	}
	r.table([]string{"cameras' video", "size", "cameras", "frames analysed/s a camera", "daemon RSS", "go", "nats caches", "frames", "snapshots", "c heap", "gpu driver", "code", "shared",
		"workers: RSS (PSS)", "all RSS", "all PSS"}, rows)
	for _, m := range ms {
		d, t := m.perCamera()
		r.p("- %s: **%s MiB a further camera** in the daemon's resident memory (aim ≤ %d), %s MiB in all processes' PSS; taken %s, load average %s at the start; command: `%s`.",
			m.Label, f1(d), aimMiBPerCamera, f1(t), m.Started.UTC().Format("2006-01-02 15:04 UTC"), f1(m.Load.One), strings.Join(m.Command, " "))
		if len(m.Steps) > 1 {
			per := func(get func(memOwners) float64) string { return f1(m.ownerPerCamera(get)) }
			r.p("  By owner, a further camera: go %s, nats caches %s, frames %s, snapshots %s, c heap %s, gpu driver %s MiB.",
				per(func(o memOwners) float64 { return o.Go }), per(func(o memOwners) float64 { return o.NATSCaches }),
				per(func(o memOwners) float64 { return o.FrameBuffers }), per(func(o memOwners) float64 { return o.SnapshotBuffers }),
				per(func(o memOwners) float64 { return o.CHeap }), per(func(o memOwners) float64 { return o.GPUDriver }))
		}
		if m.Height == 720 {
			if last := m.sortedSteps()[len(m.Steps)-1]; last.Cameras == 16 {
				met := "met"
				if last.TotalPSS() > aimMiBAt16x720 {
					met = "not met"
				}
				r.p("- The seeds' figure, 16 cameras of 720p with the daemon and its workers together: **%s MiB** (PSS; aim ≤ %d: %s); %s MiB adding up RSS, which counts the shared pages once a process.",
					f0(last.TotalPSS()), aimMiBAt16x720, met, f0(last.TotalRSS()))
			}
		}
	}
	r.p("")
}
