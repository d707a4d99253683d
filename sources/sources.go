// Package sources implements camera sources: RTSP session → depacketize → decode → letterbox
// to the model input.
//
// A Camera owns one supervised RTSP session at a time. The session's RTP callback only
// turns packets into H.264 access units and pushes them into a bounded queue (dropping and
// counting when it is full); a decode goroutine feeds them to libavcodec and converts every
// decoded frame with one swscale call straight into a letterboxed RGB24 buffer taken from
// the camera's fixed pool. Consumers get a *Frame and must Release it.
package sources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluenviron/gortsplib/v4/pkg/base"
	"github.com/bluenviron/gortsplib/v4/pkg/liberrors"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/offheap"
	"github.com/visiond/visiond/internal/redact"
)

// Internal limits and delays; the defaults of Camera's fields are in options.go.
const (
	poolSize      = 3                // frames a camera may hold at once (decoding, waiting, taken)
	queueLen      = 8                // access units between the RTP callback and the decoder
	spareAUs      = 2                // access units' buffers kept for reuse; each grows to a keyframe's size (8 held 1.5 MiB at 720p)
	retryMin      = 1 * time.Second  // first delay before restarting a failed session
	retryMax      = 30 * time.Second // the delay doubles up to this
	stableAfter   = 10 * time.Second // a session online this long resets the delay
	readTimeout   = 10 * time.Second // RTSP read timeout, also the no-packet timeout
	warnEvery     = 10 * time.Second // repeated warnings are summarized per this window
	clockSkewWarn = 10 * time.Second // a camera clock this far off this host's is reported
	bufferSlack   = 64               // spare bytes behind each Pix buffer, never handed out
)

// Frame is one decoded frame, letterboxed into the model's input. It is one of its camera's
// few frames, its picture in a buffer lent by the camera's Buffers: the consumer must call
// Release exactly once when done with it, and must not use it afterwards.
type Frame struct {
	Camera    string         // Camera.ID
	Seq       uint64         // per-camera decoded-frame sequence number, from 1; gaps are dropped frames
	Captured  time.Time      // capture time: the camera's clock from RTCP sender reports when it sends them, else the receive time
	Received  time.Time      // when the frame was decoded, on this host's clock: for ages and latencies
	Letterbox geom.Letterbox // geometry: source size → model input
	Format    PixFormat      // how the frame holds its picture until WriteRGB: RGB24, or planar 4:2:0 (a 4:2:0 stream's)

	pix     []byte                        // the picture, in Format
	slots   chan *Frame                   // the owning camera's free frames
	bufs    *FrameBuffers                 // where buf comes from
	pool    *offheap.Pool[geom.Letterbox] // the pool of bufs that lent buf
	scalers *Scalers                      // the camera's, for WriteRGB's conversion
	buf     *FrameBuffer                  // the buffer lent for this hand-out; pix is its start
	held    atomic.Bool                   // handed out and not yet released
}

// WriteRGB writes the frame as the model takes it into dst: RGB24, HWC, Letterbox.DstW x
// Letterbox.DstH, the picture at its offset and the padding geom.PadValue; dst must be
// exactly that size. A frame held in a planar format is converted (libswscale, about 0.2 ms
// at 640x480 here); an RGB24 one is copied. The frame must be held.
func (f *Frame) WriteRGB(dst []byte) error {
	lb := f.Letterbox
	if n := lb.DstW * lb.DstH * 3; len(dst) != n {
		return fmt.Errorf("camera %s frame %d: a buffer of %d bytes for a %dx%d RGB24 input of %d", f.Camera, f.Seq, len(dst), lb.DstW, lb.DstH, n)
	}
	if f.Format == PixRGB24 {
		copy(dst, f.pix)
		return nil
	}
	fillBars(dst, lb)
	if err := f.scalers.convertRGB(f.pix, f.Format, dst, lb); err != nil {
		return fmt.Errorf("camera %s frame %d: %s to RGB24: %w", f.Camera, f.Seq, f.Format, err)
	}
	return nil
}

// WriteBGR writes the frame's picture alone, without the letterbox's bars, into dst: BGR24
// (OpenCV's order), Letterbox.ScaledW x Letterbox.ScaledH, rows packed; dst must be exactly
// that size. For a snapshot's rendering. The frame must be held.
func (f *Frame) WriteBGR(dst []byte) error {
	lb := f.Letterbox
	if n := lb.ScaledW * lb.ScaledH * 3; len(dst) != n || n == 0 {
		return fmt.Errorf("camera %s frame %d: a buffer of %d bytes for a %dx%d BGR24 picture of %d", f.Camera, f.Seq, len(dst), lb.ScaledW, lb.ScaledH, n)
	}
	if f.Format != PixRGB24 {
		if err := f.scalers.convertBGR(f.pix, f.Format, dst, lb); err != nil {
			return fmt.Errorf("camera %s frame %d: %s to BGR24: %w", f.Camera, f.Seq, f.Format, err)
		}
		return nil
	}
	if len(f.pix) < lb.DstW*lb.DstH*3 {
		return fmt.Errorf("camera %s frame %d: no picture", f.Camera, f.Seq)
	}
	row := lb.ScaledW * 3
	for y := range lb.ScaledH {
		src := f.pix[((lb.PadY+y)*lb.DstW+lb.PadX)*3:][:row]
		out := dst[y*row:][:row]
		for i := 0; i < row; i += 3 {
			out[i], out[i+1], out[i+2] = src[i+2], src[i+1], src[i]
		}
	}
	return nil
}

