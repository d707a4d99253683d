// Package tsfile reads the H.264 track of an MPEG-TS file as a sequence of access units,
// pull-style, on top of mediacommon's MPEG-TS demuxer. The sample camera and the tests use it.
package tsfile

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/formats/mpegts"
)

// AccessUnit is one H.264 access unit with its timestamps in 90 kHz units, unwrapped and
// relative to the first DTS of the file.
type AccessUnit struct {
	PTS, DTS int64
	NALUs    [][]byte // access unit delimiters removed
}

// Reader reads access units of a file's first H.264 track.
type Reader struct {
	f       *os.File
	mr      *mpegts.Reader
	td      mpegts.TimeDecoder
	first   int64
	started bool
	queue   []AccessUnit
}

// Open opens file and reads its program tables. Errors name the file and say whether it is
// not MPEG-TS or has no H.264 track (listing the codecs found).
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
	var track *mpegts.Track
	var found []string
	for _, t := range r.mr.Tracks() {
		if _, ok := t.Codec.(*mpegts.CodecH264); ok {
			track = t
			break
		}
		found = append(found, codecName(t.Codec))
	}
	if track == nil {
		f.Close()
		if len(found) == 0 {
			found = []string{"no tracks"}
		}
		return nil, fmt.Errorf("%s: no H.264 track (found %s)", file, strings.Join(found, ", "))
	}
	r.mr.OnDataH264(track, func(pts, dts int64, au [][]byte) error {
		pts, dts = r.td.Decode(pts), r.td.Decode(dts)
		if !r.started {
			r.started, r.first = true, dts
		}
		nalus := au[:0:0]
		for _, n := range au {
			if len(n) > 0 && h264.NALUType(n[0]&0x1F) != h264.NALUTypeAccessUnitDelimiter {
				nalus = append(nalus, n)
			}
		}
		r.queue = append(r.queue, AccessUnit{PTS: pts - r.first, DTS: dts - r.first, NALUs: nalus})
		return nil
	})
	return r, nil
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
