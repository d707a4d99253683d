// Package clips records event clips: the encoded video of the seconds before, during and
// after a camera's objects, written as MP4 from the access units the camera sent, with no
// decoding and no encoding.
//
// A Ring per camera keeps the camera's latest access units (fed from its RTSP session's
// callback through sources.Camera.OnPacket, beside the decoder and never blocking it),
// from a keyframe, bounded by time and bytes. A Recorder per camera follows the camera's
// object events (Observe): when an object that its settings select (classes, zones) is
// confirmed, a clip opens at the last keyframe at or before PreCapture before it; objects
// that come while a clip is open join it; PostCapture after the last of them ends, the clip
// closes, as an MP4 file (mediacommon's pmp4 writer: the moov first, so browsers play it at
// once) handed to the Recorder's Finished callback. A clip that reaches MaxLength closes
// at a keyframe and the next goes on from there; a new session, a change of codec or
// resolution, or the camera going offline closes it too.
package clips

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"

	"github.com/visiond/visiond/sources"
)

// Params are a stream's codec and parameter sets, which an MP4's sample entry holds. A
// Ring's units share one *Params until the stream sends different ones.
type Params struct {
	Codec         string // sources.CodecH264 or sources.CodecH265
	VPS, SPS, PPS []byte // VPS: H.265 only
	Width, Height int    // from the SPS
}

// same reports whether p and o describe the same stream.
func (p *Params) same(o *Params) bool {
	return p == o || p != nil && o != nil && p.Codec == o.Codec && bytes.Equal(p.VPS, o.VPS) &&
		bytes.Equal(p.SPS, o.SPS) && bytes.Equal(p.PPS, o.PPS)
}

// complete reports whether p has what an MP4 needs.
func (p *Params) complete() bool {
	return p != nil && len(p.SPS) > 0 && len(p.PPS) > 0 && (p.Codec != sources.CodecH265 || len(p.VPS) > 0) && p.Width > 0
}

// withSet returns p with the parameter set nalu (of p's codec) in place, parsing an SPS
// for the frame size; p itself when nalu is not a parameter set or changes nothing.
func (p *Params) withSet(nalu []byte) *Params {
	var slot *[]byte
	n := *p
	switch {
	case p.Codec == sources.CodecH265 && len(nalu) >= 2:
		switch h265.NALUType((nalu[0] >> 1) & 0x3f) {
		case h265.NALUType_VPS_NUT:
			slot = &n.VPS
		case h265.NALUType_SPS_NUT:
			slot = &n.SPS
		case h265.NALUType_PPS_NUT:
			slot = &n.PPS
		}
	case p.Codec == sources.CodecH264 && len(nalu) >= 1:
		switch h264.NALUType(nalu[0] & 0x1f) {
		case h264.NALUTypeSPS:
			slot = &n.SPS
		case h264.NALUTypePPS:
			slot = &n.PPS
		}
	}
	if slot == nil || bytes.Equal(*slot, nalu) {
		return p
	}
	*slot = bytes.Clone(nalu)
	if slot == &n.SPS {
		n.Width, n.Height = spsSize(n.Codec, n.SPS)
	}
	return &n
}

// spsSize is the frame size an SPS states; 0 x 0 when it does not parse.
func spsSize(codec string, sps []byte) (int, int) {
	if codec == sources.CodecH265 {
		var s h265.SPS
		if s.Unmarshal(sps) != nil {
			return 0, 0
		}
		return s.Width(), s.Height()
	}
	var s h264.SPS
	if s.Unmarshal(sps) != nil {
		return 0, 0
	}
	return s.Width(), s.Height()
}

