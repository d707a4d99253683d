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
	"github.com/visiond/visiond/sources"
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

// snapshot keeps, for the snapshot endpoint and the objects' evidence, the latest analysed
// frame of a camera (a copy of the frame as the model saw it, held in the format the frame
// was: planar YUV 4:2:0 for most cameras) with its detections, the frame kept for the job in
// flight, and the JPEG last rendered. A frame is kept only while one is wanted:
// a client asked for the snapshot within snapshotInterest, or the camera's objects want
// evidence (the caller says so); then at most once per snapshotEvery. When its job finishes
// it becomes the latest analysed one. The buffers come from a pool shared by the cameras and
// go back to it once nobody wants them (settle), so a camera nobody watches holds none
// between its evidence frames. The JPEG is rendered on request, once per analysed frame kept;
// a request that comes before any kept frame's job has finished waits for the first, while
// the camera's frames are coming.
type snapshot struct {
	bufs *sources.FrameBuffers // the copies' buffers; nil: the snapshot's own, made at its first frame (tests)
	own  bool                  // bufs is the snapshot's own, closed with it

	mu      sync.Mutex
	pending keptFrame     // the frame of the job in flight (its job has not finished), if any
	last    keptFrame     // the latest kept frame whose job finished, with its detections, if any
	ready   chan struct{} // closed when a kept frame's job finishes; made by a request that found none
	taken   time.Time     // when pending was kept
	offered time.Time     // the camera's last frame dispatched, kept or not
	asked   time.Time     // the last request for the snapshot

	encoded    []byte // the last rendering, never changed in place (handed out as it is)
	encodedSeq uint64 // the frame it shows
}

// keptFrame is a copy of a frame handed to a worker, and then its detections.
type keptFrame struct {
	frame *sources.Frame // the copy; nil when none is held
	dets  []infer.Detection
	ids   []uint64    // the detections' track ids (0: none)
	scene *sceneState // the camera's zones and lines with their counts after the frame; nil: none
}

// offer keeps a copy of f, a frame about to be analysed, when one is wanted (evidence: the
// camera's objects want evidence), at most once per snapshotEvery; a frame whose job never
// finished (it failed, or was not dispatched) is replaced by the next. A frame that cannot
// be copied (no memory, or not of the model's input) is not kept.
func (s *snapshot) offer(f *sources.Frame, now time.Time, evidence bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered = now
	if !evidence && now.Sub(s.asked) >= snapshotInterest {
		// A pending frame's job ended without a result (one job of a camera at a time).
		s.pending.frame.Release() // nil-safe
		s.pending.frame = nil
		return
	}
	if s.pending.frame == nil && now.Sub(s.taken) < snapshotEvery {
		return
	}
	if s.bufs == nil {
		s.bufs, s.own = sources.NewFrameBuffers(f.Letterbox.DstW, f.Letterbox.DstH), true
	}
	s.pending.frame.Release() // nil-safe: a frame whose job never finished
	s.pending.frame = nil
	c, err := f.Copy(s.bufs)
	if err != nil {
		return // no snapshot, and no evidence, of this frame
	}
	s.pending.frame = c
	s.taken = now
}

// result attaches a job's detections when they belong to the frame kept, which becomes the
// latest analysed one, and reports whether they did.
func (s *snapshot) result(seq uint64, dets []infer.Detection, ids []uint64, scene *sceneState) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending.frame == nil || seq != s.pending.frame.Seq {
		return false
	}
	s.pending.dets = append(s.pending.dets[:0], dets...)
	s.pending.ids = append(s.pending.ids[:0], ids...)
	s.pending.scene = scene
	s.last.frame.Release() // nil-safe
	s.last, s.pending = s.pending, s.last
	s.pending.frame = nil
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
	if s.last.frame == nil || now.Sub(s.asked) < snapshotInterest {
		return
	}
	s.last.frame.Release()
	s.last.frame, s.last.scene = nil, nil
	s.encoded = nil
}

// close gives back every buffer held; the snapshot serves nothing afterwards.
func (s *snapshot) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last.frame.Release()
	s.pending.frame.Release()
	s.last, s.pending = keptFrame{}, keptFrame{}
	s.encoded = nil
	if s.bufs != nil && s.own {
		s.bufs.Close()
	}
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
	if s.last.frame == nil && now.Sub(s.offered) < snapshotWait {
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
	if s.last.frame == nil || s.encoded != nil && s.encodedSeq == s.last.frame.Seq {
		data := s.encoded
		s.mu.Unlock()
		return data, data != nil, nil
	}
	seq := s.last.frame.Seq
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
	if s.last.frame == nil || s.last.frame.Seq != seq {
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
	lb := s.last.frame.Letterbox
	bgr := gocv.NewMatWithSize(lb.ScaledH, lb.ScaledW, gocv.MatTypeCV8UC3)
	defer bgr.Close()
	pix, err := bgr.DataPtrUint8()
	if err == nil {
		err = s.last.frame.WriteBGR(pix) // the picture alone, into the Mat: the lock can go
	}
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}

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
