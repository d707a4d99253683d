package pipeline

import (
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/analytics/track"
	"github.com/visiond/visiond/clips"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/redact"
	"github.com/visiond/visiond/live"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// camera is one enabled camera as the pipeline sees it: its source, its mailbox, its place
// in the schedule, its analysis and its counters. Its state is split by the goroutine that
// owns it:
//   - sched, its schedule: the daemon's run goroutine's (the slicer's rounds, reloads);
//   - stage, its analysis (scene, track ids, evidence, recorder): the result stage's, under
//     sceneMu, which the stage holds for a result and the run goroutine for the camera's life
//     events (its objects' end: results.sweep, retire). What the stage needs of the schedule
//     comes with each job (jobRun), as a copy;
//   - counters, latency summaries and what the stage publishes for readers (settings,
//     objects, scene state, ring, recorder): atomics, or locks of their own;
//   - the per-label counts, the last error and the latency histograms: under mu.
//
// cfg never changes but for FPS and Weight, which a reload changes on the run goroutine
// with the daemon's mu held (reschedule), as it does sched.interval and sched.slack: readers
// outside the run goroutine (status) hold it too.
type camera struct {
	cfg      config.Camera // without its analytics settings, which are in settings
	settings atomic.Pointer[analyticsSettings]
	src      *sources.Camera
	box      Mailbox
	wake     func()       // asks the run goroutine for a slicer round
	sched    schedule     // the run goroutine's
	dueAt    atomic.Int64 // sched.nextDue-slack in unix ns, for onFrame
	busy     atomic.Bool  // a job of this camera is in flight, its end not run: batch=1, one at a time

	analysed   atomic.Uint64 // frames analysed and published; added to under mu, with latency
	stale      atomic.Uint64 // frames older than max_frame_age when their turn came
	lost       atomic.Uint64 // jobs whose worker died or broke the protocol
	timeouts   atomic.Uint64 // jobs whose worker passed job_timeout (and was replaced)
	rejected   atomic.Uint64 // jobs a worker refused (bad frame or geometry)
	shutdown   atomic.Uint64 // jobs cut off by shutdown (or a pool replaced by a reload)
	detections atomic.Uint64 // objects detected

	frameAge durStat // decoded to dispatched
	inferAge durStat // the worker's session run
	total    durStat // decoded to published
	fps      rate    // analysed frames per second
	snap     snapshot
	// wantsEvidence: the objects of the camera's latest analysed frame wanted evidence, so
	// the next frames are kept (snapshot.offer). Written by the stage, read by the slicer.
	wantsEvidence atomic.Bool

	sceneMu sync.Mutex
	stage   stageState // the result stage's, under sceneMu
	// What the stage publishes for readers.
	objects    atomic.Pointer[[]liveObject]   // the followed objects after the latest frame, for the API
	sceneState atomic.Pointer[sceneState]     // occupancy, line counts and tracks after the latest frame, for /metrics
	filtered   filterCounts                   // detections the camera's filter dropped, by reason
	ring       atomic.Pointer[clips.Ring]     // the recorder's ring, for the session's callbacks (onPacket)
	recorder   atomic.Pointer[clips.Recorder] // the recorder, for the source's callbacks and status
	// The live view (live.go): the muxer while the camera has viewers, for onPacket.
	live           atomic.Pointer[live.Muxer]
	feed           feed       // subscribers to its results (feed.go)
	liveMu         sync.Mutex // guards liveViewers and the muxer's making and dropping
	liveViewers    int
	liveSent       atomic.Uint64 // bytes sent by the muxers dropped
	keyframes      keyframeClock // its stream's keyframe interval (onPacket)
	keyframeWarned atomic.Bool   // its keyframe warning was logged
	log            *slog.Logger  // the daemon's; nil in tests that make cameras alone

	mu       sync.Mutex   // guards the fields below
	latency  stageLatency // per-stage latency histograms of the analysed frames
	labels   map[string]int
	lastErr  string
	lastSeen time.Time // capture time of the last analysed frame
	prev     counts    // totals at the last summary
}

// schedule is a camera's place in the slicer's schedule: the run goroutine's.
type schedule struct {
	interval time.Duration // 1/fps
	slack    time.Duration // how early a camera may go: absorbs ticker jitter, well under interval
	nextDue  time.Time
	pass     float64 // fair-queue virtual finish time of its last job
	geometry [2]int  // source size of its last job
}

// stageState is a camera's analysis, the result stage's (one job of a camera at a time, and
// the ends of its objects from the run goroutine), under the camera's sceneMu: its scene, the
// settings the scene has applied, its track ids, a buffer for its evidence, when and at what
// size a frame was last analysed, whether its life has ended (retired: no more analysis), and
// its clips' recorder (clips.go).
type stageState struct {
	// interval is the camera's 1/fps as of the latest job's dispatch (jobRun.interval): the
	// stage's copy of the schedule, which sizes the recorder's ring and hold.
	interval  time.Duration
	scene     *analytics.Scene
	sceneFor  *analyticsSettings
	ids       *trackIDs
	evidence  []track.Track
	stepped   time.Time // host clock
	frameW    int
	frameH    int
	retired   bool
	rec       *clips.Recorder
	recFor    config.Clips         // the settings rec has
	recWait   time.Duration        // the longest an object's first event came after its first sighting, when past confirmWait
	recPeak   time.Duration        // the longest an object's first event came after its first sighting since recSince
	recSince  time.Time            // host clock: the start of the window of recPeak
	recShare  int                  // the most the ring may hold: the camera's share of the budget (budget.ringShare)
	objEvents []*sinks.ObjectEvent // a frame's object events, for the recorder (reused)
}

func newCamera(cfg config.Camera, slice time.Duration, wake func()) *camera {
	if !(cfg.Weight > 0) { // a Config built in Go without one
		cfg.Weight = 1
	}
	c := &camera{cfg: withoutAnalytics(cfg), sched: newSchedule(cfg.FPS, slice), wake: wake}
	c.stage.interval = c.sched.interval
	c.setAnalytics(cfg)
	return c
}

// newSchedule is the schedule of a camera analysed at fps, by a slicer of that slice.
func newSchedule(fps float64, slice time.Duration) schedule {
	interval := time.Duration(float64(time.Second) / fps)
	return schedule{interval: interval, slack: min(slice/2, interval/4)}
}

// analyticsSettings are a camera's analytics settings in force: its objects, masks, zones
// and lines (Analytics) and which events it publishes (Events). They never change: a
// reload that changes a camera's settings stores new ones (setAnalytics), so a reader that
// keeps the pointer it last used knows, by comparing it with the camera's, that they
// changed (and then applies them: analytics.ZoneSet.Apply, LineSet.Apply, a new Filter).
type analyticsSettings struct {
	Analytics analytics.Config
	Events    config.Events
	Clips     config.Clips // which objects make clips, and how long (issue 23)
}

// setAnalytics puts cc's analytics settings in force, and reports whether they differ from
// those in force before. It is safe to call while the result stage reads them (analytics).
func (c *camera) setAnalytics(cc config.Camera) bool {
	n := &analyticsSettings{Analytics: cc.Analytics(), Events: cc.Events, Clips: cc.Clips}
	if old := c.settings.Load(); old != nil && reflect.DeepEqual(old, n) {
		return false
	}
	c.settings.Store(n)
	return true
}

// analytics returns the camera's analytics settings in force, never nil.
func (c *camera) analytics() *analyticsSettings { return c.settings.Load() }

// withoutAnalytics returns cc without its analytics settings (the fields of config.Camera
// that a reload applies live with setAnalytics).
func withoutAnalytics(cc config.Camera) config.Camera {
	cc.Objects, cc.Masks, cc.Zones, cc.Lines, cc.Events, cc.Clips = analytics.Objects{}, nil, nil, nil, config.Events{}, config.Clips{}
	return cc
}

// onFrame receives the source's frames. A frame for a camera that is due and idle wakes the
// slicer at once, so a camera analysed faster than the slice rate gets its fps and each
// frame waits for no tick; other frames wait in the mailbox for their turn.
func (c *camera) onFrame(f *sources.Frame) {
	c.box.Put(f)
	if !c.busy.Load() && time.Now().UnixNano() >= c.dueAt.Load() {
		c.wake()
	}
}

// schedule sets the earliest time of the camera's next job, and tells the source that no
// frame is taken before it (frames that a newer one will replace by then are not scaled) and
// how often it takes one (a camera analysed at most half as often as its stream sends frames
// leaves non-reference frames before that time undecoded).
func (c *camera) schedule(next time.Time) {
	c.sched.nextDue = next
	due := next.Add(-c.sched.slack)
	c.dueAt.Store(due.UnixNano())
	if c.src != nil {
		c.src.AnalysedEvery(c.sched.interval)
		c.src.NeedFrom(due)
	}
}

// superseded counts the frames replaced by a newer one before their turn: in the mailbox,
// or at the source before they were scaled (sources.Camera.NeedFrom); st is the source's
// status.
func (c *camera) superseded(st sources.Status) uint64 {
	return c.box.Dropped() + st.Unneeded
}

// durStat summarizes a duration: an exponentially weighted mean and the maximum since the
// last summary line.
type durStat struct {
	mu   sync.Mutex
	mean time.Duration
	max  time.Duration
	n    uint64
}

func (s *durStat) observe(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		s.mean = d
	} else {
		s.mean += (d - s.mean) / 16
	}
	s.n++
	s.max = max(s.max, d)
}

