// Package tsfile reads the H.264 or H.265 track of an MPEG-TS file as a sequence of access
// units, pull-style, on top of mediacommon's MPEG-TS demuxer. The sample camera and the tests
// use it.
package tsfile

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"
	"github.com/bluenviron/mediacommon/v2/pkg/formats/mpegts"
)

// AccessUnit is one H.264 access unit with its timestamps in 90 kHz units, unwrapped and
// relative to the first DTS of the file.
type AccessUnit struct {
	PTS, DTS int64
	NALUs    [][]byte // access unit delimiters removed
}

// Reader reads access units of a file's first H.264 or H.265 track.
type Reader struct {
	Codec   string // "H.264" or "H.265"
	f       *os.File
	mr      *mpegts.Reader
	td      mpegts.TimeDecoder
	first   int64
	started bool
	queue   []AccessUnit
}

// Open opens file and reads its program tables. Errors name the file and say whether it is
// not MPEG-TS or has no H.264 or H.265 track (listing the codecs found).
func Open(file string) (*Reader, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	r := &Reader{f: f, mr: &mpegts.Reader{R: bufio.NewReaderSize(f, 64<<10)}}
	if err := r.mr.Initialize(); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: not an MPEG-TS file: %w", file, err)
	}
	var found []string
	for _, t := range r.mr.Tracks() {
		switch t.Codec.(type) {
		case *mpegts.CodecH264:
			r.Codec = "H.264"
			r.mr.OnDataH264(t, r.onAU(func(n []byte) bool { return h264.NALUType(n[0]&0x1F) == h264.NALUTypeAccessUnitDelimiter }))
		case *mpegts.CodecH265:
			r.Codec = "H.265"
			r.mr.OnDataH265(t, r.onAU(func(n []byte) bool { return h265.NALUType((n[0]>>1)&0x3F) == h265.NALUType_AUD_NUT }))
		default:
			found = append(found, codecName(t.Codec))
			continue
		}
		return r, nil
	}
	f.Close()
	if len(found) == 0 {
		found = []string{"no tracks"}
	}
	return nil, fmt.Errorf("%s: no H.264 or H.265 track (found %s)", file, strings.Join(found, ", "))
}

// onAU returns the demuxer callback that queues access units without their delimiters.
func (r *Reader) onAU(isAUD func([]byte) bool) func(pts, dts int64, au [][]byte) error {
	return func(pts, dts int64, au [][]byte) error {
		pts, dts = r.td.Decode(pts), r.td.Decode(dts)
		if !r.started {
			r.started, r.first = true, dts
		}
		nalus := au[:0:0]
		for _, n := range au {
			if len(n) > 0 && !isAUD(n) {
				nalus = append(nalus, n)
			}
		}
		r.queue = append(r.queue, AccessUnit{PTS: pts - r.first, DTS: dts - r.first, NALUs: nalus})
		return nil
	}
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// Next returns the next access unit, or io.EOF after the last one.
func (r *Reader) Next() (AccessUnit, error) {
	for len(r.queue) == 0 {
		if err := r.mr.Read(); err != nil {
			return AccessUnit{}, err
		}
	}
	au := r.queue[0]
	r.queue = r.queue[1:]
	return au, nil
}

// codecName names a codec the way users know it: *mpegts.CodecMPEG4Audio is "AAC".
func codecName(c mpegts.Codec) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", c), "*mpegts.Codec")
	switch name {
	case "MPEG4Audio":
		return "AAC"
	case "MPEG4AudioLATM":
		return "AAC-LATM"
	case "H265":
		return "H.265"
	case "AC3":
		return "AC-3"
	}
	return name
}
