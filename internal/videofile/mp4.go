package videofile

import (
	"errors"
	"fmt"
	"io"
	"strings"

	gomp4 "github.com/abema/go-mp4"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"
)

// mp4Reader reads the samples of an MP4 file's video track in their order in the track
// (decoding order), each a length-prefixed (AVCC) payload read from the file when its turn
// comes. The sample table is abema/go-mp4's Probe (what mediacommon's MP4 code is built
// on), which reads files of every writer (ffmpeg's, cameras'), moov first or last.
type mp4Reader struct {
	r       io.ReadSeeker
	samples []mp4Sample
	i       int
	scale   int64 // the track's time scale, units a second
	lenSize int   // the bytes of each NAL unit's length prefix
	buf     []byte
}

// mp4Sample is one sample: where it is and its times, in the track's units.
type mp4Sample struct {
	offset   int64
	size     uint32
	dts, cto int64
}

func (r *Reader) openMP4() error {
	info, err := gomp4.Probe(r.f)
	if err != nil {
		return fmt.Errorf("an MP4 file that cannot be read: %w", err)
	}
	traks, err := gomp4.ExtractBox(r.f, nil, gomp4.BoxPath{gomp4.BoxTypeMoov(), gomp4.BoxTypeTrak()})
	if err != nil || len(traks) != len(info.Tracks) {
		return fmt.Errorf("an MP4 file that cannot be read: its tracks: %v", err)
	}
	var found []string
	for i, trak := range traks {
		entry, params, lenSize, err := mp4SampleEntry(r.f, trak)
		if err != nil {
			return fmt.Errorf("track %d: %w", i+1, err)
		}
		switch entry {
		case "avc1", "avc3":
			r.Codec = "H.264"
		case "hvc1", "hev1":
			r.Codec = "H.265"
		case "":
			continue
		default:
			found = append(found, mp4CodecName(entry))
			continue
		}
		t := info.Tracks[i]
		if len(t.Samples) == 0 && len(info.Segments) > 0 {
			return errors.New("a fragmented MP4 (its samples in movie fragments), which cannot be read yet")
		}
		if t.Timescale == 0 {
			return fmt.Errorf("its %s track has a time scale of 0", r.Codec)
		}
		samples, err := mp4Samples(t)
		if err != nil {
			return fmt.Errorf("its %s track: %w", r.Codec, err)
		}
		r.Params = params
		m := &mp4Reader{r: r.f, samples: samples, scale: int64(t.Timescale), lenSize: lenSize}
		r.next = m.next
		return nil
	}
	return noTrack(found)
}

// mp4SampleEntry reads a track's sample entry: its type ("" when the track is not video),
// and for H.264 and H.265 the parameter sets of its avcC or hvcC and the length prefix size.
func mp4SampleEntry(r io.ReadSeeker, trak *gomp4.BoxInfo) (string, [][]byte, int, error) {
	stsd := gomp4.BoxPath{gomp4.BoxTypeMdia(), gomp4.BoxTypeMinf(), gomp4.BoxTypeStbl(), gomp4.BoxTypeStsd()}
	hdlr, err := gomp4.ExtractBoxWithPayload(r, trak, gomp4.BoxPath{gomp4.BoxTypeMdia(), gomp4.BoxTypeHdlr()})
	if err != nil || len(hdlr) != 1 {
		return "", nil, 0, fmt.Errorf("no handler (hdlr): %v", err)
	}
	if h := hdlr[0].Payload.(*gomp4.Hdlr); string(h.HandlerType[:]) != "vide" {
		return "", nil, 0, nil
	}
	entries, err := gomp4.ExtractBox(r, trak, append(stsd, gomp4.BoxTypeAny()))
	if err != nil || len(entries) == 0 {
		return "", nil, 0, fmt.Errorf("no sample description (stsd): %v", err)
	}
	if len(entries) > 1 {
		return "", nil, 0, fmt.Errorf("%d sample descriptions: one is supported", len(entries))
	}
	typ := entries[0].Type.String()
	var cfg gomp4.BoxType
	switch typ {
	case "avc1", "avc3":
		cfg = gomp4.BoxTypeAvcC()
	case "hvc1", "hev1":
		cfg = gomp4.BoxTypeHvcC()
	default:
		return typ, nil, 0, nil
	}
	boxes, err := gomp4.ExtractBoxWithPayload(r, entries[0], gomp4.BoxPath{cfg})
	if err != nil || len(boxes) != 1 {
		return "", nil, 0, fmt.Errorf("%s without its %s: %v", typ, cfg, err)
	}
	var params [][]byte
	var lenSize int
	switch c := boxes[0].Payload.(type) {
	case *gomp4.AVCDecoderConfiguration:
		for _, ps := range append(append([]gomp4.AVCParameterSet(nil), c.SequenceParameterSets...), c.PictureParameterSets...) {
			params = append(params, ps.NALUnit)
		}
		lenSize = int(c.LengthSizeMinusOne) + 1
	case *gomp4.HvcC:
		for _, a := range c.NaluArrays { // VPS, SPS and PPS; an encoder's SEI may be there too
			if typ := h265.NALUType(a.NaluType); typ == h265.NALUType_VPS_NUT || typ == h265.NALUType_SPS_NUT || typ == h265.NALUType_PPS_NUT {
				for _, n := range a.Nalus {
					params = append(params, n.NALUnit)
				}
			}
		}
		lenSize = int(c.LengthSizeMinusOne) + 1
	}
	return typ, params, lenSize, nil
}

