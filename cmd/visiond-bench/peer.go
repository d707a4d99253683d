package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// peerSettings is how scripts/bench/peer.py ran in a peer-scale search.
type peerSettings struct {
	Python  string   `json:"python"` // a command: "python3", "env -u LD_LIBRARY_PATH python3"
	Script  string   `json:"script"`
	Mode    string   `json:"mode"`
	Threads int      `json:"threads"` // ONNX Runtime intra-op threads of its session (0: its default)
	CPUs    string   `json:"cpus,omitempty"`
	Model   string   `json:"model"`
	Args    []string `json:"args,omitempty"` // more peer.py arguments (--fake-output ...)
	// Versions is what the peer reported of itself on its last step (python, numpy, opencv,
	// onnxruntime: "none (fake session)" with --fake-output).
	Versions map[string]string `json:"versions,omitempty"`
}

// peerStep is the part of peer.py's result (its -o JSON) that a scale step reads.
type peerStep struct {
	Seconds     float64            `json:"seconds"`
	Frames      int                `json:"frames"`
	FramesPerS  float64            `json:"frames_per_s"`
	DetsPerS    float64            `json:"detections_per_s"`
	PerCamera   map[string]float64 `json:"per_camera_per_s"`
	MinCamera   float64            `json:"min_camera_per_s"`
	MaxCamera   float64            `json:"max_camera_per_s"`
	Jain        float64            `json:"jain"`
	LatencyP50  *float64           `json:"latency_p50_ms"` // capture (live) to result: lag behind live + read to result
	LatencyP99  *float64           `json:"latency_p99_ms"`
	LatencyMax  float64            `json:"latency_max_ms"`
	LagP50      float64            `json:"lag_p50_ms"`
	LagP99      float64            `json:"lag_p99_ms"`
	LagMax      float64            `json:"lag_max_ms"`
	CPUSeconds  float64            `json:"cpu_s"`
	CPUPerFrame float64            `json:"cpu_ms_per_frame"`
	CoresBusy   float64            `json:"cores_busy"`
	RSSMiB      float64            `json:"rss_mib"`
	Versions    map[string]string  `json:"versions"`
}

// toStep turns a peer.py result for n cameras into a scale step's window and cost; an error
// says what the result lacks.
func (p peerStep) toStep(n int) (window, stepCost, error) {
	if p.LatencyP99 == nil || p.LatencyP50 == nil {
		return window{}, stepCost{}, fmt.Errorf("peer.py's result has no latency_p99_ms (capture to result): an older peer.py?")
	}
	if p.Seconds <= 0 {
		return window{}, stepCost{}, fmt.Errorf("peer.py's result has no window (seconds %g)", p.Seconds)
	}
	if len(p.PerCamera) != n {
		return window{}, stepCost{}, fmt.Errorf("peer.py measured %d cameras, asked %d", len(p.PerCamera), n)
	}
	w := window{Seconds: p.Seconds, Cameras: n, Events: p.Frames, EventsPerSec: p.FramesPerS, PerCamera: p.PerCamera,
		MinCamera: p.MinCamera, MaxCamera: p.MaxCamera, Jain: p.Jain, DetsPerSec: p.DetsPerS,
		TotalP50: *p.LatencyP50, TotalP99: *p.LatencyP99, TotalMax: p.LatencyMax,
		AgeP50: p.LagP50, AgeP99: p.LagP99, AgeMax: p.LagMax, Load1: readLoad().One}
	c := stepCost{CPUSeconds: p.CPUSeconds, CoresBusy: p.CoresBusy, CPUPerFrameMS: p.CPUPerFrame, RSSMiB: p.RSSMiB}
	return w, c, nil
}

