package pipeline

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"slices"
	"sync"
	"time"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/offheap"
)

// snapshotEvery is how often a camera's analysed frame is kept, while one is wanted: copying
// every frame would cost a frame-sized copy per job.
const snapshotEvery = time.Second

// snapshotWait bounds how long a request for a snapshot waits for the kept frame's job when
// there is nothing to serve yet.
const snapshotWait = 2 * time.Second

// snapshotInterest is how long after a request for a camera's snapshot its analysed frames go
// on being kept: a page that shows the snapshot asks for it every second or so.
const snapshotInterest = 30 * time.Second

// snapBuffers lends the buffers of the frames kept for snapshots, outside the Go heap; the
// cameras of a daemon share one.
type snapBuffers = offheap.Pool[struct{}]

// snapshot keeps, for the snapshot endpoint and the objects' evidence, the latest analysed
// frame of a camera (letterboxed RGB, as the model saw it) with its detections, the frame kept
// for the job in flight, and the JPEG last rendered. A frame is kept only while one is wanted:
// a client asked for the snapshot within snapshotInterest, or the camera's objects want
// evidence (the caller says so); then at most once per snapshotEvery. When its job finishes
// it becomes the latest analysed one. The buffers come from a pool shared by the cameras and
// go back to it once nobody wants them (settle), so a camera nobody watches holds none
// between its evidence frames. The JPEG is rendered on request, once per analysed frame kept;
// a request that comes before any kept frame's job has finished waits for the first, while
// the camera's frames are coming.
type snapshot struct {
	bufs *snapBuffers // nil: a pool of the snapshot's own, made at its first frame (tests, replay)

	mu      sync.Mutex
	pending keptFrame     // the frame of the job in flight, while waiting
	waiting bool          // pending's job has not finished
	last    keptFrame     // the latest kept frame whose job finished, with its detections
	hasLast bool          // last holds one
	ready   chan struct{} // closed when a kept frame's job finishes; made by a request that found none
	taken   time.Time     // when pending was kept
	offered time.Time     // the camera's last frame dispatched, kept or not
	asked   time.Time     // the last request for the snapshot

	encoded    []byte // the last rendering, never changed in place (handed out as it is)
	encodedSeq uint64 // the frame it shows
}

// keptFrame is a copy of a frame handed to a worker, and then its detections.
type keptFrame struct {
	buf   *offheap.Buffer[struct{}] // nil when none is held
	lb    geom.Letterbox
	seq   uint64
	dets  []infer.Detection
	ids   []uint64    // the detections' track ids (0: none)
	scene *sceneState // the camera's zones and lines with their counts after the frame; nil: none
}

// pix is the kept frame's pixels.
func (k *keptFrame) pix() []byte { return k.buf.B[:k.lb.DstW*k.lb.DstH*3] }

// newSnapBuffers returns a pool for the frames kept of a model input of w x h.
func newSnapBuffers(w, h int) *snapBuffers { return offheap.New[struct{}](w*h*3, 0) }

// offer keeps a copy of a frame about to be analysed when one is wanted (evidence: the
// camera's objects want evidence), at most once per snapshotEvery; a frame whose job never
// finished (it failed, or was not dispatched) is replaced by the next.
func (s *snapshot) offer(in infer.Input, lb geom.Letterbox, seq uint64, now time.Time, evidence bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered = now
	if !evidence && now.Sub(s.asked) >= snapshotInterest {
		if s.waiting { // its job ended without a result (one job of a camera at a time)
			s.bufs.Put(s.pending.buf)
			s.pending.buf, s.waiting = nil, false
		}
		return
	}
	if !s.waiting && now.Sub(s.taken) < snapshotEvery {
		return
	}
	if s.bufs == nil {
		s.bufs = newSnapBuffers(lb.DstW, lb.DstH)
	}
	if s.bufs.Size() != lb.DstW*lb.DstH*3 {
		return // not the model's input: nothing kept (not expected)
	}
	if s.pending.buf == nil {
		b, err := s.bufs.Get()
		if err != nil {
			return // no memory for it: no snapshot, and no evidence, of this frame
		}
		s.pending.buf = b
	}
	if err := in.WriteRGB(s.pending.buf.B); err != nil {
		s.waiting = false // not kept; its buffer is kept for the next
		return
	}
	s.pending.lb, s.pending.seq = lb, seq
	s.waiting, s.taken = true, now
}

