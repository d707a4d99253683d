package main

// The report's cameras-per-box comparison: scale searches side by side (visiond's default
// CPU pool with FP32 and INT8 models against scripts/bench/peer.py on the same cores; one
// CUDA worker of N sessions, FP16 against FP32), the aims, and how the cost grows with the
// cameras (a plot per machine and provider).

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// The aims of the comparison: visiond's default CPU pool against the Python loop, and one
// CUDA worker on the GPU machine.
const (
	aimCamerasVsPeer = 1.5 // at least this many times the loop's cameras
	aimCPUVsPeer     = 0.6 // at most this many times its CPU per analysed frame
	aimGPUCameras    = 250 // cameras at 5 fps with p99 under 300 ms (issue 25)
)

// holdPrefix names the GPU machine's hold results: `visiond-bench measure` of one setup at
// a number of cameras, over one window (hold-*.json), which say whether that many are held
// where a scale search has not been run to its end.
const holdPrefix = "hold-"

// holdSetup is a hold result's setup in words, from its daemon's flags.
func holdSetup(m *measureResult) string {
	d := m.Daemon
	text := fmt.Sprintf("visiond run, %s %s worker(s)", d.Workers.describe(0), d.Provider)
	if d.Sessions > 0 {
		text += fmt.Sprintf(" of %d sessions", d.Sessions)
	}
	if d.CUDA != "" {
		text += ", cuda " + d.CUDA
	}
	if d.Decoder != "" {
		text += ", decoder " + d.Decoder
	}
	if d.Analytics {
		text += ", analytics on"
	}
	if d.JetStream {
		text += ", JetStream on"
	}
	text += fmt.Sprintf(", %d camera server(s)", max(d.Phases, 1))
	if v := m.Version.String(); v != "" {
		text += ", visiond " + v
	}
	return text
}

// The raw files of the comparison (scripts/gpu/bench.sh's cpu-scale, peer-scale and gpu-scale parts).
const (
	keyCPUFP32 = "scale-cpu-fp32"
	keyCPUINT8 = "scale-cpu-int8"
	keyPeer    = "peer-scale"
)

// capStep is the step that set the capacity (the last passing step with that many cameras),
// or nil when none passed.
func capStep(s *scaleResult) *scaleStep {
	for i := len(s.Steps) - 1; i >= 0; i-- {
		if st := &s.Steps[i]; st.Pass && st.Cameras == s.Capacity {
			return st
		}
	}
	return nil
}

// measured is every step of the search's run: the curve's, then the search's.
func (s *scaleResult) measured() []scaleStep {
	return append(append([]scaleStep(nil), s.Curve...), s.Steps...)
}

// hasCost reports whether the search recorded what its steps cost (older results did not).
func hasCost(s *scaleResult) bool {
	for _, st := range s.measured() {
		if st.Cost.CPUSeconds > 0 {
			return true
		}
	}
	return false
}

// setup is the search's subject in words.
func setup(s *scaleResult) string {
	if v := s.Version.String(); s.Label != "" && v != "" {
		return s.Label + ", visiond " + v
	}
	if s.Label != "" {
		return s.Label
	}
	if s.Peer != nil {
		return "peer.py " + s.Peer.Mode
	}
	seen := 0
	if st := capStep(s); st != nil {
		seen = st.Cost.Processes
	}
	d := s.Daemon
	text := fmt.Sprintf("%s %s worker(s)", d.Workers.describe(seen), d.Provider)
	if d.Sessions > 0 {
		text += fmt.Sprintf(", %d sessions each", d.Sessions)
	}
	return text
}

// gpuKeys are the run's gpu-scale results (scale-cuda-sN, then scale-cuda-sN-fp16), by
// sessions.
func (ru *run) gpuKeys() []string {
	var ks []string
	for k := range ru.scales {
		if strings.HasPrefix(k, "scale-cuda-s") {
			ks = append(ks, k)
		}
	}
	sort.Slice(ks, func(i, j int) bool {
		si, sj := sessionsOf(ks[i]), sessionsOf(ks[j])
		if si != sj {
			return si < sj
		}
		return ks[i] < ks[j]
	})
	return ks
}

func sessionsOf(key string) int {
	s := strings.TrimPrefix(key, "scale-cuda-s")
	s, _, _ = strings.Cut(s, "-")
	n, _ := strconv.Atoi(s)
	return n
}

