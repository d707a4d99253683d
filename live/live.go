// Package live muxes a camera's encoded video, as it comes from its RTSP session, into
// fragmented MP4 for a browser's Media Source Extensions: no decode and no encode, one
// fragment (moof and mdat) an access unit. A Muxer serves every viewer of its camera: a new
// viewer gets the init segment and the fragments since the last keyframe, then each new one;
// a viewer that falls behind (its queue full) misses fragments until the next keyframe,
// from which it goes on, and the camera never waits for it.
package live

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"time"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"
	"github.com/bluenviron/mediacommon/v2/pkg/formats/fmp4"
	"github.com/bluenviron/mediacommon/v2/pkg/formats/fmp4/seekablebuffer"
	"github.com/bluenviron/mediacommon/v2/pkg/formats/mp4"

	"github.com/visiond/visiond/sources"
)

// timescale is the MP4 track's clock: RTP's 90 kHz for H.264 and H.265.
const timescale = 90000

// maxGOP bounds the fragments a Muxer keeps for a new viewer's start: a camera whose
// keyframes are further apart than this many units gives a new viewer only the last maxGOP.
const maxGOP = 600

// Segment is one piece of the stream a viewer gets: the init segment (Init), or a fragment
// of one access unit.
type Segment struct {
	Data []byte
	Init bool
	Key  bool // a fragment that starts at a keyframe
	// MIME is an init segment's type with its codec (RFC 6381), as MediaSource's
	// isTypeSupported and addSourceBuffer want it: video/mp4; codecs="avc1.64001f".
	MIME string
	// Start is an init segment's capture time of its media time 0: a frame shown at media
	// time t was captured at Start + t, which matches it to its results.
	Start time.Time
}

// Stats are a Muxer's counts.
type Stats struct {
	Viewers int    // watching now
	Sent    uint64 // bytes queued to viewers
	Skipped uint64 // fragments viewers missed for being behind
}

// Muxer muxes one camera's packets (Push, from its session's callback) and serves its
// viewers (Watch). Safe for concurrent use.
type Muxer struct {
	mu      sync.Mutex
	session uint64
	codec   string
	sets    paramSets  // the latest parameter sets of the session
	params  *paramSets // those of the init segment
	init    []byte     // nil until a keyframe with parameter sets has come
	mime    string     // init's type
	start   time.Time  // the capture time of init's media time 0
	gop     []Segment  // the fragments from the last keyframe on: a new viewer's start
	seq     uint32
	dts264  h264.DTSExtractor
	dts265  h265.DTSExtractor
	base    int64 // the init's first decoding time: the fragments' timeline starts there
	lastDTS int64
	step    int64 // the last step between decoding times: a fragment's duration
	sentAny bool
	viewers map[*Viewer]struct{}
	sent    uint64
	skipped uint64
	errs    uint64 // units that could not be muxed
}

// NewMuxer returns a Muxer with no video yet.
func NewMuxer() *Muxer { return &Muxer{viewers: map[*Viewer]struct{}{}} }

// Viewer receives a camera's segments on C, in order, starting with an init segment. A new
// init segment comes when the stream's parameters change (a new session).
type Viewer struct {
	C        <-chan Segment
	c        chan Segment
	m        *Muxer
	behind   bool // missed a fragment: waits for the next keyframe
	needInit bool // a new init segment came (or none was sent yet): it goes before that keyframe
	closed   bool
}

// Watch adds a viewer whose queue holds queue segments.
func (m *Muxer) Watch(queue int) *Viewer {
	c := make(chan Segment, max(queue, 2))
	v := &Viewer{C: c, c: c, m: m}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.viewers[v] = struct{}{}
	v.behind, v.needInit = true, true // it starts at a keyframe, after the init segment
	for _, s := range m.gop {
		m.sendTo(v, s)
	}
	return v
}

// Close removes the viewer; its channel is closed.
func (v *Viewer) Close() {
	m := v.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if !v.closed {
		v.closed = true
		delete(m.viewers, v)
		close(v.c)
	}
}

// Stats returns the muxer's counts.
func (m *Muxer) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Stats{Viewers: len(m.viewers), Sent: m.sent, Skipped: m.skipped}
}