// result attaches a job's detections when they belong to the frame kept, which becomes the
// latest analysed one, and reports whether they did.
func (s *snapshot) result(seq uint64, dets []infer.Detection, ids []uint64, scene *sceneState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.waiting || seq != s.pending.seq {
		return false
	}
	s.pending.dets = append(s.pending.dets[:0], dets...)
	s.pending.ids = append(s.pending.ids[:0], ids...)
	s.pending.scene = scene
	s.bufs.Put(s.last.buf) // nil-safe
	s.last, s.pending = s.pending, s.last
	s.pending.buf = nil
	s.waiting = false
	s.hasLast = true
	if s.ready != nil {
		close(s.ready)
		s.ready = nil
	}
	return true
}

// settle gives the latest analysed frame's buffer back when no client has asked for the
// snapshot within snapshotInterest: its evidence, if any, was taken with its result.
func (s *snapshot) settle(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.hasLast || now.Sub(s.asked) < snapshotInterest {
		return
	}
	s.bufs.Put(s.last.buf)
	s.last.buf, s.last.scene = nil, nil
	s.hasLast = false
	s.encoded = nil
}

// close gives back every buffer held; the snapshot serves nothing afterwards.
func (s *snapshot) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bufs == nil {
		return
	}
	s.bufs.Put(s.last.buf)
	s.bufs.Put(s.pending.buf)
	s.last, s.pending = keptFrame{}, keptFrame{}
	s.hasLast, s.waiting, s.encoded = false, false, nil
}

var (
	boxColor  = color.RGBA{R: 255, G: 64, B: 32, A: 255}
	textColor = color.RGBA{R: 255, G: 255, B: 255, A: 255}
	zoneColor = color.RGBA{R: 32, G: 200, B: 255, A: 255}
	lineColor = color.RGBA{R: 255, G: 220, B: 0, A: 255}
)

// drawScene draws the zones (outline, id and objects inside) and lines (segment, id and
// counts in and out) of a camera on img, the picture of a frame.
func drawScene(img *gocv.Mat, st *sceneState) {
	w, h := float64(img.Cols()), float64(img.Rows())
	at := func(p []float64) image.Point { return image.Pt(int(p[0]*w), int(p[1]*h)) }
	occupancy := map[string]int{}
	for _, o := range st.occupancy {
		occupancy[o.Zone] = o.Total
	}
	for _, z := range st.settings.Analytics.Zones {
		pts := make([]image.Point, len(z.Polygon))
		for i, p := range z.Polygon {
			pts[i] = at(p)
		}
		pv := gocv.NewPointsVectorFromPoints([][]image.Point{pts})
		gocv.Polylines(img, pv, true, zoneColor, 2)
		pv.Close()
		gocv.PutText(img, fmt.Sprintf("%s: %d", z.ID, occupancy[z.ID]), pts[0].Add(image.Pt(4, 16)), gocv.FontHersheySimplex, 0.5, zoneColor, 1)
	}
	counts := map[string]map[string]uint64{}
	for _, n := range st.counts {
		if counts[n.Line] == nil {
			counts[n.Line] = map[string]uint64{}
		}
		counts[n.Line][string(n.Direction)] += n.N
	}
	for _, l := range st.settings.Analytics.Lines {
		a, b := at(l.Points[0]), at(l.Points[1])
		gocv.Line(img, a, b, lineColor, 2)
		gocv.PutText(img, fmt.Sprintf("%s in %d out %d", l.ID, counts[l.ID]["in"], counts[l.ID]["out"]),
			a.Add(image.Pt(4, 16)), gocv.FontHersheySimplex, 0.5, lineColor, 1)
	}
}

