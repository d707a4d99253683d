package sources

// Capture sources: kind gstreamer (a GStreamer pipeline ending in appsink, opened by
// OpenCV's GStreamer backend in a capture process, package capture; the Jetson
// hardware-decode path) and kind file (a video file opened by OpenCV's FFmpeg backend in
// this process, played at its own rate and looped).
//
// Reads block, so each session runs a read goroutine that owns the reads: it reads one frame
// ahead into one of two reused Mats and hands it over a channel; the session goroutine paces
// (kind file), letterboxes and emits it, then hands the Mat back. When the session ends, the
// read goroutine is stopped and waited for before the capture is closed, so no goroutine
// outlives runCapture and no Mat is used after Close.
//
// A GStreamer open or read can block in C for minutes (rtspsrc to a closed port, a silent
// camera), so kind gstreamer reads in a child process: the stall watchdog (StallTimeout)
// bounds an open or read that blocks, and ending the session kills the process, which ends
// the read at once. Kind file stays here: OpenCV's FFmpeg backend on a local file returns
// from open and read (a frame, the end or an error) without waiting on a peer, and its pacing
// and looping need the capture's seek and frame rate.

import (
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/sources/capture"
)

const (
	fileDefaultFPS = 25          // kind file: rate used when the file reports none
	fileMaxLag     = time.Second // kind file: further behind than this, pacing restarts from now
)

// capFrame is one frame read by the read goroutine.
type capFrame struct {
	m  *gocv.Mat // one of the reader's Mats; handed back through capReader.free
	at time.Time // when the frame was read
	n  int       // kind file: its number in the file, from 1 (a lower one: the file looped)
}

// capReader is the read goroutine of one capture session and its channels.
type capReader struct {
	c      *Camera
	vc     *gocv.VideoCapture // kind file
	proc   *capture.Process   // kind gstreamer
	kind   Kind
	name   string // what the errors call the source: "the pipeline" or "file NAME"
	loop   bool   // at the end of the stream, seek back to frame 0 (kind file)
	mats   [2]gocv.Mat
	free   chan *gocv.Mat // Mats the reader may read into
	frames chan capFrame  // read frames; unbuffered
	stop   chan struct{}  // closed when the session ends
	done   chan struct{}  // closed by the read goroutine when it returns
	err    error          // why the read goroutine returned; read after done
	n      int            // frames read since open or the last rewind (read goroutine only)
	opened atomic.Bool    // kind gstreamer: the capture process opened the pipeline
}

