package sources

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/base"
	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/bluenviron/gortsplib/v4/pkg/format/rtph264"
	"github.com/bluenviron/gortsplib/v4/pkg/format/rtph265"
	"github.com/pion/rtp"

	"github.com/visiond/visiond/internal/geom"
)

// accessUnit is one H.264 access unit in Annex-B form, queued for the decoder.
type accessUnit struct {
	data   []byte    // Annex-B; returned to the session's spare list after decoding
	key    bool      // holds an IDR slice
	nonRef bool      // no other frame references it (videoTrack.isNonRef): it may be left undecoded
	gap    bool      // something before it was lost: decoding must restart at a key unit
	at     time.Time // capture time (see receiver.clock)
}

// runSession runs one RTSP session until it fails or ctx ends. onlineAt is when it decoded
// its first frame (zero if it never did).
func (c *Camera) runSession(ctx context.Context) (onlineAt time.Time, err error) {
	u, err := base.ParseURL(withCredentials(c.URL, c.Username, c.Password))
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid URL: %w", err)
	}
	var recv *receiver // set before PLAY, when the track is known
	client := c.sessionClient(u, &recv)
	if err := client.Start2(); err != nil {
		return time.Time{}, err
	}
	stopWatch := context.AfterFunc(ctx, client.Close)
	defer func() {
		stopWatch()
		client.Close()
	}()

	desc, _, err := client.Describe(u)
	if err != nil {
		return time.Time{}, fmt.Errorf("DESCRIBE: %w", err)
	}
	track, err := findVideo(desc)
	if err != nil {
		return time.Time{}, err
	}
	if _, err := client.Setup(desc.BaseURL, track.media, 0, 0); err != nil {
		return time.Time{}, fmt.Errorf("SETUP: %w", err)
	}

	dec, gpuErr, err := c.openDecoder(track.codec)
	if err != nil {
		return time.Time{}, err
	}
	recv = newReceiver(c, track, queueLen)
	recv.tap = newPacketTap(c.OnPacket, c.sessions.Add(1), track)
	decoding := c.startDecoding(dec, track, recv, gpuErr)
	defer func() {
		client.Close() // no more callbacks after this
		onlineAt = decoding.stop()
	}()

	var clockLog rateLog
	client.OnPacketRTP(track.media, track.format, func(pkt *rtp.Packet) {
		// The camera's capture time, from its RTCP sender reports, once one has arrived;
		// before, the receive time placed by the packet's RTP timestamp (recv.clock).
		now := time.Now()
		at, ok := client.PacketNTP(track.media, pkt)
		if !ok {
			at = recv.clock.at(pkt.Timestamp, now)
		} else if skew := at.Sub(now); skew > clockSkewWarn || skew < -clockSkewWarn {
			clockLog.warn(c.log, "camera clock is off; events carry its capture times", "skew", skew.Round(time.Millisecond))
		}
		recv.push(pkt, at)
	})

	if _, err := client.Play(nil); err != nil {
		return time.Time{}, fmt.Errorf("PLAY: %w", err)
	}
	c.log.Debug("playing", "codec", track.codec, "sdp_params", len(track.params()) > 0)
	err = client.Wait()
	if err == nil {
		err = errors.New("RTSP session closed")
	}
	return time.Time{}, err
}

// sessionClient returns the RTSP client of a session to u, over the camera's transport; its
// callbacks log and mark the losses on *recv once the session has set it.
func (c *Camera) sessionClient(u *base.URL, recv **receiver) *gortsplib.Client {
	var transport *gortsplib.Transport
	switch c.Transport {
	case TransportTCP:
		t := gortsplib.TransportTCP
		transport = &t
	case TransportUDP:
		t := gortsplib.TransportUDP
		transport = &t
	case TransportAuto: // nil: UDP, then TCP
	}

	var lossLog rateLog
	return &gortsplib.Client{
		Scheme:       u.Scheme,
		Host:         u.Host,
		Transport:    transport,
		ReadTimeout:  c.readTimeout,
		WriteTimeout: c.readTimeout,
		OnTransportSwitch: func(err error) {
			c.log.Info("RTSP transport switched", "reason", c.redactor.Scrub(err.Error()))
		},
		OnPacketsLost: func(lost uint64) {
			if r := *recv; r != nil {
				r.gap.Store(true)
				r.tap.markLost()
			}
			lossLog.warn(c.log, "RTP packets lost", "lost", lost)
		},
		OnDecodeError: func(err error) {
			lossLog.warn(c.log, "RTP/RTCP decode error", "error", c.redactor.Scrub(err.Error()))
		},
	}
}

