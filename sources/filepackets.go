package sources

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"

	"github.com/visiond/visiond/internal/videofile"
)

// filePackets hands a file camera's access units to Camera.OnPacket, as its frames are
// played: the file demuxed beside OpenCV's decoding (an MPEG-TS file with H.264 or H.265
// video, as the sample is, or an MP4: OpenCV gives no packets), each unit sent when the frame shown at
// its decoding time is, at that frame's capture time moved by the unit's own offset. Each
// loop of the file is a session of its own (a new timeline). Session goroutine only.
type filePackets struct {
	c       *Camera
	r       *videofile.Reader
	next    *videofile.AccessUnit // read ahead, not sent yet
	session uint64
	first   int64 // the presentation time of the file's first unit: frame 1's
	last    int   // the frame number last played: a lower one is a new loop
	tap     *packetTap
}

// openFilePackets starts the file's first session; nil with the reason when the file is not
// one whose packets can be read (neither MPEG-TS nor MP4, or no H.264 or H.265 video).
func openFilePackets(c *Camera) (*filePackets, error) {
	if c.OnPacket == nil {
		return nil, nil
	}
	p := &filePackets{c: c}
	if err := p.rewind(); err != nil {
		return nil, err
	}
	return p, nil
}

// rewind starts the file again, as a new session.
func (p *filePackets) rewind() error {
	if p.r != nil {
		_ = p.r.Close()
		p.r = nil
	}
	r, err := videofile.Open(p.c.File)
	if err != nil {
		return fmt.Errorf("its packets cannot be read for clips (an MPEG-TS or MP4 file with H.264 or H.265 video can): %w", err)
	}
	p.r, p.next, p.session = r, nil, p.c.sessions.Add(1)
	p.tap = &packetTap{fn: p.c.OnPacket, pkt: Packet{Session: p.session, Codec: r.Codec, Params: r.Params, ClockRate: 90000}}
	au, err := r.Next()
	if err != nil {
		return fmt.Errorf("its packets cannot be read for clips: %w", err)
	}
	p.first, p.next = au.PTS, &au
	return nil
}

// frame sends the units up to frame n of the file (from 1, as read since the open or the
// last rewind), played at captured, the file playing at period a frame.
func (p *filePackets) frame(n int, captured time.Time, period time.Duration) {
	if n <= p.last { // the file looped: a new session
		if err := p.rewind(); err != nil {
			p.c.log.Warn("file camera: no packets for its clips", "error", err.Error())
			p.close()
		}
	}
	p.last = n
	shown := p.first + int64(n-1)*int64(period)*90000/int64(time.Second)
	for p.r != nil {
		if p.next == nil {
			au, err := p.r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					p.c.log.Debug("file camera: its packets end early", "error", err.Error())
				}
				p.close()
				return
			}
			p.next = &au
		}
		au := p.next
		if au.DTS > shown {
			return
		}
		p.next = nil
		key := isKey(p.tap.pkt.Codec, au.NALUs)
		at := captured.Add(time.Duration(au.PTS-shown) * time.Second / 90000)
		p.tap.sendAt(au.NALUs, key, au.PTS-p.first, at)
	}
}

// close ends the packets of the session; a next loop opens them again.
func (p *filePackets) close() {
	if p != nil && p.r != nil {
		_ = p.r.Close()
		p.r = nil
	}
}

// isKey reports whether an access unit of codec (CodecH264, CodecH265) is a random-access one.
func isKey(codec string, nalus [][]byte) bool {
	if codec == CodecH265 {
		return h265.IsRandomAccess(nalus)
	}
	return h264.IsRandomAccess(nalus)
}

// ReadPackets reads a whole MPEG-TS or MP4 file's access units as one session's packets, as a
// camera's session hands them over, at capture times from t0 on by their timestamps: for the
// tests and tools of what takes packets (clips, the live view) without a camera.
func ReadPackets(file string, session uint64, t0 time.Time) ([]Packet, error) {
	r, err := videofile.Open(file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Packet
	for {
		au, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, Packet{Session: session, Codec: r.Codec, NALUs: au.NALUs, Key: isKey(r.Codec, au.NALUs), PTS: au.PTS,
			ClockRate: 90000, At: t0.Add(time.Duration(au.PTS) * time.Second / 90000)})
	}
}