// runCapture runs one gstreamer or file session until the source fails or ctx ends;
// onlineAt is when it delivered its first frame (zero if it never did).
func (c *Camera) runCapture(ctx context.Context) (onlineAt time.Time, err error) {
	r, err := c.openCapture()
	if err != nil {
		return time.Time{}, err
	}
	fps := 0.0
	if r.loop {
		fps = r.vc.Get(gocv.VideoCaptureFPS)
		if !(fps > 0 && fps < 1000) {
			c.log.Info("file reports no frame rate, using the default", "file", c.File, "fps", fileDefaultFPS)
			fps = fileDefaultFPS
		}
		c.log.Debug("playing file", "file", c.File, "fps", fps,
			"frames", int(r.vc.Get(gocv.VideoCaptureFrameCount)))
	}
	if r.vc != nil {
		c.log.Debug("capture opened", "kind", c.Kind)
	}
	var pkts *filePackets // kind file with OnPacket: the file's packets, for clips
	if r.loop && c.OnPacket != nil {
		if pkts, err = openFilePackets(c); err != nil {
			c.log.Warn("file camera: no packets for its clips", "error", err.Error())
		}
		defer pkts.close()
	}
	go r.run()
	defer r.close()

	lbx := &letterboxer{scaled: gocv.NewMat(), rgb: gocv.NewMat()}
	defer lbx.close()
	fill := lbx.fill // one method value per session, not one closure per frame

	var (
		lastLB geom.Letterbox
		timer  *time.Timer
		start  time.Time // kind file: when frame 0 of the pacing was due
		due    int64     // kind file: frames paced since start
		period time.Duration
	)
	if fps > 0 {
		period = time.Duration(float64(time.Second) / fps)
		timer = time.NewTimer(time.Hour)
		timer.Stop()
		defer timer.Stop()
	}
	for {
		var f capFrame
		select {
		case <-ctx.Done():
			return onlineAt, r.cut(ctx)
		case <-r.done:
			return onlineAt, r.err
		case f = <-r.frames:
		}
		captured := f.at
		if period > 0 {
			now := time.Now()
			if due == 0 {
				start = now
			}
			at := start.Add(time.Duration(due) * period)
			if late := now.Sub(at); late > fileMaxLag {
				c.log.Debug("file playback fell behind, pacing from now", "late", late.Round(time.Millisecond))
				start, due, at = now, 0, now
			}
			if !sleepUntil(ctx, timer, at) {
				r.free <- f.m
				return onlineAt, ctx.Err()
			}
			due++
			captured = at
		}
		lb := geom.NewLetterbox(f.m.Cols(), f.m.Rows(), c.InputW, c.InputH)
		if lb != lastLB {
			c.log.Info("stream geometry", "width", lb.SrcW, "height", lb.SrcH,
				"scaled", fmt.Sprintf("%dx%d", lb.ScaledW, lb.ScaledH), "pad", fmt.Sprintf("%d,%d", lb.PadX, lb.PadY))
			lastLB = lb
		}
		if onlineAt.IsZero() {
			onlineAt = time.Now()
		}
		if pkts != nil {
			pkts.frame(f.n, captured, period)
		}
		lbx.src = *f.m
		err := c.emit(lb, captured, rgbPicture(fill))
		lbx.src = gocv.Mat{}
		r.free <- f.m // never blocks: free holds both Mats
		if err != nil {
			return onlineAt, fmt.Errorf("kind %s: %w", r.kind, err)
		}
	}
}

// openCapture opens the session's capture (kind file) or starts its capture process (kind
// gstreamer) and makes its reader (not started).
func (c *Camera) openCapture() (*capReader, error) {
	r := &capReader{c: c, kind: c.Kind}
	var err error
	switch c.Kind {
	case KindGStreamer:
		if strings.TrimSpace(c.Pipeline) == "" {
			return nil, errors.New("kind gstreamer: no pipeline configured")
		}
		r.name = "the pipeline"
		r.proc, err = capture.Start(capture.Options{Command: c.CaptureCommand, Pipeline: c.Pipeline,
			Logger: c.log, Scrub: c.redactor.Scrub})
		if err != nil {
			return nil, fmt.Errorf("kind gstreamer: %w", err)
		}
		c.log.Debug("capture process started", "pid", r.proc.PID())
	case KindFile:
		if c.File == "" {
			return nil, errors.New("kind file: no file configured")
		}
		fh, err := os.Open(c.File)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("kind file: cannot read %s: %w", c.File, err)
		}
		st, err := fh.Stat()
		fh.Close()
		if err == nil && st.IsDir() {
			return nil, fmt.Errorf("kind file: %s is a directory, not a video file", c.File)
		}
		r.name = "file " + c.File
		r.loop = true
		r.vc, err = gocv.OpenVideoCaptureWithAPI(c.File, gocv.VideoCaptureFFmpeg)
		if err != nil || !r.vc.IsOpened() {
			closeCapture(r.vc)
			return nil, fmt.Errorf("kind file: %s is not a video that FFmpeg can open", c.File)
		}
	default:
		return nil, fmt.Errorf("kind %q is not a capture kind", c.Kind)
	}
	r.mats = [2]gocv.Mat{gocv.NewMat(), gocv.NewMat()}
	r.free = make(chan *gocv.Mat, len(r.mats))
	for i := range r.mats {
		r.free <- &r.mats[i]
	}
	r.frames = make(chan capFrame)
	r.stop = make(chan struct{})
	r.done = make(chan struct{})
	return r, nil
}

