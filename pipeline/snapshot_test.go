package pipeline

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/jpeg"
	"sync/atomic"
	"testing"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/sources"
)

// The snapshot serves the last frame whose job finished: a request before any waits for the
// kept frame's job; while a newer kept frame's job is in flight (or after it failed), the
// previous frame, rendered or not; once it is done, the new one.
func TestSnapshotKeepsLastRendering(t *testing.T) {
	lb := geom.NewLetterbox(64, 48, 64, 64) // a 64x48 picture between gray bars
	frame := func(v byte) []byte {
		pix := bytes.Repeat([]byte{geom.PadValue}, 64*64*3)
		for i := lb.PadY * 64 * 3; i < (lb.PadY+lb.ScaledH)*64*3; i++ {
			pix[i] = v
		}
		return pix
	}
	get := func(s *snapshot, timeout time.Duration) ([]byte, bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		data, ok, err := s.jpeg(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return data, ok
	}
	// brightness decodes a snapshot and returns its size and mean brightness.
	brightness := func(data []byte) (image.Rectangle, int) {
		t.Helper()
		img, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		b := img.Bounds()
		var sum int
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				sum += int(r>>8+g>>8+bl>>8) / 3
			}
		}
		return b, sum / (b.Dx() * b.Dy())
	}

	// Requests that must not wait get a minute: one that waited for it would show.
	var s snapshot
	defer s.close()
	t0 := time.Now()
	// Nobody asked and no evidence is wanted: nothing is kept.
	s.offer(rgbFrame(t, frame(20), lb, 1), t0, false)
	if s.result(1, nil, nil, nil) || s.held() != 0 {
		t.Fatalf("a frame nobody wanted: kept, holding %d bytes", s.held())
	}
	// A request finds nothing analysed while frames come: it waits its bound for one kept
	// (none comes here), and the camera's frames are kept from then on.
	start := time.Now()
	if _, ok := get(&s, time.Minute); ok || time.Since(start) > 30*time.Second {
		t.Fatalf("empty snapshot: ok %v after %v, want no snapshot after at most %v", ok, time.Since(start), snapshotWait)
	}

	// The first frame kept: the request waits for its job.
	t0 = time.Now()
	s.offer(rgbFrame(t, frame(20), lb, 2), t0, false)
	var finished atomic.Bool
	go func() {
		time.Sleep(100 * time.Millisecond)
		finished.Store(true)
		s.result(2, nil, nil, nil)
	}()
	dark, ok := get(&s, time.Minute)
	if !ok || !finished.Load() {
		t.Fatalf("first frame: ok %v, job finished %v: want the frame once its job finished", ok, finished.Load())
	}
	if b, v := brightness(dark); b.Dx() != 64 || b.Dy() != 48 || v > 40 {
		t.Fatalf("first frame: %v with brightness %d, want the 64x48 picture without bars, dark", b, v)
	}

	// A second frame kept a second later: while its job is in flight, the first is served.
	s.offer(rgbFrame(t, frame(230), lb, 7), t0.Add(snapshotEvery), false)
	if data, ok := get(&s, time.Minute); !ok || !bytes.Equal(data, dark) {
		t.Fatalf("second frame in flight: ok %v, same as the first: %v; want the first", ok, bytes.Equal(data, dark))
	}
	if n := s.held(); n != 2*int64(sources.FrameBytes(64, 64)) {
		t.Fatalf("a frame served and one in flight: %d bytes held, want two frames'", n)
	}
	s.result(7, []infer.Detection{{Label: "person", Score: 0.9, Box: geom.Box{X: 10, Y: 10, W: 20, H: 20}}}, nil, nil)
	if n := s.held(); n != int64(sources.FrameBytes(64, 64)) {
		t.Fatalf("the second frame analysed: %d bytes held, want one frame's (the first's went back)", n)
	}
	bright, ok := get(&s, time.Minute)
	if !ok {
		t.Fatal("second frame done: no snapshot")
	}
	if _, v := brightness(bright); v < 180 {
		t.Fatalf("second frame done: brightness %d, want the bright second frame", v)
	}
	if n := countNear(mustDecode(t, bright), boxColor, 60); n < 20 {
		t.Fatalf("second frame done: %d box-coloured pixels, want its detection drawn", n)
	}

	// A frame offered within the second is not kept; a later one whose job never ends leaves
	// the second frame served.
	s.offer(rgbFrame(t, frame(20), lb, 8), t0.Add(snapshotEvery+time.Millisecond), false)
	s.offer(rgbFrame(t, frame(20), lb, 12), t0.Add(2*snapshotEvery), false)
	s.result(11, nil, nil, nil) // another frame's result
	if data, ok := get(&s, time.Minute); !ok || !bytes.Equal(data, bright) {
		t.Fatalf("third frame lost: ok %v, want the second frame's snapshot", ok)
	}

	// Nobody asks for snapshotInterest: the analysed frame goes back after its result, and
	// frames are kept again only for evidence.
	later := time.Now().Add(snapshotInterest)
	s.offer(rgbFrame(t, frame(20), lb, 13), later, false)
	s.result(13, nil, nil, nil)
	s.settle(later)
	if n := s.held(); n != 0 {
		t.Fatalf("nobody asking: %d bytes held after the result, want none", n)
	}
	s.offer(rgbFrame(t, frame(20), lb, 14), later.Add(snapshotEvery), false)
	if s.result(14, nil, nil, nil) {
		t.Fatal("nobody asking and no evidence wanted: a frame was kept")
	}
	s.offer(rgbFrame(t, frame(230), lb, 15), later.Add(2*snapshotEvery), true)
	if !s.result(15, nil, nil, nil) {
		t.Fatal("evidence wanted: the frame was not kept")
	}
	if _, ok, _ := s.evidence(15, infer.Detection{Label: "person", Box: geom.Box{X: 10, Y: 10, W: 20, H: 20}}, 3); !ok {
		t.Fatal("evidence wanted: the kept frame gave none")
	}
	s.settle(later.Add(2 * snapshotEvery))
	if n := s.held(); n != 0 {
		t.Fatalf("evidence taken, nobody asking: %d bytes held, want none", n)
	}

	// An analysed frame never rendered is served at once while the next kept frame's job is
	// in flight (on a busy machine that job can take longer than a request waits).
	var busy snapshot
	defer busy.close()
	busy.offer(rgbFrame(t, frame(230), lb, 1), t0, true)
	busy.result(1, nil, nil, nil)
	busy.offer(rgbFrame(t, frame(20), lb, 2), t0.Add(snapshotEvery), true)
	if data, ok := get(&busy, time.Minute); !ok {
		t.Fatal("analysed frame not rendered before the next was kept: no snapshot")
	} else if _, v := brightness(data); v < 180 {
		t.Fatalf("analysed frame not rendered before the next was kept: brightness %d, want the bright analysed frame", v)
	}

	// Nothing rendered yet and the kept frame's job never ends: the request gives up.
	var lost snapshot
	defer lost.close()
	lost.offer(rgbFrame(t, frame(20), lb, 1), time.Now(), true)
	start = time.Now()
	if _, ok := get(&lost, 100*time.Millisecond); ok || time.Since(start) > 5*time.Second {
		t.Fatalf("kept frame lost: ok %v after %v, want no snapshot within the request's deadline", ok, time.Since(start))
	}

	// A camera whose frames do not come: the request does not wait.
	var offline snapshot
	start = time.Now()
	if _, ok := get(&offline, time.Minute); ok || time.Since(start) > snapshotWait/2 {
		t.Fatalf("a camera without frames: ok %v after %v, want no snapshot at once", ok, time.Since(start))
	}
}

