package sources

import (
	"sync/atomic"
	"time"
)

// Codec names of Packet.Codec.
const (
	CodecH264 = codecH264
	CodecH265 = codecH265
)

// Packet is one encoded access unit as an RTSP camera sent it, before decoding: what a
// recording of the stream keeps (package clips). Camera.OnPacket gets every access unit
// depacketized, also those the decoder then skips or drops.
type Packet struct {
	// Session numbers the camera's RTSP sessions from 1: a new session starts a new timeline
	// (its timestamps have nothing to do with the last one's) and may bring new parameter
	// sets.
	Session uint64
	Codec   string   // CodecH264 or CodecH265
	Params  [][]byte // the parameter sets the session's SDP gave (H.265: VPS, SPS, PPS; H.264: SPS, PPS); may be empty: they come in the stream
	NALUs   [][]byte // the access unit's NAL units, without start codes
	Key     bool     // a random-access unit (IDR, or H.265 IRAP)
	// PTS is the unit's presentation time in ClockRate units: the RTP timestamp, unwrapped
	// within the session (it goes on past 2^32), from the session's first packet.
	PTS       int64
	ClockRate int
	At        time.Time // capture time, as Frame.Captured
	// Lost says that RTP packets were lost (or could not be depacketized) since the last
	// unit: this one may reference what did not arrive.
	Lost bool
}

// rtpUnwrap turns a session's 32-bit RTP timestamps into a timeline that goes on past
// their wrap: each timestamp is placed at the signed 32-bit difference from the last, so a
// wrap (every 13 h at 90 kHz) continues, and one out of order goes back a little.
type rtpUnwrap struct {
	last uint32
	at   int64
	ok   bool
}

func (u *rtpUnwrap) unwrap(ts uint32) int64 {
	if !u.ok {
		u.last, u.ok = ts, true
		return 0
	}
	u.at += int64(int32(ts - u.last))
	u.last = ts
	return u.at
}

// packetTap is the session side of Camera.OnPacket: the reused Packet and its unwrapping.
// RTP callback only.
type packetTap struct {
	fn     func(*Packet)
	pkt    Packet
	unwrap rtpUnwrap
	lost   atomic.Bool // set on RTP loss, from gortsplib's callback
}

// newPacketTap returns the tap of a session numbered session of a track; nil without
// OnPacket.
func newPacketTap(fn func(*Packet), session uint64, track *videoTrack) *packetTap {
	if fn == nil {
		return nil
	}
	return &packetTap{fn: fn, pkt: Packet{Session: session, Codec: track.codec, Params: track.params(),
		ClockRate: track.format.ClockRate()}}
}

// send hands one access unit of RTP timestamp ts to OnPacket.
func (t *packetTap) send(nalus [][]byte, key bool, ts uint32, at time.Time) {
	if t == nil {
		return
	}
	t.sendAt(nalus, key, t.unwrap.unwrap(ts), at)
}

// sendAt hands one access unit of presentation time pts (unwrapped) to OnPacket.
func (t *packetTap) sendAt(nalus [][]byte, key bool, pts int64, at time.Time) {
	p := &t.pkt
	p.NALUs, p.Key, p.PTS, p.At, p.Lost = nalus, key, pts, at, t.lost.Swap(false)
	t.fn(p)
	p.NALUs = nil
}

// markLost notes a loss for the next unit.
func (t *packetTap) markLost() {
	if t != nil {
		t.lost.Store(true)
	}
}
