// Package videofile reads the H.264 or H.265 track of a video file as a sequence of access
// units, pull-style: MPEG-TS on mediacommon's demuxer, MP4 (progressive, the moov anywhere)
// on its pmp4 reader. The sample camera, file cameras' clips and the tests use it.
package videofile

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// AccessUnit is one access unit with its timestamps in 90 kHz units, relative to the first
// DTS of the file.
type AccessUnit struct {
	PTS, DTS int64
	NALUs    [][]byte // access unit delimiters removed
}

// Reader reads the access units of a file's first H.264 or H.265 track.
type Reader struct {
	Codec     string   // "H.264" or "H.265"
	Container string   // "MPEG-TS" or "MP4"
	Params    [][]byte // the parameter sets the container holds apart from the stream (MP4: avcC/hvcC; H.265 VPS, SPS, PPS; H.264 SPS, PPS); MPEG-TS: none, they come in the stream
	f         *os.File
	next      func() (AccessUnit, error)
}

// Open opens file and reads its headers. Errors name the file and say whether it is
// neither MPEG-TS nor MP4, or has no H.264 or H.265 track (listing the codecs found).
func Open(file string) (*Reader, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	var head [12]byte
	n, _ := io.ReadFull(f, head[:])
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	r := &Reader{f: f}
	switch {
	case n >= 8 && bytes.Equal(head[4:8], []byte("ftyp")):
		r.Container = "MP4"
		err = r.openMP4()
	case n >= 1 && head[0] == 0x47:
		r.Container = "MPEG-TS"
		err = r.openTS()
	default:
		err = fmt.Errorf("neither an MPEG-TS nor an MP4 file")
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return r, nil
}

// Close closes the file.
func (r *Reader) Close() error { return r.f.Close() }

// Next returns the next access unit in decoding order, or io.EOF after the last one.
func (r *Reader) Next() (AccessUnit, error) { return r.next() }
