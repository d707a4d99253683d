package pipeline

import (
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/visiond/visiond/sources"
)

// cameraStates are the states every camera reports a visiond_camera_state series for, so
// that a state that is not current reads 0 rather than missing.
var cameraStates = []string{sources.StateConnecting, sources.StateOnline, sources.StateOffline, sources.StateUnauthorized}

// metricsCollector exports the daemon's state at scrape time from Cameras, Workers and the
// publisher's counters: the counters live in the pipeline alone, none are kept twice.
type metricsCollector struct {
	d *Daemon

	camDecoded, camAnalysed, camDropped, camDetections, camReconnects, camResyncs *prometheus.Desc
	camState, camFPS, camFPSTarget                                                *prometheus.Desc
	camAgeMean, camAgeMax, camInferMean, camLatencyMean                           *prometheus.Desc

	wJobs, wLost, wRestarts, wRecycles, wInFlight, wRSS, wGPU *prometheus.Desc

	published, publishFailed, reloadFailures *prometheus.Desc
}

func newMetricsCollector(d *Daemon) *metricsCollector {
	cam := []string{"camera"}
	wrk := []string{"worker", "provider"}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("visiond_"+name, help, labels, nil)
	}
	return &metricsCollector{
		d:             d,
		camDecoded:    desc("camera_frames_decoded_total", "Frames the camera's source decoded.", cam...),
		camAnalysed:   desc("camera_frames_analysed_total", "Frames analysed and published as detection events.", cam...),
		camDropped:    desc("camera_frames_dropped_total", "Frames not analysed, by reason: superseded (a newer frame replaced it before its turn), stale (older than max_frame_age), source (decode queue full or no free buffer), worker_lost, timeout, rejected, shutdown (cut off when stopping).", "camera", "reason"),
		camDetections: desc("camera_detections_total", "Objects detected.", cam...),
		camReconnects: desc("camera_reconnects_total", "Sessions the camera's source opened after the first.", cam...),
		camResyncs:    desc("camera_resyncs_total", "Skips to the next keyframe after loss or damage.", cam...),
		camState:      desc("camera_state", "1 for the camera's current state, 0 for the others.", "camera", "state"),
		camFPS:        desc("camera_fps_achieved", "Frames analysed per second, recently.", cam...),
		camFPSTarget:  desc("camera_fps_target", "Frames per second the camera is configured to be analysed at.", cam...),
		camAgeMean:    desc("camera_frame_age_mean_seconds", "Decoded to dispatched to a worker, exponentially weighted mean.", cam...),
		camAgeMax:     desc("camera_frame_age_max_seconds", "Decoded to dispatched to a worker, maximum within the current 10 s summary window.", cam...),
		camInferMean:  desc("camera_inference_mean_seconds", "The worker's model run, exponentially weighted mean.", cam...),
		camLatencyMean: desc("camera_latency_mean_seconds",
			"Decoded to published (end to end on this host), exponentially weighted mean.", cam...),

		wJobs:     desc("worker_jobs_total", "Jobs the worker answered (successfully or rejected).", wrk...),
		wLost:     desc("worker_jobs_lost_total", "Jobs lost to a worker crash, protocol break or timeout.", wrk...),
		wRestarts: desc("worker_restarts_total", "Worker processes started after the first.", wrk...),
		wRecycles: desc("worker_recycles_total", "Worker processes stopped between jobs for being over a memory limit.", wrk...),
		wInFlight: desc("worker_jobs_in_flight", "Jobs sent to the worker process and not answered yet.", wrk...),
		wRSS:      desc("worker_resident_memory_bytes", "Resident memory of the worker process at its last sample.", wrk...),
		wGPU:      desc("worker_gpu_memory_bytes", "GPU memory of the worker process at its last sample (0 without a GPU memory command).", wrk...),

		published:      desc("events_published_total", "Events (detections, status, config) published to NATS."),
		publishFailed:  desc("events_publish_failed_total", "Events that could not be encoded or published to NATS."),
		reloadFailures: desc("config_reload_failures_total", "Config reloads rejected; the running config stayed in force."),
	}
}

// Describe implements prometheus.Collector.
func (m *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		m.camDecoded, m.camAnalysed, m.camDropped, m.camDetections, m.camReconnects, m.camResyncs,
		m.camState, m.camFPS, m.camFPSTarget, m.camAgeMean, m.camAgeMax, m.camInferMean, m.camLatencyMean,
		m.wJobs, m.wLost, m.wRestarts, m.wRecycles, m.wInFlight, m.wRSS, m.wGPU,
		m.published, m.publishFailed, m.reloadFailures,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; it runs on each scrape.
func (m *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, c := range m.d.Cameras() {
		id := c.ID
		counter(m.camDecoded, c.Decoded, id)
		counter(m.camAnalysed, c.Analysed, id)
		for _, r := range []struct {
			reason string
			n      uint64
		}{
			{"superseded", c.Drops.Superseded},
			{"stale", c.Drops.Stale},
			{"source", c.Drops.Source},
			{"worker_lost", c.Drops.WorkerLost},
			{"timeout", c.Drops.Timeout},
			{"rejected", c.Drops.Rejected},
			{"shutdown", c.Drops.Shutdown},
		} {
			counter(m.camDropped, r.n, id, r.reason)
		}
		counter(m.camDetections, c.Detections, id)
		counter(m.camReconnects, c.Reconnects, id)
		counter(m.camResyncs, c.Resyncs, id)
		for _, s := range cameraStates {
			gauge(m.camState, b2f(c.State == s), id, s)
		}
		if c.State != "" && !slices.Contains(cameraStates, c.State) {
			gauge(m.camState, 1, id, c.State) // a state added to sources later
		}
		gauge(m.camFPS, c.FPSAchieved, id)
		gauge(m.camFPSTarget, c.FPS, id)
		gauge(m.camAgeMean, c.FrameAgeMS/1000, id)
		gauge(m.camAgeMax, c.FrameAgeMax/1000, id)
		gauge(m.camInferMean, c.InferMS/1000, id)
		gauge(m.camLatencyMean, c.LatencyMS/1000, id)
	}

	// WorkerStatus.Index counts within a pool; the position in Workers (pool order) is
	// unique across pools.
	for i, w := range m.d.Workers() {
		l := []string{strconv.Itoa(i), w.Provider}
		counter(m.wJobs, w.Jobs, l...)
		counter(m.wLost, w.Lost, l...)
		counter(m.wRestarts, w.Restarts, l...)
		counter(m.wRecycles, w.Recycles, l...)
		gauge(m.wInFlight, float64(w.InFlight), l...)
		gauge(m.wRSS, float64(w.RSSBytes), l...)
		gauge(m.wGPU, float64(w.GPUBytes), l...)
	}

	if m.d.pub != nil {
		ok, failed := m.d.pub.Stats()
		counter(m.published, ok)
		counter(m.publishFailed, failed)
	}
	counter(m.reloadFailures, m.d.ReloadFailures())
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricsHandler serves the daemon's metrics from a registry of its own (nothing is
// registered globally): the pipeline collector plus the Go runtime and process collectors.
func (d *Daemon) metricsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		newMetricsCollector(d),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(d.log.With("component", "metrics").Handler(), slog.LevelError),
		ErrorHandling: promhttp.ContinueOnError,
	})
}