// decoding is a session's decode goroutine: it runs the decode loop over the receiver's
// access units until stop.
type decoding struct {
	loop *decodeLoop
	quit chan struct{}
	wg   sync.WaitGroup
}

// startDecoding starts decoding recv's access units of track with dec: the camera's decoder,
// or the CPU's in its place when gpuErr says why the GPU's did not open (openDecoder).
func (c *Camera) startDecoding(dec *decoder, track *videoTrack, recv *receiver, gpuErr error) *decoding {
	d := &decoding{quit: make(chan struct{})}
	d.loop = &decodeLoop{cam: c, dec: dec, codec: track.codec, needKey: true, stop: d.quit}
	if gpuErr != nil {
		d.loop.onCPU(dec, gpuErr)
	} else {
		d.loop.useConfigured(dec)
	}
	if params := track.params(); len(params) > 0 {
		_ = dec.decode(appendAnnexB(nil, params), noPTS, nil) // bad parameter sets show up on the first frames
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			select {
			case <-d.quit:
				return
			case au := <-recv.queue:
				d.loop.handle(au)
				recv.recycle(au)
			}
		}
	}()
	return d
}

// stop ends the decode goroutine, waits for it, closes the decoder and returns when the
// session decoded its first frame (zero if it never did). The RTP callbacks must have
// stopped (the client closed).
func (d *decoding) stop() (onlineAt time.Time) {
	close(d.quit)
	d.wg.Wait()
	d.loop.dec.close()
	if d.loop.spare != nil {
		d.loop.spare.close()
	}
	return d.loop.onlineAt
}

// receiver turns a session's RTP packets into access units for the decode goroutine. push
// runs in the RTP callback: it only depacketizes and queues (bounded; a full queue drops
// and marks a gap, so decoding resumes at the next random-access unit).
type receiver struct {
	cam           *Camera
	track         *videoTrack
	keyframesOnly bool
	gap           atomic.Bool // set on loss; carried by the next queued access unit
	queue         chan accessUnit
	spare         chan []byte // buffers of decoded access units, for reuse: spareAUs of them
	dropLog       rateLog
	depacketLog   rateLog
	clock         rtpClock   // RTP callback only
	tap           *packetTap // Camera.OnPacket; nil without
}

func newReceiver(c *Camera, track *videoTrack, n int) *receiver {
	return &receiver{cam: c, track: track, keyframesOnly: c.Decode == DecodeKeyframes,
		queue: make(chan accessUnit, n), spare: make(chan []byte, spareAUs),
		clock: rtpClock{rate: int64(track.format.ClockRate())}}
}

// rtpClock turns RTP timestamps into capture times on this host's clock while the camera
// has sent no RTCP sender report: the receive time of a packet plus the RTP time since, so
// that frames sent out of display order (B-frames: a P-frame is sent before the B-frames
// shown before it) still get their display times, in order. The packet it counts from is the
// one that came with the least delay: a packet whose time would be after its receive time
// becomes the new origin (no capture time is in the future), as does one whose time strays
// more than rtpClockSlack before its receive time (the stream paused or jumped, or the
// clocks drifted apart).
type rtpClock struct {
	rate   int64 // RTP clock rate, Hz
	base   time.Time
	baseTS uint32
	ok     bool
}

// rtpClockSlack is how far an RTP-derived time may be from the receive time before the
// clock is set again: several frame intervals of reordering and jitter, far less than an
// outage.
const rtpClockSlack = time.Second

// at returns the capture time of a packet with RTP timestamp ts received at now.
func (c *rtpClock) at(ts uint32, now time.Time) time.Time {
	if c.rate <= 0 {
		return now
	}
	if c.ok {
		d := time.Duration(int64(int32(ts-c.baseTS)) * int64(time.Second) / c.rate)
		t := c.base.Add(d)
		if off := t.Sub(now); off <= 0 && off > -rtpClockSlack {
			return t
		}
	}
	c.base, c.baseTS, c.ok = now, ts, true
	return now
}

