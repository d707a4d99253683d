package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The wire between the daemon and a capture process. The daemon writes one Request as JSON
// on the process's stdin; the process writes messages on fd 3: a header of HeaderLen bytes,
// then a payload of the length it gives.
//
//	offset  size  field
//	0       1     type: MsgOpened, MsgFrame or MsgError
//	1       1     channels (MsgFrame: 1, 3 or 4 bytes per pixel, 8-bit)
//	2       2     zero
//	4       4     width in pixels (MsgFrame), little-endian
//	8       4     height in pixels (MsgFrame)
//	12      4     payload length in bytes: width*height*channels (MsgFrame), the message (MsgError), 0 (MsgOpened)
//	16      8     unix nanoseconds: when the frame was read (MsgFrame), when the message was made (others)
//
// MsgOpened comes first, once the pipeline has opened; then frames; a MsgError says why the
// process is about to exit (the pipeline did not open, or ended or failed).

// Request is what a capture process is asked to do.
type Request struct {
	// Pipeline is the GStreamer pipeline (gst-launch syntax, ending in appsink) to read.
	// It is passed on stdin, not on the command line, which any user can read in /proc.
	Pipeline string `json:"pipeline"`
}

// MsgType is the type of a message from a capture process.
type MsgType byte

// Message types.
const (
	MsgOpened MsgType = 'O' // the pipeline opened; frames follow
	MsgFrame  MsgType = 'F' // a frame: the payload is its rows of pixels, BGR(A) or gray
	MsgError  MsgType = 'E' // the payload says why the process ends
)

// Limits of the wire, checked by Reader.
const (
	HeaderLen     = 24
	MaxDim        = 16384     // largest width or height of a frame
	MaxFrameLen   = 256 << 20 // largest frame payload (8K BGR is 100 MiB)
	MaxErrorLen   = 64 << 10  // largest error message
	maxRequestLen = 1 << 20   // largest request (the pipeline string)
)

// Message is one message's header, decoded and checked.
type Message struct {
	Type     MsgType
	Width    int
	Height   int
	Channels int
	Len      int       // payload length
	At       time.Time // when the frame was read, or the message made
	Text     string    // MsgError: the message (its payload, read by Next)
}

// ErrBadMessage is wrapped by every error about a malformed message.
var ErrBadMessage = errors.New("capture: bad message")

