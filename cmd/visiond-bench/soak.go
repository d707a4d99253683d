package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type soakSample struct {
	T          float64   `json:"t_s"`
	Configured int       `json:"cameras_configured"`
	Online     int       `json:"cameras_online"`
	DaemonMiB  float64   `json:"daemon_rss_mib"`
	HeapMiB    float64   `json:"daemon_heap_mib"` // the daemon's Go heap in use (go_memstats_heap_inuse_bytes)
	DaemonGPU  float64   `json:"daemon_gpu_mib"`  // the daemon's own GPU memory (NVDEC decoding), nvidia-smi; 0 without
	WorkerMiB  []float64 `json:"worker_rss_mib"`
	WorkerGPU  []float64 `json:"worker_gpu_mib"`
	WorkerPIDs []int     `json:"worker_pids"`
	Goroutines float64   `json:"daemon_goroutines"`
	OpenFiles  int       `json:"open_files"`     // the daemon's and its workers' file descriptors
	DiskMiB    float64   `json:"state_disk_mib"` // the state directory: JetStream store, clips waiting, track-id floors
	RingsMiB   float64   `json:"clip_rings_mib"` // the cameras' clip rings (visiond_memory_bytes{owner="clip_rings"})
	LeafUp     bool      `json:"leaf_up"`
	HubMsgs    uint64    `json:"hub_messages,omitempty"` // events in the hub's stream that sources the box's
	EventsPS   float64   `json:"events_per_s"`
	P50        float64   `json:"latency_p50_ms"`
	P99        float64   `json:"latency_p99_ms"`
	AgeP99     float64   `json:"frame_age_p99_ms"`
	Load1      float64   `json:"load1"` // the host's 1-minute load average
}

type soakEdit struct {
	T       float64  `json:"t_s"`
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
	Cameras int      `json:"cameras"`
	ZoneTop float64  `json:"zone_top,omitempty"` // the zones' top edge after the edit (-zones)
}

// soakCut is an outage of the link to the hub: from T for Seconds.
type soakCut struct {
	T       float64 `json:"t_s"`
	Seconds float64 `json:"seconds"`
}

type soakResult struct {
	Daemon     daemonFlags  `json:"daemon"`
	DurationS  float64      `json:"duration_s"`
	EditEveryS float64      `json:"edit_every_s"`
	SampleS    float64      `json:"sample_every_s"`
	Base       int          `json:"base_cameras"`
	Churn      int          `json:"churn_cameras"`
	WarmupS    float64      `json:"warmup_s"`
	Samples    []soakSample `json:"samples"`
	Edits      []soakEdit   `json:"edits"`
	Cuts       []soakCut    `json:"cuts,omitempty"`
	// Slopes are the linear trends after the warm-up (the first SlopeFromS seconds left
	// out), in percent of the mean an hour: total_rss (daemon and workers), daemon_rss,
	// daemon_heap, goroutines, open_files.
	SlopeFromS  float64            `json:"slope_from_s"`
	Slopes      map[string]float64 `json:"slopes_pct_per_hour,omitempty"`
	HubEvents   uint64             `json:"hub_events,omitempty"` // in the hub's stream at the end
	Applied     int                `json:"reloads_applied"`
	Rejected    int                `json:"reloads_rejected"`
	RejectedErr string             `json:"reload_error,omitempty"`
	Restarts    uint64             `json:"worker_restarts"`
	Lost        uint64             `json:"worker_jobs_lost"`
	Events      int                `json:"events"`
	Load        loadAvg            `json:"load"`
	Started     time.Time          `json:"started"`
}