// cut is the error of a session whose ctx ended: for kind gstreamer cut by the stall
// watchdog, what was blocked (the open or a read) and that its process was killed.
func (r *capReader) cut(ctx context.Context) error {
	cause := context.Cause(ctx)
	if r.proc == nil || !errors.Is(cause, errStalled) {
		return ctx.Err()
	}
	r.c.stuck.Add(1)
	if !r.opened.Load() {
		return fmt.Errorf("kind gstreamer: the pipeline did not open within stall_timeout %v (%w); its capture process was killed",
			r.c.StallTimeout, cause)
	}
	return fmt.Errorf("kind gstreamer: the pipeline delivered nothing (%w); its capture process was killed", cause)
}

// run is the read goroutine: it reads into free Mats and hands them out until the
// source ends or fails (r.err says why) or stop is closed.
func (r *capReader) run() {
	defer close(r.done)
	for {
		var m *gocv.Mat
		select {
		case <-r.stop:
			return
		case m = <-r.free:
		}
		at, err := r.read(m)
		if err != nil {
			r.err = err
			return
		}
		select {
		case <-r.stop:
			return
		case r.frames <- capFrame{m: m, at: at, n: r.n}:
		}
	}
}

// read reads the next frame into m and says when it was read; kind file rewinds at the
// end of the file.
func (r *capReader) read(m *gocv.Mat) (time.Time, error) {
	if r.proc != nil {
		return r.readProc(m)
	}
	if r.vc.Read(m) && !m.Empty() {
		r.n++
		return time.Now(), nil
	}
	if r.stopped() {
		return time.Time{}, errors.New("stopped")
	}
	if r.n == 0 {
		return time.Time{}, fmt.Errorf("kind %s: %s: no frame could be decoded", r.kind, r.name)
	}
	r.vc.Set(gocv.VideoCapturePosFrames, 0)
	r.n = 0
	if r.vc.Read(m) && !m.Empty() {
		r.n++
		return time.Now(), nil
	}
	return time.Time{}, fmt.Errorf("kind %s: %s: cannot loop: no frame after seeking back to the start", r.kind, r.name)
}

// readProc reads the capture process's messages up to the next frame, into m.
func (r *capReader) readProc(m *gocv.Mat) (time.Time, error) {
	for {
		msg, err := r.proc.Next()
		if r.stopped() {
			return time.Time{}, errors.New("stopped")
		}
		if err != nil {
			how := "ended"
			if !errors.Is(err, io.EOF) {
				how = "failed: " + err.Error()
			}
			return time.Time{}, fmt.Errorf("kind gstreamer: the capture %s after %d frames (%s)", how, r.n, r.proc.Ended(""))
		}
		switch msg.Type {
		case capture.MsgOpened:
			r.opened.Store(true)
			r.c.log.Debug("capture opened", "kind", r.kind, "pid", r.proc.PID())
			continue
		case capture.MsgError:
			return time.Time{}, fmt.Errorf("kind gstreamer: %s (%s)", msg.Text, r.proc.Ended(msg.Text))
		}
		typ := gocv.MatTypeCV8UC3
		switch msg.Channels {
		case 1:
			typ = gocv.MatTypeCV8UC1
		case 4:
			typ = gocv.MatTypeCV8UC4
		}
		if m.Cols() != msg.Width || m.Rows() != msg.Height || m.Type() != typ {
			m.Close()
			*m = gocv.NewMatWithSize(msg.Height, msg.Width, typ)
		}
		data, err := m.DataPtrUint8()
		if err != nil {
			return time.Time{}, fmt.Errorf("kind gstreamer: %w", err)
		}
		if err := r.proc.ReadFrame(data); err != nil {
			if r.stopped() {
				return time.Time{}, errors.New("stopped")
			}
			return time.Time{}, fmt.Errorf("kind gstreamer: the capture failed after %d frames: %w (%s)", r.n, err, r.proc.Ended(""))
		}
		r.n++
		return msg.At, nil
	}
}

