package clips

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"
	"github.com/bluenviron/mediacommon/v2/pkg/formats/mp4"
	"github.com/bluenviron/mediacommon/v2/pkg/formats/pmp4"

	"github.com/visiond/visiond/sources"
)

// timescale is the MP4 track's clock: RTP's 90 kHz for H.264 and H.265, the units' own.
const timescale = 90000

// maxStep is the longest step between two units' decoding times taken as the stream's own:
// a longer one, or one backwards, is a jump of the camera's clock (or a new timeline), and
// the clip goes on as if the unit came one frame after the last.
const maxStep = 10 * timescale

// sample is one access unit written to a clip's spool file.
type sample struct {
	off  int64
	size uint32
	dts  int64 // on the clip's timeline, from 0 at its first unit
	pts  int64
	key  bool
}

// mp4Writer writes one clip: its units' data go to a spool file as they come (so a clip's
// memory is its sample table, 32 bytes a frame), and finish writes the MP4, the moov first,
// from the table and the spool.
type mp4Writer struct {
	params  *Params
	session uint64
	spool   *os.File
	w       *bufio.Writer
	off     int64
	samples []sample
	start   time.Time // capture time of the first unit
	last    time.Time // of the latest
	origin  int64     // the first unit's PTS: the timeline's 0
	shift   int64     // added to every unit's times after a jump
	prevDTS int64
	lastPTS int64
	h264dts h264.DTSExtractor
	h265dts h265.DTSExtractor
	notes   []string
	jumps   int
	extract int // units whose decoding time could not be worked out (taken as their presentation time)
	nalus   [][]byte

	// What Info says of its pre-roll (Recorder.open).
	preCapture, preRoll time.Duration
	short, continues    string
}

// newMP4Writer starts a clip at key unit u, spooling into a new file in dir.
func newMP4Writer(dir, name string, u *unit) (*mp4Writer, error) {
	f, err := os.CreateTemp(dir, name+"-*.spool")
	if err != nil {
		return nil, fmt.Errorf("clip spool: %w", err)
	}
	w := &mp4Writer{params: u.params, spool: f, w: bufio.NewWriterSize(f, 256<<10), start: u.at, origin: u.pts}
	w.h264dts.Initialize()
	w.h265dts.Initialize()
	return w, nil
}

// splitAVCC returns the NAL units of AVCC data, reusing dst.
func splitAVCC(dst [][]byte, data []byte) [][]byte {
	dst = dst[:0]
	for len(data) >= 4 {
		n := int(binary.BigEndian.Uint32(data))
		data = data[4:]
		if n > len(data) {
			break
		}
		dst = append(dst, data[:n])
		data = data[n:]
	}
	return dst
}

// add appends unit u (of the writer's params and session).
func (w *mp4Writer) add(u *unit) error {
	pts := u.pts - w.origin + w.shift
	if n := len(w.samples); n > 0 {
		// A jump of the camera's clock (forwards, or back by more than B-frames go): the
		// clip goes on one frame after the last unit.
		if step := pts - w.lastPTS; step > maxStep || step < -timescale {
			delta := w.lastPTS + w.frameStep() - pts
			w.shift += delta
			pts += delta
			w.jumps++
			if w.jumps == 1 {
				w.notes = append(w.notes, fmt.Sprintf("timestamps jumped by %.1f s at %s: the clip goes on from the frame before",
					float64(-delta)/timescale, u.at.UTC().Format(time.RFC3339Nano)))
			}
		}
	}
	// The decoding time: mediacommon's extractors read it from the slices' picture order
	// (B-frames decode before they show); the parameter sets go in front of a keyframe, as
	// the extractors expect them there.
	w.nalus = w.nalus[:0]
	if u.key {
		p := u.params
		if p.Codec == sources.CodecH265 {
			w.nalus = append(w.nalus, p.VPS, p.SPS, p.PPS)
		} else {
			w.nalus = append(w.nalus, p.SPS, p.PPS)
		}
	}
	w.nalus = append(w.nalus, splitAVCC(nil, u.data)...)
	var dts int64
	var err error
	if u.params.Codec == sources.CodecH265 {
		dts, err = w.h265dts.Extract(w.nalus, pts)
	} else {
		dts, err = w.h264dts.Extract(w.nalus, pts)
	}
	if err != nil || len(w.samples) > 0 && dts <= w.prevDTS {
		dts = max(pts, w.prevDTS+1)
		if len(w.samples) == 0 {
			dts = pts
		}
		w.extract++
	}
	if pts < dts {
		pts = dts
	}
	if _, err := w.w.Write(u.data); err != nil {
		return fmt.Errorf("clip spool: %w", err)
	}
	w.samples = append(w.samples, sample{off: w.off, size: uint32(len(u.data)), dts: dts, pts: pts, key: u.key})
	w.off += int64(len(u.data))
	w.prevDTS, w.lastPTS = dts, pts
	w.last = u.at
	return nil
}