// get returns the mean and the maximum; reset starts a new maximum.
func (s *durStat) get(reset bool) (mean, maxd time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mean, maxd = s.mean, s.max
	if reset {
		s.max = 0
	}
	return mean, maxd
}

// rate measures events per second over the last events (up to 32).
type rate struct {
	mu    sync.Mutex
	times [32]time.Time
	n     int
}

func (r *rate) tick(t time.Time) {
	r.mu.Lock()
	r.times[r.n%len(r.times)] = t
	r.n++
	r.mu.Unlock()
}

// perSecond is the rate over the recorded events, 0 when the last is older than stale.
func (r *rate) perSecond(now time.Time, stale time.Duration) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := min(r.n, len(r.times))
	if k < 2 {
		return 0
	}
	last, first := r.times[(r.n-1)%len(r.times)], r.times[(r.n-k)%len(r.times)]
	if now.Sub(last) > stale || !last.After(first) {
		return 0
	}
	return float64(k-1) / last.Sub(first).Seconds()
}

type counts struct{ analysed, stale, lost, superseded uint64 }

// summary is what changed since the previous summary.
type summary struct {
	analysed, stale, lost, superseded uint64
	objects                           string
	lastErr                           string
}

// countResult counts an analysed frame: its detections and its latency per stage. The
// frame counter and the histograms change together under mu, so a scrape sees as many
// observations in each histogram as frames analysed.
func (c *camera) countResult(ev *sinks.DetectionEvent) {
	c.mu.Lock()
	c.analysed.Add(1)
	c.detections.Add(uint64(len(ev.Detections)))
	c.latency.observe(ev.LatencyMS)
	if c.labels == nil {
		c.labels = make(map[string]int)
	}
	for _, det := range ev.Detections {
		c.labels[det.Label]++
	}
	c.lastSeen = ev.CapturedAt
	c.mu.Unlock()
}