func (r *capReader) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

// close stops the read goroutine, waits for it and closes the capture and the Mats. Kind
// gstreamer kills the capture process first, which ends a blocked read at once; kind file
// reads do not block on a peer, so it only waits.
func (r *capReader) close() {
	close(r.stop)
	if r.proc != nil {
		r.proc.Close()
	}
	<-r.done
	closeCapture(r.vc)
	for i := range r.mats {
		r.mats[i].Close()
	}
}

func closeCapture(vc *gocv.VideoCapture) {
	if vc != nil {
		vc.Close()
	}
}

// sleepUntil waits on timer until at; false if ctx ended first.
func sleepUntil(ctx context.Context, timer *time.Timer, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer.Reset(d)
	select {
	case <-ctx.Done():
		timer.Stop()
		return false
	case <-timer.C:
		return true
	}
}

// letterboxer draws BGR(A) Mats into letterboxed RGB24 buffers with reused Mats: after the
// first frame of a size, fill allocates nothing.
type letterboxer struct {
	src    gocv.Mat // the frame to draw; set before each fill, not owned
	scaled gocv.Mat // src resized to ScaledW x ScaledH
	rgb    gocv.Mat // scaled converted to RGB
}

// fill draws src into pix at lb (the emit callback).
func (l *letterboxer) fill(pix []byte, lb geom.Letterbox) error {
	if l.src.Cols() != lb.SrcW || l.src.Rows() != lb.SrcH {
		return fmt.Errorf("frame is %dx%d, letterbox expects %dx%d", l.src.Cols(), l.src.Rows(), lb.SrcW, lb.SrcH)
	}
	var code gocv.ColorConversionCode
	switch t := l.src.Type(); t {
	case gocv.MatTypeCV8UC3:
		code = gocv.ColorBGRToRGB
	case gocv.MatTypeCV8UC4:
		code = gocv.ColorRGBAToBGR // = COLOR_BGRA2RGB (3): swap R and B, drop alpha
	default:
		return fmt.Errorf("frame Mat type %v (%d channels), want 8-bit BGR: end the pipeline with "+
			"videoconvert ! video/x-raw,format=BGR ! appsink", t, l.src.Channels())
	}
	src := l.src
	if lb.ScaledW != lb.SrcW || lb.ScaledH != lb.SrcH {
		gocv.Resize(l.src, &l.scaled, image.Pt(lb.ScaledW, lb.ScaledH), 0, 0, gocv.InterpolationLinear)
		src = l.scaled
	}
	gocv.CvtColor(src, &l.rgb, code)
	data, err := l.rgb.DataPtrUint8()
	if err != nil {
		return err
	}
	row, stride := lb.ScaledW*3, lb.DstW*3
	if len(data) < row*lb.ScaledH {
		return fmt.Errorf("converted frame has %d bytes, want %d", len(data), row*lb.ScaledH)
	}
	off := (lb.PadY*lb.DstW + lb.PadX) * 3
	if need := off + (lb.ScaledH-1)*stride + row; len(pix) < need {
		return fmt.Errorf("buffer has %d bytes, letterbox %+v needs %d", len(pix), lb, need)
	}
	if row == stride {
		copy(pix[off:off+row*lb.ScaledH], data)
		return nil
	}
	for y := range lb.ScaledH {
		copy(pix[off+y*stride:off+y*stride+row], data[y*row:(y+1)*row])
	}
	return nil
}

func (l *letterboxer) close() {
	l.scaled.Close()
	l.rgb.Close()
}
