package main

// The sections of BENCHMARKS.md after its summary, in the order report.write writes them.

import (
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

func (r *report) machines() {
	r.p("## Machines and versions")
	r.p("")
	head := []string{""}
	for _, ru := range r.runs {
		head = append(head, ru.name())
	}
	get := func(f func(e *envInfo) string) []string {
		var row []string
		for _, ru := range r.runs {
			if ru.env == nil {
				row = append(row, "-")
			} else {
				row = append(row, f(ru.env))
			}
		}
		return row
	}
	rows := [][]string{
		append([]string{"CPU"}, get(func(e *envInfo) string { return e.CPU })...),
		append([]string{"CPUs"}, get(func(e *envInfo) string { return strconv.Itoa(e.CPUs) })...),
		append([]string{"memory"}, get(func(e *envInfo) string { return f1(e.MemoryGiB) + " GiB" })...),
		append([]string{"GPU"}, get(func(e *envInfo) string { return or(e.GPU, "none") })...),
		append([]string{"OS"}, get(func(e *envInfo) string { return e.OS })...),
		append([]string{"kernel"}, get(func(e *envInfo) string { return e.Kernel })...),
	}
	var loads []string
	for _, ru := range r.runs {
		loads = append(loads, or(ru.loadNote(), "-"))
	}
	rows = append(rows, append([]string{"load"}, loads...))
	keys := map[string]bool{}
	for _, ru := range r.runs {
		if ru.env != nil {
			for k := range ru.env.Versions {
				keys[k] = true
			}
		}
	}
	var ks []string
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		rows = append(rows, append([]string{k}, get(func(e *envInfo) string { return or(e.Versions[k], "-") })...))
	}
	// The peer's own versions, as it reported them.
	for _, ru := range r.runs {
		if ru.peerPlain != nil {
			if v, ok := ru.peerPlain["versions"].(map[string]any); ok {
				var parts []string
				for _, k := range []string{"python", "numpy", "opencv", "onnxruntime"} {
					parts = append(parts, k+" "+fmt.Sprint(v[k]))
				}
				row := []string{"peer.py (Python)"}
				for _, x := range r.runs {
					if x == ru {
						row = append(row, strings.Join(parts, ", "))
					} else {
						row = append(row, "-")
					}
				}
				rows = append(rows, row)
			}
		}
	}
	r.table(head, rows)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (r *report) decodeSection(local *run) {
	r.p("## Decode: CPU per frame against `ffmpeg -f null`")
	r.p("")
	r.p("`BenchmarkDecodeVsFFmpeg` (sources/bench_test.go): 3 s clips of the sample video at each size and codec (10 fps,")
	r.p("a keyframe every second, no B-frames, as cameras send), decoded on one thread by visiond's decoder (libavcodec")
	r.p("through cgo) and by `ffmpeg -threads 1 -i clip -f null -` on the same file; CPU time from getrusage, ffmpeg's")
	r.p("start-up (its run on one frame) subtracted. Ratio below 1: visiond spends less.")
	r.p("")
	for _, ru := range r.runs {
		if len(ru.decode) == 0 {
			continue
		}
		var rows [][]string
		for _, b := range ru.decode {
			rows = append(rows, []string{strings.TrimPrefix(b.name, "BenchmarkDecodeVsFFmpeg/"), f2(b.metrics["ms-cpu/frame"]) + " ms",
				f2(b.metrics["ffmpeg-ms-cpu/frame"]) + " ms", "**" + f2(b.metrics["ratio"]) + "**"})
		}
		r.p("%s, %s iterations per stream:", ru.name(), or(ru.knobs["BENCH_TIME"], "?"))
		r.p("")
		r.table([]string{"stream", "visiond decode CPU/frame", "ffmpeg CPU/frame", "ratio"}, rows)
	}
	if len(local.decode) == 0 {
		r.p("Not run here: %s.", r.notRun(local, "decode"))
		r.p("")
	}
}

func (r *report) pipelineSection() {
	r.p("## Pipeline: detections/s through the daemon against bare loops")
	r.p("")
	r.p("`BenchmarkThroughputVsBareLoop` (pipeline/bench_test.go): the whole daemon (cameras reading the 10 fps sample over")
	r.p("RTSP, more frames than the workers take, every event counted on NATS) against bare loops of `Detector.Detect` on")
	r.p("the same model and provider (tensor preparation, session run, output decoding and NMS, back to back on one frame),")
	r.p("one process per worker like the workers, each with a loop per session, all at once. Ratio above 1: the daemon analyses")
	r.p("more frames per second than the bare loops, because a worker prepares the next frame and decodes the last while its")
	r.p("session runs. Daemon cores: the CPU of the daemon's process (its cameras' decoding and scaling, the bench's RTSP and")
	r.p("NATS servers) over the window; decoder: the cameras' (`cuda`: NVDEC).")
	r.p("")
	any := false
	for _, ru := range r.runs {
		if len(ru.pipeline) == 0 {
			if why, ok := ru.failed["pipeline"]; ok {
				r.p("%s: failed: %s", ru.name(), oneLine(why))
				r.p("")
			}
			continue
		}
		any = true
		var rows [][]string
		for _, b := range ru.pipeline {
			m := b.metrics
			gpuMem := "-"
			if m["MiB-gpu/worker"] > 0 {
				gpuMem = f0(m["MiB-gpu/worker"])
			}
			sessions, cores := "1", "-" // lines from before sessions per worker: one each
			if m["sessions"] > 0 {
				sessions = f0(m["sessions"])
			}
			if m["daemon-cores"] > 0 {
				cores = f2(m["daemon-cores"])
			}
			rows = append(rows, []string{b.prefix["provider"], b.prefix["workers"], sessions, or(b.prefix["threads"], "default"), b.prefix["cameras"],
				or(b.prefix["decoder"], "cpu"), f1(m["bare-runs/s"]), f1(m["one-process-bare-runs/s"]),
				f1(m["daemon-events/s"]), "**" + f2(m["ratio"]) + "**", f0(m["p50-ms"]) + " / " + f0(m["p99-ms"]), cores, f0(m["MiB-rss/worker"]), gpuMem})
		}
		r.p("%s, %s s per side:", ru.name(), or(ru.knobs["PIPE_SECONDS"], or(ru.knobs["GPU_PIPE_SECONDS"], "?")))
		r.p("")
		r.table([]string{"provider", "workers", "sessions per worker", "threads per session", "cameras", "decoder", "bare loops (runs/s)", "same loops in one process", "daemon (events/s)", "ratio",
			"capture→publish p50 / p99 ms", "daemon cores", "MiB RSS per worker", "MiB GPU per worker"}, rows)
	}
	if !any {
		r.p("Not run.")
		r.p("")
	}
}

func (r *report) peerSection(gpu *run) {
	r.p("## A peer: the Python loop of the deployment guides against visiond")
	r.p("")
	r.p("`scripts/bench/peer.py`: one OpenCV `VideoCapture` per camera (FFmpeg backend, RTSP over TCP), a thread per camera,")
	r.p("one ONNX Runtime session (CPU provider) shared by the threads, letterbox and class-wise NMS like visiond's")
	r.p("(checked against visiond's on still images: `peer.py --selftest`). Both read the same RTSP cameras (`visiond-bench")
	r.p("serve`: the sample video in real time at 10 fps, more than either analyses), both are confined to the same CPUs")
	r.p("with `taskset`; the peer's session has as many intra-op threads as there are CPUs, and visiond runs CPU workers")
	r.p("(`visiond-bench measure -fps 10`), as many one-thread workers as CPUs (its default) and in the other")
	r.p("workers × threads splits listed. *plain* is the guides' loop (read, infer, repeat: frames queue in the capture and it falls")
	r.p("behind live); *latest* keeps only each camera's newest frame (a reader thread per camera), the usual fix.")
	r.p("")
	if gpu == nil || gpu.peerD == nil || gpu.peerPlain == nil {
		why := "not run: Python's onnxruntime is not installable on the development box (no PyPI; Debian has none). Run `scripts/gpu/bench.sh peer` on the GPU machine and `make bench GPU=DIR`."
		if gpu != nil {
			why = r.notRun(gpu, "peer")
		}
		r.p("%s", why)
		r.p("")
		if gpu != nil && gpu.selftest != "" {
			r.p("```\n%s\n```\n", gpu.selftest)
		}
		return
	}
	d := gpu.peerD
	if fakePeer(gpu.peerPlain) {
		r.p("**The peer's figures below come from a fake session (`peer.py --fake-output`, for testing the scripts): they measure nothing.**")
		r.p("")
	}
	var rows [][]string
	for _, m := range append([]*measureResult{d}, gpu.peerAlt...) {
		rows = append(rows, []string{fmt.Sprintf("visiond, %d worker(s) × %d thread(s)", m.Daemon.Workers, m.Daemon.Threads), f1(m.Window.EventsPerSec), f1(m.Window.DetsPerSec),
			f2(m.Window.MinCamera) + " / " + f2(m.Window.MaxCamera), f3(m.Window.Jain), "capture→publish " + f0(m.Window.TotalP50) + " / " + f0(m.Window.TotalP99),
			"frame age at dispatch p99 " + f0(m.Window.AgeP99), f1(m.CPUPerFrameMS), f2(m.CoresBusy), f0(m.DaemonRSSMiB + m.WorkersRSSMiB)})
	}
	pf := num(gpu.peerPlain, "frames_per_s")
	for _, p := range []map[string]any{gpu.peerPlain, gpu.peerLatest} {
		if p == nil {
			continue
		}
		rows = append(rows, []string{"peer.py " + str(p, "mode"), f1(num(p, "frames_per_s")), f1(num(p, "detections_per_s")), f2(num(p, "min_camera_per_s")) + " / " + f2(num(p, "max_camera_per_s")),
			f3(num(p, "jain")), "read→result " + f0(num(p, "read_to_result_p50_ms")) + " / " + f0(num(p, "read_to_result_p99_ms")),
			"behind live p99 " + f0(num(p, "lag_p99_ms")) + ", max " + f0(num(p, "lag_max_ms")), f1(num(p, "cpu_ms_per_frame")), f2(num(p, "cores_busy")), f0(num(p, "rss_mib"))})
	}
	r.p("%s: %d cameras, CPUs `%s`, the peer with %s ONNX Runtime threads, %s per side; visiond first with its default", gpu.name(), d.Cameras, d.Daemon.CPUs, fmt.Sprint(num(gpu.peerPlain, "threads")), dur(d.Window.Seconds))
	r.p("workers for those CPUs (a one-thread worker per CPU), then in the other configurations measured:")
	r.p("")
	r.table([]string{"", "frames/s", "detections/s", "slowest / fastest camera (frames/s)", "Jain", "latency p50 / p99 ms", "staleness ms", "CPU ms per frame", "cores busy", "MiB RSS"}, rows)
	r.p("**visiond ÷ peer (plain): %s× the frames per second**, %s× the CPU per frame.", f2(d.Window.EventsPerSec/pf), f2(d.CPUPerFrameMS/num(gpu.peerPlain, "cpu_ms_per_frame")))
	if gpu.peerLatest != nil {
		pl := num(gpu.peerLatest, "frames_per_s")
		r.p("Against the *latest* variant: %s× the frames per second.", f2(d.Window.EventsPerSec/pl))
	}
	r.p("")
	r.p("The latency columns are not the same measurement: visiond's is from capture (the RTP packet's arrival, or the")
	r.p("camera's clock through RTCP) to the event's publication; the peer's is from `read()` returning a frame to the")
	r.p("end of its postprocessing, and its staleness column is how far behind real time the analysed frame was, from")
	r.p("the stream's timestamps (the frames queued in the capture that a plain loop works through).")
	r.p("")
	if gpu.selftest != "" {
		r.p("`peer.py --selftest` on that machine (letterbox, session output and detections against visiond's):")
		r.p("")
		r.p("```\n%s\n```\n", gpu.selftest)
	}
}

func (r *report) scaleSection() {
	r.p("## Scale: cameras sustained at 5 fps with p99 capture-to-publish under 300 ms")
	r.p("")
	r.p("`visiond-bench scale`: a real `visiond run` on a config file that the bench rewrites; cameras are added (and, while")
	r.p("bisecting, removed) by config reloads, all reading the sample video over RTSP from camera servers in the bench")
	r.p("process (started a fraction of a frame apart, so that cameras are not all in phase). The count grows from the first")
	r.p("step's by a factor until a step fails, then bisects. A step passes when every camera is online, all together reach")
	r.p("their share of cameras × fps, the slowest camera its share of its fps, and the p99 of capture-to-publish latency over")
	r.p("the window is under the bound (each search's criterion below). `visiond-bench peer-scale` runs the same search on")
	r.p("`scripts/bench/peer.py`, restarted for every step. Cores busy: CPU time of the daemon and its workers (or the loop's")
	r.p("process) over the window ÷ the window; GPU memory at the window's end.")
	r.p("")
	for _, ru := range r.runs {
		keys := make([]string, 0, len(ru.scales))
		for k := range ru.scales {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { // scale.json first
			if (keys[i] == "scale") != (keys[j] == "scale") {
				return keys[i] == "scale"
			}
			return keys[i] < keys[j]
		})
		if len(keys) == 0 && (ru.tag == "cpu" || ru.failed["scale"] != "") {
			r.p("%s: %s.", ru.name(), r.notRun(ru, "scale"))
			r.p("")
		}
		for _, k := range keys {
			s := ru.scales[k]
			cost, gpu := hasCost(s), false
			for _, st := range s.measured() {
				gpu = gpu || gpuMiB(&st) > 0
			}
			var rows [][]string
			for i, st := range s.measured() {
				w := st.Window
				res := "pass"
				if !st.Pass {
					res = "fail: " + st.Why
				}
				if i < len(s.Curve) {
					res = "(for the curve, not the search) " + res
				}
				row := []string{strconv.Itoa(st.Cameras), f1(w.EventsPerSec), f2(w.MinCamera), f0(w.TotalP50), f0(w.TotalP99), f0(w.TotalMax), f0(w.AgeP99)}
				if cost {
					row = append(row, f2(st.Cost.CoresBusy), f1(st.Cost.CPUPerFrameMS))
				}
				if gpu {
					row = append(row, f0(gpuMiB(&st)))
				}
				rows = append(rows, append(row, f1(w.Load1), res))
			}
			head := []string{"cameras", "events/s", "slowest camera /s", "latency p50 ms", "p99 ms", "max ms", "frame age p99 ms"}
			if s.Peer != nil {
				head[6] = "behind live p99 ms"
			}
			if cost {
				head = append(head, "cores busy", "CPU ms per frame")
			}
			if gpu {
				head = append(head, "GPU MiB")
			}
			head = append(head, "host load", "result")
			c := s.Criterion
			r.p("%s, %s (`%s.json`): %s window per step after %s settling, first step %d cameras: **%d cameras** sustained",
				ru.name(), setup(s)+modelNote(s), k, dur(s.WindowS), dur(s.SettleS), firstCameras(s), s.Capacity)
			r.p("(every camera ≥ %s fps, all ≥ %s × cameras × %g fps, p99 < %g ms; %s searching).", f2(c.MinShare*c.FPS), f2(c.Total), c.FPS, c.P99MS, dur(s.Seconds))
			r.p("")
			r.table(head, rows)
		}
	}
}

// firstCameras is the cameras of the search's first step (0: none), the curve's aside.
func firstCameras(s *scaleResult) int {
	if len(s.Steps) == 0 {
		return 0
	}
	return s.Steps[0].Cameras
}

func (r *report) overloadSection() {
	r.p("## Overload: twice the capacity")
	r.p("")
	r.p("`visiond-bench overload`: twice the capacity, each camera asking 5 fps, for the duration: twice the cameras that the")
	r.p("scale search sustained, or, where that is more, cameras asking twice the most frames per second that the workers")
	r.p("analysed in any step of the search (the latency bound can end the search well below what the workers take).")
	r.p("Frame age is capture to dispatch to a worker (the event's `latency_ms.queue`); frames older than `max_frame_age`")
	r.p("are dropped, not analysed. Fairness is Jain's index over the cameras' analysed frames per second (1: all equal;")
	r.p("1/n: one camera gets everything), over the whole run and per interval.")
	r.p("")
	for _, ru := range r.runs {
		o := ru.overload
		if o == nil {
			if ru.tag == "cpu" || ru.failed["overload"] != "" {
				r.p("%s: %s.", ru.name(), r.notRun(ru, "overload"))
				r.p("")
			}
			continue
		}
		w := o.Overall
		r.p("%s: %d cameras (%d sustained; the search's most analysed %s frames/s) for %s after %s of warm-up; %d %s worker(s).",
			ru.name(), o.Cameras, o.Capacity, f1(o.ScaleMaxRate), dur(o.DurationS), dur(o.WarmupS), o.Daemon.Workers, o.Daemon.Provider)
		r.p("")
		asked := float64(o.Cameras) * o.Daemon.FPS
		r.table([]string{"", "figure"}, [][]string{
			{"analysed frames/s (asked)", fmt.Sprintf("%s (%s); %s per camera, slowest %s, fastest %s", f1(w.EventsPerSec), f0(asked), f2(w.EventsPerSec/float64(max(1, o.Cameras))), f2(w.MinCamera), f2(w.MaxCamera))},
			{"fairness, Jain's index (whole run)", "**" + f3(w.Jain) + "**"},
			{"fairness, lowest per interval", f3(minOver(o.Intervals, func(w window) float64 { return w.Jain }))},
			{"frame age at dispatch p50 / p99 / max", fmt.Sprintf("%s / %s / %s ms (max_frame_age %s ms: max ÷ bound %s)", f0(w.AgeP50), f0(w.AgeP99), f0(w.AgeMax), f0(o.MaxFrameAgeS*1000), f2(w.AgeMax/(o.MaxFrameAgeS*1000)))},
			{"frame age p99, last interval ÷ first", trend(o.Intervals)},
			{"capture→publish p50 / p99 / max", fmt.Sprintf("%s / %s / %s ms", f0(w.TotalP50), f0(w.TotalP99), f0(w.TotalMax))},
			{"frames decoded / analysed", fmt.Sprintf("%d / %d", o.Decoded, o.Analysed)},
			{"dropped: superseded / stale / source / worker lost / timeout", fmt.Sprintf("%d / %d / %d / %d / %d", o.Drops.Superseded, o.Drops.Stale, o.Drops.Source, o.Drops.WorkerLost, o.Drops.Timeout)},
			{"reconnects, worker restarts", fmt.Sprintf("%d, %d", o.Reconnects, o.Restarts)},
		})
		var rows [][]string
		t := 0.0
		for _, iv := range o.Intervals {
			t += iv.Seconds
			rows = append(rows, []string{dur(t), f1(iv.EventsPerSec), f3(iv.Jain), f2(iv.MinCamera), f0(iv.AgeP50), f0(iv.AgeP99), f0(iv.AgeMax), f0(iv.TotalP99), f1(iv.Load1)})
		}
		r.table([]string{"until", "events/s", "Jain", "slowest camera /s", "frame age p50 ms", "p99 ms", "max ms", "capture→publish p99 ms", "host load"}, rows)
	}
}

func trend(ws []window) string {
	if len(ws) < 2 {
		return "-"
	}
	return f2(ws[len(ws)-1].AgeP99 / ws[0].AgeP99)
}

func minOver(ws []window, f func(window) float64) float64 {
	m := math.Inf(1)
	for _, w := range ws {
		m = math.Min(m, f(w))
	}
	return m
}

func (r *report) soakSection() error {
	r.p("## Soak: cameras added and removed by config edits")
	r.p("")
	r.p("`visiond-bench soak`: a real `visiond run` whose config file the bench rewrites every edit period (written to a")
	r.p("temporary file and renamed over, as deploy tools do): odd edits add cameras with new ids, even edits remove them.")
	r.p("Every sample period it reads the daemon's resident memory (/proc), each worker's (`/api/workers`, /proc) and GPU")
	r.p("memory (`/api/workers`, from nvidia-smi), and the latency of the events published since the last sample.")
	r.p("")
	for _, ru := range r.runs {
		k := ru.soak
		if k == nil || len(k.Samples) == 0 {
			if ru.tag == "cpu" || ru.failed["soak"] != "" {
				r.p("%s: %s.", ru.name(), r.notRun(ru, "soak"))
				r.p("")
			}
			continue
		}
		a, z := soakEnds(k)
		r.p("%s: %d base cameras at %g fps, %d added and removed by turns, every %s for %s after %s of warm-up (%d edits: %d reloads applied, %d rejected), %s %s worker(s); %d events.",
			ru.name(), k.Base, k.Daemon.FPS, k.Churn, dur(k.EditEveryS), dur(k.DurationS), dur(k.WarmupS), len(k.Edits), k.Applied, k.Rejected, k.Daemon.Workers.describe(0), k.Daemon.Provider, k.Events)
		r.p("")
		// Trends over the samples like the start (same cameras, all online): the camera count
		// alternates, and memory with it.
		var like []soakSample
		for _, s := range k.Samples {
			if s.Configured == a.Configured && s.Online == s.Configured {
				like = append(like, s)
			}
		}
		floor := func(from, to float64, f func(s soakSample) float64) float64 { return soakFloor(k, from, to, f) }
		q := k.DurationS / 4
		// A trend over a few minutes says nothing about hours.
		trend := func(t, y []float64) string {
			if k.DurationS < 20*60 {
				return "- (run too short)"
			}
			return f1(slope(t, y)) + " MiB/h"
		}
		half := like[:0:0]
		for _, s := range like {
			if s.T >= k.DurationS/2 {
				half = append(half, s)
			}
		}
		like = half
		var ts, dm, hm []float64
		for _, s := range like {
			ts = append(ts, s.T/3600)
			dm = append(dm, s.DaemonMiB)
			hm = append(hm, s.HeapMiB)
		}
		peak := func(f func(s soakSample) float64) float64 {
			m := 0.0
			for _, s := range k.Samples {
				m = math.Max(m, f(s))
			}
			return m
		}
		rows := [][]string{
			{"daemon RSS", f0(a.DaemonMiB) + " MiB", f0(z.DaemonMiB) + " MiB", "**" + f2(z.DaemonMiB/a.DaemonMiB) + "**", f0(peak(rssOf)) + " MiB", trend(ts, dm)},
			{"daemon RSS, lowest sample of the first / last quarter", f0(floor(0, q, rssOf)) + " MiB", f0(floor(3*q, k.DurationS, rssOf)) + " MiB",
				f2(floor(3*q, k.DurationS, rssOf) / floor(0, q, rssOf)), "-", "-"},
			{"daemon Go heap in use", f0(a.HeapMiB) + " MiB", f0(z.HeapMiB) + " MiB", f2(z.HeapMiB / a.HeapMiB), f0(peak(heapOf)) + " MiB", trend(ts, hm)},
			{"daemon Go heap, lowest sample of the first / last quarter", f0(floor(0, q, heapOf)) + " MiB", f0(floor(3*q, k.DurationS, heapOf)) + " MiB",
				"**" + f2(floor(3*q, k.DurationS, heapOf)/floor(0, q, heapOf)) + "**", "-", "-"},
		}
		for i := range a.WorkerMiB {
			if i >= len(z.WorkerMiB) {
				break
			}
			var wm, wt []float64
			for _, s := range like {
				if i < len(s.WorkerMiB) {
					wm, wt = append(wm, s.WorkerMiB[i]), append(wt, s.T/3600)
				}
			}
			pidNote := ""
			if a.WorkerPIDs[i] != z.WorkerPIDs[i] {
				pidNote = " (process replaced)"
			}
			rows = append(rows, []string{fmt.Sprintf("worker %d RSS%s", i, pidNote), f0(a.WorkerMiB[i]) + " MiB", f0(z.WorkerMiB[i]) + " MiB", "**" + f2(z.WorkerMiB[i]/a.WorkerMiB[i]) + "**",
				f0(peak(func(s soakSample) float64 { return at(s.WorkerMiB, i) })) + " MiB", trend(wt, wm)})
			if a.WorkerGPU[i] > 0 || z.WorkerGPU[i] > 0 {
				rows = append(rows, []string{fmt.Sprintf("worker %d GPU memory", i), f0(a.WorkerGPU[i]) + " MiB", f0(z.WorkerGPU[i]) + " MiB", "**" + f2(z.WorkerGPU[i]/a.WorkerGPU[i]) + "**",
					f0(peak(func(s soakSample) float64 { return at(s.WorkerGPU, i) })) + " MiB", "-"})
			}
		}
		rows = append(rows,
			[]string{"latency p50 (interval)", f0(a.P50) + " ms", f0(z.P50) + " ms", f2(z.P50 / a.P50), f0(peak(func(s soakSample) float64 { return s.P50 })) + " ms", "-"},
			[]string{"latency p99 (interval)", f0(a.P99) + " ms", f0(z.P99) + " ms", f2(z.P99 / a.P99), f0(peak(func(s soakSample) float64 { return s.P99 })) + " ms", "-"},
			[]string{"cameras online", strconv.Itoa(a.Online), strconv.Itoa(z.Online), "-", strconv.Itoa(int(peak(func(s soakSample) float64 { return float64(s.Online) }))), "-"},
		)
		r.table([]string{"", fmt.Sprintf("start (%s)", dur(a.T)), fmt.Sprintf("end (%s, the last sample with the start's cameras)", dur(z.T)), "end ÷ start", "peak", fmt.Sprintf("trend, second half (least squares over its %d samples with the start's cameras)", len(like))}, rows)
		if k.Restarts > 0 || k.Lost > 0 {
			r.p("Worker restarts during the soak: %d; jobs lost: %d.", k.Restarts, k.Lost)
			r.p("")
		}
		if k.Rejected > 0 {
			r.p("A reload was rejected: %s", oneLine(k.RejectedErr))
			r.p("")
		}
		r.soakChurn(k)
		if ru.soakPNG != "" {
			name := "BENCHMARKS-soak.png"
			if ru.tag == "gpu" {
				name = "BENCHMARKS-soak-gpu.png"
			}
			dst, link, err := r.imgPath(name)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(ru.soakPNG)
			if err != nil {
				return err
			}
			if err := os.WriteFile(dst, data, 0o644); err != nil {
				return err
			}
			r.p("![soak: memory and latency over time, %s](%s)", ru.name(), link)
			r.p("")
		}
	}
	return nil
}

// soakEnds returns the first sample and the last one with the same cameras configured and
// all of them online, so that start and end compare like with like.
func soakEnds(k *soakResult) (soakSample, soakSample) {
	a := k.Samples[0]
	for i := len(k.Samples) - 1; i > 0; i-- {
		if z := k.Samples[i]; z.Configured == a.Configured && z.Online == z.Configured {
			return a, z
		}
	}
	return a, k.Samples[len(k.Samples)-1]
}

func at(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

func (r *report) commandsSection() {
	r.p("## How to reproduce")
	r.p("")
	r.p("```sh")
	r.p("make bench                                   # everything below, on this box; then the report")
	r.p("make bench SOAK=2m OVERLOAD=1m               # a quick run")
	r.p("make bench-report GPU=docs/bench/gpu         # the report again, merging the GPU machine's results")
	r.p("```")
	r.p("")
	r.p("Knobs (Makefile variables): `BENCH_TIME` (decode iterations), `PIPE_SECONDS`, `PIPE_CAMERAS`, `PIPE_WORKERS`,")
	r.p("`WORKERS` and `THREADS` (the daemon's CPU workers and their ONNX Runtime threads; unset: the daemon's defaults),")
	r.p("`SCALE_WINDOW`, `OVERLOAD`, `SOAK`, `SOAK_EDIT`, `CLIPS_CAMERAS`, `CLIPS_ROUNDS`, `CLIPS_WARMUP`, `CLIPS_WINDOW`, `PARTS` (a subset")
	r.p("of decode pipeline scale overload soak crowd, and, not by default, clips: event clips off and on, and cpu-scale peer-scale:")
	r.p("the cameras-per-box comparison on this box's cores), `BENCH_OUT` (raw results, default")
	r.p("build/bench), `GPU` (the GPU machine's results to merge). On the GPU machine: `scripts/gpu/bench.sh` (see its")
	r.p("header) writes the same raw files under `$OUT`; `scripts/gpu/bench-pack.sh` stages it and prints the calls (the")
	r.p("cameras per box: `bench.sh env cpu-scale peer-scale`, then `bench.sh gpu-scale`, each within one 10-minute call).")
	r.p("Sections that open with \"%s\" are written by hand and kept as they are when the report is rewritten.", handMark)
	r.p("")
	for _, ru := range r.runs {
		if len(ru.commands) == 0 {
			continue
		}
		r.p("The commands of this run on the %s (from the repository root; raw output in `%s`):", ru.name(), ru.dir)
		r.p("")
		r.p("```sh")
		for _, c := range ru.commands {
			r.p("%s", c)
		}
		r.p("```")
		r.p("")
	}
}

// soakChurn says what else the soak did (zone edits, cuts of the link to the hub, the clip
// store's size) and gives the trends after the warm-up, in percent of the mean an hour, with
// the samples' last goroutines, open files and state directory.
func (r *report) soakChurn(k *soakResult) {
	zones := 0
	for _, e := range k.Edits {
		if e.ZoneTop != 0 {
			zones++
		}
	}
	var parts []string
	if zones > 0 {
		parts = append(parts, fmt.Sprintf("%d edits also moved every camera's zone", zones))
	}
	if k.Daemon.Clips != "" {
		store := "the default clip store"
		if k.Daemon.ClipStoreMiB > 0 {
			store = fmt.Sprintf("a clip store of %d MiB", k.Daemon.ClipStoreMiB)
		}
		parts = append(parts, fmt.Sprintf("clips on (`%s`) into %s", k.Daemon.Clips, store))
	}
	if len(k.Cuts) > 0 {
		parts = append(parts, fmt.Sprintf("the link to a hub cut %d times for %s (the hub's stream held %d events at the end)", len(k.Cuts), dur(k.Cuts[0].Seconds), k.HubEvents))
	}
	if len(parts) > 0 {
		r.p("Besides the cameras: %s.", strings.Join(parts, "; "))
		r.p("")
	}
	if len(k.Slopes) == 0 || len(k.Samples) == 0 {
		return
	}
	z := k.Samples[len(k.Samples)-1]
	r.p("Trends after the first %s (least squares over every sample, in %% of the mean an hour; the aim is at most 1): total RSS (daemon and workers) **%s**, daemon RSS %s, Go heap %s, goroutines %s, open files %s. At the end: %.0f goroutines, %d open files, %.0f MiB in the state directory.",
		dur(k.SlopeFromS), f2(k.Slopes["total_rss"]), f2(k.Slopes["daemon_rss"]), f2(k.Slopes["daemon_heap"]), f2(k.Slopes["goroutines"]), f2(k.Slopes["open_files"]),
		z.Goroutines, z.OpenFiles, z.DiskMiB)
	r.p("")
}