// NewFrame returns a held frame of the RGB24 input rgb, letterboxed as lb (lb.DstW x lb.DstH,
// the picture at its offset), from no camera: a picture made elsewhere, such as a still
// image or a test's. The frame holds rgb itself, not a copy; its Release gives nothing back.
func NewFrame(camera string, seq uint64, lb geom.Letterbox, rgb []byte) (*Frame, error) {
	if n := lb.DstW * lb.DstH * 3; len(rgb) != n || n == 0 {
		return nil, fmt.Errorf("camera %s frame %d: %d bytes for a %dx%d RGB24 input of %d", camera, seq, len(rgb), lb.DstW, lb.DstH, n)
	}
	f := &Frame{Camera: camera, Seq: seq, Letterbox: lb, Format: PixRGB24, pix: rgb}
	f.held.Store(true)
	return f, nil
}

// Copy returns a copy of the frame, held, whose buffer comes from bufs rather than from the
// camera's frames: its picture in the format the frame holds it (planar 4:2:0 takes 0.46 MB
// at 640x480 where the RGB24 input takes 1.2 at 640x640), for keeping past the frame's
// release (a snapshot, an object's evidence). Its Release gives the buffer back to bufs; the
// copy is no camera's frame. bufs must be for the frame's model input. The frame must be
// held.
func (f *Frame) Copy(bufs *FrameBuffers) (*Frame, error) {
	lb := f.Letterbox
	if lb.DstW != bufs.w || lb.DstH != bufs.h {
		return nil, fmt.Errorf("camera %s frame %d: a %dx%d input, buffers for %dx%d", f.Camera, f.Seq, lb.DstW, lb.DstH, bufs.w, bufs.h)
	}
	if len(f.pix) == 0 {
		return nil, fmt.Errorf("camera %s frame %d: no picture", f.Camera, f.Seq)
	}
	pool, buf, err := bufs.get(f.Format, lb)
	if err != nil {
		return nil, fmt.Errorf("camera %s frame %d: a buffer for its copy: %w", f.Camera, f.Seq, err)
	}
	c := &Frame{Camera: f.Camera, Seq: f.Seq, Captured: f.Captured, Received: f.Received, Letterbox: lb, Format: f.Format,
		pix: buf.B[:len(f.pix)], pool: pool, buf: buf, scalers: f.scalers}
	copy(c.pix, f.pix)
	if f.Format == PixRGB24 {
		buf.Note = lb // its bars, copied
	}
	c.held.Store(true)
	return c, nil
}

// FrameBuffers lends the frames' buffers (Camera.Buffers), outside the Go heap: a pool for
// frames held in RGB24, and one for each size of the frames held in planar 4:2:0, each
// buffer of its format and size (so that the memory counted is the memory the frames
// touch). A buffer's note is the geometry whose letterbox padding it holds (RGB24).
type FrameBuffers struct {
	w, h int
	rgb  *offheap.Pool[geom.Letterbox]

	mu  sync.Mutex
	yuv map[[2]int]*offheap.Pool[geom.Letterbox] // by the letterbox's scaled size
	// closed: pools made after Close are closed as they are made (their buffers unmapped
	// as they are put back)
	closed bool
}

// FrameBuffer is one frame buffer lent.
type FrameBuffer = offheap.Buffer[geom.Letterbox]

// FrameBufferStats is what a FrameBuffers holds.
type FrameBufferStats struct {
	RGB offheap.Stats   // the RGB24 pool's
	YUV []offheap.Stats // the planar pools', one a size, in no order
}

// Bytes is the memory held: the buffers lent and free of every pool.
func (s FrameBufferStats) Bytes() int64 {
	n := s.RGB.Bytes()
	for _, y := range s.YUV {
		n += y.Bytes()
	}
	return n
}

// NewFrameBuffers returns the buffers of frames for a model input of w x h, for cameras to
// share (Camera.Buffers).
func NewFrameBuffers(w, h int) *FrameBuffers {
	return &FrameBuffers{w: w, h: h, rgb: offheap.New[geom.Letterbox](FrameBytes(w, h), 0), yuv: map[[2]int]*offheap.Pool[geom.Letterbox]{}}
}

