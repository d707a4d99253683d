package pipeline

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"sync"
	"time"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// snapshotEvery is how often a camera's analysed frame is kept for /snapshot.jpg: copying
// every frame would cost a frame-sized copy per job.
const snapshotEvery = time.Second

// snapshotWait bounds how long a request for a snapshot waits for the kept frame's job when
// there is nothing to serve yet.
const snapshotWait = 2 * time.Second

// snapshot keeps one analysed frame of a camera (letterboxed RGB, as the model saw it) and
// its detections, for the snapshot endpoint, and the JPEG last rendered from it. The JPEG is
// rendered on request, once per kept frame, and stays served while the next kept frame's job
// is in flight; a request that finds nothing rendered and the kept frame's job in flight
// waits for it.
type snapshot struct {
	mu       sync.Mutex
	pix      []byte // reused
	lb       geom.Letterbox
	seq      uint64
	dets     []infer.Detection
	complete bool          // dets belong to pix
	done     chan struct{} // closed when the kept frame is complete; nil before the first frame
	taken    time.Time

	encoded    []byte // the last rendering, never changed in place (handed out as it is)
	encodedSeq uint64 // the frame it shows
}

// offer keeps a copy of a frame about to be analysed, at most once per snapshotEvery.
func (s *snapshot) offer(pix []byte, lb geom.Letterbox, seq uint64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.taken) < snapshotEvery && s.complete {
		return
	}
	s.pix = append(s.pix[:0], pix...)
	if s.done == nil || s.complete {
		s.done = make(chan struct{})
	} // else the kept frame never got its result (its job failed, or was not dispatched): waiters wait on for this one

	s.lb, s.seq, s.complete, s.taken = lb, seq, false, now
}

// result attaches a job's detections when they belong to the kept frame.
func (s *snapshot) result(seq uint64, dets []infer.Detection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq == s.seq && !s.complete && s.done != nil {
		s.dets, s.complete = append(s.dets[:0], dets...), true
		close(s.done)
	}
}

var (
	boxColor  = color.RGBA{R: 255, G: 64, B: 32, A: 255}
	textColor = color.RGBA{R: 255, G: 255, B: 255, A: 255}
)

// jpeg returns the latest analysed frame kept, cropped to the picture (no letterbox bars),
// with its boxes and labels drawn, as JPEG; while the kept frame's job is in flight, the
// frame rendered before it, or, when there is none, the kept frame once its job is done
// (waiting up to snapshotWait, or until ctx ends). ok is false when there is no analysed
// frame to show. The data must not be modified.
func (s *snapshot) jpeg(ctx context.Context) (data []byte, ok bool, err error) {
	s.mu.Lock()
	if !s.complete && s.encoded == nil && s.done != nil {
		done := s.done
		s.mu.Unlock()
		wait := time.NewTimer(snapshotWait)
		defer wait.Stop()
		select {
		case <-done:
		case <-wait.C:
		case <-ctx.Done():
		}
		s.mu.Lock()
	}
	if !s.complete || s.encoded != nil && s.encodedSeq == s.seq {
		data := s.encoded
		s.mu.Unlock()
		return data, data != nil, nil
	}
	lb, seq := s.lb, s.seq
	rgb, err := gocv.NewMatFromBytes(lb.DstH, lb.DstW, gocv.MatTypeCV8UC3, s.pix)
	dets := append([]infer.Detection(nil), s.dets...)
	if err != nil {
		s.mu.Unlock()
		return nil, false, fmt.Errorf("snapshot: %w", err)
	}
	picture := rgb.Region(image.Rect(lb.PadX, lb.PadY, lb.PadX+lb.ScaledW, lb.PadY+lb.ScaledH))
	bgr := gocv.NewMat()
	gocv.CvtColor(picture, &bgr, gocv.ColorBGRToRGB) // swaps R and B, into a copy: the lock can go
	picture.Close()
	rgb.Close()
	s.mu.Unlock()
	defer bgr.Close()

	sx, sy := float64(lb.ScaledW)/float64(lb.SrcW), float64(lb.ScaledH)/float64(lb.SrcH)
	for _, d := range dets {
		r := image.Rect(int(d.Box.X*sx), int(d.Box.Y*sy), int((d.Box.X+d.Box.W)*sx), int((d.Box.Y+d.Box.H)*sy))
		gocv.Rectangle(&bgr, r, boxColor, 2)
		label := fmt.Sprintf("%s %.2f", d.Label, d.Score)
		gocv.PutText(&bgr, label, image.Pt(r.Min.X+2, max(r.Min.Y-4, 12)), gocv.FontHersheySimplex, 0.45, textColor, 1)
	}
	buf, err := gocv.IMEncode(gocv.JPEGFileExt, bgr)
	if err != nil {
		return nil, false, fmt.Errorf("snapshot: encode: %w", err)
	}
	defer buf.Close()
	data = append([]byte(nil), buf.GetBytes()...)
	s.mu.Lock()
	if s.encoded == nil || seq >= s.encodedSeq { // a concurrent request may have rendered a newer one
		s.encoded, s.encodedSeq = data, seq
	}
	s.mu.Unlock()
	return data, true, nil
}