// push depacketizes one RTP packet; a completed access unit is queued with time at.
func (r *receiver) push(pkt *rtp.Packet, at time.Time) {
	c, track := r.cam, r.track
	nalus, err := track.depacketize(pkt)
	if err != nil {
		if !track.incomplete(err) {
			r.gap.Store(true)
			r.tap.markLost()
			r.depacketLog.warn(c.log, track.codec+" depacketize error", "error", err.Error())
		}
		return
	}
	nalus = slices.DeleteFunc(nalus, func(n []byte) bool { return len(n) == 0 })
	if len(nalus) == 0 {
		return
	}
	key := track.isKey(nalus)
	r.tap.send(nalus, key, pkt.Timestamp, at)
	if r.keyframesOnly && !key {
		c.skipped.Add(1)
		return
	}
	var buf []byte
	select {
	case buf = <-r.spare:
	default:
	}
	au := accessUnit{data: appendAnnexB(buf[:0], nalus), key: key, nonRef: !key && track.isNonRef(nalus),
		gap: r.gap.Swap(false), at: at}
	select {
	case r.queue <- au:
	default:
		c.dropped.Add(1)
		r.gap.Store(true)
		r.dropLog.warn(c.log, "decode queue full, access units dropped")
	}
}

// recycle keeps a decoded access unit's buffer for a later one.
func (r *receiver) recycle(au accessUnit) {
	select {
	case r.spare <- au.data:
	default:
	}
}

// decodeLoop is the decode goroutine's state for one session.
type decodeLoop struct {
	cam      *Camera
	dec      *decoder
	codec    string // the track's, for the decoders the loop opens in place of dec (fallback.go)
	needKey  bool   // skip access units until the next random-access one
	at       time.Time
	lb       geom.Letterbox // geometry of the last frame
	onlineAt time.Time
	errLog   rateLog
	onFrame  func(w, h int, pts int64)
	gaps     frameGaps
	// gate, when set, is passed by every decode (decode): its open slot for the session's
	// first decode of a keyframe, which opens the GPU decoder, its call slot for each;
	// opened says that the first succeeded, entered that the session has taken an open
	// slot (the first open's wait is not counted by the stall watchdog; a retry's is). stop
	// ends a wait for it.
	gate    *DecoderGate
	opened  bool
	entered bool
	stop    <-chan struct{}
	// The GPU decoder's fallback (fallback.go): fallible says that dec is the GPU's and may
	// be replaced by the CPU's, openFails counts its failed opens in a row, fellBack says
	// fellBack that the loop decodes on the CPU in its place and retryAt when it tries the GPU again;
	// spare is the CPU decoder kept while a retry's GPU decoder opens.
	fallible  bool
	openFails int
	fellBack  bool
	retryAt   time.Time
	spare     *decoder
}

// frameGaps estimates a stream's frame interval from its access units' capture times: the
// span of a window of them over their number, so that units sent in bursts, or out of
// display order (B-frames), count at their capture times.
type frameGaps struct {
	gap    time.Duration // the last window's estimate; 0 before the first window ends
	lo, hi time.Time     // the window's earliest and latest capture times
	n      int           // units in the window
}

// gapWindow is the number of access units an estimate spans: at the ends of a window,
// frames out of display order shift the span by a frame or two, 3-6% of it.
const gapWindow = 32

func (g *frameGaps) observe(at time.Time) {
	if g.n == 0 {
		g.lo, g.hi = at, at
	}
	if at.Before(g.lo) {
		g.lo = at
	}
	if at.After(g.hi) {
		g.hi = at
	}
	g.n++
	if g.n == gapWindow {
		if g.hi.After(g.lo) {
			g.gap = g.hi.Sub(g.lo) / (gapWindow - 1)
		}
		g.n = 0
	}
}

// decode decodes au, through the gate when the loop has one: an open slot for the
// session's first decode, a call slot for every one. ended says that the session ended while
// it waited (nothing was decoded).
func (l *decodeLoop) decode(au accessUnit) (ended bool, err error) {
	if l.gate == nil {
		t0 := time.Now()
		err = l.dec.decode(au.data, au.at.UnixNano(), l.onFrame)
		l.spent(t0, t0)
		return false, err
	}
	opening := !l.opened
	if opening && !l.gate.enter(l.cam, l.stop, !l.entered) {
		return true, nil
	}
	l.entered = l.entered || opening
	t0 := time.Now()
	if !l.gate.call(l.stop) {
		if opening {
			l.gate.leave()
		}
		return true, nil
	}
	t1 := time.Now()
	if opening && l.cam.openErr != nil {
		err = l.cam.openErr()
	}
	if err == nil {
		err = l.dec.decode(au.data, au.at.UnixNano(), l.onFrame)
	}
	l.gate.called()
	l.spent(t0, t1)
	if opening {
		l.gate.leave()
		l.opened = err == nil
	}
	return false, err
}