// get lends a buffer for a frame held in pf, letterboxed as lb, with the pool it goes back
// to. The lookup and the loan are one step, so that Trim never forgets a pool that lends.
func (b *FrameBuffers) get(pf PixFormat, lb geom.Letterbox) (*offheap.Pool[geom.Letterbox], *FrameBuffer, error) {
	if pf == PixRGB24 {
		buf, err := b.rgb.Get()
		return b.rgb, buf, err
	}
	k := [2]int{lb.ScaledW, lb.ScaledH}
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.yuv[k]
	if p == nil {
		p = offheap.New[geom.Letterbox](newYUVLayout(k[0], k[1]).size+bufferSlack, 0)
		if b.closed {
			p.Close()
		}
		b.yuv[k] = p
	}
	buf, err := p.Get()
	return p, buf, err
}

// Stats returns what the buffers hold now.
func (b *FrameBuffers) Stats() FrameBufferStats {
	st := FrameBufferStats{RGB: b.rgb.Stats()}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.yuv {
		st.YUV = append(st.YUV, p.Stats())
	}
	return st
}

// Trim unmaps the free buffers that have lain unused longer than the pools' idle time, and
// forgets the planar pools left empty (a size no camera has now).
func (b *FrameBuffers) Trim() {
	b.rgb.Trim()
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, p := range b.yuv {
		p.Trim()
		if st := p.Stats(); st.InUse == 0 && st.Free == 0 {
			delete(b.yuv, k)
		}
	}
}

// Close unmaps the free buffers; those lent are unmapped when they are put back.
func (b *FrameBuffers) Close() {
	b.rgb.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, p := range b.yuv {
		p.Close()
	}
}

// Release gives the frame's buffer back and the frame to its camera. The frame's picture
// must not be used afterwards. A second Release of the same hand-out is ignored.
func (f *Frame) Release() {
	if f == nil || !f.held.CompareAndSwap(true, false) {
		return
	}
	f.giveBack()
}

// giveBack returns the buffer to its pool and the frame to its camera's free frames (a
// copy's or NewFrame's to none).
func (f *Frame) giveBack() {
	if f.pool != nil {
		f.pool.Put(f.buf)
	}
	f.pool, f.buf, f.pix = nil, nil, nil
	if f.slots != nil {
		f.slots <- f // never blocks: the channel holds every frame of the camera
	}
}

// StatusChange is a camera's move from one state to another.
type StatusChange struct {
	Camera   string
	State    State  // the new state
	Previous State  // the state before ("" when the camera starts)
	Reason   string // why a session failed (URL redacted; never a password); "" when online
	At       time.Time
	// Gap, when the camera comes online, is the time since the last frame before the
	// outage: the length of the hole in its coverage. 0 the first time it comes online.
	Gap time.Duration
}

// Status is a snapshot of a camera's health and counters.
type Status struct {
	State      State  // StateConnecting, StateOnline, StateOffline or StateUnauthorized
	LastError  string // the error that ended the last session, URL redacted; "" if none
	Frames     uint64 // frames decoded (the last Seq)
	Delivered  uint64 // frames handed to OnFrame
	Dropped    uint64 // access units dropped (decode queue full) plus frames not scaled (no free buffer)
	Reconnects uint64 // sessions started after a failed one
	Skipped    uint64 // access units not decoded because decode is keyframes
	// SkippedNonRef counts the non-reference frames (B-frames, non-reference P-frames) left
	// undecoded because nothing would have seen them (NeedFrom). They are not dropped frames:
	// they get no Seq, and Frames does not count them.
	SkippedNonRef uint64
	Resyncs       uint64 // times decoding skipped to the next keyframe after a loss or a decode error
	Unneeded      uint64 // frames decoded but not scaled: a newer one was expected before NeedFrom's time
	Stuck         uint64 // kind gstreamer: sessions whose capture process was killed, its open or read blocked past StallTimeout
	// Decode is where the camera's decoding went (kind rtsp): sums since the camera started.
	Decode DecodeTimes
	// Decoder is the decoder of the camera's session (kind rtsp; "" before the first): Decoder
	// as configured, or DecoderCPU when the GPU decoder would not open (DecoderFallback says
	// why; "" on the configured one). DecoderFallbacks counts the times a session moved to
	// the CPU; it tries the GPU again every few minutes.
	Decoder          Decoder
	DecoderFallback  string
	DecoderFallbacks uint64
}

// DecodeTimes sums a camera's time in decoding, by step (Status.Decode), for kind rtsp: how
// long its decode goroutine waited for the GPU decoder (a DecoderGate call slot) and how long
// the calls took, and of these the frames' copies out of GPU memory and their scaling.
type DecodeTimes struct {
	Calls uint64        // access units sent to the decoder
	Wait  time.Duration // waiting for a DecoderGate call slot (decoder cuda)
	Busy  time.Duration // in the decoder's calls, with the copying and scaling of their frames
	// Scaled counts the frames copied (decoder cuda) and scaled into a buffer; Copy and
	// Scale are their parts of Busy.
	Scaled uint64
	Copy   time.Duration // copying frames from GPU memory to the host (decoder cuda)
	Scale  time.Duration // letterboxing frames into RGB24 buffers
}