// isParamSet reports whether nalu is a parameter set (kept in Params, not in samples) or an
// access unit delimiter (left out: an MP4 sample needs none).
func isParamSet(codec string, nalu []byte) (param, drop bool) {
	if codec == sources.CodecH265 {
		if len(nalu) < 2 {
			return false, true
		}
		switch h265.NALUType((nalu[0] >> 1) & 0x3f) {
		case h265.NALUType_VPS_NUT, h265.NALUType_SPS_NUT, h265.NALUType_PPS_NUT:
			return true, true
		case h265.NALUType_AUD_NUT:
			return false, true
		}
		return false, false
	}
	if len(nalu) < 1 {
		return false, true
	}
	switch h264.NALUType(nalu[0] & 0x1f) {
	case h264.NALUTypeSPS, h264.NALUTypePPS:
		return true, true
	case h264.NALUTypeAccessUnitDelimiter:
		return false, true
	}
	return false, false
}

// unit is an access unit kept by a Ring.
type unit struct {
	session uint64
	params  *Params
	key     bool
	lost    bool      // packets were lost before it
	pts     int64     // in the session's clock (90 kHz)
	at      time.Time // capture time
	data    []byte    // AVCC: each NAL unit behind its 4-byte length; parameter sets and delimiters left out
}

// Ring keeps a camera's latest access units from a keyframe: at least Keep of them (the
// newest unit's capture time minus Keep is covered from a keyframe at or before it), and
// at most MaxBytes (the oldest group of pictures goes first). Push never waits for
// anything but the Ring's own lock, held for a copy.
type Ring struct {
	keep     time.Duration
	maxBytes int

	mu      sync.Mutex
	units   []unit   // oldest first, from units[start]
	start   int      // units before it are gone (their slots reused on compaction)
	first   uint64   // the sequence number of units[start]
	keys    []uint64 // sequence numbers of the keyframes held, oldest first
	bytes   int      // of the units' data
	held    int      // bytes of buffers held: the units', and the spares
	spare   [][]byte // buffers of evicted units, for reuse
	session uint64
	params  *Params
	lastAt  time.Time // capture time of the newest unit
	gop     time.Duration
	dropped uint64    // units not kept: no keyframe or parameter sets yet, or pushed out by MaxBytes
	lost    bool      // a loss to carry to the next unit kept
	due     time.Time // a unit captured at or after it wakes the reader too (wakeAt); zero: none

	// For Shortfall: when the current session's first unit came (kept or not), and the
	// capture time of the newest unit evicted, by MaxBytes or by Keep.
	sessionSince time.Time
	evictedAt    time.Time
	evictedBytes bool

	// wake gets a signal (never waiting) when a keyframe is kept or a unit reaches due: the
	// moments its Recorder has something to do.
	wake chan struct{}
}

// maxSpare bounds a Ring's spare buffers.
const maxSpare = 16

// NewRing returns a Ring that keeps keep of video, in at most maxBytes.
func NewRing(keep time.Duration, maxBytes int) *Ring {
	return &Ring{keep: keep, maxBytes: maxBytes, wake: make(chan struct{}, 1)}
}

// wakeAt makes the first unit captured at or after t wake the reader, besides keyframes;
// zero: only keyframes do.
func (r *Ring) wakeAt(t time.Time) {
	r.mu.Lock()
	r.due = t
	r.mu.Unlock()
}

// wakeUp signals the reader; it never waits. r.mu is held, or the caller is a test.
func (r *Ring) wakeUp() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// SetLimits changes the ring's bounds (a reload changed pre_capture); what it holds beyond
// them goes with the next unit.
func (r *Ring) SetLimits(keep time.Duration, maxBytes int) {
	r.mu.Lock()
	r.keep, r.maxBytes = keep, maxBytes
	r.mu.Unlock()
}

// Limits returns the ring's bounds: the video it keeps, in at most how many bytes.
func (r *Ring) Limits() (time.Duration, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keep, r.maxBytes
}

