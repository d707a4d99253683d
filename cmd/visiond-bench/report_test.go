package main

import (
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// steps makes a search's steps: cameras n at cost per frame cpuMS, p99 growing with n, GPU
// memory gpu0 + 3 MiB a camera when gpu0 > 0; pass up to capacity.
func steps(capacity int, cpuMS, gpu0 float64, ns ...int) []scaleStep {
	var out []scaleStep
	for _, n := range ns {
		fps := 5.0
		if n > capacity {
			fps = 4
		}
		st := scaleStep{Cameras: n, Pass: n <= capacity, Window: window{Seconds: 10, Cameras: n, Events: int(fps * 10 * float64(n)),
			EventsPerSec: fps * float64(n), MinCamera: fps, TotalP99: 100 + float64(n)},
			Cost: stepCost{CPUSeconds: cpuMS * fps * float64(n) / 100, CoresBusy: cpuMS * fps * float64(n) / 1000, CPUPerFrameMS: cpuMS, RSSMiB: 100}}
		if gpu0 > 0 {
			st.Cost.GPUMiB = gpu0 + 3*float64(n)
			st.Cost.DaemonGPUMiB = 300 + 2*float64(n) // NVDEC: 2 of the 3 MiB a camera adds
			st.Window.ReconnectsWarmup = n / 100      // the cameras that reconnected at start
		}
		if !st.Pass {
			st.Why = "too slow"
		}
		out = append(out, st)
	}
	return out
}

func TestReportCamerasPerBox(t *testing.T) {
	dir := t.TempDir()
	local, gpu := filepath.Join(dir, "local"), filepath.Join(dir, "gpu")
	for _, d := range []string{local, gpu} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	crit := criterion{FPS: 5, P99MS: 300, MinShare: 0.95, Total: 0.95}
	write := func(d, name string, v any) {
		t.Helper()
		if err := writeJSON(filepath.Join(d, name), v); err != nil {
			t.Fatal(err)
		}
	}
	write(local, "env.json", envInfo{CPUs: 2})
	write(gpu, "env.json", envInfo{CPUs: 16, GPU: "NVIDIA H200, 580, 143771 MiB"})
	cpuFlags := daemonFlags{Provider: "cpu", Workers: unset, Threads: unset, Sessions: unset, FPS: 5, Model: "third_party/yolov8n.onnx"}
	write(gpu, "peer-scale.json", scaleResult{Label: "peer.py plain", Peer: &peerSettings{Mode: "plain"}, Criterion: crit, Capacity: 20, FirstFail: 21,
		Steps: steps(20, 160, 0, 16, 20, 25, 22, 21)})
	write(gpu, "scale-cpu-fp32.json", scaleResult{Label: "default CPU pool, FP32", Daemon: cpuFlags, Criterion: crit, Capacity: 24, FirstFail: 25,
		Steps: steps(24, 120, 0, 16, 20, 25, 24)})
	int8 := cpuFlags
	int8.Model = "build/models/yolov8n-int8.onnx"
	write(gpu, "scale-cpu-int8.json", scaleResult{Label: "default CPU pool, INT8", Daemon: int8, Criterion: crit, Capacity: 40, FirstFail: 41,
		Steps: steps(40, 80, 0, 16, 20, 25, 31, 39, 48, 43, 41, 40)})
	cuda := daemonFlags{Provider: "cuda", Workers: 1, Threads: unset, FPS: 5}
	for _, s := range []struct {
		name     string
		sessions int
		capacity int
		gpu0     float64
	}{{"scale-cuda-s1", 1, 58, 1000}, {"scale-cuda-s4", 4, 160, 3000}, {"scale-cuda-s4-fp16", 4, 200, 1500}} {
		f := cuda
		f.Sessions = setting(s.sessions)
		write(gpu, s.name+".json", scaleResult{Label: s.name, Command: []string{"visiond-bench", "scale", "-sessions", strconv.Itoa(s.sessions)},
			Daemon: f, Criterion: crit, Capacity: s.capacity, FirstFail: s.capacity + 2,
			Curve: steps(s.capacity, 20, s.gpu0, 1), Steps: steps(s.capacity, 20, s.gpu0, s.capacity/2, s.capacity, s.capacity+2)})
	}
	// Two hold results of visiond run: 250 cameras held, 300 not (a camera behind).
	held := measureResult{Command: []string{"visiond-bench", "measure", "-cameras", "250"},
		Daemon:  daemonFlags{Provider: "cuda", Workers: 1, Sessions: 8, Decoder: "cuda", Analytics: true, JetStream: true, Phases: 1, CUDA: "{graph: true}"},
		Cameras: 250, Window: window{Seconds: 30, Cameras: 250, Events: 37500, EventsPerSec: 1250, MinCamera: 5, Captured: 37500, SubscriberP99: 151},
		DaemonGPUMiB: 2500, WorkersGPUMiB: 1750}
	behind := held
	behind.Command = nil
	behind.Version = &buildInfo{Revision: "8390dfe0123456789", Modified: true}
	behind.Cameras, behind.Window.Cameras, behind.Window.EventsPerSec, behind.Window.MinCamera = 300, 300, 1490, 4.5
	write(gpu, "hold-cuda-s8-c250.json", held)
	write(gpu, "hold-cuda-s8-c300.json", behind)
	if err := os.WriteFile(filepath.Join(local, "scale.failed"), []byte("exit status 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Two calls of bench.sh a day apart: the header says the results span them.
	for _, name := range []string{"commands-20261130T080518.txt", "commands-20261201T053452.txt"} {
		if err := os.WriteFile(filepath.Join(gpu, name), []byte("bin/visiond-bench env\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "BENCHMARKS.md")
	hand := "## Tracking on a video with known truth\n\n*Written by hand from the logs.*\n\n```sh\n## not a heading inside code\n```\n\nLast line.\n"
	old := "# visiond benchmarks\n\n## Summary\n\nold figures\n\n" + hand + "\n## How to reproduce\n\nold commands\n"
	if err := os.WriteFile(out, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reportCmd([]string{"-in", local, "-gpu", gpu, "-o", out}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{
		// 24 ÷ 20 cameras, 120 ÷ 160 ms: both aims missed; 40 ÷ 20 and 80 ÷ 160: both met.
		"visiond, default CPU pool, FP32 | GPU machine (16 CPUs, NVIDIA H200) | **24** against the Python loop's 20: 1.20× (aim 1.5×: **not met**); CPU per analysed frame 120.0 ÷ 160.0 ms = 0.75× (aim ≤ 0.6×: **not met**)",
		"visiond, default CPU pool, INT8 | GPU machine (16 CPUs, NVIDIA H200) | **40** against the Python loop's 20: 2.00× (aim 1.5×: met); CPU per analysed frame 80.0 ÷ 160.0 ms = 0.50× (aim ≤ 0.6×: met)",
		"scale-cuda-s1 | GPU machine (16 CPUs, NVIDIA H200) | **58** (aim 250: **not met**); p99 158 ms; 0 reconnects at start; GPU 1174 MiB, 20.2 MiB per camera",
		"scale-cuda-s4 | GPU machine (16 CPUs, NVIDIA H200) | **160** (aim 250: **not met**)",
		"cameras held on the GPU (5 fps each, p99 < 300 ms, one window): visiond run, 1 cuda worker(s) of 8 sessions, cuda {graph: true}, decoder cuda, analytics on, JetStream on, 1 camera server(s) | GPU machine (16 CPUs, NVIDIA H200) | " +
			"**250 cameras held** for 30 s (aim 250: met); slowest camera 5.00/s; p99 151 ms; 0 reconnects at start; GPU 4250 MiB, 17.0 MiB per camera; `visiond-bench measure -cameras 250`",
		"JetStream on, 1 camera server(s), visiond 8390dfe with uncommitted changes | GPU machine (16 CPUs, NVIDIA H200) | **300 cameras not held** for 30 s (aim 250: **not met**): a camera at 4.50/s < 0.95 x 5; slowest camera 4.50/s; p99 151 ms; 0 reconnects at start; GPU 4250 MiB, 14.2 MiB per camera; from hold-cuda-s8-c300.json",
		"FP16 ÷ FP32 (4 session(s)): 1.25× the cameras",
		"| default CPU pool, INT8 (`build/models/yolov8n-int8.onnx`) | **40** (41 failed) | 2.00 | 80.0 | 0.50 |",
		"| scale-cuda-s4 | **160** (162 failed) | 260 | 1 / 0 | 3480 | 21.8 | 16.00 | 20.0 | 3.0 | 2.0 |",
		"- scale-cuda-s4: `visiond-bench scale -sessions 4`",
		"| 1 | 5.0 | 5.00 | 0 | 101 | 0 | 0 | 0.10 | 20.0 | 3003 | 0.0 | (for the curve, not the search) pass |",
		"## Cameras per box, side by side",
		"run there in 2 calls from 2026-11-30 08:05 to 2026-12-01 05:34 UTC",
		"(every camera ≥ 4.75 fps, all ≥ 0.95 × cameras × 5 fps, p99 < 300 ms",
		"| scale | 2-CPU box | failed: exit status 1 |",
		"docs/img/BENCHMARKS-growth-gpu-machine-cpu.png", "docs/img/BENCHMARKS-growth-gpu-machine-gpu.png",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	// The section written by hand is kept whole, once, before "How to reproduce"; the old
	// generated sections are not.
	if strings.Count(text, hand) != 1 || strings.Index(text, hand) > strings.Index(text, "## How to reproduce") {
		t.Errorf("the hand-written section is not kept once before How to reproduce:\n%s", text)
	}
	if strings.Contains(text, "old figures") || strings.Contains(text, "old commands") {
		t.Error("the old file's generated sections were kept")
	}
	for _, name := range []string{"BENCHMARKS-growth-gpu-machine-cpu.png", "BENCHMARKS-growth-gpu-machine-gpu.png"} {
		f, err := os.Open(filepath.Join(dir, imgDir, name))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		panels := 2
		if strings.HasSuffix(name, "-gpu.png") {
			panels = 3 // cores, GPU memory, p99
		}
		if b := img.Bounds(); b.Dy() != titleH+panels*panelH {
			t.Errorf("%s: height %d, want %d panels", name, b.Dy(), panels)
		}
	}
	// A rewrite keeps the hand-written section once.
	if err := reportCmd([]string{"-in", local, "-gpu", gpu, "-o", out}); err != nil {
		t.Fatal(err)
	}
	again, _ := os.ReadFile(out)
	if d := os.Getenv("REPORT_COPY"); d != "" {
		exec.Command("cp", "-r", dir, d).Run()
	}
	if strings.Count(string(again), hand) != 1 {
		t.Error("a second rewrite did not keep the hand-written section exactly once")
	}
}

func TestHandSections(t *testing.T) {
	text := "# t\n\n## A\n\ngenerated\n\n## B\n\n*Written by hand: b*\n\nbody\n## C\n*Written by hand* c\n"
	got := handSections(text)
	if len(got) != 2 || got[0] != "## B\n\n*Written by hand: b*\n\nbody\n" || got[1] != "## C\n*Written by hand* c\n" {
		t.Errorf("%q", got)
	}
	if handSections("## A\n\ntext *Written by hand*\n") != nil {
		t.Error("a mark that does not open the section kept it")
	}
}