func mustDecode(t *testing.T, data []byte) image.Image {
	t.Helper()
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// The snapshot draws the camera's zones and lines with their counts, and track ids; the
// evidence of an object is its frame with its box only, and only for the frame kept.
func TestSnapshotDrawsScene(t *testing.T) {
	lb := geom.NewLetterbox(320, 240, 320, 320)
	pix := bytes.Repeat([]byte{40, 60, 200}, lb.DstW*lb.DstH) // blue, in RGB order
	st := &sceneState{settings: &analyticsSettings{Analytics: analytics.Config{
		Zones: []analytics.Zone{{ID: "lower", Polygon: analytics.Points{{0.1, 0.5}, {0.9, 0.5}, {0.9, 0.9}, {0.1, 0.9}}}},
		Lines: []analytics.Line{{ID: "middle", Points: analytics.Points{{0.5, 0.05}, {0.5, 0.95}}}},
	}}}
	var s snapshot
	defer s.close()
	s.offer(rgbFrame(t, pix, lb, 3), time.Now(), true)
	det := infer.Detection{Label: "person", Score: 0.8, Box: geom.Box{X: 20, Y: 20, W: 40, H: 80}}
	if !s.result(3, []infer.Detection{det}, []uint64{17}, st) {
		t.Fatal("result of the kept frame: not taken")
	}
	data, ok, err := s.jpeg(context.Background())
	if err != nil || !ok {
		t.Fatalf("jpeg: %v %v", ok, err)
	}
	img := mustDecode(t, data)
	if r, g, b, _ := img.At(300, 10).RGBA(); r>>8 > 60 || g>>8 < 40 || g>>8 > 80 || b>>8 < 180 { // away from what is drawn
		t.Errorf("the picture at (300, 10): RGB %d %d %d, want the frame's blue, 40 60 200", r>>8, g>>8, b>>8)
	}
	for _, c := range []struct {
		name string
		rgba color.RGBA
		min  int
	}{{"zone", zoneColor, 500}, {"line", lineColor, 300}, {"box", boxColor, 200}} {
		if n := countNear(img, c.rgba, 60); n < c.min {
			t.Errorf("%s: %d pixels of its colour, want at least %d", c.name, n, c.min)
		}
	}
	if s.result(4, nil, nil, nil) {
		t.Error("result of a frame not kept: taken")
	}
	ev, ok, err := s.evidence(3, det, 17)
	if err != nil || !ok {
		t.Fatalf("evidence of the kept frame: %v %v", ok, err)
	}
	img = mustDecode(t, ev)
	if n := countNear(img, zoneColor, 60); n > 50 {
		t.Errorf("evidence: %d zone-coloured pixels, want the object's box alone", n)
	}
	if n := countNear(img, boxColor, 60); n < 200 {
		t.Errorf("evidence: %d box-coloured pixels, want its box", n)
	}
	if _, ok, _ := s.evidence(9, det, 17); ok {
		t.Error("evidence of a frame not kept: taken")
	}
}

// held is the bytes of the buffers the snapshot holds.
func (s *snapshot) held() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bufs == nil {
		return 0
	}
	st := s.bufs.Stats()
	n := int64(st.RGB.InUse * st.RGB.Size)
	for _, y := range st.YUV {
		n += int64(y.InUse * y.Size)
	}
	return n
}

// rgbFrame is a held frame of the RGB24 input pix, letterboxed as lb.
func rgbFrame(t *testing.T, pix []byte, lb geom.Letterbox, seq uint64) *sources.Frame {
	t.Helper()
	f, err := sources.NewFrame("cam", seq, lb, pix)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
