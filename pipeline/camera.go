package pipeline

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// camera is one enabled camera as the pipeline sees it: its source, its mailbox, its place
// in the schedule and its counters.
type camera struct {
	cfg      config.Camera
	src      *sources.Camera
	box      Mailbox
	interval time.Duration // 1/fps
	slack    time.Duration // how early a camera may go: absorbs ticker jitter, well under interval
	nextDue  time.Time     // owned by the slicer goroutine
	dueAt    atomic.Int64  // nextDue-slack in unix ns, for onFrame
	busy     atomic.Bool   // a job of this camera is in flight: batch=1, one at a time
	wake     func()        // wakes the slicer

	analysed   atomic.Uint64 // frames analysed and published
	stale      atomic.Uint64 // frames older than max_frame_age when their turn came
	lost       atomic.Uint64 // jobs that ended in an error (worker crash, timeout)
	detections atomic.Uint64 // objects detected

	mu       sync.Mutex // guards the fields below
	labels   map[string]int
	lastErr  string
	lastSeen time.Time // capture time of the last analysed frame
	prev     counts    // totals at the last summary
}

func newCamera(cfg config.Camera, slice time.Duration, wake func()) *camera {
	interval := time.Duration(float64(time.Second) / cfg.FPS)
	return &camera{cfg: cfg, interval: interval, slack: min(slice/2, interval/4), wake: wake}
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

// schedule sets the earliest time of the camera's next job.
func (c *camera) schedule(next time.Time) {
	c.nextDue = next
	c.dueAt.Store(next.Add(-c.slack).UnixNano())
}

type counts struct{ analysed, stale, lost, dropped uint64 }

// summary is what changed since the previous summary.
type summary struct {
	analysed, stale, lost uint64
	prevDropped           uint64
	objects               string
	lastErr               string
}

func (c *camera) countResult(ev *sinks.DetectionEvent) {
	c.analysed.Add(1)
	c.detections.Add(uint64(len(ev.Detections)))
	c.mu.Lock()
	if c.labels == nil {
		c.labels = make(map[string]int)
	}
	for _, det := range ev.Detections {
		c.labels[det.Label]++
	}
	c.lastSeen = ev.CapturedAt
	c.mu.Unlock()
}

func (c *camera) noteError(err error) {
	c.mu.Lock()
	c.lastErr = err.Error()
	c.mu.Unlock()
}

// summarize returns the counts since the last call and starts a new window.
func (c *camera) summarize() summary {
	now := counts{c.analysed.Load(), c.stale.Load(), c.lost.Load(), c.box.Dropped()}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := summary{
		analysed:    now.analysed - c.prev.analysed,
		stale:       now.stale - c.prev.stale,
		lost:        now.lost - c.prev.lost,
		prevDropped: c.prev.dropped,
		objects:     formatLabels(c.labels),
		lastErr:     c.lastErr,
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

// CameraStatus is a camera's state and counters, as served on /api/cameras.
type CameraStatus struct {
	ID           string    `json:"id"`
	URL          string    `json:"url"` // password redacted
	State        string    `json:"state"`
	LastError    string    `json:"last_error,omitempty"`
	FPS          float64   `json:"fps"`
	Decoded      uint64    `json:"frames_decoded"`
	Analysed     uint64    `json:"frames_analysed"`
	Dropped      uint64    `json:"frames_dropped"` // replaced in the mailbox before their turn
	SourceDrops  uint64    `json:"frames_dropped_source"`
	Resyncs      uint64    `json:"resyncs"` // skips to the next keyframe after loss or damage
	Reconnects   uint64    `json:"reconnects"`
	Stale        uint64    `json:"frames_stale"`
	Lost         uint64    `json:"jobs_lost"`
	Detections   uint64    `json:"detections"`
	LastAnalysed time.Time `json:"last_analysed,omitempty"`
}

func (c *camera) status() CameraStatus {
	st := c.src.Status()
	c.mu.Lock()
	last := c.lastSeen
	c.mu.Unlock()
	return CameraStatus{
		ID:           c.cfg.ID,
		URL:          config.Redact(c.cfg.URL),
		State:        st.State,
		LastError:    st.LastError,
		FPS:          c.cfg.FPS,
		Decoded:      st.Frames,
		Analysed:     c.analysed.Load(),
		Dropped:      c.box.Dropped(),
		SourceDrops:  st.Dropped,
		Resyncs:      st.Resyncs,
		Reconnects:   st.Reconnects,
		Stale:        c.stale.Load(),
		Lost:         c.lost.Load(),
		Detections:   c.detections.Load(),
		LastAnalysed: last,
	}
}

// Cameras reports every enabled camera.
func (d *Daemon) Cameras() []CameraStatus {
	out := make([]CameraStatus, len(d.cams))
	for i, c := range d.cams {
		out[i] = c.status()
	}
	return out
}
