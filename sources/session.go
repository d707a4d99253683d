package sources

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/base"
	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/bluenviron/gortsplib/v4/pkg/format/rtph264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/pion/rtp"

	"github.com/visiond/visiond/infer"
)

// accessUnit is one H.264 access unit in Annex-B form, queued for the decoder.
type accessUnit struct {
	data []byte    // Annex-B; returned to the session's spare list after decoding
	key  bool      // holds an IDR slice
	gap  bool      // something before it was lost: decoding must restart at a key unit
	at   time.Time // receive time
}

// runSession runs one RTSP session until it fails or ctx ends. onlineAt is when it decoded
// its first frame (zero if it never did).
func (c *Camera) runSession(ctx context.Context) (onlineAt time.Time, err error) {
	u, err := base.ParseURL(c.URL)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid URL: %w", err)
	}
	var transport *gortsplib.Transport
	switch strings.ToLower(c.Transport) {
	case "tcp":
		t := gortsplib.TransportTCP
		transport = &t
	case "udp":
		t := gortsplib.TransportUDP
		transport = &t
	case "auto":
	default:
		return time.Time{}, fmt.Errorf("unknown transport %q (want tcp, udp or auto)", c.Transport)
	}

	var gap atomic.Bool // set on loss; carried by the next queued access unit
	var lossLog, dropLog, depacketLog rateLog
	client := &gortsplib.Client{
		Scheme:       u.Scheme,
		Host:         u.Host,
		Transport:    transport,
		ReadTimeout:  c.readTimeout,
		WriteTimeout: c.readTimeout,
		OnTransportSwitch: func(err error) {
			c.log.Info("RTSP transport switched", "reason", c.redactor.Scrub(err.Error()))
		},
		OnPacketsLost: func(lost uint64) {
			gap.Store(true)
			lossLog.warn(c.log, "RTP packets lost", "lost", lost)
		},
		OnDecodeError: func(err error) {
			depacketLog.warn(c.log, "RTP/RTCP decode error", "error", c.redactor.Scrub(err.Error()))
		},
	}
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
	var forma *format.H264
	medi := desc.FindFormat(&forma)
	if medi == nil {
		return time.Time{}, fmt.Errorf("no H.264 media in the stream (found %s)", describeFormats(desc))
	}
	rtpDec, err := forma.CreateDecoder()
	if err != nil {
		return time.Time{}, fmt.Errorf("H.264 depacketizer: %w", err)
	}
	if _, err := client.Setup(desc.BaseURL, medi, 0, 0); err != nil {
		return time.Time{}, fmt.Errorf("SETUP: %w", err)
	}

	dec, err := newDecoder()
	if err != nil {
		return time.Time{}, err
	}
	loop := &decodeLoop{cam: c, dec: dec, needKey: true}
	if sps, pps := forma.SafeParams(); sps != nil || pps != nil {
		var params [][]byte
		for _, p := range [][]byte{sps, pps} {
			if len(p) > 0 {
				params = append(params, p)
			}
		}
		_ = dec.decode(appendAnnexB(nil, params), nil) // a bad SPS/PPS shows up on the first frames
	}

	queue := make(chan accessUnit, queueLen)
	spare := make(chan []byte, queueLen+2)
	stopDecode := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopDecode:
				return
			case au := <-queue:
				loop.handle(au)
				select {
				case spare <- au.data:
				default:
				}
			}
		}
	}()
	defer func() {
		client.Close() // no more callbacks after this
		close(stopDecode)
		wg.Wait()
		dec.close()
		onlineAt = loop.onlineAt
	}()

	client.OnPacketRTP(medi, forma, func(pkt *rtp.Packet) {
		nalus, err := rtpDec.Decode(pkt)
		if err != nil {
			if !errors.Is(err, rtph264.ErrMorePacketsNeeded) && !errors.Is(err, rtph264.ErrNonStartingPacketAndNoPrevious) {
				gap.Store(true)
				depacketLog.warn(c.log, "H.264 depacketize error", "error", err.Error())
			}
			return
		}
		var buf []byte
		select {
		case buf = <-spare:
		default:
		}
		au := accessUnit{
			data: appendAnnexB(buf[:0], nalus),
			key:  isRandomAccess(nalus),
			gap:  gap.Swap(false),
			at:   time.Now(),
		}
		select {
		case queue <- au:
		default:
			c.dropped.Add(1)
			gap.Store(true)
			dropLog.warn(c.log, "decode queue full, access units dropped")
		}
	})

	if _, err := client.Play(nil); err != nil {
		return time.Time{}, fmt.Errorf("PLAY: %w", err)
	}
	c.log.Debug("playing", "sdp_sps", forma.SPS != nil)
	err = client.Wait()
	if err == nil {
		err = errors.New("RTSP session closed")
	}
	return time.Time{}, err
}

// decodeLoop is the decode goroutine's state for one session.
type decodeLoop struct {
	cam      *Camera
	dec      *decoder
	needKey  bool // skip access units until the next random-access one
	at       time.Time
	lb       infer.Letterbox // geometry of the last frame
	onlineAt time.Time
	errLog   rateLog
	onFrame  func(w, h int)
}

// handle decodes one access unit; decoding errors only make it wait for the next
// random-access unit.
func (l *decodeLoop) handle(au accessUnit) {
	if au.gap {
		l.needKey = true
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
	if err := l.dec.decode(au.data, l.onFrame); err != nil {
		l.needKey = true
		l.errLog.warn(l.cam.log, "H.264 decode error, waiting for the next IDR", "error", err.Error())
	}
}

// frame handles one decoded frame: count it, take a free buffer, scale into it, hand it out.
func (l *decodeLoop) frame(w, h int) {
	c := l.cam
	seq := c.frames.Add(1)
	if l.onlineAt.IsZero() {
		l.onlineAt = time.Now()
		c.setOnline()
	}
	lb := infer.NewLetterbox(w, h, c.InputW, c.InputH)
	if lb != l.lb {
		c.log.Info("stream geometry", "width", w, "height", h,
			"scaled", fmt.Sprintf("%dx%d", lb.ScaledW, lb.ScaledH), "pad", fmt.Sprintf("%d,%d", lb.PadX, lb.PadY))
		l.lb = lb
	}
	var f *Frame
	select {
	case f = <-c.pool:
	default:
		c.dropped.Add(1)
		return
	}
	if f.padded != lb {
		fillPad(f.Pix)
		f.padded = lb
	}
	if err := l.dec.scaleInto(f.Pix, lb); err != nil {
		c.pool <- f
		f.padded = infer.Letterbox{} // the failed call may have left anything there
		l.errLog.warn(c.log, "scale failed", "error", err.Error())
		return
	}
	f.Camera = c.ID
	f.Seq = seq
	f.Captured = l.at
	f.Letterbox = lb
	f.held.Store(true)
	c.delivered.Add(1)
	if c.OnFrame == nil {
		f.Release()
		return
	}
	c.OnFrame(f)
}

// fillPad paints the whole buffer with the letterbox gray; the scaled image then covers
// its part.
func fillPad(p []byte) {
	if len(p) == 0 {
		return
	}
	p[0] = infer.PadValue
	for n := 1; n < len(p); n *= 2 {
		copy(p[n:], p[:n])
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

// isRandomAccess reports whether the access unit holds an IDR slice.
func isRandomAccess(nalus [][]byte) bool {
	for _, n := range nalus {
		if len(n) > 0 && h264.NALUType(n[0]&0x1F) == h264.NALUTypeIDR {
			return true
		}
	}
	return false
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
