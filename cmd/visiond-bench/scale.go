package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// criterion is what "sustained" means: every camera analysed at (nearly) its fps and the
// p99 latency under a bound: received - captured_at, what a subscriber sees (window.p99).
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
	case w.p99() >= c.P99MS:
		return false, fmt.Sprintf("p99 %.0f ms >= %g ms", w.p99(), c.P99MS)
	}
	return true, ""
}

type scaleStep struct {
	Cameras int      `json:"cameras"`
	Pass    bool     `json:"pass"`
	Why     string   `json:"why,omitempty"`
	Window  window   `json:"window"`
	Cost    stepCost `json:"cost"`
}

type scaleResult struct {
	Label     string        `json:"label,omitempty"`   // what was measured, for the report
	Command   []string      `json:"command,omitempty"` // the command line that produced it (os.Args)
	Daemon    daemonFlags   `json:"daemon"`
	Version   *buildInfo    `json:"daemon_version,omitempty"` // the daemon's /api/version`
	Peer      *peerSettings `json:"peer,omitempty"`           // set when the subject is scripts/bench/peer.py, not visiond
	Criterion criterion     `json:"criterion"`
	WindowS   float64       `json:"window_s"`
	SettleS   float64       `json:"settle_s"`
	WarmupS   float64       `json:"warmup_s,omitempty"` // more settling before the first step
	Search    searchOpts    `json:"search"`
	Steps     []scaleStep   `json:"steps"`
	Curve     []scaleStep   `json:"curve,omitempty"` // steps measured before the search, for the cost curve only
	Capacity  int           `json:"capacity"`        // most cameras that passed (0: not even one)
	FirstFail int           `json:"first_fail,omitempty"`
	Cut       bool          `json:"cut,omitempty"` // -budget ended the search before it came within -resolution
	Load      loadAvg       `json:"load"`
	Started   time.Time     `json:"started"`
	Seconds   float64       `json:"seconds"`
}

// searchOpts are the scale search's bounds: the first step's cameras, the factor by which
// the count grows until a step fails, and how close the bisection comes (it stops when the
// fewest failing cameras are at most Resolution more than the most passing).
type searchOpts struct {
	Start      int     `json:"start"`
	Max        int     `json:"max"`
	Grow       float64 `json:"grow"`
	Resolution int     `json:"resolution"`
	// Budget, when set, ends the search before a step that would not end within it (the
	// longest step so far as the estimate); the result then says it was cut.
	Budget float64 `json:"budget_s,omitempty"`
}

func (o *searchOpts) register(fs *flag.FlagSet) {
	fs.IntVar(&o.Start, "start", 1, "cameras of the first step (start near the expected answer: fewer steps)")
	fs.IntVar(&o.Max, "max", 512, "most cameras to try")
	fs.Float64Var(&o.Grow, "grow", 2, "factor by which the cameras grow after a passing step, until one fails (> 1)")
	fs.IntVar(&o.Resolution, "resolution", 1, "bisect until the first failure is at most this many cameras above the capacity")
	fs.Func("budget", "end the search, and write what it found, before a step that would not end within this `duration` of the start "+
		"(the longest step so far as the estimate; 0: no bound)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("want a duration >= 0, got %q", v)
		}
		o.Budget = d.Seconds()
		return nil
	})
}

// cameraList is a flag of camera counts: "1,8" or "1 8"; "" none.
type cameraList []int

func (l *cameraList) String() string {
	var parts []string
	for _, n := range *l {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ",")
}

func (l *cameraList) Set(v string) error {
	*l = nil
	for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return fmt.Errorf("want camera counts >= 1 separated by commas, got %q", f)
		}
		*l = append(*l, n)
	}
	return nil
}

// curveSteps measures each count of the list (the low end of the cost curve, which a search
// started near its answer does not visit); they decide nothing.
func curveSteps(counts cameraList, measure func(n int) (scaleStep, error)) ([]scaleStep, error) {
	var out []scaleStep
	for _, n := range counts {
		st, err := measure(n)
		if err != nil {
			return out, err
		}
		out = append(out, st)
	}
	return out, nil
}

func (o searchOpts) check() error {
	switch {
	case o.Start < 1:
		return fmt.Errorf("-start %d: must be at least 1", o.Start)
	case o.Max < o.Start:
		return fmt.Errorf("-max %d: must be at least -start (%d)", o.Max, o.Start)
	case !(o.Grow > 1):
		return fmt.Errorf("-grow %g: must be more than 1", o.Grow)
	case o.Resolution < 1:
		return fmt.Errorf("-resolution %d: must be at least 1", o.Resolution)
	}
	return nil
}

// search finds the most cameras for which step passes: it grows the count from o.Start by
// o.Grow until a step fails (or o.Max passes), then bisects between the last pass and the
// first failure. It returns the steps in the order run, the most cameras that passed (0:
// none) and the fewest that failed (0: none); an error from step ends the search. With
// o.Budget it runs no step that would end past the budget by the longest step's time, and
// says whether that cut the search short.
func search(o searchOpts, step func(n int) (scaleStep, error)) (steps []scaleStep, lo, hi int, cut bool, err error) {
	start := time.Now()
	var longest time.Duration
	n := o.Start
	for {
		t0 := time.Now()
		st, err := step(n)
		if err != nil {
			return steps, lo, hi, false, err
		}
		longest = max(longest, time.Since(t0))
		steps = append(steps, st)
		if st.Pass {
			lo = n
		} else {
			hi = n
		}
		switch {
		case hi == 0 && n >= o.Max:
			return steps, lo, hi, false, nil
		case hi == 0:
			n = min(o.Max, max(n+1, int(math.Ceil(float64(n)*o.Grow))))
		case hi-lo > o.Resolution:
			n = (lo + hi) / 2
		default:
			return steps, lo, hi, false, nil
		}
		if o.Budget > 0 && time.Since(start)+longest > time.Duration(o.Budget*float64(time.Second)) {
			logf("search: the next step (%d cameras) would end past -budget %v: stopping with %d passed, %d failed",
				n, time.Duration(o.Budget*float64(time.Second)), lo, hi)
			return steps, lo, hi, true, nil
		}
	}
}

