package pipeline

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/internal/version"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// metricsCollector exports the daemon's state at scrape time from Cameras, Workers and the
// publisher's counters: the counters live in the pipeline alone, none are kept twice.
type metricsCollector struct {
	d *Daemon

	camDecoded, camAnalysed, camDropped, camDetections, camReconnects, camResyncs, camStuck *prometheus.Desc
	camFallbacks, camOnCPU                                                                  *prometheus.Desc
	camLiveViewers, camLiveBytes, camKeyframeInterval                                       *prometheus.Desc
	camNotDecoded, camDecodeCalls, camDecodeSeconds                                         *prometheus.Desc
	camState, camFPS, camFPSTarget                                                          *prometheus.Desc
	camAgeMean, camAgeMax, camInferMean, camLatencyMean                                     *prometheus.Desc
	stageLatency                                                                            *prometheus.Desc
	camTracked, zoneObjects, zoneClassObjects, lineCrossings, camFiltered                   *prometheus.Desc
	camClips, camClipsFailed, camClipBytes, camRingBytes                                    *prometheus.Desc
	clipsStored, clipsLost, clipsEvicted, clipsPending, clipsPendingBytes                   *prometheus.Desc

	wJobs, wLost, wRestarts, wRecycles, wInFlight, wRSS, wGPU *prometheus.Desc
	memory                                                    *prometheus.Desc
	memBudget, memGoLimit, memOver                            *prometheus.Desc

	published, publishFailed, reloadFailures       *prometheus.Desc
	publishRetried, publishDropped, publishPending *prometheus.Desc

	buildInfo, lastReload, lastReloadOK                 *prometheus.Desc
	leafUp, leafChanged                                 *prometheus.Desc
	haDropped                                           *prometheus.Desc
	streamMsgs, streamBytes, streamMaxBytes, streamFull *prometheus.Desc
}