// Camera is one camera (an RTSP stream, a GStreamer pipeline or a video file), supervised: a
// failed session is restarted after a jittered, growing delay. Set the exported fields, then
// Start; do not change them afterwards. Every field's zero value is its default.
type Camera struct {
	// ID names the camera in Frame.Camera, StatusChange and log lines. Required.
	ID string
	// Kind is the kind of source, which decides which of URL, Pipeline and File is read.
	// Default DefaultKind (rtsp).
	Kind Kind

	// URL is the camera's rtsp:// or rtsps:// URL, for kind rtsp. Credentials in it are
	// used, never logged. Required for kind rtsp.
	URL string
	// Username and Password are the RTSP credentials, for kind rtsp, when not in URL.
	// Default: none.
	Username string
	Password string
	// Transport is how RTP packets arrive, for kind rtsp. Default DefaultTransport (tcp).
	Transport Transport
	// Decode is which access units are decoded, for kind rtsp. Default DefaultDecode (all).
	Decode DecodeMode
	// Decoder is what decodes the video, for kind rtsp. Default DefaultDecoder (cpu).
	Decoder Decoder
	// DecoderGate, for decoder cuda, bounds how many cameras open their GPU decoders at
	// once and how many decode calls are under way; the cameras of a process share one.
	// Default nil: unbounded.
	DecoderGate *DecoderGate
	// Pipeline is a GStreamer pipeline ending in appsink, for kind gstreamer. Required for
	// kind gstreamer.
	Pipeline string
	// File is a video file, played at its own rate and looped, for kind file. Required for
	// kind file.
	File string
	// CaptureCommand is the argv that starts a capture process (package capture), for kind
	// gstreamer. Default {os.Executable(), "capture"}: the daemon's own executable.
	CaptureCommand []string

	// StallTimeout closes and reopens a session that delivers no frame for this long (from
	// its start, so it also bounds the opening, less the first open's wait at DecoderGate; kind
	// gstreamer: its capture process is killed, however the open or read was blocked).
	// Default DefaultStallTimeout (10 s).
	StallTimeout time.Duration
	// InputW and InputH are the model's input size, which frames are letterboxed into.
	// Default DefaultInputW x DefaultInputH (640x640).
	InputW int
	InputH int
	// Buffers lends the frames' buffers, made by NewFrameBuffers(InputW, InputH); the cameras
	// of a process share one, so that frame memory follows the frames in flight rather than
	// the cameras. Default nil (or one of another size): the camera's own, unmapped by Close.
	Buffers *FrameBuffers
	// Scalers lends the scalers that letterbox the decoded frames and convert them at
	// WriteRGB; the cameras of a process share one, so that scalers follow the pictures
	// being scaled rather than the cameras. Default nil: the camera's own, freed by Close
	// (a frame converted later makes a scaler for the call).
	Scalers *Scalers
	// OnFrame is called from the decode goroutine with each new frame. It must not block
	// and takes ownership of the frame (it or a later consumer calls Release). Default nil:
	// frames are released at once.
	OnFrame func(*Frame)
	// OnStatus is called on every change of state, from the camera's goroutines; it must
	// not block. Default nil: none is reported.
	OnStatus func(StatusChange)
	// OnPacket, for kind rtsp, is called from the RTP callback with every access unit as
	// the camera sent it, before decoding (Packet): what a recording keeps. It must not block
	// and must copy what it keeps (the Packet and its NAL units are reused). Default nil.
	OnPacket func(*Packet)
	// Logger receives the camera's log lines, with its id and redacted URL. Default
	// slog.Default().
	Logger *slog.Logger

	// tunables, overridden by tests
	retryMin, retryMax, stableAfter, readTimeout time.Duration
	gateCPU                                      bool         // decoder cpu plays the GPU's: DecoderGate gates it, and it falls back to another CPU decoder
	openErr                                      func() error // set: a gated decoder open fails with what it returns, when not nil (tests: a GPU that opens no more decoders)
	gpuRetry                                     time.Duration

	log        *slog.Logger
	redactor   redact.Redactor // hides the URL's password (or the pipeline's credentials) in logs, status and errors
	invalid    error           // what is wrong with Kind, Transport or Decode (checkOptions); nil when valid
	slots      chan *Frame     // the frames not handed out
	bufs       *FrameBuffers   // Buffers, or ownBufs
	ownBufs    *FrameBuffers   // the camera's own, when Buffers is not of its size
	scalers    *Scalers        // Scalers, or the camera's own (ownScalers)
	ownScalers bool
	bufWarn    rateLog // frame buffers refused by the system

	frames, delivered, dropped, reconnects atomic.Uint64
	skipped                                atomic.Uint64              // access units not decoded (decode: keyframes)
	resyncs                                atomic.Uint64              // waits for a keyframe after loss or damage
	lastFrame                              atomic.Int64               // unix ns of the last decoded frame
	unneeded                               atomic.Uint64              // frames not scaled (NeedFrom)
	stuck                                  atomic.Uint64              // capture processes killed by the stall watchdog
	needFrom                               atomic.Int64               // unix ns: see NeedFrom
	analysedEvery                          atomic.Int64               // ns: see AnalysedEvery
	gapMean                                atomic.Int64               // ns: mean time between the stream's frames
	skippedNonRef                          atomic.Uint64              // non-reference frames not decoded (NeedFrom)
	sinceFrame                             atomic.Int64               // frames not decoded since the last decoded one
	sessions                               atomic.Uint64              // RTSP sessions started (Packet.Session)
	inGate                                 atomic.Bool                // waiting for a DecoderGate slot: the stall watchdog holds off
	readyAt                                atomic.Int64               // unix ns a DecoderGate slot was last taken: the watchdog counts from here
	gateWaits                              atomic.Uint64              // times the camera found DecoderGate full and waited
	decodeErr                              atomic.Pointer[string]     // the session's last decode error: a stall names it
	decCalls, decScaled                    atomic.Uint64              // Status.Decode's counts
	decWait, decBusy, decCopy, decScale    atomic.Int64               // Status.Decode's times, ns
	decoderUse                             atomic.Pointer[decoderUse] // the session's decoder, and why it is not Decoder (fallback.go)
	fallbacks                              atomic.Uint64              // sessions moved from the GPU decoder to the CPU's

	mu        sync.Mutex
	started   bool
	closed    bool
	cancel    context.CancelFunc
	done      chan struct{}
	state     State
	lastError string
}