// spent adds a decode call to the camera's DecodeTimes: one that asked for its call slot
// at asked, got it at began and has just returned.
func (l *decodeLoop) spent(asked, began time.Time) {
	c := l.cam
	c.decCalls.Add(1)
	c.decWait.Add(int64(began.Sub(asked)))
	c.decBusy.Add(int64(time.Since(began)))
	frames, copyTime, scaleTime := l.dec.takeSpent()
	c.decScaled.Add(frames)
	c.decCopy.Add(int64(copyTime))
	c.decScale.Add(int64(scaleTime))
}

// handle decodes one access unit; decoding errors only make it wait for the next
// random-access unit.
func (l *decodeLoop) handle(au accessUnit) {
	if au.gap && !l.needKey {
		l.needKey = true
		l.cam.resyncs.Add(1)
	}
	if l.needKey {
		if !au.key {
			return
		}
		l.needKey = false
	}
	if l.onFrame == nil {
		l.onFrame = l.frame
	}
	l.at = au.at
	l.gaps.observe(au.at)
	if au.key {
		l.retryGPU(time.Now())
	}
	skip := au.nonRef && l.cam.skippableNow(time.Now(), l.gaps.gap)
	l.dec.skipNonRef(skip)
	opening := !l.opened
	ended, err := l.decode(au)
	if !ended && err != nil && opening && l.fallBack(err) {
		ended, err = l.decode(au) // the same keyframe, on the CPU
	}
	if ended {
		return
	}
	if err == nil {
		l.decoded()
	}
	if err != nil {
		l.needKey = true
		l.cam.resyncs.Add(1)
		msg := err.Error()
		l.cam.decodeErr.Store(&msg)
		l.errLog.warn(l.cam.log, "decode error, waiting for the next keyframe", "error", msg)
		return
	}
	if skip {
		l.cam.countSkippedNonRef()
	}
}

// frame handles one decoded frame: scale it into a free buffer and hand it out. Its capture
// time is its own access unit's (pts), which with B-frames is not the last one sent.
func (l *decodeLoop) frame(w, h int, pts int64) {
	c := l.cam
	at := l.at
	if pts != noPTS {
		at = time.Unix(0, pts)
	}
	lb := geom.NewLetterbox(w, h, c.InputW, c.InputH)
	if lb != l.lb {
		c.log.Info("stream geometry", "width", w, "height", h,
			"scaled", fmt.Sprintf("%dx%d", lb.ScaledW, lb.ScaledH), "pad", fmt.Sprintf("%d,%d", lb.PadX, lb.PadY))
		l.lb = lb
	}
	if l.onlineAt.IsZero() {
		l.onlineAt = time.Now()
	}
	if err := c.emit(lb, at, l.dec); err != nil {
		l.errLog.warn(c.log, "scale failed", "error", err.Error())
	}
}

// fillPad paints the whole buffer with the letterbox gray; the scaled image then covers
// its part.
func fillPad(p []byte) {
	if len(p) == 0 {
		return
	}
	p[0] = geom.PadValue
	for n := 1; n < len(p); n *= 2 {
		copy(p[n:], p[:n])
	}
}

// fillBars paints the letterbox bars of a frame of geometry lb with the letterbox gray: the
// rows above and below the picture, and the columns beside it.
func fillBars(p []byte, lb geom.Letterbox) {
	row := lb.DstW * 3
	top, bottom := lb.PadY*row, (lb.PadY+lb.ScaledH)*row
	if lb.ScaledW <= 0 || lb.ScaledH <= 0 || bottom > len(p) {
		fillPad(p) // no picture, or not this buffer's: all of it
		return
	}
	fillPad(p[:top])
	fillPad(p[bottom:])
	if left, right := lb.PadX*3, (lb.PadX+lb.ScaledW)*3; left > 0 || right < row {
		for y := lb.PadY; y < lb.PadY+lb.ScaledH; y++ {
			r := p[y*row : (y+1)*row]
			fillPad(r[:left])
			fillPad(r[right:])
		}
	}
}

// appendAnnexB appends the NAL units to dst, each behind a 4-byte start code.
func appendAnnexB(dst []byte, nalus [][]byte) []byte {
	for _, n := range nalus {
		dst = append(dst, 0, 0, 0, 1)
		dst = append(dst, n...)
	}
	return dst
}