// soakCmd runs the daemon for the duration with base cameras, and every edit-every rewrites
// its config file: odd edits add churn new cameras, even ones remove them again (new ids
// every time, so cameras come and go). It samples the daemon's and each worker's memory and
// the latency of the last interval's events.
func soakCmd(args []string) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	var f daemonFlags
	f.register(fs)
	out := fs.String("o", "-", "output JSON")
	csvPath := fs.String("csv", "", "also write the samples as CSV here")
	pngPath := fs.String("png", "", "also plot memory and latency over time to this PNG")
	dur := fs.Duration("duration", 30*time.Minute, "how long")
	every := fs.Duration("edit-every", time.Minute, "config edit period")
	sample := fs.Duration("sample-every", 10*time.Second, "sampling period")
	scale := fs.String("scale", "", "scale result (JSON): base cameras = its capacity")
	base := fs.Int("cameras", 0, "base cameras, when not from -scale (default 2)")
	churn := fs.Int("churn", 2, "cameras added by odd edits and removed by even ones")
	title := fs.String("title", "", "plot title")
	warmup := fs.Duration("warmup", 30*time.Second, "wait after every camera is online, before the first sample")
	zones := fs.Bool("zones", false, "every edit also moves the cameras' zone (with -analytics)")
	hub := fs.Bool("hub", false, "link the daemon's embedded server to a hub (in this process) through a proxy that -cut-every cuts")
	cutEvery := fs.Duration("cut-every", 0, "cut the link to the hub this often (0: never)")
	cutFor := fs.Duration("cut-for", 30*time.Second, "how long each cut lasts")
	maxCuts := fs.Int("cuts", 0, "cut the link at most this often (0: no bound)")
	replot := fs.String("replot", "", "run nothing: plot the soak result `FILE` (its JSON) to -png")
	slopeFrom := fs.Duration("slope-from", 0, "leave this much of the start out of the slopes (default: a tenth of -duration)")
	fs.IntVar(&f.ClipStoreMiB, "clip-store-mib", 0, "clip_store.max_bytes_mib (0: the daemon's default)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *replot != "" {
		var res soakResult
		if err := readJSON(*replot, &res); err != nil {
			return err
		}
		if *pngPath == "" {
			return errors.New("-replot needs -png")
		}
		return plotSoak(*pngPath, *title, res)
	}
	if *slopeFrom == 0 {
		*slopeFrom = *dur / 10
	}
	var link *hubLink
	if *hub {
		var err error
		if link, err = startHubLink(); err != nil {
			return err
		}
		defer link.close()
		f.Leaf = link.url()
	}
	if *scale != "" && *base == 0 {
		var s scaleResult
		if err := readJSON(*scale, &s); err != nil {
			return err
		}
		*base = s.Capacity
	}
	if *base <= 0 {
		*base = 2
	}
	res := soakResult{Daemon: f, DurationS: dur.Seconds(), EditEveryS: every.Seconds(), SampleS: sample.Seconds(),
		Base: *base, Churn: *churn, WarmupS: warmup.Seconds(), Started: time.Now(), SlopeFromS: slopeFrom.Seconds()}

	d, err := startDaemon(f, *base)
	if err != nil {
		return err
	}
	defer d.Stop()
	if err := d.warmUp(*warmup); err != nil {
		return err
	}
	if link != nil {
		if err := link.source(site, f.JetStream); err != nil {
			return err
		}
	}
	baseIDs := append([]string(nil), d.cams...)
	next := *base // the number in the next new camera's id
	var churned []string
	logf("soak: %d cameras, %v, an edit every %v, a sample every %v", *base, *dur, *every, *sample)

	t0 := time.Now()
	end := t0.Add(*dur)
	nextSample, nextEdit := t0.Add(*sample), t0.Add(*every)
	never := end.Add(time.Hour)
	nextCut, restoreAt := never, never
	if link != nil && *cutEvery > 0 {
		nextCut = t0.Add(*cutEvery)
	}
	lastSample, edits := t0, 0
	for {
		if !nextEdit.Before(end) {
			nextEdit = never // no edit at the very end: nothing would measure it
		}
		at := earliest(nextSample, nextEdit, nextCut, restoreAt)
		if at.After(end) {
			break
		}
		time.Sleep(time.Until(at))
		if err := d.alive(); err != nil {
			return err
		}
		if at.Equal(nextCut) {
			link.proxy.Cut()
			res.Cuts = append(res.Cuts, soakCut{T: time.Since(t0).Seconds(), Seconds: cutFor.Seconds()})
			logf("soak: +%4.0fs link to the hub cut for %v", time.Since(t0).Seconds(), *cutFor)
			restoreAt, nextCut = time.Now().Add(*cutFor), nextCut.Add(*cutEvery)
			if *maxCuts > 0 && len(res.Cuts) >= *maxCuts {
				nextCut = never
			}
			continue
		}
		if at.Equal(restoreAt) {
			link.proxy.Restore()
			logf("soak: +%4.0fs link to the hub restored", time.Since(t0).Seconds())
			restoreAt = never
			continue
		}
		if nextEdit.Before(nextSample) { // a sample due at the same time goes first
			edits++
			e := soakEdit{T: time.Since(t0).Seconds()}
			if edits%2 == 1 {
				for range *churn {
					id := fmt.Sprintf("cam%03d", next)
					next++
					churned = append(churned, id)
					e.Added = append(e.Added, id)
				}
			} else {
				e.Removed, churned = churned, nil
			}
			if *zones {
				d.f.zoneTop = map[bool]float64{true: 0.55, false: 0.5}[edits%2 == 1]
				e.ZoneTop = d.f.zoneTop
			}
			ids := append(append([]string(nil), baseIDs...), churned...)
			if err := d.writeConfig(ids); err != nil {
				return err
			}
			e.Cameras = len(ids)
			res.Edits = append(res.Edits, e)
			logf("soak: +%4.0fs edit %d: added %v removed %v (%d cameras)", e.T, edits, e.Added, e.Removed, e.Cameras)
			nextEdit = nextEdit.Add(*every)
			continue
		}
		now := time.Now()
		s := soakSample{T: now.Sub(t0).Seconds(), Configured: len(d.cams), DaemonMiB: mib(d.daemonRSS()), Load1: readLoad().One}
		s.HeapMiB = mib(int64(d.metric("go_memstats_heap_inuse_bytes")))
		s.Goroutines = d.metric("go_goroutines")
		s.RingsMiB = mib(int64(d.metric(`visiond_memory_bytes{owner="clip_rings"}`)))
		s.LeafUp = d.metric("visiond_leaf_link_up") == 1
		s.OpenFiles, _ = fdCount(d.cmd.Process.Pid)
		s.DiskMiB = mib(dirBytes(filepath.Join(d.dir, "state")))
		if link != nil {
			s.HubMsgs = link.messages()
		}
		s.DaemonGPU = gpuMemByPID()[d.cmd.Process.Pid]
		if cs, err := d.cameras(); err == nil {
			for _, c := range cs {
				if c.State == "online" {
					s.Online++
				}
			}
		}
		if ws, err := d.workers(); err == nil {
			for _, w := range ws {
				rss := w.RSS
				if w.PID > 0 {
					if r := procRSS(w.PID); r > 0 {
						rss = r // fresher than the pool's last sample
					}
				}
				n, _ := fdCount(w.PID)
				s.OpenFiles += n
				s.WorkerMiB = append(s.WorkerMiB, mib(rss))
				s.WorkerGPU = append(s.WorkerGPU, mib(w.GPU))
				s.WorkerPIDs = append(s.WorkerPIDs, w.PID)
			}
		}
		w := summarise(d.events.between(lastSample, now), now.Sub(lastSample).Seconds(), d.cams)
		s.EventsPS, s.P50, s.P99, s.AgeP99 = w.EventsPerSec, w.TotalP50, w.TotalP99, w.AgeP99
		res.Samples = append(res.Samples, s)
		logf("soak: +%4.0fs daemon %.0f MiB (GPU %.0f, heap %.0f, rings %.0f), workers %v MiB (GPU %v), %.0f goroutines, %d files, disk %.0f MiB, leaf %v, hub %d, %.1f events/s, p50 %.0f p99 %.0f ms, %d/%d online",
			s.T, s.DaemonMiB, s.DaemonGPU, s.HeapMiB, s.RingsMiB, s.WorkerMiB, s.WorkerGPU, s.Goroutines, s.OpenFiles, s.DiskMiB, s.LeafUp, s.HubMsgs,
			s.EventsPS, s.P50, s.P99, s.Online, s.Configured)
		lastSample = now
		nextSample = nextSample.Add(*sample)
	}
	time.Sleep(time.Until(end))
	res.Events = len(d.events.between(t0, end))
	// Let the last edit's reload event arrive.
	for range 20 {
		d.configs.mu.Lock()
		n := d.configs.applied + d.configs.rejected
		d.configs.mu.Unlock()
		if n >= len(res.Edits) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	d.configs.mu.Lock()
	res.Applied, res.Rejected, res.RejectedErr = d.configs.applied, d.configs.rejected, d.configs.lastErr
	d.configs.mu.Unlock()
	if ws, err := d.workers(); err == nil {
		for _, w := range ws {
			res.Restarts += w.Restarts
			res.Lost += w.Lost
		}
	}
	res.Load = readLoad()
	res.Slopes = soakSlopes(res.Samples, res.SlopeFromS)
	if link != nil {
		res.HubEvents = link.messages()
	}
	logf("soak: slopes after %.0f s, %% of the mean an hour: %v", res.SlopeFromS, res.Slopes)
	if *csvPath != "" {
		if err := writeSoakCSV(*csvPath, res); err != nil {
			return err
		}
	}
	if *pngPath != "" {
		if err := plotSoak(*pngPath, *title, res); err != nil {
			return err
		}
	}
	return writeJSON(*out, res)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func writeSoakCSV(path string, r soakResult) error {
	var b strings.Builder
	nw := 0
	for _, s := range r.Samples {
		nw = max(nw, len(s.WorkerMiB))
	}
	b.WriteString("t_s,cameras_configured,cameras_online,daemon_rss_mib,daemon_heap_mib,daemon_gpu_mib")
	for i := range nw {
		fmt.Fprintf(&b, ",worker%d_rss_mib,worker%d_gpu_mib,worker%d_pid", i, i, i)
	}
	b.WriteString(",events_per_s,latency_p50_ms,latency_p99_ms,frame_age_p99_ms,load1\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "%.0f,%d,%d,%.1f,%.1f,%.1f", s.T, s.Configured, s.Online, s.DaemonMiB, s.HeapMiB, s.DaemonGPU)
		for i := range nw {
			if i < len(s.WorkerMiB) {
				fmt.Fprintf(&b, ",%.1f,%.1f,%d", s.WorkerMiB[i], s.WorkerGPU[i], s.WorkerPIDs[i])
			} else {
				b.WriteString(",,,")
			}
		}
		fmt.Fprintf(&b, ",%.2f,%.1f,%.1f,%.1f,%.2f\n", s.EventsPS, s.P50, s.P99, s.AgeP99, s.Load1)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// soakSlopes fits a line to each series of the samples from from seconds on (least squares)
// and returns its slope in percent of the series' mean an hour; a series whose mean is 0, or
// with fewer than 3 samples, is left out.
func soakSlopes(samples []soakSample, from float64) map[string]float64 {
	series := map[string]func(soakSample) float64{
		"total_rss":   func(s soakSample) float64 { return s.DaemonMiB + sum(s.WorkerMiB) },
		"daemon_rss":  func(s soakSample) float64 { return s.DaemonMiB },
		"daemon_heap": func(s soakSample) float64 { return s.HeapMiB },
		"goroutines":  func(s soakSample) float64 { return s.Goroutines },
		"open_files":  func(s soakSample) float64 { return float64(s.OpenFiles) },
	}
	out := map[string]float64{}
	for name, get := range series {
		var hours, v []float64
		for _, s := range samples {
			if s.T >= from {
				hours, v = append(hours, s.T/3600), append(v, get(s))
			}
		}
		if m := mean(v); len(v) >= 3 && m != 0 {
			out[name] = math.Round(slope(hours, v)/m*100*100) / 100
		}
	}
	return out
}

// earliest returns the earliest of ts.
func earliest(ts ...time.Time) time.Time {
	e := ts[0]
	for _, t := range ts[1:] {
		if t.Before(e) {
			e = t
		}
	}
	return e
}