// Start starts the camera's goroutines; they run until Close. Calling it again, or after
// Close, does nothing.
func (c *Camera) Start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.closed {
		return
	}
	c.started = true
	c.init()
	c.state = StateConnecting
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	go c.run(ctx)
}

// init applies defaults and makes the camera's frames.
func (c *Camera) init() {
	if c.InputW <= 0 {
		c.InputW = DefaultInputW
	}
	if c.InputH <= 0 {
		c.InputH = DefaultInputH
	}
	if c.Kind == "" {
		c.Kind = DefaultKind
	}
	if c.Transport == "" {
		c.Transport = DefaultTransport
	}
	if c.Decode == "" {
		c.Decode = DefaultDecode
	}
	if c.Decoder == "" {
		c.Decoder = DefaultDecoder
	}
	c.invalid = c.checkOptions()
	setDefault(&c.retryMin, retryMin)
	setDefault(&c.retryMax, retryMax)
	c.retryMax = max(c.retryMax, c.retryMin)
	setDefault(&c.stableAfter, stableAfter)
	setDefault(&c.readTimeout, readTimeout)
	setDefault(&c.StallTimeout, DefaultStallTimeout)
	logger := c.Logger
	if logger == nil {
		logger = slog.Default()
	}
	if c.Kind == KindGStreamer {
		c.redactor = redact.Pipeline(c.Pipeline)
		c.log = logger.With("camera", c.ID)
	} else {
		c.redactor = redact.New(withCredentials(c.URL, c.Username, c.Password))
		c.log = logger.With("camera", c.ID, "url", c.redactor.URL)
	}

	c.bufs = c.Buffers
	if c.bufs == nil || c.bufs.w != c.InputW || c.bufs.h != c.InputH {
		c.ownBufs = NewFrameBuffers(c.InputW, c.InputH)
		c.bufs = c.ownBufs
	}
	c.scalers = c.Scalers
	if c.scalers == nil {
		c.scalers, c.ownScalers = &Scalers{}, true
	}
	c.slots = make(chan *Frame, poolSize)
	for range poolSize {
		c.slots <- &Frame{slots: c.slots, bufs: c.bufs, scalers: c.scalers}
	}
}

// FrameBytes is the size of a buffer of a frame held in RGB24 for a model input of w x h: the
// picture and a little room behind it that the scaler may touch.
func FrameBytes(w, h int) int { return w*h*3 + bufferSlack }

// Close stops the camera and waits for every goroutine it started. Safe to call twice.
// Frames already handed out stay valid until released.
func (c *Camera) Close() {
	c.mu.Lock()
	c.closed = true
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	if c.ownBufs != nil {
		c.ownBufs.Close() // frames still held are unmapped as they are released
	}
	if c.ownScalers {
		c.scalers.Close() // frames still held make a scaler for their conversion
	}
}