// jpeg returns the latest analysed frame kept, cropped to the picture (no letterbox bars),
// with its boxes and labels drawn, as JPEG, and keeps the camera's frames kept for the next
// snapshotInterest. With no analysed frame kept while the camera's frames are coming (one
// was dispatched within snapshotWait), it waits for the next kept frame's job (up to
// snapshotWait, or until ctx ends). ok is false when there is no analysed frame to show. The
// data must not be modified.
func (s *snapshot) jpeg(ctx context.Context) (data []byte, ok bool, err error) {
	s.mu.Lock()
	now := time.Now()
	s.asked = now
	if !s.hasLast && now.Sub(s.offered) < snapshotWait {
		if s.ready == nil {
			s.ready = make(chan struct{})
		}
		ready := s.ready
		s.mu.Unlock()
		wait := time.NewTimer(snapshotWait)
		defer wait.Stop()
		select {
		case <-ready:
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
	seq := s.last.seq
	data, err = s.renderLast(s.last.dets, s.last.ids, s.last.scene) // unlocks s.mu
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	if s.encoded == nil || seq >= s.encodedSeq { // a concurrent request may have rendered a newer one
		s.encoded, s.encodedSeq = data, seq
	}
	s.mu.Unlock()
	return data, true, nil
}

// evidence renders the latest analysed frame, if it is frame seq, with one tracked object's
// box and label: its best frame, for the snapshot store. ok is false when the frame kept is
// another.
func (s *snapshot) evidence(seq uint64, d infer.Detection, id uint64) (data []byte, ok bool, err error) {
	s.mu.Lock()
	if !s.hasLast || s.last.seq != seq {
		s.mu.Unlock()
		return nil, false, nil
	}
	data, err = s.renderLast([]infer.Detection{d}, []uint64{id}, nil) // unlocks s.mu
	return data, err == nil, err
}

// renderLast returns the latest analysed frame, cropped to the picture (no letterbox bars),
// with dets' boxes, labels and track ids (ids[i] of dets[i]) drawn, and the zones and lines
// of scene with their counts, as JPEG. It is called with s.mu held and releases it once the
// frame is copied; dets, ids and scene are not changed.
func (s *snapshot) renderLast(dets []infer.Detection, ids []uint64, scene *sceneState) ([]byte, error) {
	dets, ids = slices.Clone(dets), slices.Clone(ids) // the buffers are reused once s.mu is released
	lb := s.last.lb
	rgb, err := gocv.NewMatFromBytes(lb.DstH, lb.DstW, gocv.MatTypeCV8UC3, s.last.pix())
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	picture := rgb.Region(image.Rect(lb.PadX, lb.PadY, lb.PadX+lb.ScaledW, lb.PadY+lb.ScaledH))
	bgr := gocv.NewMat()
	gocv.CvtColor(picture, &bgr, gocv.ColorBGRToRGB) // swaps R and B, into a copy: the lock can go
	picture.Close()
	rgb.Close()
	s.mu.Unlock()
	defer bgr.Close()

	if scene != nil {
		drawScene(&bgr, scene)
	}
	sx, sy := float64(lb.ScaledW)/float64(lb.SrcW), float64(lb.ScaledH)/float64(lb.SrcH)
	for i, d := range dets {
		r := image.Rect(int(d.Box.X*sx), int(d.Box.Y*sy), int((d.Box.X+d.Box.W)*sx), int((d.Box.Y+d.Box.H)*sy))
		gocv.Rectangle(&bgr, r, boxColor, 2)
		label := fmt.Sprintf("%s %.2f", d.Label, d.Score)
		if i < len(ids) && ids[i] != 0 {
			label = fmt.Sprintf("#%d %s %.2f", ids[i], d.Label, d.Score)
		}
		gocv.PutText(&bgr, label, image.Pt(r.Min.X+2, max(r.Min.Y-4, 12)), gocv.FontHersheySimplex, 0.45, textColor, 1)
	}
	buf, err := gocv.IMEncode(gocv.JPEGFileExt, bgr)
	if err != nil {
		return nil, fmt.Errorf("snapshot: encode: %w", err)
	}
	defer buf.Close()
	return append([]byte(nil), buf.GetBytes()...), nil
}