func newMetricsCollector(d *Daemon) *metricsCollector {
	cam := []string{"camera"}
	wrk := []string{"worker", "provider"}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("visiond_"+name, help, labels, nil)
	}
	return &metricsCollector{
		d:              d,
		camDecoded:     desc("camera_frames_decoded_total", "Frames the camera's source decoded.", cam...),
		camNotDecoded:  desc("camera_frames_not_decoded_total", "Frames the camera's source left undecoded, not dropped: decode keyframes, or frames nothing references before the camera's turn.", cam...),
		camAnalysed:    desc("camera_frames_analysed_total", "Frames analysed and published as detection events.", cam...),
		camDropped:     desc("camera_frames_dropped_total", "Frames not analysed, by reason: superseded (a newer frame replaced it before its turn), stale (older than max_frame_age), source (decode queue full or no free buffer), worker_lost, timeout, rejected, shutdown (cut off when stopping).", "camera", "reason"),
		camDetections:  desc("camera_detections_total", "Objects detected.", cam...),
		camDecodeCalls: desc("camera_decode_calls_total", "Access units the camera's source sent to its decoder.", cam...),
		camDecodeSeconds: desc("camera_decode_seconds_total", "Time the camera's source spent decoding, by step: wait (for a call slot of the GPU decoder, decoder cuda), "+
			"busy (in the decoder's calls, copy and scale included), copy (of busy: frames copied from GPU memory to the host), scale (of busy: frames letterboxed into the format they are held in, YUV 4:2:0 or RGB24; the conversion of a YUV one to RGB24 is the dispatch's).", "camera", "step"),
		camReconnects:       desc("camera_reconnects_total", "Sessions the camera's source opened after the first.", cam...),
		camResyncs:          desc("camera_resyncs_total", "Skips to the next keyframe after loss or damage.", cam...),
		camStuck:            desc("camera_stuck_sessions_total", "Kind gstreamer: capture processes killed because their open or read blocked past stall_timeout.", cam...),
		camFallbacks:        desc("camera_decoder_fallbacks_total", "Decoder cuda: sessions moved to a CPU decoder because the GPU decoder did not open.", cam...),
		camOnCPU:            desc("camera_decoder_fallback", "Decoder cuda: 1 while the camera decodes on the CPU in place of its GPU decoder, else 0.", cam...),
		camLiveViewers:      desc("camera_live_viewers", "Viewers of the camera's live video (/api/cameras/{id}/live).", cam...),
		camKeyframeInterval: desc("camera_keyframe_interval_seconds", "The camera's stream's latest keyframe interval, from its packets (kinds rtsp and file); absent until two keyframes came.", cam...),
		camLiveBytes:        desc("camera_live_bytes_total", "Bytes of the camera's live video queued to its viewers.", cam...),
		camState:            desc("camera_state", "1 for the camera's current state, 0 for the others.", "camera", "state"),
		camFPS:              desc("camera_fps_achieved", "Frames analysed per second, recently.", cam...),
		camFPSTarget:        desc("camera_fps_target", "Frames per second the camera is configured to be analysed at.", cam...),
		camAgeMean:          desc("camera_frame_age_mean_seconds", "Decoded to dispatched to a worker, exponentially weighted mean.", cam...),
		camAgeMax:           desc("camera_frame_age_max_seconds", "Decoded to dispatched to a worker, maximum within the current 10 s summary window.", cam...),
		camInferMean:        desc("camera_inference_mean_seconds", "The worker's model run, exponentially weighted mean.", cam...),
		camLatencyMean: desc("camera_latency_mean_seconds",
			"Decoded to published (end to end on this host), exponentially weighted mean.", cam...),
		stageLatency: desc("stage_latency_seconds",
			"Latency of each analysed frame by stage: queue (decoded to dispatched to a worker: the frame's age at dispatch), "+
				"pre, infer and post (the worker's preprocessing, model run and postprocessing), total (decoded to published).",
			"camera", "stage"),
		camTracked:       desc("camera_tracked_objects", "Objects the camera's tracker follows (confirmed tracks, seen or lost for less than its buffer).", cam...),
		zoneObjects:      desc("zone_objects", "Objects in the zone now (after its debounce).", "camera", "zone"),
		zoneClassObjects: desc("zone_class_objects", "Objects of a class in the zone now; classes with none have no series.", "camera", "zone", "class"),
		lineCrossings:    desc("line_crossings_total", "Crossings of the line by direction (in, out) and class, kept across restarts in the state bucket.", "camera", "line", "direction", "class"),
		camFiltered: desc("filtered_detections_total", "Detections the camera's filter dropped before tracking, by reason: class (a class it does not track), "+
			"score (below its class's min_score), area (outside its min_area..max_area), mask (its anchor in a mask).", "camera", "reason"),

		camClips:       desc("camera_clips_total", "Clips the camera's recorder finished and handed to the clip store.", cam...),
		camClipsFailed: desc("camera_clips_failed_total", "Clips not started or not written: the spool or the MP4 could not be written.", cam...),
		camClipBytes:   desc("camera_clip_bytes_total", "Bytes of the clips the camera's recorder wrote.", cam...),
		camRingBytes:   desc("camera_clip_ring_bytes", "Memory the camera's ring of encoded video holds for its clips' pre_capture, with its recorder's read buffer.", cam...),
		clipsStored:    desc("clips_stored_total", "Clips stored in the site's clip store."),
		clipsLost: desc("clips_lost_total", "Clips not stored, by reason: queue_full (the store was slow or unreachable too long), "+
			"refused (the store is full: the server refused it after the oldest were removed), invalid (a bad clip file).", "reason"),
		clipsEvicted:      desc("clips_evicted_total", "Clips removed from the store, oldest first, to make room."),
		clipsPending:      desc("clips_pending", "Clips on disk waiting to be stored."),
		clipsPendingBytes: desc("clips_pending_bytes", "Bytes of the clips waiting to be stored."),

		wJobs:     desc("worker_jobs_total", "Jobs the worker answered (successfully or rejected).", wrk...),
		wLost:     desc("worker_jobs_lost_total", "Jobs lost to a worker crash, protocol break or timeout.", wrk...),
		wRestarts: desc("worker_restarts_total", "Worker processes started after the first.", wrk...),
		wRecycles: desc("worker_recycles_total", "Worker processes stopped between jobs for being over a memory limit.", wrk...),
		wInFlight: desc("worker_jobs_in_flight", "Jobs sent to the worker process and not answered yet.", wrk...),
		wRSS:      desc("worker_resident_memory_bytes", "Resident memory of the worker process at its last sample.", wrk...),
		wGPU:      desc("worker_gpu_memory_bytes", "GPU memory of the worker process at its last sample (0 without a GPU memory command).", wrk...),
		memory: desc("memory_bytes", "The daemon's resident memory by owner: go (the Go runtime: the daemon, the embedded NATS server, RTSP sessions), "+
			"nats_store_caches (the embedded NATS server's file-store block buffers, in the Go heap), frame_buffers, snapshot_buffers, clip_rings, c_heap (the C libraries: decoders above all), gpu_driver, code (executable and libraries), shared (the workers' frame slots).", "owner"),
		memBudget:  desc("memory_budget_bytes", "The memory budget of the daemon and its workers together (memory_limit_mib, else the cgroup's limit); 0: none."),
		memGoLimit: desc("memory_go_limit_bytes", "The Go memory limit the budget last set for the daemon: what the budget leaves the Go runtime; 0: none set."),
		memOver:    desc("memory_over_budget_samples_total", "Samples (one every 10 s) that found the daemon and its workers holding more than the memory budget."),

		published: desc("events_published_total",
			"Events (detections, status, health, gaps, config) published: acknowledged by JetStream, or sent with core NATS."),
		publishFailed:  desc("events_publish_failed_total", "Events that could not be encoded, or came after shutdown began."),
		publishRetried: desc("events_publish_retried_total", "Events sent again after an error or a missing acknowledgement."),
		publishDropped: desc("events_publish_dropped_total", "Events dropped from the full outbox while NATS was unreachable (each reported by a gap event)."),
		publishPending: desc("events_publish_pending", "Events in the outbox or awaiting acknowledgement."),
		reloadFailures: desc("config_reload_failures_total", "Config reloads rejected; the running config stayed in force."),

		buildInfo: desc("build_info", "Always 1: the build's module version, VCS revision and Go version (visiond version).",
			"version", "revision", "go"),
		lastReload: desc("config_last_reload_success_timestamp_seconds",
			"When the config in force was applied: the start, or the last reload applied (unix seconds)."),
		lastReloadOK: desc("config_last_reload_successful", "1 when the last reload was applied (or none was tried since the start), 0 when it was rejected."),
		leafUp: desc("leaf_link_up", "1 while the embedded NATS server's link to the hub (nats.leaf) is up, 0 while it is down. "+
			"Only with nats.leaf; checked every second."),
		haDropped: desc("homeassistant_events_dropped_total", "Home Assistant discovery (nats.mqtt.discovery): the daemon's events it dropped, "+
			"its queue full; the state they carried is corrected by the next event of their kind (health every 10 s). Only with discovery."),
		leafChanged: desc("leaf_link_last_change_timestamp_seconds",
			"When the link to the hub last went up or down (unix seconds): since when visiond_leaf_link_up has held; the start before any change."),
		streamMsgs:     desc("stream_messages", "Events in the site's JetStream stream, as last read (at start, then every 10 s).", "stream"),
		streamBytes:    desc("stream_bytes", "Bytes in the site's JetStream stream, as last read.", "stream"),
		streamMaxBytes: desc("stream_max_bytes", "The stream's size limit (nats.stream.max_bytes_mib); past it the oldest events go.", "stream"),
		streamFull: desc("stream_fullness_ratio",
			"stream_bytes / stream_max_bytes, 0 to 1: at 1 the oldest events are removed before their age limit (a gap event says how many).", "stream"),
	}
}