// Status returns a snapshot of the camera's state and counters.
func (c *Camera) Status() Status {
	c.mu.Lock()
	st := Status{State: c.state, LastError: c.lastError}
	c.mu.Unlock()
	if st.State == "" {
		st.State = StateConnecting
	}
	st.Frames = c.frames.Load()
	st.Delivered = c.delivered.Load()
	st.Dropped = c.dropped.Load()
	st.Reconnects = c.reconnects.Load()
	st.Skipped = c.skipped.Load()
	st.SkippedNonRef = c.skippedNonRef.Load()
	st.Resyncs = c.resyncs.Load()
	st.Unneeded = c.unneeded.Load()
	st.Stuck = c.stuck.Load()
	st.Decode = DecodeTimes{
		Calls: c.decCalls.Load(), Wait: time.Duration(c.decWait.Load()), Busy: time.Duration(c.decBusy.Load()),
		Scaled: c.decScaled.Load(), Copy: time.Duration(c.decCopy.Load()), Scale: time.Duration(c.decScale.Load()),
	}
	if u := c.decoderUse.Load(); u != nil {
		st.Decoder, st.DecoderFallback = u.decoder, u.why
	}
	st.DecoderFallbacks = c.fallbacks.Load()
	return st
}

// NeedFrom says that the consumer takes no frame before t: a frame decoded while another is
// expected before t (1.5 mean frame intervals from now) would be replaced by it unseen, so it
// is not scaled nor handed out, and counted in Status.Unneeded. Scaling into the letterbox
// costs about half as much CPU as decoding; with a 25 fps camera analysed at 5 fps it saves
// three frames in five. When the consumer also said that it takes at most one frame per
// interval at least about twice the stream's frame interval (AnalysedEvery: the camera is
// analysed at most half as often as its stream sends frames), a frame of an RTSP stream that
// no other frame references (a B-frame, a non-reference P-frame) arriving before t is not
// even decoded (libavcodec's skip_frame), and is counted in Status.SkippedNonRef; the first
// frame at or after t is always decoded. The zero time (the default) asks for every frame.
// Safe to call from any goroutine.
func (c *Camera) NeedFrom(t time.Time) {
	if t.IsZero() {
		c.needFrom.Store(0)
		return
	}
	c.needFrom.Store(t.UnixNano())
}

// AnalysedEvery tells the camera that its consumer takes at most one frame every d (the
// camera's analysed interval, 1/fps; 0, the default: unknown). Together with NeedFrom it
// lets the camera leave non-reference frames undecoded when d is at least about twice the
// stream's frame interval. Call it again when the rate changes; safe from any goroutine.
func (c *Camera) AnalysedEvery(d time.Duration) {
	c.analysedEvery.Store(int64(max(d, 0)))
}

// unneededNow reports whether a frame decoded at now, prev (unix ns) after the one before
// (0: none), can be left unscaled (NeedFrom), and keeps the mean interval of the stream's
// frames (the frames left undecoded between the two count: they are the stream's too).
func (c *Camera) unneededNow(now, prev int64) bool {
	skipped := c.sinceFrame.Swap(0)
	if prev == 0 || now <= prev {
		return false
	}
	gap, mean := (now-prev)/(skipped+1), c.gapMean.Load()
	if mean == 0 {
		mean = gap
	} else {
		mean += (gap - mean) / 8
	}
	c.gapMean.Store(mean)
	need := c.needFrom.Load()
	// The next frame is expected within mean, and comes before need even if it is late by half
	// of that; a stream that pauses pushes mean up, and every frame is scaled again.
	return need != 0 && now+mean+mean/2 < need && gap < 2*mean
}

// skippableNow reports whether a non-reference frame arriving at now, of a stream that
// sends a frame every frameGap, can be left undecoded: the consumer takes at most one frame
// per analysed interval (AnalysedEvery), at least 1.5 frame intervals (about half the
// stream's rate or less, with room for the error of frameGap), and takes no frame before need
// (NeedFrom): it will take the first frame at or after need, which is decoded whatever its
// type. At higher analysed rates nothing is skipped, so that a stream that sends its frames
// in bursts (a P-frame, then the B-frames shown before it) cannot leave the consumer without
// one.
func (c *Camera) skippableNow(now time.Time, frameGap time.Duration) bool {
	need, every := c.needFrom.Load(), c.analysedEvery.Load()
	return need != 0 && frameGap > 0 && 2*every >= 3*int64(frameGap) && now.UnixNano() < need
}

// countSkippedNonRef counts a non-reference frame left undecoded (skippableNow).
func (c *Camera) countSkippedNonRef() {
	c.skippedNonRef.Add(1)
	c.sinceFrame.Add(1)
}

// session runs one session of the camera's kind until it fails or ctx ends; onlineAt is
// when it delivered its first frame (zero if it never did).
func (c *Camera) session(ctx context.Context) (onlineAt time.Time, err error) {
	if c.invalid != nil {
		return time.Time{}, c.invalid
	}
	if c.Kind == KindRTSP {
		return c.runSession(ctx)
	}
	return c.runCapture(ctx)
}