// videoTrack is the stream's video: H.264 or H.265, the first one offered.
type videoTrack struct {
	codec       string // codecH264 or codecH265
	media       *description.Media
	format      format.Format
	depacketize func(*rtp.Packet) ([][]byte, error)
	incomplete  func(error) bool // the depacketizer needs more packets: not an error
	params      func() [][]byte  // parameter sets from the SDP
	maxTID      uint8            // H.265: the highest temporal sub-layer seen (isNonRef)
}

// isKey reports whether the access unit is a random-access one of the track's codec (its
// NAL units must not be empty).
func (t *videoTrack) isKey(nalus [][]byte) bool { return isKey(t.codec, nalus) }

// isNonRef reports whether no other frame references the access unit (its NAL units must
// not be empty), so that it can be left undecoded. H.264: every slice has nal_ref_idc 0 (a
// non-reference P- or B-frame). H.265: every slice is of a sub-layer non-reference type
// (TRAIL_N, TSA_N, STSA_N, RADL_N, RASL_N or a reserved even type below 16), and the stream
// has shown no temporal sub-layer above 0 (pictures of a higher sub-layer may reference a
// sub-layer non-reference picture). It keeps the highest sub-layer seen: call it on every
// access unit, in order, from one goroutine.
func (t *videoTrack) isNonRef(nalus [][]byte) bool {
	vcl, nonRef := false, true
	for _, n := range nalus {
		if t.codec == codecH265 {
			if len(n) < 2 {
				continue
			}
			if tid := n[1]&7 - 1; n[1]&7 > 0 && tid > t.maxTID {
				t.maxTID = tid
			}
			typ := (n[0] >> 1) & 0x3f
			if typ > 31 { // not a slice
				continue
			}
			vcl = true
			nonRef = nonRef && typ < 16 && typ%2 == 0
			continue
		}
		typ := n[0] & 0x1f
		if typ < 1 || typ > 5 { // not a slice
			continue
		}
		vcl = true
		nonRef = nonRef && n[0]&0x60 == 0 // nal_ref_idc
	}
	return vcl && nonRef && t.maxTID == 0
}

// findVideo picks the stream's H.264 or H.265 media; audio, metadata and other tracks are
// left alone (not even set up).
func findVideo(desc *description.Session) (*videoTrack, error) {
	var h264f *format.H264
	if medi := desc.FindFormat(&h264f); medi != nil {
		dec, err := h264f.CreateDecoder()
		if err != nil {
			return nil, fmt.Errorf("H.264 depacketizer: %w", err)
		}
		return &videoTrack{
			codec: codecH264, media: medi, format: h264f, depacketize: dec.Decode,
			incomplete: func(err error) bool {
				return errors.Is(err, rtph264.ErrMorePacketsNeeded) || errors.Is(err, rtph264.ErrNonStartingPacketAndNoPrevious)
			},
			params: func() [][]byte {
				sps, pps := h264f.SafeParams()
				return nonEmpty(sps, pps)
			},
		}, nil
	}
	var h265f *format.H265
	if medi := desc.FindFormat(&h265f); medi != nil {
		dec, err := h265f.CreateDecoder()
		if err != nil {
			return nil, fmt.Errorf("H.265 depacketizer: %w", err)
		}
		return &videoTrack{
			codec: codecH265, media: medi, format: h265f, depacketize: dec.Decode,
			incomplete: func(err error) bool {
				return errors.Is(err, rtph265.ErrMorePacketsNeeded) || errors.Is(err, rtph265.ErrNonStartingPacketAndNoPrevious)
			},
			params: func() [][]byte {
				vps, sps, pps := h265f.SafeParams()
				return nonEmpty(vps, sps, pps)
			},
		}, nil
	}
	return nil, fmt.Errorf("no H.264 or H.265 video in the stream (found %s)", describeFormats(desc))
}

func nonEmpty(ps ...[]byte) [][]byte {
	var out [][]byte
	for _, p := range ps {
		if len(p) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// describeFormats lists the stream's media as "video M-JPEG, audio G711".
func describeFormats(desc *description.Session) string {
	var parts []string
	for _, m := range desc.Medias {
		for _, f := range m.Formats {
			parts = append(parts, fmt.Sprintf("%s %s", m.Type, f.Codec()))
		}
	}
	if len(parts) == 0 {
		return "no media"
	}
	return strings.Join(parts, ", ")
}