// filterCounts count the detections a camera's filter dropped, indexed by analytics.Drop.
type filterCounts [len(analytics.Dropped{})]atomic.Uint64

// countFiltered adds a frame's drops.
func (c *camera) countFiltered(d analytics.Dropped) {
	for reason, n := range d {
		if analytics.Drop(reason) != analytics.Keep && n > 0 {
			c.filtered[reason].Add(uint64(n))
		}
	}
}

func (c *camera) noteError(err error) {
	c.mu.Lock()
	c.lastErr = err.Error()
	c.mu.Unlock()
}

// summarize returns the counts since the last call and starts a new window; st is the
// source's status.
func (c *camera) summarize(st sources.Status) summary {
	now := counts{c.analysed.Load(), c.stale.Load(), c.lost.Load() + c.timeouts.Load() + c.rejected.Load(), c.superseded(st)}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := summary{
		analysed:   now.analysed - c.prev.analysed,
		stale:      now.stale - c.prev.stale,
		lost:       now.lost - c.prev.lost,
		superseded: now.superseded - c.prev.superseded,
		objects:    formatLabels(c.labels),
		lastErr:    c.lastErr,
	}
	c.prev = now
	c.labels = nil
	c.lastErr = ""
	return s
}

// formatLabels renders label counts as "person:12 car:3", most frequent first.
func formatLabels(m map[string]int) string {
	labels := make([]string, 0, len(m))
	for l := range m {
		labels = append(labels, l)
	}
	sort.Slice(labels, func(i, j int) bool {
		if m[labels[i]] != m[labels[j]] {
			return m[labels[i]] > m[labels[j]]
		}
		return labels[i] < labels[j]
	})
	parts := make([]string, len(labels))
	for i, l := range labels {
		parts[i] = fmt.Sprintf("%s:%d", l, m[l])
	}
	return strings.Join(parts, " ")
}