// Push copies the access unit p into the ring. It is called from the camera's RTP callback.
func (r *Ring) Push(p *sources.Packet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p.Session != r.session {
		r.session, r.sessionSince = p.Session, p.At
		r.params = &Params{Codec: p.Codec}
		for _, ps := range p.Params {
			r.params = r.params.withSet(ps)
		}
	}
	need := 0
	for _, n := range p.NALUs {
		if param, drop := isParamSet(p.Codec, n); param {
			r.params = r.params.withSet(n)
		} else if !drop {
			need += 4 + len(n)
		}
	}
	r.lost = r.lost || p.Lost
	if need == 0 {
		return
	}
	if (r.len() == 0 && !p.Key) || !r.params.complete() {
		r.dropped++
		return
	}
	buf := r.buffer(need)
	for _, n := range p.NALUs {
		if _, drop := isParamSet(p.Codec, n); !drop {
			buf = append(buf, byte(len(n)>>24), byte(len(n)>>16), byte(len(n)>>8), byte(len(n)))
			buf = append(buf, n...)
		}
	}
	seq := r.first + uint64(r.len())
	if p.Key {
		if len(r.keys) > 0 {
			if gap := p.At.Sub(r.units[r.index(r.keys[len(r.keys)-1])].at); gap > 0 {
				r.gop = gap
			}
		}
		r.keys = append(r.keys, seq)
	}
	r.units = append(r.units, unit{session: p.Session, params: r.params, key: p.Key, lost: r.lost,
		pts: p.PTS, at: p.At, data: buf})
	r.lost = false
	r.bytes += len(buf)
	r.lastAt = p.At
	r.evict()
	if p.Key || !r.due.IsZero() && !p.At.Before(r.due) {
		r.wakeUp()
	}
}

func (r *Ring) len() int { return len(r.units) - r.start }

func (r *Ring) index(seq uint64) int { return r.start + int(seq-r.first) }

// buffer returns an empty buffer of at least n bytes' capacity: the smallest spare that
// fits (the larger ones stay for keyframes), else a new one.
func (r *Ring) buffer(n int) []byte {
	best := -1
	for i, b := range r.spare {
		if cap(b) >= n && (best < 0 || cap(b) < cap(r.spare[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := r.spare[best]
		r.spare[best] = r.spare[len(r.spare)-1]
		r.spare = r.spare[:len(r.spare)-1]
		return b[:0]
	}
	b := make([]byte, 0, n+n/4)
	r.held += cap(b)
	return b
}

// spareOf makes the evicted buffer b a spare. The spares are bounded (maxSpare): a full list
// keeps its largest, so that units of any size find one.
func (r *Ring) spareOf(b []byte) {
	if len(r.spare) < maxSpare {
		r.spare = append(r.spare, b[:0])
		return
	}
	small := 0
	for i, s := range r.spare {
		if cap(s) < cap(r.spare[small]) {
			small = i
		}
	}
	if cap(b) <= cap(r.spare[small]) {
		r.held -= cap(b)
		return
	}
	r.held -= cap(r.spare[small])
	r.spare[small] = b[:0]
}

// evict drops the oldest groups of pictures that Keep and MaxBytes allow.
func (r *Ring) evict() {
	for len(r.keys) > 1 {
		second := r.units[r.index(r.keys[1])]
		byKeep := r.lastAt.Sub(second.at) >= r.keep
		if !byKeep && r.bytes <= r.maxBytes {
			break
		}
		r.evictedBytes = !byKeep
		r.dropTo(r.keys[1])
	}
	// One group of pictures larger than the bound: its oldest units go. The ring then
	// starts between keyframes: a clip that is being written goes on reading it; a new one
	// waits for the next keyframe.
	for r.bytes > r.maxBytes && r.len() > 1 {
		r.dropped++
		r.evictedBytes = true
		r.dropTo(r.first + 1)
	}
}

// dropTo drops the units before seq.
func (r *Ring) dropTo(seq uint64) {
	for r.first < seq {
		u := &r.units[r.start]
		r.evictedAt = u.at
		r.bytes -= len(u.data)
		r.spareOf(u.data)
		*u = unit{}
		r.start++
		r.first++
	}
	for len(r.keys) > 0 && r.keys[0] < seq {
		r.keys = r.keys[1:]
	}
	if r.start > 64 && r.start > len(r.units)/2 { // compact: the slots before start are empty
		n := copy(r.units, r.units[r.start:])
		clear(r.units[n:])
		r.units = r.units[:n]
		r.start = 0
	}
}

// Next is the sequence number the next unit pushed will have.
func (r *Ring) Next() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first + uint64(r.len())
}

// keyAtOrBefore returns the sequence number and time of the last keyframe held whose capture
// time is at or before t, or the first keyframe held when all are later (late); ok is false
// when the ring holds none.
func (r *Ring) keyAtOrBefore(t time.Time) (seq uint64, at time.Time, late, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.keys) == 0 {
		return 0, time.Time{}, false, false
	}
	seq, at = r.keys[0], r.units[r.index(r.keys[0])].at
	if at.After(t) {
		return seq, at, true, true
	}
	for _, k := range r.keys[1:] {
		kat := r.units[r.index(k)].at
		if kat.After(t) {
			break
		}
		seq, at = k, kat
	}
	return seq, at, false, true
}

// Why a clip's pre-roll is shorter than its pre_capture (Info.Short).
const (
	// ShortStreamStart: the camera's video in the ring begins after pre_capture before the
	// object: the stream started or reconnected then, or clips were turned on then.
	ShortStreamStart = "stream_start"
	// ShortNoKeyframe: the ring held video from before, but no keyframe at or before the
	// time wanted (a stream joined between keyframes: what comes before the first keyframe
	// cannot be decoded, and is not kept).
	ShortNoKeyframe = "no_keyframe"
	// ShortRingBytes: the ring's byte bound (its share of the memory budget) pushed out the
	// group of pictures wanted.
	ShortRingBytes = "ring_bytes"
	// ShortConfirmedLate: the object was confirmed later after its first sighting than the
	// ring keeps video for (the box analyses frames late); the ring widens for the next.
	ShortConfirmedLate = "confirmed_late"
	// ShortPreviousClip: the video before is in the camera's previous clip, which starts at
	// the same keyframe (two clips never start at the same frame).
	ShortPreviousClip = "previous_clip"
)

// shortfall says why the ring holds no keyframe at or before t (a Short* constant).
func (r *Ring) shortfall(t time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.evictedAt.IsZero() && !r.evictedAt.Before(t) && r.evictedBytes:
		return ShortRingBytes
	case !r.evictedAt.IsZero() && !r.evictedAt.Before(t):
		return ShortConfirmedLate
	case r.sessionSince.IsZero() || r.sessionSince.After(t):
		return ShortStreamStart
	}
	return ShortNoKeyframe
}

