package main

import (
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
}

// summarise summarises evs, received over secs seconds from the cameras ids (a camera with
// no event counts as 0).
func summarise(evs []event, secs float64, ids []string) window {
	w := window{Seconds: secs, Cameras: len(ids), Events: len(evs), PerCamera: map[string]float64{}}
	for _, id := range ids {
		w.PerCamera[id] = 0
	}
	var tot, age []float64
	dets := 0
	for _, e := range evs {
		if _, ok := w.PerCamera[e.cam]; !ok {
			continue // a camera removed by a reload still publishing its last frame
		}
		w.PerCamera[e.cam]++
		tot = append(tot, e.total)
		age = append(age, e.age)
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
	return w
}

// measureWindow waits dur and summarises the events received meanwhile.
func (d *daemon) measureWindow(dur time.Duration) window {
	from := time.Now()
	time.Sleep(dur)
	to := time.Now()
	w := summarise(d.events.between(from, to), to.Sub(from).Seconds(), d.cams)
	w.Load1 = readLoad().One
	return w
}
