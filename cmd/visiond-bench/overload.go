package main

import (
	"flag"
	"math"
	"time"
)

type drops struct {
	Superseded, Stale, Source, WorkerLost, Timeout, Rejected, Shutdown uint64
}

type overloadResult struct {
	Daemon       daemonFlags `json:"daemon"`
	Capacity     int         `json:"capacity"`               // cameras sustained (scale), the reference
	ScaleMaxRate float64     `json:"scale_max_events_per_s"` // the most events/s of any scale step
	Factor       float64     `json:"factor"`
	Cameras      int         `json:"cameras"`
	DurationS    float64     `json:"duration_s"`
	WarmupS      float64     `json:"warmup_s"`
	MaxFrameAgeS float64     `json:"max_frame_age_s"` // the daemon's max_frame_age (its default)
	Overall      window      `json:"overall"`
	Intervals    []window    `json:"intervals"`
	Decoded      uint64      `json:"frames_decoded"`
	Analysed     uint64      `json:"frames_analysed"`
	Drops        drops       `json:"drops"`
	Reconnects   uint64      `json:"reconnects"`
	WorkerLost   uint64      `json:"worker_jobs_lost"`
	Restarts     uint64      `json:"worker_restarts"`
	Load         loadAvg     `json:"load"`
	Started      time.Time   `json:"started"`
}

// overloadCmd runs factor x capacity cameras for the duration and reports throughput,
// frame age (capture to dispatch) and latency per interval, and fairness: Jain's index over
// the cameras' analysed rates.
func overloadCmd(args []string) error {
	fs := flag.NewFlagSet("overload", flag.ContinueOnError)
	var f daemonFlags
	f.register(fs)
	out := fs.String("o", "-", "output JSON")
	scale := fs.String("scale", "", "scale result (JSON) whose capacity is the reference")
	capacity := fs.Int("capacity", 0, "cameras sustained, when not read from -scale")
	factor := fs.Float64("factor", 2, "cameras = factor x capacity")
	dur := fs.Duration("duration", 10*time.Minute, "how long to run overloaded (after the warm-up)")
	warmup := fs.Duration("warmup", 15*time.Second, "wait after every camera is online")
	if err := fs.Parse(args); err != nil {
		return err
	}
	maxRate := 0.0
	if *scale != "" {
		var s scaleResult
		if err := readJSON(*scale, &s); err != nil {
			return err
		}
		*capacity = s.Capacity
		for _, st := range s.Steps {
			maxRate = max(maxRate, st.Window.EventsPerSec)
		}
	}
	// Twice the capacity both ways: twice the cameras sustained under the latency bound, and
	// cameras asking twice the most frames per second the workers analysed in the search (the
	// latency bound can stop the search well below what the workers can take).
	n := max(2, int(*factor*float64(max(1, *capacity))+0.5))
	if maxRate > 0 {
		n = max(n, int(math.Ceil(*factor*maxRate/f.FPS)))
	}
	res := overloadResult{Daemon: f, Capacity: *capacity, ScaleMaxRate: maxRate, Factor: *factor, Cameras: n, DurationS: dur.Seconds(),
		WarmupS: warmup.Seconds(), MaxFrameAgeS: 1, Started: time.Now()}

	d, err := startDaemon(f, n)
	if err != nil {
		return err
	}
	defer d.Stop()
	logf("overload: %d cameras (capacity %d); warming up %v once online, then %v", n, *capacity, *warmup, *dur)
	if err := d.warmUp(*warmup); err != nil {
		return err
	}
	before, err := d.cameras()
	if err != nil {
		return err
	}
	wBefore, err := d.workers()
	if err != nil {
		return err
	}
	interval := min(time.Minute, max(10*time.Second, *dur/10))
	t0 := time.Now()
	end := t0.Add(*dur)
	for from := t0; from.Before(end); {
		to := from.Add(interval)
		if to.After(end) {
			to = end
		}
		time.Sleep(time.Until(to))
		if err := d.alive(); err != nil {
			return err
		}
		w := summarise(d.events.between(from, to), to.Sub(from).Seconds(), d.cams)
		w.Load1 = readLoad().One
		logf("overload: +%4.0fs %.1f events/s, Jain %.3f, frame age p99 %.0f ms max %.0f ms, latency p99 %.0f ms",
			to.Sub(t0).Seconds(), w.EventsPerSec, w.Jain, w.AgeP99, w.AgeMax, w.TotalP99)
		w.PerCamera = nil
		res.Intervals = append(res.Intervals, w)
		from = to
	}
	res.Overall = summarise(d.events.between(t0, end), end.Sub(t0).Seconds(), d.cams)
	after, err := d.cameras()
	if err != nil {
		return err
	}
	wAfter, err := d.workers()
	if err != nil {
		return err
	}
	prev := map[string]camStatus{}
	for _, c := range before {
		prev[c.ID] = c
	}
	for _, c := range after {
		p := prev[c.ID]
		res.Decoded += c.Decoded - p.Decoded
		res.Analysed += c.Analysed - p.Analysed
		res.Reconnects += c.Reconnects - p.Reconnects
		res.Drops.Superseded += c.Drops.Superseded - p.Drops.Superseded
		res.Drops.Stale += c.Drops.Stale - p.Drops.Stale
		res.Drops.Source += c.Drops.Source - p.Drops.Source
		res.Drops.WorkerLost += c.Drops.WorkerLost - p.Drops.WorkerLost
		res.Drops.Timeout += c.Drops.Timeout - p.Drops.Timeout
		res.Drops.Rejected += c.Drops.Rejected - p.Drops.Rejected
		res.Drops.Shutdown += c.Drops.Shutdown - p.Drops.Shutdown
	}
	for i, w := range wAfter {
		if i < len(wBefore) {
			res.WorkerLost += w.Lost - wBefore[i].Lost
			res.Restarts += w.Restarts - wBefore[i].Restarts
		}
	}
	res.Load = readLoad()
	logf("overload: %.1f events/s over %v, Jain %.3f, frame age p99 %.0f ms max %.0f ms",
		res.Overall.EventsPerSec, *dur, res.Overall.Jain, res.Overall.AgeP99, res.Overall.AgeMax)
	return writeJSON(*out, res)
}
