package sources

import "time"

// DefaultDecoderOpens is how many cameras of a process open a GPU decoder at once when the
// daemon gives them a DecoderGate: enough to keep the opens going back to back, few enough
// that none waits long in the driver.
const DefaultDecoderOpens = 4

// DecoderGate bounds how many cameras open a GPU decoder (decoder cuda) at the same time.
// libavcodec creates a session's NVDEC decoder when it decodes the session's first keyframe,
// and the driver takes these creations one by one: with 150 cameras starting together, the
// last ones waited past their stall timeout, were cut as stalled and opened again, adding
// to the queue. A camera given a gate waits for one of its slots before that first keyframe
// and leaves it once the keyframe is decoded; the time it waits for a slot is not counted by
// its stall watchdog (which counts from the slot's being taken, so an open that hangs still
// ends as a stall). One gate serves every camera of a process; the zero of Camera.DecoderGate,
// nil, leaves the opens unbounded. Safe for concurrent use.
type DecoderGate struct {
	slots chan struct{}
}

// NewDecoderGate returns a gate of n slots (at least 1).
func NewDecoderGate(n int) *DecoderGate {
	return &DecoderGate{slots: make(chan struct{}, max(n, 1))}
}

// enter takes a slot for camera c, or returns false when stop is closed first. While it
// waits, c's stall watchdog is held off; from the slot on, it counts again.
func (g *DecoderGate) enter(c *Camera, stop <-chan struct{}) bool {
	select {
	case g.slots <- struct{}{}: // free at once: nothing to hold off
		c.readyAt.Store(time.Now().UnixNano())
		return true
	default:
	}
	c.gateWaits.Add(1)
	c.inGate.Store(true)
	defer c.inGate.Store(false)
	select {
	case g.slots <- struct{}{}:
		c.readyAt.Store(time.Now().UnixNano())
		return true
	case <-stop:
		return false
	}
}

// leave gives a slot back.
func (g *DecoderGate) leave() { <-g.slots }
