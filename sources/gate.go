package sources

import "time"

// The bounds of the daemon's DecoderGate, from BenchmarkNVDECOpen and BenchmarkNVDECDecode on
// an H200 (docs/gpu-memory.md, "NVDEC: surfaces sized to a camera, and opens in turn").
const (
	// DefaultDecoderOpens is how many cameras open a GPU decoder at once: the driver takes
	// the opens in turn (159 ms each alone, 745 ms on average 16 at once), so a few keep them
	// going back to back and none waits long in the driver.
	DefaultDecoderOpens = 4
	// DefaultDecoderCalls is how many decode calls (each with its frame's copy to the host)
	// are under way at once on the GPU: 250 decoders free to call at once got 2080 frames/s
	// in all, 48 at a time 6492.
	DefaultDecoderCalls = 48
)

// DecoderGate bounds what the cameras of a process do at once on the GPU's video decoder
// (decoder cuda): how many open a decoder, and how many decode calls are under way.
//
// libavcodec creates a session's NVDEC decoder when it decodes the session's first keyframe,
// and the driver takes these creations one by one: with 150 cameras starting together, the
// last ones waited past their stall timeout, were cut as stalled and opened again, adding to
// the queue. A camera given a gate waits for an open slot before that first keyframe and
// leaves it once the keyframe is decoded; the time a session's first open waits for the slot
// is not counted by its stall watchdog (which counts from the slot's being taken, so an open
// that hangs still ends as a stall). An open that fails is tried again at the next keyframe,
// through the gate, and counted: a GPU that opens no more decoders (the H200 opened 285 in one
// process) ends the session as a stall naming the decode error.
//
// Past some tens of decoders calling at once, the decoder's throughput falls, and every
// camera's frames fall behind; each decode call (and the copy of its frame to the host)
// takes a call slot first.
//
// One gate serves every camera of a process; the zero of Camera.DecoderGate, nil, leaves
// both unbounded. Safe for concurrent use.
type DecoderGate struct {
	opens chan struct{}
	calls chan struct{}
}

// NewDecoderGate returns a gate of the given open and call slots (each at least 1).
func NewDecoderGate(opens, calls int) *DecoderGate {
	return &DecoderGate{opens: make(chan struct{}, max(opens, 1)), calls: make(chan struct{}, max(calls, 1))}
}

// enter takes an open slot for camera c, or returns false when stop is closed first. For a
// session's first open (first), c's stall watchdog is held off while it waits and counts
// again from the slot on. A later one, after an open that failed, holds nothing off: a
// decoder that cannot be opened (past the GPU's last decoder, the driver refuses more) must
// end as a stall, not keep the camera connecting without an error.
func (g *DecoderGate) enter(c *Camera, stop <-chan struct{}, first bool) bool {
	if !first {
		return take(g.opens, stop)
	}
	select {
	case g.opens <- struct{}{}: // free at once: nothing to hold off
		c.readyAt.Store(time.Now().UnixNano())
		return true
	default:
	}
	c.gateWaits.Add(1)
	c.inGate.Store(true)
	defer c.inGate.Store(false)
	if !take(g.opens, stop) {
		return false
	}
	c.readyAt.Store(time.Now().UnixNano())
	return true
}

// leave gives an open slot back.
func (g *DecoderGate) leave() { <-g.opens }

// call takes a call slot, or returns false when stop is closed first.
func (g *DecoderGate) call(stop <-chan struct{}) bool { return take(g.calls, stop) }

// take takes one of slots, waiting for it, or returns false when stop is closed first.
func take(slots chan struct{}, stop <-chan struct{}) bool {
	select {
	case slots <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

// called gives a call slot back.
func (g *DecoderGate) called() { <-g.calls }
