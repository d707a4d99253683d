package main

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// pct is the q-quantile of xs by nearest rank (xs need not be sorted); 0 when empty (the
// window's event count says so).
func pct(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are equal, 1/n when one
// takes everything; 0 when all are 0.
func jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}

// slope is the least-squares slope of y over x.
func slope(x, y []float64) float64 {
	if len(x) < 2 {
		return 0
	}
	mx, my := mean(x), mean(y)
	var num, den float64
	for i := range x {
		num += (x[i] - mx) * (y[i] - my)
		den += (x[i] - mx) * (x[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// window summarises the detection events of one measurement window.
type window struct {
	Seconds      float64            `json:"seconds"`
	Cameras      int                `json:"cameras"`
	Events       int                `json:"events"`
	EventsPerSec float64            `json:"events_per_s"`
	PerCamera    map[string]float64 `json:"per_camera_per_s"`
	MinCamera    float64            `json:"min_camera_per_s"`
	MaxCamera    float64            `json:"max_camera_per_s"`
	Jain         float64            `json:"jain"`
	DetsPerSec   float64            `json:"detections_per_s"`
	TotalP50     float64            `json:"latency_p50_ms"`
	TotalP99     float64            `json:"latency_p99_ms"`
	TotalMax     float64            `json:"latency_max_ms"`
	AgeP50       float64            `json:"frame_age_p50_ms"`
	AgeP99       float64            `json:"frame_age_p99_ms"`
	AgeMax       float64            `json:"frame_age_max_ms"`
	Load1        float64            `json:"load1"` // the host's 1-minute load average at the window's end
	// As a subscriber sees it (events carrying captured_at): published_at - captured_at, and
	// the bench's clock at receipt - captured_at; Subscriber is what the criterion uses.
	Captured      int     `json:"events_with_captured_at,omitempty"`
	PublishedP50  float64 `json:"published_p50_ms,omitempty"`
	PublishedP99  float64 `json:"published_p99_ms,omitempty"`
	SubscriberP50 float64 `json:"subscriber_p50_ms,omitempty"`
	SubscriberP99 float64 `json:"subscriber_p99_ms,omitempty"`
	SubscriberMax float64 `json:"subscriber_max_ms,omitempty"`
	// Stages are latency_ms' stages (queue, pre, infer, post, total): where the time goes.
	Stages map[string]quantiles `json:"stages_ms,omitempty"`
	// Reconnects are the cameras' RTSP reconnects (/api/cameras) while the step warmed up
	// and over the window (set by the scale steps).
	ReconnectsWarmup int `json:"reconnects_warmup"`
	ReconnectsWindow int `json:"reconnects_window"`
	// The cameras' own counts over the window (/api/cameras): frames their decoders put out
	// a second, the slowest camera's and the mean, and frames their sources dropped (decode
	// queue full, no free frame buffer). A frame late or lost before it reaches the daemon's
	// queue shows here, not in latency_ms.
	DecodedMin  float64 `json:"decoded_min_per_s,omitempty"`
	DecodedMean float64 `json:"decoded_mean_per_s,omitempty"`
	SourceDrops uint64  `json:"source_drops,omitempty"`
	// Decode is where the cameras' decoding went over the window, from their counts
	// (/api/cameras' decode); nil when they were not read or nothing was decoded.
	Decode *decodeSteps `json:"decode,omitempty"`
}

// decodeSteps are the cameras' decode calls over a window, all cameras together: the mean
// time a call waited for its slot of the GPU decoder and the mean time it took, and of the
// frames scaled, the mean time of a frame's copy out of GPU memory and of its scaling.
type decodeSteps struct {
	CallsPerSec  float64 `json:"calls_per_s"`
	WaitMS       float64 `json:"wait_ms"`
	BusyMS       float64 `json:"busy_ms"`
	ScaledPerSec float64 `json:"scaled_per_s"`
	CopyMS       float64 `json:"copy_ms"`
	ScaleMS      float64 `json:"scale_ms"`
}

// String is the steps for a log line.
func (d *decodeSteps) String() string {
	if d == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f calls/s waiting %.2f ms and taking %.2f ms each; %.0f frames/s scaled, copy %.2f ms + scale %.2f ms each",
		d.CallsPerSec, d.WaitMS, d.BusyMS, d.ScaledPerSec, d.CopyMS, d.ScaleMS)
}

// quantiles are the p50 and p99 of one latency.
type quantiles struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

func quantilesOf(xs []float64) quantiles { return quantiles{P50: pct(xs, .5), P99: pct(xs, .99)} }

// p99 is the latency the criterion judges: received - captured_at (what a subscriber sees)
// when the events carried captured_at, else latency_ms.total (a peer's events).
func (w window) p99() float64 {
	if w.Captured > 0 {
		return w.SubscriberP99
	}
	return w.TotalP99
}

// summarise summarises evs, received over secs seconds from the cameras ids (a camera with
// no event counts as 0).
func summarise(evs []event, secs float64, ids []string) window {
	w := window{Seconds: secs, Cameras: len(ids), Events: len(evs), PerCamera: map[string]float64{}}
	for _, id := range ids {
		w.PerCamera[id] = 0
	}
	var tot, age, pub, recv, pre, inf, post []float64
	dets := 0
	for _, e := range evs {
		if _, ok := w.PerCamera[e.cam]; !ok {
			continue // a camera removed by a reload still publishing its last frame
		}
		w.PerCamera[e.cam]++
		tot = append(tot, e.total)
		age = append(age, e.age)
		pre, inf, post = append(pre, e.pre), append(inf, e.infer), append(post, e.post)
		if e.hasCapture {
			pub, recv = append(pub, e.published), append(recv, e.received)
		}
		dets += e.dets
	}
	w.Events = len(tot)
	w.EventsPerSec = float64(len(tot)) / secs
	w.DetsPerSec = float64(dets) / secs
	var per []float64
	keys := make([]string, 0, len(w.PerCamera))
	for k := range w.PerCamera {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		w.PerCamera[k] /= secs
		per = append(per, w.PerCamera[k])
	}
	if len(per) > 0 {
		w.MinCamera, w.MaxCamera = slices.Min(per), slices.Max(per)
		w.Jain = jain(per)
	}
	w.TotalP50, w.TotalP99, w.TotalMax = pct(tot, .5), pct(tot, .99), maxOf(tot)
	w.AgeP50, w.AgeP99, w.AgeMax = pct(age, .5), pct(age, .99), maxOf(age)
	w.Captured = len(recv)
	w.PublishedP50, w.PublishedP99 = pct(pub, .5), pct(pub, .99)
	w.SubscriberP50, w.SubscriberP99, w.SubscriberMax = pct(recv, .5), pct(recv, .99), maxOf(recv)
	if len(tot) > 0 {
		w.Stages = map[string]quantiles{"queue": quantilesOf(age), "pre": quantilesOf(pre), "infer": quantilesOf(inf),
			"post": quantilesOf(post), "total": quantilesOf(tot)}
	}
	return w
}

// measureWindow waits dur and summarises the events received meanwhile, and the cameras'
// decoder output and source drops (left out when /api/cameras cannot be read).
func (d *daemon) measureWindow(dur time.Duration) window {
	o := d.openWindow()
	time.Sleep(dur)
	return d.closeWindow(o)
}

// openedWindow is a window's start: when, and the cameras' counts then.
type openedWindow struct {
	from time.Time
	cams []camStatus
	err  error
}

// openWindow starts a window that closeWindow summarises.
func (d *daemon) openWindow() openedWindow {
	cs, err := d.cameras()
	return openedWindow{from: time.Now(), cams: cs, err: err}
}

// closeWindow summarises the events received since o opened, and the cameras' decoder
// output and source drops (left out when /api/cameras cannot be read).
func (d *daemon) closeWindow(o openedWindow) window {
	to := time.Now()
	cs1, err1 := d.cameras()
	w := summarise(d.events.between(o.from, to), to.Sub(o.from).Seconds(), d.cams)
	if o.err == nil && err1 == nil {
		sc := sourceCounts(o.cams, cs1, w.Seconds)
		w.DecodedMin, w.DecodedMean, w.SourceDrops, w.Decode = sc.DecodedMin, sc.DecodedMean, sc.SourceDrops, sc.Decode
	}
	w.Load1 = readLoad().One
	return w
}

// sourceCounts compares two readings of /api/cameras secs seconds apart: the cameras'
// decoder output and their sources' drops (window's Decoded*, SourceDrops) and where their
// decoding went (Decode). A camera in only one reading, or whose counters went down
// (restarted), is left out.
func sourceCounts(then, now []camStatus, secs float64) (w window) {
	prev := make(map[string]camStatus, len(then))
	for _, c := range then {
		prev[c.ID] = c
	}
	var rates []float64
	var calls, scaled uint64
	var wait, busy, cp, scale float64
	for _, c := range now {
		p, ok := prev[c.ID]
		if !ok || c.Decoded < p.Decoded || c.Drops.Source < p.Drops.Source || c.Decode.Calls < p.Decode.Calls || secs <= 0 {
			continue
		}
		rates = append(rates, float64(c.Decoded-p.Decoded)/secs)
		w.SourceDrops += c.Drops.Source - p.Drops.Source
		calls += c.Decode.Calls - p.Decode.Calls
		scaled += c.Decode.Scaled - p.Decode.Scaled
		wait += c.Decode.Wait - p.Decode.Wait
		busy += c.Decode.Busy - p.Decode.Busy
		cp += c.Decode.Copy - p.Decode.Copy
		scale += c.Decode.Scale - p.Decode.Scale
	}
	if len(rates) == 0 {
		return w
	}
	sum := 0.0
	for _, r := range rates {
		sum += r
	}
	w.DecodedMin, w.DecodedMean = slices.Min(rates), sum/float64(len(rates))
	if calls > 0 {
		d := &decodeSteps{CallsPerSec: float64(calls) / secs, WaitMS: 1000 * wait / float64(calls), BusyMS: 1000 * busy / float64(calls)}
		if scaled > 0 {
			d.ScaledPerSec, d.CopyMS, d.ScaleMS = float64(scaled)/secs, 1000*cp/float64(scaled), 1000*scale/float64(scaled)
		}
		w.Decode = d
	}
	return w
}