// sendTo queues fragment s to v, or marks v behind when its queue is full: it then misses
// fragments until the next keyframe, which it gets after the init segment when a new one
// came meanwhile. Under m.mu.
func (m *Muxer) sendTo(v *Viewer, s Segment) {
	if v.behind {
		if !s.Key {
			m.skipped++
			return
		}
		if v.needInit {
			if cap(v.c)-len(v.c) < 2 {
				m.skipped++
				return
			}
			v.c <- Segment{Data: m.init, Init: true, MIME: m.mime, Start: m.start}
			m.sent += uint64(len(m.init))
			v.needInit = false
		}
		v.behind = false
	}
	select {
	case v.c <- s:
		m.sent += uint64(len(s.Data))
	default:
		v.behind = true
		m.skipped++
	}
}

// broadcast sends fragment s to every viewer. Under m.mu.
func (m *Muxer) broadcast(s Segment) {
	for v := range m.viewers {
		m.sendTo(v, s)
	}
}

// Push muxes one access unit of the camera's session into a fragment for the viewers. It
// never blocks on a viewer, and keeps nothing of p (the session reuses it).
func (m *Muxer) Push(p *sources.Packet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p.Session != m.session || p.Codec != m.codec {
		m.session, m.codec = p.Session, p.Codec
		m.init, m.gop, m.params = nil, nil, nil
		m.sets = paramSets{}
	}
	m.sets.take(p.Codec, p.Params)
	m.sets.take(p.Codec, p.NALUs)
	if !p.Key && m.init == nil {
		return
	}
	if p.Key && !m.sets.equal(m.params) {
		if !m.sets.complete(p.Codec) {
			return // a keyframe without its parameter sets: wait for one with them
		}
		if err := m.newInit(p); err != nil {
			m.errs++
			return
		}
	}
	dts, err := m.extractDTS(p)
	switch {
	case !m.sentAny: // the init's first unit: the fragments' timeline starts at it
		if err != nil {
			dts = p.PTS
		}
		m.base, m.lastDTS = dts, dts-m.step
		m.start = p.At.Add(-time.Duration(p.PTS-dts) * time.Second / timescale)
	case err != nil || dts <= m.lastDTS:
		dts = max(p.PTS, m.lastDTS+1) // a damaged unit or a jump: keep the timeline going
	}
	if step := dts - m.lastDTS; step > 0 && step <= 10*timescale {
		m.step = step
	}
	m.lastDTS, m.sentAny = dts, true
	ptsOff := min(max(p.PTS-dts, 0), 1<<31-1)
	sample := &fmp4.Sample{}
	if p.Codec == sources.CodecH265 {
		err = sample.FillH265(int32(ptsOff), p.NALUs)
	} else {
		err = sample.FillH264(int32(ptsOff), p.NALUs)
	}
	if err != nil {
		m.errs++
		return
	}
	sample.Duration = uint32(m.step)
	sample.IsNonSyncSample = !p.Key
	m.seq++
	part := fmp4.Part{SequenceNumber: m.seq, Tracks: []*fmp4.PartTrack{{ID: 1, BaseTime: uint64(dts - m.base), Samples: []*fmp4.Sample{sample}}}}
	var buf seekablebuffer.Buffer
	if err := part.Marshal(&buf); err != nil {
		m.errs++
		return
	}
	s := Segment{Data: buf.Bytes(), Key: p.Key}
	if p.Key || len(m.gop) >= maxGOP {
		clear(m.gop)
		m.gop = m.gop[:0]
	}
	m.gop = append(m.gop, s)
	m.broadcast(s)
}

// newInit makes the init segment of the parameter sets in m.sets, from keyframe p on, and
// sends it to the viewers. Under m.mu.
func (m *Muxer) newInit(p *sources.Packet) error {
	var codec mp4.Codec
	if p.Codec == sources.CodecH265 {
		codec = &mp4.CodecH265{VPS: m.sets.vps, SPS: m.sets.sps, PPS: m.sets.pps}
	} else {
		codec = &mp4.CodecH264{SPS: m.sets.sps, PPS: m.sets.pps}
	}
	init := fmp4.Init{Tracks: []*fmp4.InitTrack{{ID: 1, TimeScale: timescale, Codec: codec}}}
	var buf seekablebuffer.Buffer
	if err := init.Marshal(&buf); err != nil {
		return err
	}
	m.init, m.params = buf.Bytes(), m.sets.clone()
	m.mime = `video/mp4; codecs="` + codecString(p.Codec, m.sets) + `"`
	clear(m.gop)
	m.gop = m.gop[:0]
	m.dts264.Initialize()
	m.dts265.Initialize()
	m.sentAny, m.step = false, timescale/10
	for v := range m.viewers {
		v.behind, v.needInit = true, true // the init goes with the keyframe that follows
	}
	return nil
}