// Describe implements prometheus.Collector.
func (m *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		m.camDecoded, m.camNotDecoded, m.camDecodeCalls, m.camDecodeSeconds, m.camAnalysed, m.camDropped, m.camDetections, m.camReconnects, m.camResyncs, m.camStuck, m.camFallbacks, m.camOnCPU, m.camLiveViewers, m.camLiveBytes, m.camKeyframeInterval,
		m.camState, m.camFPS, m.camFPSTarget, m.camAgeMean, m.camAgeMax, m.camInferMean, m.camLatencyMean,
		m.stageLatency, m.camTracked, m.zoneObjects, m.zoneClassObjects, m.lineCrossings, m.camFiltered,
		m.camClips, m.camClipsFailed, m.camClipBytes, m.camRingBytes,
		m.clipsStored, m.clipsLost, m.clipsEvicted, m.clipsPending, m.clipsPendingBytes,
		m.wJobs, m.wLost, m.wRestarts, m.wRecycles, m.wInFlight, m.wRSS, m.wGPU, m.memory, m.memBudget, m.memGoLimit, m.memOver,
		m.published, m.publishFailed, m.reloadFailures, m.publishRetried, m.publishDropped, m.publishPending,
		m.buildInfo, m.lastReload, m.lastReloadOK, m.leafUp, m.leafChanged, m.haDropped,
		m.streamMsgs, m.streamBytes, m.streamMaxBytes, m.streamFull,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; it runs on each scrape.
func (m *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	e := emitter{ch}
	for _, cm := range m.d.cameraMetrics() {
		m.collectCamera(e, cm)
	}
	m.collectDaemon(e)
}

// emitter sends constant metrics to a collector's channel.
type emitter struct{ ch chan<- prometheus.Metric }

func (e emitter) counter(d *prometheus.Desc, v uint64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func (e emitter) gauge(d *prometheus.Desc, v float64, labels ...string) {
	e.ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// collectCamera sends one camera's series: its frames, drops, decode, state, rates,
// latencies, filtered detections, clips, and its scene's tracks, zones and lines.
func (m *metricsCollector) collectCamera(e emitter, cm cameraMetrics) {
	ch, counter, gauge := e.ch, e.counter, e.gauge
	c, id := cm.status, cm.status.ID
	counter(m.camDecoded, c.Decoded, id)
	counter(m.camNotDecoded, c.NotDecoded, id)
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
	counter(m.camDecodeCalls, c.Decode.Calls, id)
	for _, st := range []struct {
		step string
		s    float64
	}{{"wait", c.Decode.WaitSec}, {"busy", c.Decode.BusySec}, {"copy", c.Decode.CopySec}, {"scale", c.Decode.ScaleSec}} {
		ch <- prometheus.MustNewConstMetric(m.camDecodeSeconds, prometheus.CounterValue, st.s, id, st.step)
	}
	counter(m.camStuck, c.Stuck, id)
	counter(m.camFallbacks, c.DecoderFallbacks, id)
	gauge(m.camLiveViewers, float64(c.LiveViewers), id)
	if c.KeyframeIntervalS > 0 {
		gauge(m.camKeyframeInterval, c.KeyframeIntervalS, id)
	}
	counter(m.camLiveBytes, c.LiveBytes, id)
	gauge(m.camOnCPU, b2f(c.DecoderFallback != ""), id)
	// A series for every state, so that a state that is not current reads 0 rather
	// than missing.
	for _, s := range sources.States() {
		gauge(m.camState, b2f(c.State == s), id, string(s))
	}
	gauge(m.camFPS, c.FPSAchieved, id)
	gauge(m.camFPSTarget, c.FPS, id)
	gauge(m.camAgeMean, c.FrameAgeMS/1000, id)
	gauge(m.camAgeMax, c.FrameAgeMax/1000, id)
	gauge(m.camInferMean, c.InferMS/1000, id)
	gauge(m.camLatencyMean, c.LatencyMS/1000, id)
	for stage := range nStages {
		count, sum, buckets := cm.latency.get(stage)
		ch <- prometheus.MustNewConstHistogram(m.stageLatency, count, sum, buckets, id, stageName(stage))
	}
	for reason, n := range cm.filtered {
		if d := analytics.Drop(reason); d != analytics.Keep {
			counter(m.camFiltered, n, id, d.String())
		}
	}
	if cl := c.Clips; cl != nil {
		counter(m.camClips, cl.Written, id)
		counter(m.camClipsFailed, cl.Failed, id)
		counter(m.camClipBytes, cl.Bytes, id)
		gauge(m.camRingBytes, float64(cl.RingBytes), id)
	}
	if sc := cm.scene; sc != nil {
		gauge(m.camTracked, float64(sc.tracked), id)
		for _, z := range sc.occupancy {
			gauge(m.zoneObjects, float64(z.Total), id, z.Zone)
			for class, n := range z.ByClass {
				gauge(m.zoneClassObjects, float64(n), id, z.Zone, class)
			}
		}
		for _, n := range sc.counts {
			counter(m.lineCrossings, n.N, id, n.Line, string(n.Direction), n.Class)
		}
	}
}

// collectDaemon sends the daemon's series: workers, publisher and stream, clip store,
// reloads, leaf node and build.
func (m *metricsCollector) collectDaemon(e emitter) {
	counter, gauge := e.counter, e.gauge
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
		ps := m.d.pub.Stats()
		counter(m.published, ps.Published)
		counter(m.publishFailed, ps.Failed)
		counter(m.publishRetried, ps.Retried)
		counter(m.publishDropped, ps.Dropped)
		gauge(m.publishPending, float64(ps.Pending))
		if st, ok := m.d.pub.StreamStats(); ok {
			gauge(m.streamMsgs, float64(st.Messages), st.Name)
			gauge(m.streamBytes, float64(st.Bytes), st.Name)
			if st.MaxBytes > 0 {
				gauge(m.streamMaxBytes, float64(st.MaxBytes), st.Name)
				gauge(m.streamFull, float64(st.Bytes)/float64(st.MaxBytes), st.Name)
			}
		}
	}
	if m.d.clips != nil {
		cs := m.d.clips.Stats()
		counter(m.clipsStored, cs.Stored)
		counter(m.clipsLost, cs.Dropped, "queue_full")
		counter(m.clipsLost, cs.Refused, "refused")
		counter(m.clipsLost, cs.Invalid, "invalid")
		counter(m.clipsEvicted, cs.Evicted)
		gauge(m.clipsPending, float64(cs.Pending))
		gauge(m.clipsPendingBytes, float64(cs.PendingBytes))
	}
	mem := m.d.Memory()
	for _, o := range []struct {
		owner string
		bytes int64
	}{{"go", mem.GoBytes}, {"nats_store_caches", mem.NATSStoreCaches}, {"frame_buffers", mem.FrameBuffers}, {"snapshot_buffers", mem.SnapshotBuffers},
		{"clip_rings", mem.ClipRings}, {"c_heap", mem.CHeapBytes}, {"gpu_driver", mem.GPUDriverBytes}, {"code", mem.CodeBytes}, {"shared", mem.SharedBytes}} {
		gauge(m.memory, float64(o.bytes), o.owner)
	}
	gauge(m.memBudget, float64(mem.BudgetBytes))
	gauge(m.memGoLimit, float64(mem.GoLimitBytes))
	counter(m.memOver, mem.OverBudgetSamples)
	counter(m.reloadFailures, m.d.ReloadFailures())
	gauge(m.lastReload, unixSeconds(time.Unix(0, m.d.lastReload.Load())))
	gauge(m.lastReloadOK, b2f(m.d.lastReloadOK.Load()))
	if m.d.hasLeaf() {
		up, since := m.d.leaf.state()
		gauge(m.leafUp, b2f(up))
		gauge(m.leafChanged, unixSeconds(since))
	}
	if m.d.ha != nil {
		counter(m.haDropped, m.d.ha.Dropped())
	}
	v := version.Get()
	gauge(m.buildInfo, 1, v.Version, v.Revision, v.Go)
}

// unixSeconds is t as Prometheus timestamps are: seconds since the epoch, with a fraction.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// cameraMetrics is a camera's status with its latency histograms, read together.
type cameraMetrics struct {
	status   CameraStatus
	latency  stageLatency
	scene    *sceneState // nil before its first analysed frame
	filtered [len(filterCounts{})]uint64
}

// cameraMetrics reports every enabled camera for a scrape. A removed camera's series go with
// it; a restarted one starts from zero, like its counters.
func (d *Daemon) cameraMetrics() []cameraMetrics {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]cameraMetrics, len(d.cams))
	for i, c := range d.cams {
		out[i].status, out[i].latency = c.statusLatency()
		out[i].scene = c.sceneState.Load()
		for reason := range c.filtered {
			out[i].filtered[reason] = c.filtered[reason].Load()
		}
	}
	return out
}