// checkOptions returns what is wrong with the camera's typed options, checked once at Start;
// every session of a camera with an invalid one fails with it (config never gives one).
func (c *Camera) checkOptions() error {
	if _, err := ParseKind(string(c.Kind)); err != nil || c.Kind != KindRTSP {
		return err
	}
	if _, err := ParseTransport(string(c.Transport)); err != nil {
		return err
	}
	if _, err := ParseDecodeMode(string(c.Decode)); err != nil {
		return err
	}
	_, err := ParseDecoder(string(c.Decoder))
	return err
}

// errStalled ends a session that delivered no frame for StallTimeout.
var errStalled = errors.New("stalled")

// run supervises sessions until ctx ends: each runs under a stall watchdog, and a failed
// one is followed by a jittered, growing delay (the longest one after a refusal of the
// credentials, which retrying sooner will not fix).
func (c *Camera) run(ctx context.Context) {
	defer close(c.done)
	delay := c.retryMin
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			c.reconnects.Add(1)
		}
		c.log.Debug("connecting", "kind", c.Kind, "transport", c.Transport)
		onlineAt, err := c.watchedSession(ctx)
		if ctx.Err() != nil {
			c.log.Debug("camera closed")
			return
		}
		state, msg := StateOffline, "session ended"
		if err != nil {
			msg = c.redactor.Scrub(err.Error())
		}
		if !onlineAt.IsZero() && time.Since(onlineAt) >= c.stableAfter {
			delay = c.retryMin
		}
		wait := c.backoff(delay)
		delay = min(2*delay, c.retryMax)
		var bad liberrors.ErrClientBadStatusCode
		if errors.As(err, &bad) && bad.Code == base.StatusUnauthorized {
			state, msg = StateUnauthorized, "unauthorized: the camera refused the credentials"
			wait = c.backoff(c.retryMax)
		}
		c.setState(state, msg)
		c.log.Warn("camera "+string(state)+", retrying", "error", msg, "retry_in", wait.Round(time.Millisecond),
			"reconnects", c.reconnects.Load())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watchedSession runs one session and ends it with errStalled when no frame arrives for
// StallTimeout (from its start, then from each frame; time spent waiting for a DecoderGate
// slot does not count).
func (c *Camera) watchedSession(ctx context.Context) (time.Time, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	c.decodeErr.Store(nil)
	watchdog := make(chan struct{})
	go func() {
		defer close(watchdog)
		tick := time.NewTicker(max(c.StallTimeout/4, 10*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case now := <-tick.C:
				if c.inGate.Load() {
					continue
				}
				last := time.Unix(0, max(c.lastFrame.Load(), start.UnixNano(), c.readyAt.Load()))
				if now.Sub(last) >= c.StallTimeout {
					cancel(stallError(now.Sub(last), c.decodeErr.Load()))
					return
				}
			}
		}
	}()
	onlineAt, err := c.session(sctx)
	cancel(nil)
	<-watchdog
	if cause := context.Cause(sctx); errors.Is(cause, errStalled) && ctx.Err() == nil && !errors.Is(err, errStalled) {
		err = cause
	}
	return onlineAt, err
}

// stallError is the cause a session is cut with after d without a frame; decodeErr, when
// set, is the session's last decode error, often the reason (a decoder the GPU would not
// open fails every keyframe).
func stallError(d time.Duration, decodeErr *string) error {
	if decodeErr != nil {
		return fmt.Errorf("%w: no frame for %v; the last decode failed: %s", errStalled, d.Round(time.Second), *decodeErr)
	}
	return fmt.Errorf("%w: no frame for %v", errStalled, d.Round(time.Second))
}

// setState records a state other than online and reports the change.
func (c *Camera) setState(state State, reason string) {
	c.mu.Lock()
	was := c.state
	c.state, c.lastError = state, reason
	c.mu.Unlock()
	if was != state && c.OnStatus != nil {
		c.OnStatus(StatusChange{Camera: c.ID, State: state, Previous: was, Reason: reason, At: time.Now()})
	}
}

// picture is a frame's picture as a source hands it to emit: the format it is held in
// (PixFormat), then drawn into a buffer of that format.
type picture interface {
	// pixFormat is the format the picture is held in, letterboxed as lb.
	pixFormat(lb geom.Letterbox) (PixFormat, error)
	// draw draws the picture into dst, a buffer of format pf: for PixRGB24 at lb's offset in
	// the model's input (the padding around is already gray); for a planar format, lb's
	// scaled picture as yuvLayout places it.
	draw(dst []byte, lb geom.Letterbox, pf PixFormat) error
}

// rgbPicture is a picture drawn in RGB24 by a function.
type rgbPicture func(pix []byte, lb geom.Letterbox) error

