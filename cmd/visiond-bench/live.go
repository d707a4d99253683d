package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"
)

// liveStep is the daemon watched by viewers viewers a camera for a window.
type liveStep struct {
	Viewers      int     `json:"viewers_per_camera"`
	CPUPercent   float64 `json:"daemon_cpu_percent"` // of one core, over the window
	RSSMiB       float64 `json:"daemon_rss_mib"`     // median of the samples
	BytesPerS    float64 `json:"bytes_per_s"`        // what all viewers received, video and results
	Messages     uint64  `json:"messages"`
	EventsPerS   float64 `json:"events_per_s"`
	ViewerErrors int     `json:"viewer_errors"`
}

// liveLatency is the status page's capture-to-screen latency, read from the page (its
// data-overlay-latency-ms, a moving average over the results drawn) once a second.
type liveLatency struct {
	Browser string    `json:"browser"`
	Samples []float64 `json:"samples_ms"`
	P50     float64   `json:"p50_ms"`
	P90     float64   `json:"p90_ms"`
	Drawn   int       `json:"results_drawn"`
	Error   string    `json:"error,omitempty"`
}

type liveResult struct {
	Command []string     `json:"command,omitempty"`
	Daemon  daemonFlags  `json:"daemon"`
	Cameras int          `json:"cameras"`
	WarmupS float64      `json:"warmup_s"`
	WindowS float64      `json:"window_s"`
	Feed    bool         `json:"feed"` // each viewer also reads the results feed, as the page does
	Steps   []liveStep   `json:"steps"`
	Latency *liveLatency `json:"latency,omitempty"`
	Load    loadAvg      `json:"load"`
	Started time.Time    `json:"started"`
}

// perViewer is what one viewer of one camera costs against no viewer: CPU in percent of a
// core and resident memory in MiB, over the steps with viewers (least squares).
func (r liveResult) perViewer() (cpu, mib float64, ok bool) {
	var n, c, m []float64
	for _, s := range r.Steps {
		n = append(n, float64(s.Viewers*r.Cameras))
		c, m = append(c, s.CPUPercent), append(m, s.RSSMiB)
	}
	if len(n) < 2 {
		return 0, 0, false
	}
	return slope(n, c), slope(n, m), true
}

// repeatSpread is the widest difference in CPU between steps of the same viewer count, when
// a count was measured more than once.
func (r liveResult) repeatSpread() (float64, bool) {
	lo, hi := map[int]float64{}, map[int]float64{}
	var spread float64
	ok := false
	for _, s := range r.Steps {
		if _, seen := lo[s.Viewers]; !seen {
			lo[s.Viewers], hi[s.Viewers] = s.CPUPercent, s.CPUPercent
			continue
		}
		lo[s.Viewers], hi[s.Viewers] = min(lo[s.Viewers], s.CPUPercent), max(hi[s.Viewers], s.CPUPercent)
		spread, ok = max(spread, hi[s.Viewers]-lo[s.Viewers]), true
	}
	return spread, ok
}

// liveCmd measures what the live view costs (issue 40, item 6): one daemon of -cameras
// cameras; for each count of -viewers, that many WebSocket viewers a camera read its live
// video (and, with -feed, its results feed, as the status page does) through the window,
// while the daemon's CPU time and resident memory are read from /proc. With a browser
// (-browser, default chromium on the PATH) the status page then plays camera 0 with its
// overlays in real time, and its capture-to-screen latency is sampled once a second.
func liveCmd(args []string) error {
	fs := flag.NewFlagSet("live", flag.ContinueOnError)
	var f daemonFlags
	f.register(fs)
	out := fs.String("o", "-", "output JSON")
	cams := fs.Int("cameras", 4, "cameras")
	counts := fs.String("viewers", "0,1,4", "viewers a camera, comma-separated: a window each")
	feed := fs.Bool("feed", true, "each viewer also reads the camera's results feed (the overlays)")
	warmup := fs.Duration("warmup", 20*time.Second, "wait after every camera is online, and after the viewers join")
	dur := fs.Duration("window", 30*time.Second, "measuring window a step")
	browser := fs.String("browser", "chromium", "headless Chromium for the page's latency (\"\": none)")
	latencyFor := fs.Duration("latency-window", 30*time.Second, "how long the page's latency is sampled")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f.Analytics = true
	var ns []int
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return fmt.Errorf("-viewers %q: want counts >= 0, comma-separated", *counts)
		}
		ns = append(ns, n)
	}
	d, err := startDaemon(f, *cams)
	if err != nil {
		return err
	}
	defer d.Stop()
	if err := d.warmUp(*warmup); err != nil {
		return err
	}
	res := liveResult{Command: os.Args, Daemon: f, Cameras: *cams, WarmupS: warmup.Seconds(), WindowS: dur.Seconds(),
		Feed: *feed, Load: readLoad(), Started: time.Now()}
	for _, n := range ns {
		step, err := d.liveStep(n, *feed, *warmup, *dur)
		if err != nil {
			return fmt.Errorf("%d viewers a camera: %w", n, err)
		}
		logf("live: %d viewers a camera of %d: daemon CPU %.1f%% of a core, RSS %.0f MiB, %.0f KB/s to the viewers",
			n, *cams, step.CPUPercent, step.RSSMiB, step.BytesPerS/1e3)
		res.Steps = append(res.Steps, step)
	}
	if c, m, ok := res.perViewer(); ok {
		logf("live: a viewer costs %.2f%% of a core and %.2f MiB", c, m)
	}
	if *browser != "" {
		lat := d.pageLatency(*browser, *latencyFor)
		res.Latency = &lat
		logf("live: capture to boxes on screen: p50 %.0f ms, p90 %.0f ms (%d results drawn) %s", lat.P50, lat.P90, lat.Drawn, lat.Error)
	}
	if err := d.alive(); err != nil {
		return err
	}
	return writeJSON(*out, res)
}

