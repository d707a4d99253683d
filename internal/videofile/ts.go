package videofile

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"
	"github.com/bluenviron/mediacommon/v2/pkg/formats/mpegts"
)

// tsReader demuxes an MPEG-TS file: the demuxer calls back with each access unit, queued
// until Next takes it.
type tsReader struct {
	mr      *mpegts.Reader
	td      mpegts.TimeDecoder
	first   int64
	started bool
	queue   []AccessUnit
}

func (r *Reader) openTS() error {
	t := &tsReader{mr: &mpegts.Reader{R: bufio.NewReaderSize(r.f, 64<<10)}}
	if err := t.mr.Initialize(); err != nil {
		return fmt.Errorf("not an MPEG-TS file: %w", err)
	}
	var found []string
	for _, tr := range t.mr.Tracks() {
		switch tr.Codec.(type) {
		case *mpegts.CodecH264:
			r.Codec = "H.264"
			t.mr.OnDataH264(tr, t.onAU(func(n []byte) bool { return h264.NALUType(n[0]&0x1F) == h264.NALUTypeAccessUnitDelimiter }))
		case *mpegts.CodecH265:
			r.Codec = "H.265"
			t.mr.OnDataH265(tr, t.onAU(func(n []byte) bool { return h265.NALUType((n[0]>>1)&0x3F) == h265.NALUType_AUD_NUT }))
		default:
			found = append(found, tsCodecName(tr.Codec))
			continue
		}
		r.next = t.next
		return nil
	}
	return noTrack(found)
}

// onAU returns the demuxer callback that queues access units without their delimiters.
func (t *tsReader) onAU(isAUD func([]byte) bool) func(pts, dts int64, au [][]byte) error {
	return func(pts, dts int64, au [][]byte) error {
		pts, dts = t.td.Decode(pts), t.td.Decode(dts)
		if !t.started {
			t.started, t.first = true, dts
		}
		nalus := au[:0:0]
		for _, n := range au {
			if len(n) > 0 && !isAUD(n) {
				nalus = append(nalus, n)
			}
		}
		t.queue = append(t.queue, AccessUnit{PTS: pts - t.first, DTS: dts - t.first, NALUs: nalus})
		return nil
	}
}

func (t *tsReader) next() (AccessUnit, error) {
	for len(t.queue) == 0 {
		if err := t.mr.Read(); err != nil {
			return AccessUnit{}, err
		}
	}
	au := t.queue[0]
	t.queue = t.queue[1:]
	return au, nil
}

// noTrack is the error of a file without H.264 or H.265 video, listing what it has.
func noTrack(found []string) error {
	if len(found) == 0 {
		found = []string{"no tracks"}
	}
	return fmt.Errorf("no H.264 or H.265 track (found %s)", strings.Join(found, ", "))
}

// tsCodecName names a codec the way users know it: *mpegts.CodecMPEG4Audio is "AAC".
func tsCodecName(c mpegts.Codec) string { return codecName(fmt.Sprintf("%T", c), "*mpegts.Codec") }

func codecName(typ, prefix string) string {
	name := strings.TrimPrefix(typ, prefix)
	switch name {
	case "MPEG4Audio":
		return "AAC"
	case "MPEG4AudioLATM":
		return "AAC-LATM"
	case "H265":
		return "H.265"
	case "H264":
		return "H.264"
	case "AC3":
		return "AC-3"
	}
	return name
}