// mp4Samples lays out a track's samples: their offsets from the chunks (each chunk's
// samples back to back), their decoding times from the time deltas.
func mp4Samples(t *gomp4.Track) ([]mp4Sample, error) {
	out := make([]mp4Sample, 0, len(t.Samples))
	var dts int64
	k := 0
	for _, c := range t.Chunks {
		off := int64(c.DataOffset)
		for range c.SamplesPerChunk {
			if k == len(t.Samples) {
				return nil, fmt.Errorf("its chunks hold more samples than its sample table (%d)", len(t.Samples))
			}
			s := t.Samples[k]
			out = append(out, mp4Sample{offset: off, size: s.Size, dts: dts, cto: s.CompositionTimeOffset})
			off += int64(s.Size)
			dts += int64(s.TimeDelta)
			k++
		}
	}
	if k != len(t.Samples) {
		return nil, fmt.Errorf("its chunks hold %d samples, its sample table %d", k, len(t.Samples))
	}
	return out, nil
}

func (m *mp4Reader) next() (AccessUnit, error) {
	if m.i == len(m.samples) {
		return AccessUnit{}, io.EOF
	}
	s := m.samples[m.i]
	m.i++
	if cap(m.buf) < int(s.size) {
		m.buf = make([]byte, s.size)
	}
	buf := m.buf[:s.size]
	if _, err := m.r.Seek(s.offset, io.SeekStart); err != nil {
		return AccessUnit{}, fmt.Errorf("sample %d: %w", m.i, err)
	}
	if _, err := io.ReadFull(m.r, buf); err != nil {
		return AccessUnit{}, fmt.Errorf("sample %d at byte %d: %w", m.i, s.offset, err)
	}
	nalus, err := splitLengthPrefixed(buf, m.lenSize)
	if err != nil {
		return AccessUnit{}, fmt.Errorf("sample %d: %w", m.i, err)
	}
	return AccessUnit{DTS: m.to90k(s.dts), PTS: m.to90k(s.dts + s.cto), NALUs: nalus}, nil
}

// splitLengthPrefixed splits a sample into its NAL units, each after a big-endian length of
// size bytes; the NAL units are copies (the buffer is reused).
func splitLengthPrefixed(b []byte, size int) ([][]byte, error) {
	if size == 4 {
		var a h264.AVCC
		if err := a.Unmarshal(b); err != nil {
			return nil, err
		}
		return cloneAll(a), nil
	}
	var out [][]byte
	for len(b) > 0 {
		if len(b) < size {
			return nil, fmt.Errorf("%d bytes left, less than a %d-byte length", len(b), size)
		}
		n := 0
		for _, c := range b[:size] {
			n = n<<8 | int(c)
		}
		b = b[size:]
		if n == 0 || n > len(b) {
			return nil, fmt.Errorf("a NAL unit of %d bytes where %d are left", n, len(b))
		}
		out = append(out, append([]byte(nil), b[:n]...))
		b = b[n:]
	}
	return out, nil
}

func cloneAll(nalus [][]byte) [][]byte {
	out := make([][]byte, len(nalus))
	for i, n := range nalus {
		out[i] = append([]byte(nil), n...)
	}
	return out
}

// to90k converts a time in the track's units to 90 kHz units.
func (m *mp4Reader) to90k(t int64) int64 { return t * 90000 / m.scale }

// mp4CodecName names a sample entry the way users know it.
func mp4CodecName(entry string) string {
	switch entry {
	case "mp4v":
		return "MPEG-4 Visual"
	case "mjpa", "mjpb", "jpeg":
		return "MJPEG"
	case "vp09":
		return "VP9"
	case "av01":
		return "AV1"
	}
	return strings.TrimSpace(entry)
}
