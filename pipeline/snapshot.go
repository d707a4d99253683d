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

// snapshot keeps, for the snapshot endpoint, the latest analysed frame of a camera
// (letterboxed RGB, as the model saw it) with its detections, the frame kept for the job in
// flight, and the JPEG last rendered. A frame is kept at most once per snapshotEvery; when
// its job finishes it becomes the latest analysed one (the two buffers swap, both reused).
// The JPEG is rendered on request, once per analysed frame kept; a request that comes before
// any kept frame's job has finished waits for the first.
type snapshot struct {
	mu      sync.Mutex
	pending keptFrame     // the frame of the job in flight, while waiting
	waiting bool          // pending's job has not finished
	last    keptFrame     // the latest kept frame whose job finished, with its detections
	hasLast bool          // last holds one
	first   chan struct{} // closed when the first kept frame's job finishes; nil before a frame is kept
	taken   time.Time     // when pending was kept

	encoded    []byte // the last rendering, never changed in place (handed out as it is)
	encodedSeq uint64 // the frame it shows
}

// keptFrame is a copy of a frame handed to a worker, and then its detections.
type keptFrame struct {
	pix  []byte // reused
	lb   geom.Letterbox
	seq  uint64
	dets []infer.Detection
}

// offer keeps a copy of a frame about to be analysed, at most once per snapshotEvery; a
// frame whose job never finished (it failed, or was not dispatched) is replaced by the next.
func (s *snapshot) offer(pix []byte, lb geom.Letterbox, seq uint64, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.waiting && now.Sub(s.taken) < snapshotEvery {
		return
	}
	s.pending.pix = append(s.pending.pix[:0], pix...)
	s.pending.lb, s.pending.seq = lb, seq
	s.waiting, s.taken = true, now
	if s.first == nil {
		s.first = make(chan struct{})
	}
}

// result attaches a job's detections when they belong to the frame kept, which becomes the
// latest analysed one.
func (s *snapshot) result(seq uint64, dets []infer.Detection) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.waiting || seq != s.pending.seq {
		return
	}
	s.pending.dets = append(s.pending.dets[:0], dets...)
	s.last, s.pending = s.pending, s.last
	s.waiting = false
	if !s.hasLast {
		s.hasLast = true
		close(s.first)
	}
}

var (
	boxColor  = color.RGBA{R: 255, G: 64, B: 32, A: 255}
	textColor = color.RGBA{R: 255, G: 255, B: 255, A: 255}
)

// jpeg returns the latest analysed frame kept, cropped to the picture (no letterbox bars),
// with its boxes and labels drawn, as JPEG; before any kept frame's job has finished, it
// waits for the first (up to snapshotWait, or until ctx ends). ok is false when there is no
// analysed frame to show. The data must not be modified.
func (s *snapshot) jpeg(ctx context.Context) (data []byte, ok bool, err error) {
	s.mu.Lock()
	if !s.hasLast && s.first != nil {
		first := s.first
		s.mu.Unlock()
		wait := time.NewTimer(snapshotWait)
		defer wait.Stop()
		select {
		case <-first:
		case <-wait.C:
		case <-ctx.Done():
		}
		s.mu.Lock()
	}
	if !s.hasLast || s.encoded != nil && s.encodedSeq == s.last.seq {
		data := s.encoded
		s.mu.Unlock()
		return data, data != nil, nil
	}
	lb, seq := s.last.lb, s.last.seq
	rgb, err := gocv.NewMatFromBytes(lb.DstH, lb.DstW, gocv.MatTypeCV8UC3, s.last.pix)
	dets := append([]infer.Detection(nil), s.last.dets...)
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