// peerScaleCmd is scaleCmd for scripts/bench/peer.py: the same cameras (served by this
// process), the same search and criterion; each step runs peer.py on n cameras, analysing
// -fps frames per second of each, for a settle time and a window, and reads its result.
// peer.py's latency is from the frame's live arrival (its lag behind the soonest frame of
// its stream, by the stream's timestamps) to the end of its postprocessing.
func peerScaleCmd(args []string) error {
	fs := flag.NewFlagSet("peer-scale", flag.ContinueOnError)
	var o searchOpts
	o.register(fs)
	var curve cameraList
	fs.Var(&curve, "curve", "camera `counts` (\"1,8\") measured before the search, for the plot of the cost against cameras only")
	var p peerSettings
	fs.StringVar(&p.Python, "python", "python3", "the command that runs peer.py's Python (space-separated words, e.g. \"env -u LD_LIBRARY_PATH python3\")")
	fs.StringVar(&p.Script, "peer", "scripts/bench/peer.py", "peer.py")
	fs.StringVar(&p.Mode, "mode", "plain", "peer.py's loop: plain (read, infer, repeat) or latest")
	fs.IntVar(&p.Threads, "threads", 0, "ONNX Runtime intra-op threads of the peer's session (0: its default, a thread per core)")
	fs.StringVar(&p.CPUs, "cpus", "", "CPU list the peer runs on (\"\": every CPU)")
	fs.StringVar(&p.Model, "model", "third_party/yolov8n.onnx", "model")
	peerArgs := fs.String("peer-args", "", "more peer.py arguments, space-separated (e.g. \"--fake-output out.npy\" where Python has no onnxruntime)")
	video := fs.String("video", "third_party/media/vtest.h264.ts", "the MPEG-TS file every camera plays (looped, in real time)")
	phases := fs.Int("phases", 4, "camera servers, a fraction of a frame apart")
	urls := fs.String("camera-urls", "", "a file of camera URLs (visiond-bench serve); default: serve the cameras in this process")
	fps := fs.Float64("fps", 5, "frames analysed per second per camera")
	out := fs.String("o", "-", "output JSON")
	label := fs.String("label", "", "what is measured, in words, for the report")
	p99 := fs.Duration("p99", 300*time.Millisecond, "p99 capture-to-result latency bound")
	win := fs.Duration("window", 20*time.Second, "measurement window per step")
	settle := fs.Duration("settle", 5*time.Second, "wait after every camera has a frame, before the window (peer.py --warmup)")
	minShare := fs.Float64("min-share", 0.95, "each camera must reach this share of -fps")
	totalShare := fs.Float64("total-share", 0.95, "all cameras together must reach this share of cameras x -fps")
	dir := fs.String("dir", "", "work directory for each step's result and log (default: a temporary one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	if p.Mode != "plain" && p.Mode != "latest" {
		return fmt.Errorf("-mode %q: want plain or latest", p.Mode)
	}
	if *fps <= 0 {
		return fmt.Errorf("-fps %g: must be more than 0", *fps)
	}
	if len(strings.Fields(p.Python)) == 0 {
		return fmt.Errorf("-python: empty")
	}
	if _, err := os.Stat(p.Script); err != nil {
		return fmt.Errorf("-peer: %w", err)
	}
	p.Args = strings.Fields(*peerArgs)
	work := *dir
	if work == "" {
		d, err := os.MkdirTemp("", "visiond-bench-peer-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		work = d
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	cams, err := camerasFor(daemonFlags{Video: *video, Phases: *phases, URLs: *urls})
	if err != nil {
		return err
	}
	defer cams.Close()
	urlFile := filepath.Join(work, "camera-urls.txt")
	var list []string
	for i := range max(1, *phases, len(cams.urls)) {
		list = append(list, cams.URL(i))
	}
	if err := os.WriteFile(urlFile, []byte(strings.Join(list, "\n")+"\n"), 0o644); err != nil {
		return err
	}

	c := criterion{FPS: *fps, P99MS: float64(*p99) / float64(time.Millisecond), MinShare: *minShare, Total: *totalShare}
	res := scaleResult{Label: *label, Peer: &p, Criterion: c, WindowS: win.Seconds(), SettleS: settle.Seconds(), Search: o, Started: time.Now()}
	res.Daemon.FPS = *fps
	res.Daemon.Model = p.Model
	res.Daemon.Video = *video
	ran := 0
	measure := func(n int) (scaleStep, error) {
		step := scaleStep{Cameras: n}
		ran++
		ps, err := runPeer(p, urlFile, n, *fps, *settle, *win, filepath.Join(work, fmt.Sprintf("peer-%d", n)))
		if err != nil && ran == 1 {
			return step, err // it does not run at all (no numpy, a bad argument): no capacity to report
		} else if err != nil {
			step.Why = oneLine(err.Error()) // it ran before: this many cameras are too many for it
		} else if step.Window, step.Cost, err = ps.toStep(n); err != nil {
			return step, err // a result the bench cannot read: the search means nothing
		} else {
			step.Pass, step.Why = c.check(step.Window)
			p.Versions = ps.Versions
		}
		logStep("peer-scale", step)
		return step, nil
	}
	return res.measure("peer-scale", o, curve, measure, *out)
}

// peerCommand is the command line of one peer.py run on n cameras.
func peerCommand(p peerSettings, urlFile string, n int, fps float64, settle, win time.Duration, out string) []string {
	args := append(strings.Fields(p.Python), p.Script, "--mode", p.Mode, "--urls", urlFile, "--cameras", strconv.Itoa(n),
		"--fps", strconv.FormatFloat(fps, 'g', -1, 64), "--threads", strconv.Itoa(p.Threads), "--model", p.Model,
		"--warmup", strconv.FormatFloat(settle.Seconds(), 'g', -1, 64), "--seconds", strconv.FormatFloat(win.Seconds(), 'g', -1, 64), "-o", out)
	if p.CPUs != "" {
		args = append(args, "--cpus", p.CPUs)
	}
	return append(args, p.Args...)
}

// runPeer runs peer.py on n cameras and reads its result; base is the path prefix of its
// result (base.json) and log (base.log). A run that outlives its window by 3 minutes (60 s
// to get every camera's first frame, start-up, the model's load) is killed.
func runPeer(p peerSettings, urlFile string, n int, fps float64, settle, win time.Duration, base string) (peerStep, error) {
	var ps peerStep
	ctx, cancel := context.WithTimeout(context.Background(), settle+win+3*time.Minute)
	defer cancel()
	argv := peerCommand(p, urlFile, n, fps, settle, win, base+".json")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	log, err := os.Create(base + ".log")
	if err != nil {
		return ps, err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	os.Remove(base + ".json")
	if err := cmd.Run(); err != nil {
		data, _ := os.ReadFile(base + ".log")
		if len(data) > 600 {
			data = data[len(data)-600:]
		}
		return ps, fmt.Errorf("peer.py on %d cameras: %v: %s", n, err, strings.TrimSpace(string(data)))
	}
	if err := readJSON(base+".json", &ps); err != nil {
		return ps, fmt.Errorf("peer.py's result: %w", err)
	}
	return ps, nil
}