// liveStep runs n viewers a camera for the window, after the warm-up.
func (d *daemon) liveStep(n int, feed bool, warmup, dur time.Duration) (liveStep, error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var bytes, msgs atomic.Uint64
	var failed atomic.Int64
	for _, id := range d.cams {
		for range n {
			paths := []string{"/api/cameras/" + id + "/live"}
			if feed {
				paths = append(paths, "/api/cameras/"+id+"/results")
			}
			for _, p := range paths {
				wg.Go(func() {
					if err := d.view(ctx, p, &bytes, &msgs); err != nil && ctx.Err() == nil {
						failed.Add(1)
						logf("live: viewer of %s: %v", p, err)
					}
				})
			}
		}
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	time.Sleep(warmup)
	step := liveStep{Viewers: n}
	o := d.openWindow()
	pid := d.cmd.Process.Pid
	cpu0, b0, m0, t0 := cpuSeconds(pid), bytes.Load(), msgs.Load(), time.Now()
	var rss []float64
	for t := time.Duration(0); t < dur; t += 5 * time.Second {
		time.Sleep(5 * time.Second)
		rss = append(rss, float64(procRSS(pid))/(1<<20))
	}
	secs := time.Since(t0).Seconds()
	step.CPUPercent = (cpuSeconds(pid) - cpu0) / secs * 100
	step.BytesPerS = float64(bytes.Load()-b0) / secs
	step.Messages = msgs.Load() - m0
	step.RSSMiB = pct(rss, .5)
	w := d.closeWindow(o)
	step.EventsPerS = float64(w.Events) / w.Seconds
	step.ViewerErrors = int(failed.Load())
	return step, d.alive()
}

// view reads the WebSocket at path until ctx ends, counting what comes.
func (d *daemon) view(ctx context.Context, path string, bytes, msgs *atomic.Uint64) error {
	conn, _, err := websocket.Dial(ctx, "ws://"+d.httpAddr+path, nil)
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(64 << 20)
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			return err
		}
		bytes.Add(uint64(len(data)))
		msgs.Add(1)
	}
}

// pageLatency opens the status page on camera 0 in headless Chromium (real time: no virtual
// time, whose clock runs ahead of the results) and reads its capture-to-screen latency once a
// second for the window.
func (d *daemon) pageLatency(browser string, window time.Duration) liveLatency {
	lat := liveLatency{Browser: browser}
	path, err := exec.LookPath(browser)
	if err != nil {
		lat.Error = err.Error()
		return lat
	}
	dir, err := os.MkdirTemp("", "visiond-bench-browser-")
	if err != nil {
		lat.Error = err.Error()
		return lat
	}
	defer os.RemoveAll(dir)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"), chromedp.WindowSize(1280, 1000), chromedp.Env("HOME="+dir))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+d.httpAddr+"/?live="+d.cams[0])); err != nil {
		lat.Error = err.Error()
		return lat
	}
	const read = `(() => { const v = document.getElementById("player-video"); return [Number(v.dataset.overlayLatencyMs || -1), Number(v.dataset.overlayFrames || 0)]; })()`
	for end := time.Now().Add(window + 10*time.Second); time.Now().Before(end); {
		time.Sleep(time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](read))
		if err != nil || len(v) != 2 {
			lat.Error = fmt.Sprint("reading the page: ", err)
			break
		}
		if v[1] > 0 && time.Until(end) < window { // the first 10 s: the player starting
			lat.Samples = append(lat.Samples, v[0])
			lat.Drawn = int(v[1])
		}
	}
	if len(lat.Samples) == 0 && lat.Error == "" {
		lat.Error = errors.New("the page drew no results").Error()
	}
	if len(lat.Samples) > 0 {
		s := append([]float64(nil), lat.Samples...)
		sort.Float64s(s)
		lat.P50, lat.P90 = pct(s, .5), pct(s, .9)
	}
	return lat
}

// liveRuns reads the run's live-*.json.
func liveRuns(ru *run) []liveResult {
	if ru == nil {
		return nil
	}
	files, _ := filepath.Glob(filepath.Join(ru.dir, "live*.json"))
	sort.Strings(files)
	var rs []liveResult
	for _, f := range files {
		var l liveResult
		if readJSON(f, &l) == nil && len(l.Steps) > 0 {
			rs = append(rs, l)
		}
	}
	return rs
}