// The stages of visiond_stage_latency_seconds: the fields of sinks.Latency.
const (
	stageQueue = iota
	stagePre
	stageInfer
	stagePost
	stageTotal
	nStages
)

func stageName(stage int) string {
	return [nStages]string{"queue", "pre", "infer", "post", "total"}[stage]
}

// nLatencyBuckets is the number of finite buckets of visiond_stage_latency_seconds.
const nLatencyBuckets = 15

// latencyBounds returns the buckets' upper bounds in seconds: 0.5 ms (a preprocessing or
// postprocessing step) to 5 s (an overloaded box's queue, past any sensible max_frame_age),
// finest around the 5-150 ms that a model run and a whole frame take on edge hardware.
func latencyBounds() [nLatencyBuckets]float64 {
	return [nLatencyBuckets]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5}
}

// stageLatency holds a camera's latency histograms, one per stage. A plain value guarded by
// the camera's mutex: observed once per analysed frame, copied on each scrape.
type stageLatency struct {
	n       uint64                               // observations, the same in every stage
	buckets [nStages][nLatencyBuckets + 1]uint64 // per bucket, not cumulative; the last is above 5 s
	sum     [nStages]float64                     // seconds
}

func (s *stageLatency) observe(l sinks.Latency) {
	bounds := latencyBounds()
	s.n++
	for stage, ms := range [nStages]float64{stageQueue: l.Queue, stagePre: l.Pre, stageInfer: l.Infer, stagePost: l.Post, stageTotal: l.Total} {
		v := ms / 1000
		i := 0
		for i < len(bounds) && v > bounds[i] {
			i++
		}
		s.buckets[stage][i]++
		s.sum[stage] += v
	}
}

// get returns a stage's histogram as Prometheus has it: count, sum and cumulative counts by
// upper bound.
func (s *stageLatency) get(stage int) (count uint64, sum float64, cumulative map[float64]uint64) {
	bounds := latencyBounds()
	cumulative = make(map[float64]uint64, len(bounds))
	var acc uint64
	for i, b := range bounds {
		acc += s.buckets[stage][i]
		cumulative[b] = acc
	}
	return s.n, s.sum[stage], cumulative
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