func (rgbPicture) pixFormat(geom.Letterbox) (PixFormat, error)             { return PixRGB24, nil }
func (p rgbPicture) draw(dst []byte, lb geom.Letterbox, _ PixFormat) error { return p(dst, lb) }

// emit hands out one new frame of the current session: it counts it, leaves it if it is not
// needed (NeedFrom), takes a free frame (none free: the frame is counted as dropped) and a
// buffer of the format the picture is held in, lets pic draw into it at lb (for RGB24, the
// padding around is already gray) and passes it to OnFrame. The first frame of a session
// marks the camera online. Every source kind delivers its frames through here.
func (c *Camera) emit(lb geom.Letterbox, captured time.Time, pic picture) error {
	seq := c.frames.Add(1)
	now := time.Now()
	prev := c.lastFrame.Swap(now.UnixNano())
	if c.decodeErr.Load() != nil {
		c.decodeErr.Store(nil) // decoded since: a later stall is not that error's
	}
	c.setOnline(now, prev)
	if c.unneededNow(now.UnixNano(), prev) {
		c.unneeded.Add(1)
		return nil
	}
	var f *Frame
	select {
	case f = <-c.slots:
	default:
		c.dropped.Add(1)
		return nil
	}
	pf, err := pic.pixFormat(lb)
	if err != nil {
		c.slots <- f
		return err
	}
	pool, buf, err := c.bufs.get(pf, lb)
	if err != nil {
		c.slots <- f
		c.dropped.Add(1)
		c.bufWarn.warn(c.log, "no memory for a frame buffer; frames are dropped", "error", err)
		return nil
	}
	f.Format, f.Letterbox, f.pool, f.buf = pf, lb, pool, buf
	if pf == PixRGB24 {
		f.pix = buf.B[:c.InputW*c.InputH*3]
		if buf.Note != lb {
			fillBars(f.pix, lb)
			buf.Note = lb
		}
	} else {
		f.pix = buf.B[:newYUVLayout(lb.ScaledW, lb.ScaledH).size]
	}
	if err := pic.draw(f.pix, lb, pf); err != nil {
		buf.Note = geom.Letterbox{} // the failed call may have left anything there
		f.giveBack()
		return err
	}
	f.Camera = c.ID
	f.Seq = seq
	f.Captured = captured
	f.Received = time.Now()
	f.held.Store(true)
	c.delivered.Add(1)
	if c.OnFrame == nil {
		f.Release()
		return nil
	}
	c.OnFrame(f)
	return nil
}

// setOnline marks the camera online at a frame; prev is the time of the frame before it
// (unix ns, 0 if none), so the change reports how long coverage was lost.
func (c *Camera) setOnline(now time.Time, prev int64) {
	c.mu.Lock()
	was := c.state
	c.state = StateOnline
	c.mu.Unlock()
	if was == StateOnline {
		return
	}
	ch := StatusChange{Camera: c.ID, State: StateOnline, Previous: was, At: now}
	if prev != 0 {
		ch.Gap = now.Sub(time.Unix(0, prev))
	}
	c.log.Info("camera online", "gap", ch.Gap.Round(time.Millisecond))
	if c.OnStatus != nil {
		c.OnStatus(ch)
	}
}

// withCredentials returns rawURL with username and password as its user info, or rawURL
// as it is when username is empty or rawURL does not parse.
func withCredentials(rawURL, username, password string) string {
	u, err := url.Parse(rawURL)
	if username == "" || err != nil {
		return rawURL
	}
	u.User = url.UserPassword(username, password)
	return u.String()
}

// backoff returns the delay before the next session: d ± 20%, drawn uniformly from that
// range cut to [retryMin, retryMax], so the delay never leaves the range the README states
// (1 s to 30 s) while cameras that fail together still spread out: at the cap the draws
// fall in [24 s, 30 s], at the floor in [1 s, 1.2 s].
func (c *Camera) backoff(d time.Duration) time.Duration {
	lo := max(c.retryMin, time.Duration(float64(d)*0.8))
	hi := min(c.retryMax, time.Duration(float64(d)*1.2))
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo+1)
}

func setDefault(p *time.Duration, v time.Duration) {
	if *p <= 0 {
		*p = v
	}
}

// rateLog summarizes a repeated warning: the first occurrence is logged, then at most one
// line per warnEvery with the number of occurrences since the previous line.
type rateLog struct {
	mu   sync.Mutex
	last time.Time
	n    int
}

func (r *rateLog) warn(l *slog.Logger, msg string, args ...any) {
	r.mu.Lock()
	r.n++
	now := time.Now()
	if !r.last.IsZero() && now.Sub(r.last) < warnEvery {
		r.mu.Unlock()
		return
	}
	n := r.n
	r.n, r.last = 0, now
	r.mu.Unlock()
	l.Warn(msg, append(args, "count", n)...)
}