// frameStep is the last step between decoding times, or a tenth of a second.
func (w *mp4Writer) frameStep() int64 {
	if n := len(w.samples); n >= 2 {
		if s := w.samples[n-1].dts - w.samples[n-2].dts; s > 0 && s <= maxStep {
			return s
		}
	}
	return timescale / 10
}

// end is the end of the clip's last frame shown: the latest presentation time and a frame.
func (w *mp4Writer) end() int64 {
	var last int64
	for _, s := range w.samples {
		last = max(last, s.pts)
	}
	return last + w.frameStep()
}

// duration is the clip's length so far, from its first frame shown to the end of its last,
// the last frame's own duration included.
func (w *mp4Writer) duration() time.Duration {
	if len(w.samples) == 0 {
		return 0
	}
	return time.Duration(w.end()-w.samples[0].pts) * time.Second / timescale
}

// mp4Info is what finish says of the clip written.
type mp4Info struct {
	Frames   int
	Duration time.Duration
	Bytes    int64
}

// finish writes the MP4 to path and removes the spool.
func (w *mp4Writer) finish(path string) (mp4Info, error) {
	defer w.abort()
	if len(w.samples) == 0 {
		return mp4Info{}, errors.New("clip has no frames")
	}
	if err := w.w.Flush(); err != nil {
		return mp4Info{}, fmt.Errorf("clip spool: %w", err)
	}
	if w.extract > 0 {
		w.notes = append(w.notes, fmt.Sprintf("%d frames' decoding order could not be read: they play in arrival order", w.extract))
	}
	tr := &pmp4.Track{ID: 1, TimeScale: timescale}
	p := w.params
	if p.Codec == sources.CodecH265 {
		tr.Codec = &mp4.CodecH265{VPS: p.VPS, SPS: p.SPS, PPS: p.PPS}
	} else {
		tr.Codec = &mp4.CodecH264{SPS: p.SPS, PPS: p.PPS}
	}
	buf := make([]byte, 0, 256<<10)
	tr.Samples = make([]*pmp4.Sample, len(w.samples))
	// The last sample lasts to the end of the last frame shown: with B-frames the frame shown
	// last is not the one decoded last, and frames shown past the samples' durations would
	// fall outside the edit list.
	end := w.end()
	for i, s := range w.samples {
		dur := end - s.dts
		if i+1 < len(w.samples) {
			dur = w.samples[i+1].dts - s.dts
		}
		s := s
		tr.Samples[i] = &pmp4.Sample{
			Duration: uint32(dur), PTSOffset: int32(s.pts - s.dts), IsNonSyncSample: !s.key, PayloadSize: s.size,
			GetPayload: func() ([]byte, error) {
				if cap(buf) < int(s.size) {
					buf = make([]byte, s.size)
				}
				b := buf[:s.size]
				if _, err := w.spool.ReadAt(b, s.off); err != nil {
					return nil, fmt.Errorf("clip spool: %w", err)
				}
				return b, nil
			},
		}
	}
	tr.TimeOffset = -int32(w.samples[0].pts - w.samples[0].dts) // the first frame shows at 0
	f, err := os.Create(path)
	if err != nil {
		return mp4Info{}, err
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	err = (&pmp4.Presentation{Tracks: []*pmp4.Track{tr}}).Marshal(bw)
	if err == nil {
		err = bw.Flush()
	}
	var size int64
	if err == nil {
		var st os.FileInfo
		if st, err = f.Stat(); err == nil {
			size = st.Size()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return mp4Info{}, fmt.Errorf("write %s: %w", path, err)
	}
	return mp4Info{Frames: len(w.samples), Duration: w.duration(), Bytes: size}, nil
}

// abort removes the spool.
func (w *mp4Writer) abort() {
	if w.spool == nil {
		return
	}
	name := w.spool.Name()
	_ = w.spool.Close()
	_ = os.Remove(name)
	w.spool = nil
}
