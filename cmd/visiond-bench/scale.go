package main

import (
	"flag"
	"fmt"
	"time"
)

// criterion is what "sustained" means: every camera analysed at (nearly) its fps and the
// p99 of capture-to-publish latency under a bound.
type criterion struct {
	FPS      float64 `json:"fps"`
	P99MS    float64 `json:"p99_ms"`
	MinShare float64 `json:"min_share"` // each camera's rate >= MinShare * fps, the total >= TotalShare * n * fps
	Total    float64 `json:"total_share"`
}

func (c criterion) check(w window) (bool, string) {
	switch {
	case w.Events == 0:
		return false, "no events"
	case w.EventsPerSec < c.Total*float64(w.Cameras)*c.FPS:
		return false, fmt.Sprintf("%.1f events/s < %.2f x %d x %g", w.EventsPerSec, c.Total, w.Cameras, c.FPS)
	case w.MinCamera < c.MinShare*c.FPS:
		return false, fmt.Sprintf("a camera at %.2f/s < %.2f x %g", w.MinCamera, c.MinShare, c.FPS)
	case w.TotalP99 >= c.P99MS:
		return false, fmt.Sprintf("p99 %.0f ms >= %g ms", w.TotalP99, c.P99MS)
	}
	return true, ""
}

type scaleStep struct {
	Cameras int    `json:"cameras"`
	Pass    bool   `json:"pass"`
	Why     string `json:"why,omitempty"`
	Window  window `json:"window"`
}

type scaleResult struct {
	Daemon    daemonFlags `json:"daemon"`
	Criterion criterion   `json:"criterion"`
	WindowS   float64     `json:"window_s"`
	SettleS   float64     `json:"settle_s"`
	Steps     []scaleStep `json:"steps"`
	Capacity  int         `json:"capacity"` // most cameras that passed (0: not even one)
	FirstFail int         `json:"first_fail,omitempty"`
	Load      loadAvg     `json:"load"`
	Started   time.Time   `json:"started"`
	Seconds   float64     `json:"seconds"`
}

// scaleCmd searches for the most cameras the daemon sustains: it doubles the cameras
// (reloading the config) until a step fails the criterion, then bisects between the last
// pass and the first failure. Each step waits for every camera to be online, lets it settle,
// then measures one window.
func scaleCmd(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	var f daemonFlags
	f.register(fs)
	out := fs.String("o", "-", "output JSON")
	p99 := fs.Duration("p99", 300*time.Millisecond, "p99 capture-to-publish latency bound")
	win := fs.Duration("window", 20*time.Second, "measurement window per step")
	settle := fs.Duration("settle", 5*time.Second, "wait after every camera is online, before the window")
	start := fs.Int("start", 1, "cameras of the first step")
	maxCams := fs.Int("max", 512, "most cameras to try")
	minShare := fs.Float64("min-share", 0.9, "each camera must reach this share of -fps")
	totalShare := fs.Float64("total-share", 0.95, "all cameras together must reach this share of cameras x -fps")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := criterion{FPS: f.FPS, P99MS: float64(*p99) / float64(time.Millisecond), MinShare: *minShare, Total: *totalShare}
	res := scaleResult{Daemon: f, Criterion: c, WindowS: win.Seconds(), SettleS: settle.Seconds(), Started: time.Now()}

	d, err := startDaemon(f, 0)
	if err != nil {
		return err
	}
	defer d.Stop()

	lo, hi := 0, 0 // most cameras that passed, fewest that failed (0: none yet)
	n := max(1, *start)
	for {
		step := scaleStep{Cameras: n}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("cam%03d", i)
		}
		if err := d.setCameras(ids, 90*time.Second); err != nil {
			if aerr := d.alive(); aerr != nil {
				return aerr
			}
			step.Why = err.Error()
		} else {
			time.Sleep(*settle)
			step.Window = d.measureWindow(*win)
			step.Pass, step.Why = c.check(step.Window)
		}
		res.Steps = append(res.Steps, step)
		logf("scale: %d cameras: %.1f events/s, slowest camera %.2f/s, p99 %.0f ms: pass=%v %s",
			n, step.Window.EventsPerSec, step.Window.MinCamera, step.Window.TotalP99, step.Pass, step.Why)
		if step.Pass {
			lo = n
		} else {
			hi = n
		}
		switch {
		case hi == 0 && n >= *maxCams:
		case hi == 0:
			n = min(*maxCams, n*2)
			continue
		case hi-lo > 1:
			n = (lo + hi) / 2
			continue
		}
		break
	}
	res.Capacity, res.FirstFail = lo, hi
	res.Load = readLoad()
	res.Seconds = time.Since(res.Started).Seconds()
	logf("scale: capacity %d cameras at %g fps (p99 < %v)", lo, f.FPS, *p99)
	return writeJSON(*out, res)
}
