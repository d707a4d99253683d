package analytics

import (
	"fmt"
	"math"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// Defaults of Motion.
const (
	// DefaultStationaryWindow is how long an anchor must stay within the radius for its
	// object to be stationary.
	DefaultStationaryWindow = 5 * time.Second
	// DefaultStationaryRadius is how far an anchor may wander and stay stationary, as a
	// fraction of the frame's diagonal: 0.02 is 19 pixels on a 768x576 frame, well above a
	// parked car's box jitter and below a walker's stride over a few seconds.
	DefaultStationaryRadius = 0.02
)

// MotionEvent is an object becoming stationary or moving again.
type MotionEvent struct {
	TrackID    uint64
	Label      string
	Stationary bool // true: it became stationary; false: it moves again
	// Time is the capture time of the frame that decided it.
	Time time.Time
	// Since is when the new state began: for stationary, the first frame of the window in
	// which it stayed put; for moving, Time.
	Since time.Time
}

// Motion says which tracks stand still: a track is stationary once its anchor has stayed
// within Radius of where it settled for Window, and moves again when seen beyond Radius
// from there. Where it settled is the mean of its anchors since it last moved (the mean of
// the last 32 once past 32), so one noisy box at the start does not decide it. Create it
// with NewMotion; not safe for concurrent use.
type Motion struct {
	window time.Duration
	radius float64 // fraction of the diagonal
	anchor Anchor
	tracks map[uint64]*mover
	events []MotionEvent
	last   time.Time // time of the last stale sweep
}

type mover struct {
	label      string
	ref        geom.Point // mean anchor since it settled, normalized (so a resolution change moves nothing)
	n          int        // anchors in the mean, at most meanLen; 0: take ref from the next sighting
	settled    time.Time  // the first frame within radius of ref
	stationary bool
	lastSeen   time.Time
}

// meanLen bounds the mean that ref keeps, so that it follows a slow drift.
const meanLen = 32

// NewMotion returns a Motion with a window (> 0; 0 is DefaultStationaryWindow), a radius
// (fraction of the frame's diagonal, 0..1; 0 is DefaultStationaryRadius) and the anchor
// tested ("" is DefaultAnchor).
func NewMotion(window time.Duration, radius float64, anchor Anchor) (*Motion, error) {
	if window == 0 {
		window = DefaultStationaryWindow
	}
	if radius == 0 {
		radius = DefaultStationaryRadius
	}
	switch {
	case window < 0:
		return nil, fmt.Errorf("analytics: stationary window %v is negative", window)
	case !(radius > 0 && radius <= 1):
		return nil, fmt.Errorf("analytics: stationary radius %g is outside 0..1 (a fraction of the frame's diagonal)", radius)
	case anchor != "" && anchor != AnchorBottomCenter && anchor != AnchorCenter:
		return nil, fmt.Errorf("analytics: unknown anchor %q (want bottom_center or center)", anchor)
	}
	return &Motion{window: window, radius: radius, anchor: anchorOr(anchor), tracks: map[uint64]*mover{}}, nil
}

// SetAnchor makes the motion test use anchor a ("" is DefaultAnchor) from the next Update (a
// hot reload): each object keeps its state, and where it settled is taken again from its next
// sighting, in the new anchor's terms, so the change itself moves nothing.
func (m *Motion) SetAnchor(a Anchor) error {
	if a != "" && a != AnchorBottomCenter && a != AnchorCenter {
		return fmt.Errorf("analytics: unknown anchor %q (want bottom_center or center)", a)
	}
	if a = anchorOr(a); a != m.anchor {
		m.anchor = a
		for _, v := range m.tracks {
			v.n = 0
		}
	}
	return nil
}

// Update takes one frame and returns the changes it decided, in the order of its objects.
// Ended tracks are forgotten. The slice is reused by the next Update. It fails only on a frame
// without a size.
func (m *Motion) Update(f Frame) ([]MotionEvent, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	m.events = m.events[:0]
	diag := f.diagonal()
	w, h := float64(f.W), float64(f.H)
	t := f.Time
	for _, o := range f.Objects {
		p := f.normalized(m.anchor, o.Box)
		v := m.tracks[o.TrackID]
		if v == nil {
			m.tracks[o.TrackID] = &mover{label: o.Label, ref: p, n: 1, settled: t, lastSeen: t}
			continue
		}
		v.lastSeen = t
		if v.n == 0 { // the anchor changed (SetAnchor): settled where it is now, in its terms
			v.ref, v.n = p, 1
			continue
		}
		if math.Hypot((p.X-v.ref.X)*w, (p.Y-v.ref.Y)*h) > m.radius*diag {
			// Moved: it settles afresh from here.
			v.ref, v.n, v.settled = p, 1, t
			if v.stationary {
				v.stationary = false
				m.events = append(m.events, MotionEvent{TrackID: o.TrackID, Label: v.label, Time: t, Since: t})
			}
			continue
		}
		v.n = min(v.n+1, meanLen)
		v.ref.X += (p.X - v.ref.X) / float64(v.n)
		v.ref.Y += (p.Y - v.ref.Y) / float64(v.n)
		if !v.stationary && since(t, v.settled) >= m.window {
			v.stationary = true
			m.events = append(m.events, MotionEvent{TrackID: o.TrackID, Label: v.label, Stationary: true, Time: t, Since: v.settled})
		}
	}
	for _, id := range f.Ended {
		delete(m.tracks, id)
	}
	if since(t, m.last) >= StaleAfter/10 || m.last.IsZero() {
		m.last = t
		for id, v := range m.tracks {
			if since(t, v.lastSeen) > StaleAfter {
				delete(m.tracks, id)
			}
		}
	}
	return m.events, nil
}

// Stationary says whether track id is stationary.
func (m *Motion) Stationary(id uint64) bool {
	v := m.tracks[id]
	return v != nil && v.stationary
}