// ratio is a / b as text, "-" without b.
func ratio(a, b float64) string {
	if a < 0 || b <= 0 {
		return "-"
	}
	return f2(a / b)
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

// cameraRows are the summary's rows of the comparison, for every run that has any of it.
func (r *report) cameraRows() [][]string {
	var rows [][]string
	for _, ru := range r.runs {
		peer := ru.scales[keyPeer]
		for _, k := range []string{keyCPUFP32, keyCPUINT8} {
			s := ru.scales[k]
			if s == nil {
				if why, ok := ru.failed[k]; ok {
					rows = append(rows, []string{"cameras per box, CPU: " + strings.TrimPrefix(k, "scale-"), ru.name(), "failed: " + oneLine(why)})
				}
				continue
			}
			what := fmt.Sprintf("cameras per box on %s CPU cores (%g fps each, p99 < %g ms): visiond, %s", cpusOf(ru), s.Criterion.FPS, s.Criterion.P99MS, setup(s))
			fig := fmt.Sprintf("**%d**", s.Capacity)
			if peer != nil && peer.Capacity == 0 {
				fig += " against the Python loop's 0 (it sustained not one camera: no ratio)"
			} else if peer != nil {
				cr := float64(s.Capacity) / float64(peer.Capacity)
				fig += fmt.Sprintf(" against the Python loop's %d: %s× (aim %g×: %s)", peer.Capacity, f2(cr), aimCamerasVsPeer, met(cr >= aimCamerasVsPeer))
				if a, b := capStep(s), capStep(peer); a != nil && b != nil {
					cpu := a.Cost.CPUPerFrameMS / b.Cost.CPUPerFrameMS
					fig += fmt.Sprintf("; CPU per analysed frame %s ÷ %s ms = %s× (aim ≤ %g×: %s)", f1(a.Cost.CPUPerFrameMS), f1(b.Cost.CPUPerFrameMS), ratio(a.Cost.CPUPerFrameMS, b.Cost.CPUPerFrameMS), aimCPUVsPeer,
						met(b.Cost.CPUPerFrameMS > 0 && cpu <= aimCPUVsPeer))
				}
			} else {
				fig += "; the Python loop: " + r.notRun(ru, keyPeer)
			}
			rows = append(rows, []string{what, ru.name(), fig})
		}
		if peer == nil && ru.failed[keyPeer] != "" && ru.scales[keyCPUFP32] == nil {
			rows = append(rows, []string{"cameras per box, CPU: the Python loop", ru.name(), r.notRun(ru, keyPeer)})
		}
		var fp32 = map[int]*scaleResult{}
		for _, k := range ru.gpuKeys() {
			s := ru.scales[k]
			fig := fmt.Sprintf("**%d** (aim %d: %s)", s.Capacity, aimGPUCameras, met(s.Capacity >= aimGPUCameras))
			if st := capStep(s); st != nil {
				fig += fmt.Sprintf("; p99 %s ms; %d reconnects at start; GPU %s MiB, %s MiB per camera", f0(st.Window.p99()), st.Window.ReconnectsWarmup,
					f0(gpuMiB(st)), f1(gpuMiB(st)/float64(st.Cameras)))
			}
			n := sessionsOf(k)
			if strings.HasSuffix(k, "-fp16") {
				if ref := fp32[n]; ref != nil {
					fig += fmt.Sprintf("; FP16 ÷ FP32 (%d session(s)): %s× the cameras", n, ratio(float64(s.Capacity), float64(ref.Capacity)))
					if a, b := capStep(s), capStep(ref); a != nil && b != nil {
						fig += fmt.Sprintf(", %s× the GPU memory per camera", ratio(gpuMiB(a)/float64(a.Cameras), gpuMiB(b)/float64(b.Cameras)))
					}
				}
			} else {
				fp32[n] = s
			}
			fig += "; started " + runAt(s)
			rows = append(rows, []string{fmt.Sprintf("cameras per box on the GPU (%g fps each, p99 < %g ms): %s", s.Criterion.FPS, s.Criterion.P99MS, setup(s)), ru.name(), fig})
		}
		for _, k := range ru.holdKeys() {
			m, c := ru.holds[k], holdCriterion()
			ok, why := c.check(m.Window)
			fig := fmt.Sprintf("**%d cameras %s** for %s s (aim %d: %s)", m.Cameras, map[bool]string{true: "held", false: "not held"}[ok], f0(m.Window.Seconds),
				aimGPUCameras, met(ok && m.Cameras >= aimGPUCameras))
			if !ok {
				fig += ": " + why
			}
			g := m.DaemonGPUMiB + m.WorkersGPUMiB
			fig += fmt.Sprintf("; slowest camera %s/s; p99 %s ms; %d reconnects at start; GPU %s MiB, %s MiB per camera", f2(m.Window.MinCamera),
				f0(m.Window.p99()), m.Window.ReconnectsWarmup, f0(g), f1(g/float64(max(m.Cameras, 1))))
			if len(m.Command) > 0 {
				fig += fmt.Sprintf("; `%s`", strings.Join(m.Command, " "))
			} else {
				fig += "; from " + k + ".json"
			}
			rows = append(rows, []string{fmt.Sprintf("cameras held on the GPU (%g fps each, p99 < %g ms, one window): %s%s", c.FPS, c.P99MS, holdSetup(m), modelNoteOf(m.Daemon.Model)), ru.name(), fig})
		}
		var failed []string
		for k := range ru.failed {
			if strings.HasPrefix(k, "scale-cuda-s") && ru.scales[k] == nil {
				failed = append(failed, k)
			}
		}
		sort.Strings(failed)
		for _, k := range failed {
			rows = append(rows, []string{"cameras per box on the GPU: " + strings.TrimPrefix(k, "scale-"), ru.name(), "failed: " + oneLine(ru.failed[k])})
		}
	}
	return rows
}

// gpuMiB is the step's GPU memory: the daemon's and workers' (per process), else the
// device's in use.
func gpuMiB(st *scaleStep) float64 {
	if st.Cost.GPUMiB > 0 {
		return st.Cost.GPUMiB
	}
	return st.Cost.DeviceGPUMiB
}

func cpusOf(ru *run) string {
	if ru.env == nil {
		return "the"
	}
	return strconv.Itoa(ru.env.CPUs)
}

// camerasSection writes the comparison's tables and plots.
func (r *report) camerasSection() error {
	any := false
	for _, ru := range r.runs {
		if ru.scales[keyCPUFP32] != nil || ru.scales[keyPeer] != nil || len(ru.gpuKeys()) > 0 {
			any = true
		}
	}
	r.p("## Cameras per box, side by side")
	r.p("")
	r.p("Each figure is one scale search (`visiond-bench scale`, or `visiond-bench peer-scale` for the Python loop) in one run:")
	r.p("cameras added by config reloads (the loop: restarted with more cameras), all playing the sample video over RTSP from")
	r.p("camera servers in the bench process, each analysed at 5 fps; a step passes when every camera reaches its share of")
	r.p("5 fps, all together 95%%, and the p99 of capture-to-publish latency (the loop: from the frame's live arrival to its")
	r.p("result) is under 300 ms. Every step records the cores busy (CPU time of the daemon and its workers, or of the loop's")
	r.p("process, over the window ÷ the window), CPU per analysed frame, GPU memory (nvidia-smi) and the p99; the figures of a")
	r.p("setup are those of the step with the most cameras sustained. The loop is `scripts/bench/peer.py --fps 5` (a thread per")
	r.p("camera reading every frame with OpenCV, those between analysis slots skipped by the stream's clock, one ONNX Runtime session with")
	r.p("its default threads shared by the threads). Aims: visiond's default CPU pool %g× the loop's cameras at most %g× its", aimCamerasVsPeer, aimCPUVsPeer)
	r.p("CPU per analysed frame; %d cameras on one CUDA worker.", aimGPUCameras)
	r.p("")
	if !any {
		r.p("Not run: `scripts/gpu/bench.sh env cpu-scale peer-scale` and `scripts/gpu/bench.sh gpu-scale` on the GPU machine, then `make bench-report GPU=DIR`.")
		r.p("")
		return nil
	}
	for _, ru := range r.runs {
		peer := ru.scales[keyPeer]
		var cpuRows [][]string
		for _, k := range []string{keyPeer, keyCPUFP32, keyCPUINT8} {
			s := ru.scales[k]
			if s == nil {
				if why, ok := ru.failed[k]; ok {
					cpuRows = append(cpuRows, []string{strings.TrimPrefix(k, "scale-"), "failed: " + oneLine(why), "", "", "", "", "", "", "", ""})
				}
				continue
			}
			st := capStep(s)
			row := []string{setup(s) + modelNote(s), sustained(s), "-", "-", "-", "-", "-", "-", "-", runAt(s)}
			if peer != nil && s != peer {
				row[2] = ratio(float64(s.Capacity), float64(peer.Capacity))
			}
			if st != nil {
				row[3] = f1(st.Cost.CPUPerFrameMS)
				if pst := capStep(peer0(peer)); pst != nil && s != peer {
					row[4] = ratio(st.Cost.CPUPerFrameMS, pst.Cost.CPUPerFrameMS)
				}
				row[5], row[6], row[7], row[8] = f2(st.Cost.CoresBusy), f0(st.Window.TotalP99), f2(st.Window.MinCamera), f0(st.Cost.RSSMiB)
			}
			cpuRows = append(cpuRows, row)
		}
		if len(cpuRows) > 0 {
			r.p("%s, CPU provider on every core (`visiond-bench scale -provider cpu`, the pool's count and threads left to the daemon):", ru.name())
			r.p("")
			r.table([]string{"setup", "cameras sustained", fmt.Sprintf("÷ the loop's (aim ≥ %g)", aimCamerasVsPeer), "CPU ms per analysed frame",
				fmt.Sprintf("÷ the loop's (aim ≤ %g)", aimCPUVsPeer), "cores busy", "p99 ms", "slowest camera /s", "MiB RSS", "started (UTC)"}, cpuRows)
		}
		var gpuRows [][]string
		var commands []string
		for _, k := range ru.gpuKeys() {
			s := ru.scales[k]
			row := []string{setup(s) + modelNote(s), sustained(s), "-", "-", "-", "-", "-", "-", "-", "-", runAt(s)}
			if st := capStep(s); st != nil {
				g := gpuMiB(st)
				row[2], row[3] = f0(st.Window.p99()), fmt.Sprintf("%d / %d", st.Window.ReconnectsWarmup, st.Window.ReconnectsWindow)
				row[4], row[5], row[6], row[7] = f0(g), f1(g/float64(st.Cameras)), f2(st.Cost.CoresBusy), f1(st.Cost.CPUPerFrameMS)
			}
			var xs, ys, ds []float64
			for _, st := range s.measured() {
				if g := gpuMiB(&st); g > 0 {
					xs, ys, ds = append(xs, float64(st.Cameras)), append(ys, g), append(ds, st.Cost.DaemonGPUMiB)
				}
			}
			if len(xs) >= 2 {
				row[8] = f1(slope(xs, ys))
				if slices.Max(ds) > 0 {
					row[9] = f1(slope(xs, ds))
				}
			}
			gpuRows = append(gpuRows, row)
			if len(s.Command) > 0 {
				commands = append(commands, fmt.Sprintf("- %s: `%s`", setup(s), strings.Join(s.Command, " ")))
			}
		}
		if len(gpuRows) > 0 {
			r.p("%s, one CUDA worker process (`visiond-bench scale -provider cuda -workers 1 -sessions N`, driving `visiond run`):", ru.name())
			r.p("")
			r.table([]string{"setup", fmt.Sprintf("cameras sustained (aim %d)", aimGPUCameras), "p99 ms (as a subscriber sees it, where events carry captured_at)",
				"reconnects (warm-up / window)", "GPU MiB (daemon and worker)", "GPU MiB per camera",
				"cores busy", "CPU ms per analysed frame", "GPU MiB per added camera (least squares over the steps)",
				"of which the daemon's (NVDEC)", "started (UTC)"}, gpuRows)
			for _, c := range commands {
				r.p("%s", c)
			}
			if len(commands) > 0 {
				r.p("")
			}
		}
		for _, fam := range []string{"cpu", "gpu"} {
			name, err := r.growthPlot(ru, fam)
			if err != nil {
				return err
			}
			if name != "" {
				r.p("![how the cost grows with the cameras, %s, %s provider](%s)", ru.name(), fam, name)
				r.p("")
			}
		}
	}
	return nil
}

// runAt is when the search started, "-" if it did not say.
func runAt(s *scaleResult) string {
	if s.Started.IsZero() {
		return "-"
	}
	return s.Started.UTC().Format("2006-01-02 15:04")
}

// peer0 is s, or an empty result (no steps) when s is nil.
func peer0(s *scaleResult) *scaleResult {
	if s == nil {
		return &scaleResult{}
	}
	return s
}

// modelNote names the model when it is not the default one.
func modelNote(s *scaleResult) string { return modelNoteOf(s.Daemon.Model) }

func modelNoteOf(model string) string {
	if model == "" || model == "third_party/yolov8n.onnx" {
		return ""
	}
	return " (`" + model + "`)"
}

// holdKeys are the run's hold results, by name.
func (ru *run) holdKeys() []string {
	ks := make([]string, 0, len(ru.holds))
	for k := range ru.holds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// holdCriterion is what a hold result is judged by: the GPU scale searches' criterion
// (visiond-bench scale's defaults, -fps 5 -p99 300ms).
func holdCriterion() criterion { return criterion{FPS: 5, P99MS: 300, MinShare: 0.95, Total: 0.95} }

// family is the kind of machine part a search loads: "gpu" for cuda and tensorrt workers,
// "cpu" for CPU workers and the Python loop.
func family(s *scaleResult) string {
	if s.Peer == nil && (s.Daemon.Provider == "cuda" || s.Daemon.Provider == "tensorrt") {
		return "gpu"
	}
	return "cpu"
}

// growthPlot draws, for the run's searches of a family that recorded their cost, cores
// busy, GPU memory (gpu) and p99 latency against cameras, every step measured; it returns
// the report's link to the PNG (in imgDir), "" when there is nothing to draw.
func (r *report) growthPlot(ru *run, fam string) (string, error) {
	var keys []string
	for k, s := range ru.scales {
		if family(s) == fam && hasCost(s) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "", nil
	}
	sort.Strings(keys)
	cores := panel{ylabel: "cores busy (CPU time of daemon + workers, or of the loop, / wall)"}
	gpu := panel{ylabel: "GPU memory of daemon + workers (MiB, nvidia-smi)"}
	lat := panel{ylabel: "p99 capture-to-publish latency (ms)"}
	xmax, bound := 0.0, 0.0
	for i, k := range keys {
		s := ru.scales[k]
		steps := s.measured()
		sort.SliceStable(steps, func(a, b int) bool { return steps[a].Cameras < steps[b].Cameras })
		var x, c, g, l []float64
		for _, st := range steps {
			if st.Window.Seconds == 0 {
				continue // not measured (the cameras did not come online)
			}
			x = append(x, float64(st.Cameras))
			c = append(c, st.Cost.CoresBusy)
			g = append(g, gpuMiB(&st))
			l = append(l, st.Window.TotalP99)
			xmax = math.Max(xmax, float64(st.Cameras))
		}
		bound = math.Max(bound, s.Criterion.P99MS)
		col := palette[i%len(palette)]
		name := setup(s)
		if !s.Started.IsZero() { // searches of one setup in several calls differ by their time
			name += s.Started.UTC().Format(" (15:04)")
		}
		cores.series = append(cores.series, series{name: name, x: x, y: c, col: col})
		gpu.series = append(gpu.series, series{name: name, x: x, y: g, col: col})
		lat.series = append(lat.series, series{name: name, x: x, y: l, col: col})
	}
	if bound > 0 {
		lat.series = append(lat.series, series{name: "bound", x: []float64{0, xmax * 1.05}, y: []float64{bound, bound}, col: colorGray})
	}
	panels := []panel{cores, lat}
	if fam == "gpu" {
		panels = []panel{cores, gpu, lat}
	}
	tag := "local"
	if ru.tag == "gpu" {
		tag = "gpu-machine"
	}
	name := fmt.Sprintf("BENCHMARKS-growth-%s-%s.png", tag, fam)
	title := fmt.Sprintf("visiond: cost against cameras at %g fps each, %s, %s provider", ru.scales[keys[0]].Criterion.FPS, ru.name(), fam)
	path, link, err := r.imgPath(name)
	if err != nil {
		return "", err
	}
	return link, plot(path, title, "cameras", xmax*1.05, panels)
}

// sustained is the search's capacity with its first failure, and whether its budget cut it
// short of its resolution.
func sustained(s *scaleResult) string {
	cut := ""
	if s.Cut {
		cut = fmt.Sprintf("; search cut by its %s budget", dur(s.Search.Budget))
	}
	switch {
	case s.FirstFail == 0 && s.Cut:
		return fmt.Sprintf("**%d** (none failed%s)", s.Capacity, cut)
	case s.FirstFail == 0:
		return fmt.Sprintf("**%d** (none failed up to %d)", s.Capacity, s.Search.Max)
	}
	return fmt.Sprintf("**%d** (%d failed%s)", s.Capacity, s.FirstFail, cut)
}