// Reader reads messages from a capture process. A MsgFrame's payload must be read with
// ReadFrame (or skipped with Skip) before the next Next.
type Reader struct {
	r       io.Reader
	hdr     [HeaderLen]byte
	pending int // payload bytes of the last frame not yet read
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader { return &Reader{r: r} }

// Next reads the next message's header (and a MsgError's text). io.EOF: the stream ended
// cleanly between messages.
func (r *Reader) Next() (Message, error) {
	if r.pending > 0 {
		if err := r.Skip(); err != nil {
			return Message{}, err
		}
	}
	if _, err := io.ReadFull(r.r, r.hdr[:]); err != nil {
		return Message{}, err
	}
	m, err := parseHeader(r.hdr[:])
	if err != nil {
		return Message{}, err
	}
	switch m.Type {
	case MsgError:
		b := make([]byte, m.Len)
		if _, err := io.ReadFull(r.r, b); err != nil {
			return Message{}, fmt.Errorf("%w: error message cut short: %v", ErrBadMessage, noEOF(err))
		}
		m.Text = string(b)
	case MsgFrame:
		r.pending = m.Len
	}
	return m, nil
}

// ReadFrame reads the payload of the frame Next returned into dst, which must hold it.
func (r *Reader) ReadFrame(dst []byte) error {
	if len(dst) < r.pending {
		return fmt.Errorf("capture: frame of %d bytes does not fit a buffer of %d", r.pending, len(dst))
	}
	n := r.pending
	r.pending = 0
	if _, err := io.ReadFull(r.r, dst[:n]); err != nil {
		return fmt.Errorf("%w: frame cut short: %v", ErrBadMessage, noEOF(err))
	}
	return nil
}

// Skip discards the payload of the frame Next returned.
func (r *Reader) Skip() error {
	n := int64(r.pending)
	r.pending = 0
	if k, err := io.CopyN(io.Discard, r.r, n); err != nil {
		return fmt.Errorf("%w: frame cut short after %d of %d bytes: %v", ErrBadMessage, k, n, noEOF(err))
	}
	return nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseHeader decodes and checks a header.
func parseHeader(h []byte) (Message, error) {
	m := Message{
		Type:     MsgType(h[0]),
		Channels: int(h[1]),
		Width:    int(binary.LittleEndian.Uint32(h[4:])),
		Height:   int(binary.LittleEndian.Uint32(h[8:])),
		Len:      int(binary.LittleEndian.Uint32(h[12:])),
		At:       time.Unix(0, int64(binary.LittleEndian.Uint64(h[16:]))),
	}
	bad := func(format string, args ...any) (Message, error) {
		return Message{}, fmt.Errorf("%w: %s", ErrBadMessage, fmt.Sprintf(format, args...))
	}
	if h[2] != 0 || h[3] != 0 {
		return bad("reserved bytes %#x %#x, want zero", h[2], h[3])
	}
	switch m.Type {
	case MsgOpened:
		if m.Len != 0 || m.Width != 0 || m.Height != 0 || m.Channels != 0 {
			return bad("opened message with a payload or a size")
		}
	case MsgError:
		if m.Len > MaxErrorLen {
			return bad("error message of %d bytes, over %d", m.Len, MaxErrorLen)
		}
	case MsgFrame:
		switch {
		case m.Channels != 1 && m.Channels != 3 && m.Channels != 4:
			return bad("frame with %d channels, want 1, 3 or 4", m.Channels)
		case m.Width < 1 || m.Width > MaxDim || m.Height < 1 || m.Height > MaxDim:
			return bad("frame of %dx%d, want 1 to %d each way", m.Width, m.Height, MaxDim)
		case m.Width*m.Height*m.Channels > MaxFrameLen:
			return bad("frame of %dx%dx%d is over %d bytes", m.Width, m.Height, m.Channels, MaxFrameLen)
		case m.Len != m.Width*m.Height*m.Channels:
			return bad("frame of %dx%dx%d with a payload of %d bytes", m.Width, m.Height, m.Channels, m.Len)
		}
	default:
		return bad("unknown message type %#x", h[0])
	}
	return m, nil
}

// Writer writes messages to the daemon.
type Writer struct {
	w   io.Writer
	hdr [HeaderLen]byte
}

// NewWriter returns a Writer to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (w *Writer) header(t MsgType, width, height, channels, n int, at time.Time) error {
	h := w.hdr[:]
	clear(h)
	h[0], h[1] = byte(t), byte(channels)
	binary.LittleEndian.PutUint32(h[4:], uint32(width))
	binary.LittleEndian.PutUint32(h[8:], uint32(height))
	binary.LittleEndian.PutUint32(h[12:], uint32(n))
	binary.LittleEndian.PutUint64(h[16:], uint64(at.UnixNano()))
	_, err := w.w.Write(h)
	return err
}

// Opened says that the pipeline has opened.
func (w *Writer) Opened() error { return w.header(MsgOpened, 0, 0, 0, 0, time.Now()) }

// Frame writes a frame of width x height pixels of channels bytes, read at at.
func (w *Writer) Frame(width, height, channels int, pix []byte, at time.Time) error {
	if len(pix) != width*height*channels {
		return fmt.Errorf("capture: frame of %dx%dx%d has %d bytes", width, height, channels, len(pix))
	}
	if err := w.header(MsgFrame, width, height, channels, len(pix), at); err != nil {
		return err
	}
	_, err := w.w.Write(pix)
	return err
}

// Error writes why the process ends (cut to MaxErrorLen).
func (w *Writer) Error(msg string) error {
	if len(msg) > MaxErrorLen {
		msg = msg[:MaxErrorLen]
	}
	if err := w.header(MsgError, 0, 0, 0, len(msg), time.Now()); err != nil {
		return err
	}
	_, err := io.WriteString(w.w, msg)
	return err
}