// liveAim is issue 40's aim for a viewer: under 1% of a core; and for a result's boxes on
// screen after its capture: under 1 s on loopback.
const (
	liveAimCPU     = 1.0
	liveAimLatency = 1000.0
)

// liveSummary is the summary's row of the live runs: each run's cost of a viewer and its
// capture-to-screen latency.
func (r *report) liveSummary(local *run) []string {
	const what = "live view: the daemon's CPU a viewer (video and overlays), and capture to boxes on screen"
	ls := liveRuns(local)
	if len(ls) == 0 {
		return []string{what, local.name(), r.notRun(local, "live")}
	}
	var parts []string
	for _, l := range ls {
		c, _, ok := l.perViewer()
		if !ok {
			continue
		}
		most := 0
		for _, s := range l.Steps {
			most = max(most, s.Viewers*l.Cameras)
		}
		p := fmt.Sprintf("**%s%%** of a core (aim < %g%%: %s; up to %d viewers)", f2(c), liveAimCPU, met(c < liveAimCPU), most)
		if c < 0 {
			p = fmt.Sprintf("no cost above the noise (%s%% of a core; up to %d viewers)", f2(c), most)
		}
		if lat := l.Latency; lat != nil && len(lat.Samples) > 0 {
			p += fmt.Sprintf(", p50 **%s ms** (aim < %g ms: %s)", f0(lat.P50), liveAimLatency, met(lat.P50 < liveAimLatency))
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return []string{what, local.name(), "one step only: no cost a viewer"}
	}
	return []string{what, local.name(), strings.Join(parts, "; ")}
}

func (r *report) liveSection(local *run) {
	r.p("## Live view: what a viewer costs, and capture to screen")
	r.p("")
	ls := liveRuns(local)
	if len(ls) == 0 {
		r.p("`visiond-bench live` (cmd/visiond-bench/live.go; `make bench PARTS=live`). Not run here: %s.", r.notRun(local, "live"))
		r.p("")
		return
	}
	for _, l := range ls {
		what := "its live video"
		if l.Feed {
			what = "its live video and its results feed (the overlays), as the status page does"
		}
		r.p("`visiond-bench live`: one daemon (`visiond run`, workers %s, %s, analytics on) of %d cameras at %s fps; at each count, that many",
			l.Daemon.Workers.describe(0), l.Daemon.Provider, l.Cameras, f0(l.Daemon.FPS))
		r.p("WebSocket viewers a camera read %s; each step measures %s s after a %s s warm-up, the daemon's CPU time and resident memory from /proc.",
			what, f0(l.WindowS), f0(l.WarmupS))
		r.p("")
		var rows [][]string
		for _, s := range l.Steps {
			rows = append(rows, []string{fmt.Sprint(s.Viewers), fmt.Sprint(s.Viewers * l.Cameras), f1(s.CPUPercent) + "%", f0(s.RSSMiB) + " MiB",
				f0(s.BytesPerS/1e3) + " KB/s", f1(s.EventsPerS), fmt.Sprint(s.ViewerErrors)})
		}
		r.table([]string{"viewers a camera", "viewers", "daemon CPU (one core = 100%)", "daemon RSS", "sent to viewers", "events/s", "viewer errors"}, rows)
		if c, m, ok := l.perViewer(); ok {
			cost := fmt.Sprintf("**A viewer costs %s%% of a core and %s MiB**", f2(c), f1(m))
			if c < 0 {
				cost = fmt.Sprintf("**A viewer costs no CPU above the noise** (%s%% of a core) **and %s MiB**", f2(c), f1(m))
			}
			r.p("- %s in the daemon (least squares over the steps; aim: under 1%% of a core, and no decode: the video is the camera's packets, remuxed).", cost)
		}
		if spread, ok := l.repeatSpread(); ok {
			r.p("- The noise: steps of the same count differ by up to %s%% of a core (the daemon's CPU time moves with the workers' inference beside it on a box this size).", f1(spread))
		}
		if lat := l.Latency; lat != nil {
			if len(lat.Samples) > 0 {
				r.p("- **Capture to boxes on screen: p50 %s ms, p90 %s ms** (headless Chromium playing camera 0 in real time, the page's own measure: the time a result's boxes first came on screen less its capture time, a moving average read once a second for %d s; %d results drawn; aim under 1 s on loopback).",
					f0(lat.P50), f0(lat.P90), len(lat.Samples), lat.Drawn)
			} else {
				r.p("- Capture to screen: not measured (%s).", lat.Error)
			}
		}
		r.p("- Taken %s, load average %s at the start; command: `%s`.", l.Started.UTC().Format("2006-01-02 15:04 UTC"), f1(l.Load.One), strings.Join(l.Command, " "))
		r.p("")
	}
	r.p("A unit muxed and a frame's results marshalled, alone: `BenchmarkMuxerPush` (live) and `BenchmarkFrameMessage` (pipeline), in `make bench-micro`.")
	r.p("")
}