// read appends to dst copies of the units from sequence number from on, their data in buf
// (reused), and returns the sequence number after the last. skipped counts the units from
// from on that the ring no longer holds (the reader fell behind).
func (r *Ring) read(from uint64, dst []unit, buf []byte) ([]unit, []byte, uint64, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var skipped uint64
	if from < r.first {
		skipped, from = r.first-from, r.first
	}
	end := r.first + uint64(r.len())
	if from > end {
		from = end
	}
	need := 0
	for s := from; s < end; s++ {
		need += len(r.units[r.index(s)].data)
	}
	buf = buf[:0]
	if cap(buf) < need {
		buf = make([]byte, 0, need)
	}
	for s := from; s < end; s++ {
		u := r.units[r.index(s)]
		off := len(buf)
		buf = append(buf, u.data...)
		u.data = buf[off:len(buf):len(buf)]
		dst = append(dst, u)
	}
	return dst, buf, end, skipped
}

// RingStats are a Ring's figures.
type RingStats struct {
	Units   int           // access units held
	Bytes   int           // their bytes
	Held    int           // bytes of buffers held (units' and spares')
	Span    time.Duration // from the oldest unit to the newest
	GOP     time.Duration // the latest keyframe interval
	Dropped uint64        // units not kept: before the first keyframe or parameter sets, or pushed out by the byte bound
}

// Stats returns the ring's figures.
func (r *Ring) Stats() RingStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := RingStats{Units: r.len(), Bytes: r.bytes, Held: r.held, GOP: r.gop, Dropped: r.dropped}
	if r.len() > 0 {
		s.Span = r.lastAt.Sub(r.units[r.start].at)
	}
	return s
}

func (p *Params) String() string {
	return fmt.Sprintf("%s %dx%d", p.Codec, p.Width, p.Height)
}