// scaleCmd searches for the most cameras the daemon sustains (search), the cameras set by
// config reloads (or, with -restart, by a new daemon for each step). Each step waits for
// every camera to be online, lets it settle, then measures one window and what it cost (CPU,
// memory, GPU memory).
func scaleCmd(args []string) error {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	var f daemonFlags
	f.register(fs)
	var o searchOpts
	o.register(fs)
	var curve cameraList
	fs.Var(&curve, "curve", "camera `counts` (\"1,8\") measured before the search, for the plot of the cost against cameras only")
	out := fs.String("o", "-", "output JSON")
	label := fs.String("label", "", "what is measured, in words, for the report (e.g. \"default CPU pool, FP32\")")
	p99 := fs.Duration("p99", 300*time.Millisecond, "p99 capture-to-publish latency bound")
	win := fs.Duration("window", 20*time.Second, "measurement window per step")
	settle := fs.Duration("settle", 5*time.Second, "wait after every camera is online, before the window")
	online := fs.Duration("online", 90*time.Second, "how long a step waits for every camera to come online before it fails (the GPU's decoders open a few at a time)")
	warmup := fs.Duration("warmup", 10*time.Second, "more wait before the first step's window (the workers' first runs are slow)")
	minShare := fs.Float64("min-share", 0.95, "each camera must reach this share of -fps (0.95: 4.75 of 5)")
	totalShare := fs.Float64("total-share", 0.95, "all cameras together must reach this share of cameras x -fps")
	restart := fs.Bool("restart", false, "start a new daemon for every step, with -warmup each time, rather than reload the cameras of one "+
		"(slower; no step inherits another's state: on the GPU, a daemon reloaded down from an overloaded step paced its cameras low for a while)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	c := criterion{FPS: f.FPS, P99MS: float64(*p99) / float64(time.Millisecond), MinShare: *minShare, Total: *totalShare}
	res := scaleResult{Label: *label, Command: os.Args, Daemon: f, Criterion: c, WindowS: win.Seconds(), SettleS: settle.Seconds(), WarmupS: warmup.Seconds(), Search: o, Started: time.Now()}

	d, err := startDaemon(f, 0)
	if err != nil {
		return err
	}
	defer func() { d.Stop() }() // the daemon of the last step
	res.Version = d.version()

	first := true
	measure := func(n int) (scaleStep, error) {
		step := scaleStep{Cameras: n}
		if *restart && !first {
			d.Stop()
			if d, err = startDaemon(f, 0); err != nil {
				return step, err
			}
			first = true // its workers' first runs are slow too
			logf("scale: a new daemon (pid %d) for the step of %d cameras", d.cmd.Process.Pid, n)
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("cam%03d", i)
		}
		r0 := d.reconnects()
		if err := d.setCameras(ids, *online); err != nil {
			if aerr := d.alive(); aerr != nil {
				return step, aerr
			}
			step.Why = err.Error()
		} else {
			time.Sleep(*settle)
			if first {
				time.Sleep(*warmup)
				first = false
			}
			r1 := d.reconnects()
			step.Window, step.Cost = d.measureStep(*win)
			step.Window.ReconnectsWarmup, step.Window.ReconnectsWindow = reconnectsSince(r0, r1), reconnectsSince(r1, d.reconnects())
			step.Pass, step.Why = c.check(step.Window)
		}
		logStep("scale", step)
		return step, nil
	}
	return res.measure("scale", o, curve, measure, *out)
}

// measure runs the curve's steps and the search with measure, fills in res with what they
// found and writes it to out; what names the command in the log.
func (res *scaleResult) measure(what string, o searchOpts, curve cameraList, measure func(n int) (scaleStep, error), out string) error {
	var err error
	if res.Curve, err = curveSteps(curve, measure); err != nil {
		return err
	}
	steps, lo, hi, cut, err := search(o, measure)
	res.Steps = steps
	if err != nil {
		return err
	}
	res.Capacity, res.FirstFail, res.Cut = lo, hi, cut
	res.Load = readLoad()
	res.Seconds = time.Since(res.Started).Seconds()
	logf("%s: capacity %d cameras at %g fps (p99 < %v) in %.0f s", what, lo, res.Criterion.FPS,
		time.Duration(res.Criterion.P99MS*float64(time.Millisecond)), res.Seconds)
	return writeJSON(out, res)
}

func logStep(what string, st scaleStep) {
	w, c := st.Window, st.Cost
	logf("%s: %d cameras: %.1f frames/s, slowest camera %.2f/s, p99 %.0f ms (subscriber; decode→publish %.0f), decoded %.2f/s slowest, %d source drops, decode: %v, reconnects %d+%d, %.2f cores, %.1f ms CPU per frame, GPU %.0f MiB (%.1f per camera): pass=%v %s",
		what, st.Cameras, w.EventsPerSec, w.MinCamera, w.p99(), w.TotalP99, w.DecodedMin, w.SourceDrops, w.Decode, w.ReconnectsWarmup, w.ReconnectsWindow, c.CoresBusy, c.CPUPerFrameMS, c.GPUMiB, c.GPUMiBPerCamera, st.Pass, st.Why)
}