// Drops counts a camera's frames that were not analysed, by reason.
type Drops struct {
	Superseded uint64 `json:"superseded"`  // a newer frame replaced it in the mailbox before its turn
	Stale      uint64 `json:"stale"`       // older than max_frame_age when its turn came
	Source     uint64 `json:"source"`      // dropped by the source: decode queue full or no free buffer
	WorkerLost uint64 `json:"worker_lost"` // its worker died or broke the protocol
	Timeout    uint64 `json:"timeout"`     // its worker passed job_timeout
	Rejected   uint64 `json:"rejected"`    // the worker refused the job
	Shutdown   uint64 `json:"shutdown"`    // cut off by shutdown (or by a reload's pool swap)
}

// CameraStatus is a camera's state and counters, as served on /api/cameras.
type CameraStatus struct {
	ID           string        `json:"id"`
	URL          string        `json:"url"` // password redacted
	State        sources.State `json:"state"`
	LastError    string        `json:"last_error,omitempty"`
	FPS          float64       `json:"fps"`
	Decoded      uint64        `json:"frames_decoded"`
	NotDecoded   uint64        `json:"frames_not_decoded"` // left undecoded, not dropped: decode keyframes, or non-reference frames before the camera's turn
	Analysed     uint64        `json:"frames_analysed"`
	Drops        Drops         `json:"frames_dropped"`
	Resyncs      uint64        `json:"resyncs"` // skips to the next keyframe after loss or damage
	Reconnects   uint64        `json:"reconnects"`
	Stuck        uint64        `json:"stuck,omitempty"` // kind gstreamer: capture processes killed, their open or read blocked past stall_timeout
	Detections   uint64        `json:"detections"`
	FPSAchieved  float64       `json:"fps_achieved"`     // analysed frames per second, recently
	FrameAgeMS   float64       `json:"frame_age_ms"`     // decoded to dispatched, mean
	FrameAgeMax  float64       `json:"frame_age_max_ms"` // decoded to dispatched, maximum since the last summary
	InferMS      float64       `json:"inference_ms"`     // the worker's session run, mean
	LatencyMS    float64       `json:"latency_ms"`       // decoded to published, mean
	LastAnalysed time.Time     `json:"last_analysed,omitempty"`
	// Clips, while the camera makes clips: its recorder's counts and its ring of video.
	Clips *ClipStatus `json:"clips,omitempty"`
	// Decode is where the camera's decoding went since it started (kind rtsp).
	Decode DecodeStatus `json:"decode"`
	// Decoder is the decoder of the camera's session (kind rtsp): its decoder, or cpu in the
	// place of a GPU decoder that did not open, DecoderFallback saying why; DecoderFallbacks
	// counts the sessions moved to the CPU (sources.Status).
	Decoder          sources.Decoder `json:"decoder,omitempty"`
	DecoderFallback  string          `json:"decoder_fallback,omitempty"`
	DecoderFallbacks uint64          `json:"decoder_fallbacks,omitempty"`
	// LiveViewers watch the camera's live video now; LiveBytes have been queued to viewers
	// since the camera started (live.go).
	// KeyframeIntervalS is the stream's latest keyframe interval, measured from its packets
	// (kinds rtsp and file); absent until two keyframes came.
	KeyframeIntervalS float64 `json:"keyframe_interval_s,omitempty"`
	// Warnings are what the camera's settings and stream do not go well together in: a
	// keyframe interval longer than its clips' pre_capture.
	Warnings    []string `json:"warnings,omitempty"`
	LiveViewers int      `json:"live_viewers"`
	LiveBytes   uint64   `json:"live_bytes"`
}

// DecodeStatus sums a camera's decoding by step (CameraStatus.Decode; sources.DecodeTimes):
// divide a difference of two readings of a sum by that of its count for the mean of a call
// or a frame.
type DecodeStatus struct {
	Calls    uint64  `json:"calls"`   // access units sent to the decoder
	WaitSec  float64 `json:"wait_s"`  // waiting for a call slot of the GPU decoder (decoder cuda)
	BusySec  float64 `json:"busy_s"`  // in the decoder's calls, the frames' copies and scaling included
	Scaled   uint64  `json:"scaled"`  // frames copied out and scaled into a buffer
	CopySec  float64 `json:"copy_s"`  // of busy_s: copying frames from GPU memory to the host (decoder cuda)
	ScaleSec float64 `json:"scale_s"` // of busy_s: letterboxing frames (into the YUV they are held in, or RGB24)
}