// extractDTS is the decoding time of p from its stream's picture order (B-frames come before
// the frames they show between). Under m.mu.
func (m *Muxer) extractDTS(p *sources.Packet) (int64, error) {
	if p.Codec == sources.CodecH265 {
		return m.dts265.Extract(p.NALUs, p.PTS)
	}
	return m.dts264.Extract(p.NALUs, p.PTS)
}

// paramSets are the latest parameter sets of a stream (VPS: H.265 only).
type paramSets struct {
	vps, sps, pps []byte
}

// take keeps the parameter sets among nalus.
func (ps *paramSets) take(codec string, nalus [][]byte) {
	for _, n := range nalus {
		if len(n) == 0 {
			continue
		}
		if codec == sources.CodecH265 {
			if len(n) < 2 {
				continue
			}
			switch h265.NALUType((n[0] >> 1) & 0b111111) {
			case h265.NALUType_VPS_NUT:
				ps.vps = keep(ps.vps, n)
			case h265.NALUType_SPS_NUT:
				ps.sps = keep(ps.sps, n)
			case h265.NALUType_PPS_NUT:
				ps.pps = keep(ps.pps, n)
			}
			continue
		}
		switch h264.NALUType(n[0] & 0x1f) {
		case h264.NALUTypeSPS:
			ps.sps = keep(ps.sps, n)
		case h264.NALUTypePPS:
			ps.pps = keep(ps.pps, n)
		}
	}
}

// keep returns n, copied into old's place unless old holds it already.
func keep(old, n []byte) []byte {
	if bytes.Equal(old, n) {
		return old
	}
	return bytes.Clone(n)
}

func (ps *paramSets) complete(codec string) bool {
	return ps.sps != nil && ps.pps != nil && (codec != sources.CodecH265 || ps.vps != nil)
}

func (ps *paramSets) equal(o *paramSets) bool {
	return o != nil && bytes.Equal(ps.vps, o.vps) && bytes.Equal(ps.sps, o.sps) && bytes.Equal(ps.pps, o.pps)
}

func (ps *paramSets) clone() *paramSets { c := *ps; return &c }

// codecString is the RFC 6381 name of the stream's codec from its SPS: avc1.PPCCLL for H.264
// (profile, constraint flags, level), hvc1.S.C.TL.B for H.265 (ISO/IEC 14496-15, annex E).
func codecString(codec string, ps paramSets) string {
	if codec != sources.CodecH265 {
		if len(ps.sps) < 4 {
			return "avc1.42e01e" // no SPS to read: baseline 3.0, as browsers take for unknown
		}
		return fmt.Sprintf("avc1.%02x%02x%02x", ps.sps[1], ps.sps[2], ps.sps[3])
	}
	// After the 2-byte NAL header and a byte of ids: profile space, tier and profile (1 byte),
	// the 32 compatibility flags, 6 bytes of constraint flags, the level.
	b := h264.EmulationPreventionRemove(ps.sps)
	if len(b) < 15 {
		return "hvc1.1.6.L93.B0" // no SPS to read: Main, level 3.1
	}
	space, tier, profile := b[3]>>6, (b[3]>>5)&1, b[3]&0x1f
	compat := bits.Reverse32(binary.BigEndian.Uint32(b[4:8]))
	var sb strings.Builder
	sb.WriteString("hvc1.")
	if space > 0 {
		sb.WriteByte('A' + space - 1)
	}
	fmt.Fprintf(&sb, "%d.%x.%c%d", profile, compat, "LH"[tier], b[14])
	cons := b[8:14]
	for len(cons) > 0 && cons[len(cons)-1] == 0 {
		cons = cons[:len(cons)-1]
	}
	for _, c := range cons {
		fmt.Fprintf(&sb, ".%x", c)
	}
	return sb.String()
}