func (c *camera) status() CameraStatus {
	s, _ := c.statusLatency()
	return s
}

// statusLatency returns the camera's status and its latency histograms, read together: the
// histograms hold exactly the status's Analysed observations.
func (c *camera) statusLatency() (CameraStatus, stageLatency) {
	st := c.src.Status()
	age, ageMax := c.frameAge.get(false)
	inf, _ := c.inferAge.get(false)
	tot, _ := c.total.get(false)
	viewers, liveBytes := c.liveStats()
	c.mu.Lock()
	last := c.lastSeen
	analysed := c.analysed.Load()
	latency := c.latency
	c.mu.Unlock()
	return CameraStatus{
		ID:         c.cfg.ID,
		URL:        redact.URL(c.cfg.URL),
		State:      st.State,
		LastError:  st.LastError,
		FPS:        c.cfg.FPS,
		Decoded:    st.Frames,
		NotDecoded: st.Skipped + st.SkippedNonRef,
		Analysed:   analysed,
		Drops: Drops{
			Superseded: c.superseded(st),
			Stale:      c.stale.Load(),
			Source:     st.Dropped,
			WorkerLost: c.lost.Load(),
			Timeout:    c.timeouts.Load(),
			Rejected:   c.rejected.Load(),
			Shutdown:   c.shutdown.Load(),
		},
		Resyncs:           st.Resyncs,
		Reconnects:        st.Reconnects,
		Stuck:             st.Stuck,
		Detections:        c.detections.Load(),
		FPSAchieved:       c.fps.perSecond(time.Now(), 3*time.Second+2*c.sched.interval),
		FrameAgeMS:        ms(age),
		FrameAgeMax:       ms(ageMax),
		InferMS:           ms(inf),
		LatencyMS:         ms(tot),
		LastAnalysed:      last,
		Clips:             c.clipStatus(),
		KeyframeIntervalS: c.keyframes.interval().Seconds(),
		Warnings:          c.warnings(),
		Decode: DecodeStatus{
			Calls: st.Decode.Calls, WaitSec: st.Decode.Wait.Seconds(), BusySec: st.Decode.Busy.Seconds(),
			Scaled: st.Decode.Scaled, CopySec: st.Decode.Copy.Seconds(), ScaleSec: st.Decode.Scale.Seconds(),
		},
		Decoder:          st.Decoder,
		DecoderFallback:  st.DecoderFallback,
		DecoderFallbacks: st.DecoderFallbacks,
		LiveViewers:      viewers,
		LiveBytes:        liveBytes,
	}, latency
}

// ClipStatus is a camera's clip recording (CameraStatus.Clips).
type ClipStatus struct {
	Written     uint64  `json:"written"`      // clips finished and handed to the store
	Failed      uint64  `json:"failed"`       // clips not started or not written (the spool or the MP4 could not be written)
	Bytes       uint64  `json:"bytes"`        // of the clips written
	RingBytes   int     `json:"ring_bytes"`   // memory its ring of encoded video holds (buffers, spares included) and its recorder's read buffer
	RingSeconds float64 `json:"ring_seconds"` // the video the ring spans
}

// clipStatus is the camera's clip recording; nil when it makes none.
func (c *camera) clipStatus() *ClipStatus {
	r := c.recorder.Load()
	if r == nil {
		return nil
	}
	st := r.Stats()
	return &ClipStatus{Written: st.Written, Failed: st.Failed, Bytes: st.Bytes, RingBytes: st.Ring.Held + st.ReadBuf,
		RingSeconds: st.Ring.Span.Seconds()}
}

// Cameras reports every enabled camera.
func (d *Daemon) Cameras() []CameraStatus {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]CameraStatus, len(d.cams))
	for i, c := range d.cams {
		out[i] = c.status()
	}
	return out
}

// camera returns the enabled camera with that id, or nil.
func (d *Daemon) camera(id string) *camera {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, c := range d.cams {
		if c.cfg.ID == id {
			return c
		}
	}
	return nil
}
