package groundtruth

import (
	"context"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
)

// loadMedia reads vtest.avi's background and people.
func loadMedia(t testing.TB) *Media {
	t.Helper()
	start := time.Now()
	m, err := LoadVTest(t.Context(), testutil.Media(t, "vtest.avi"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("vtest.avi: background and %d people in %v", len(m.People), time.Since(start).Round(time.Millisecond))
	return m
}

func TestLoadVTest(t *testing.T) {
	m := loadMedia(t)
	if m.Background.Rect != image.Rect(0, 0, 768, 576) || len(m.People) != len(personCuts()) {
		t.Fatalf("background %v, %d people", m.Background.Rect, len(m.People))
	}
	total := 0
	for _, p := range m.People {
		b := p.Image.Rect
		// A cut-out person: taller than wide, mostly opaque inside its box, transparent
		// outside the body, its box touched by the body on all four sides.
		if b.Dy() < 60 || b.Dx() < 20 || 2*b.Dy() < 3*b.Dx() || p.Class != "person" {
			t.Errorf("%s: %v %q", p.Name, b, p.Class)
		}
		opaque, edges := 0, [4]bool{}
		for y := range b.Dy() {
			for x := range b.Dx() {
				if p.Image.NRGBAAt(x, y).A == 255 {
					opaque++
					edges[0] = edges[0] || x == 0
					edges[1] = edges[1] || y == 0
					edges[2] = edges[2] || x == b.Dx()-1
					edges[3] = edges[3] || y == b.Dy()-1
				}
			}
		}
		if f := float64(opaque) / float64(b.Dx()*b.Dy()); f < 0.35 || f > 0.85 || edges != [4]bool{true, true, true, true} {
			t.Errorf("%s: %.0f%% of the box opaque, body on edges %v", p.Name, 100*f, edges)
		}
		total += opaque
	}
	if m.Person("walker-640") == nil || m.Person("nobody") != nil {
		t.Error("Person lookup")
	}
	// The van, cut out of the background: its tight box is the truck the model sees there
	// (VTestParked's first box), within a few pixels.
	if len(m.Vehicles) != 1 || m.Vehicles[0].Class != "car" || m.Vehicles[0].Name != "van" {
		t.Fatalf("vehicles %+v", m.Vehicles)
	}
	if r, want := m.Vehicles[0].Image.Rect, VTestParked()[0]; math.Abs(float64(r.Dx())-want.W) > 4 || math.Abs(float64(r.Dy())-want.H) > 4 {
		t.Errorf("van %v, want about %.0fx%.0f", r.Size(), want.W, want.H)
	}
	t.Logf("%d people, %d pixels", len(m.People), total)

	if _, err := LoadVTest(t.Context(), testutil.Media(t, "messi5.jpg")); err == nil || !strings.Contains(err.Error(), "want 768x576") {
		t.Errorf("messi5.jpg as vtest.avi: %v", err)
	}
	if _, err := LoadVTest(t.Context(), filepath.Join(t.TempDir(), "none.avi")); err == nil || !strings.Contains(err.Error(), "ffprobe") {
		t.Errorf("missing file: %v", err)
	}
	t.Run("detected", func(t *testing.T) { checkPeopleDetected(t, m) })
}

func TestCutSpriteErrors(t *testing.T) {
	frame := image.NewRGBA(image.Rect(0, 0, 64, 64))
	bg := image.NewRGBA(image.Rect(0, 0, 64, 64))
	for _, tc := range []struct {
		name string
		bg   *image.RGBA
		r    image.Rectangle
		want string
	}{
		{"sizes", image.NewRGBA(image.Rect(0, 0, 32, 32)), image.Rect(0, 0, 10, 10), "differ in size"},
		{"outside", bg, image.Rect(60, 60, 70, 70), "inside the frame"},
		{"nothing", bg, image.Rect(10, 10, 40, 40), "only 0 pixels differ"},
	} {
		if _, err := CutSprite(frame, tc.bg, tc.r, 28); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// A 10x20 block with a hole, cut from a window around it; then from one that cuts it.
	for y := 20; y < 40; y++ {
		for x := 20; x < 30; x++ {
			if x != 25 || y != 30 {
				frame.Pix[frame.PixOffset(x, y)] = 200
			}
		}
	}
	sp, err := CutSprite(frame, bg, image.Rect(10, 10, 40, 50), 28)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Image.Rect != image.Rect(0, 0, 10, 20) || sp.Image.NRGBAAt(5, 10).A != 255 {
		t.Errorf("cut %v, hole alpha %d: want the 10x20 block, its hole filled", sp.Image.Rect, sp.Image.NRGBAAt(5, 10).A)
	}
	if _, err := CutSprite(frame, bg, image.Rect(22, 10, 40, 50), 28); err == nil || !strings.Contains(err.Error(), "touches its edge") {
		t.Errorf("window cutting the object: %v", err)
	}
}

// blockMedia stands in for LoadVTest's media: a black plaza, and red 40x100 blocks for the
// people.
func blockMedia() *Media {
	m := &Media{Background: image.NewRGBA(image.Rect(0, 0, 768, 576))}
	for _, c := range personCuts() {
		m.People = append(m.People, block(c.name, 40, 100, red))
	}
	return m
}

func TestPlazaTruth(t *testing.T) {
	m := blockMedia()
	sc, err := Plaza(m, 5)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sc.Crossings(PlazaLine())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id  int
		dir Direction
		t   time.Duration
	}{{4, In, 4 * s}, {1, In, 4500 * time.Millisecond}, {2, Out, 7111111111}, {4, Out, 8400 * time.Millisecond}}
	if len(cs) != len(want) {
		t.Fatalf("crossings %+v", cs)
	}
	for i, w := range want {
		if c := cs[i]; c.ObjectID != w.id || c.Direction != w.dir || (c.T-w.t).Abs() > time.Millisecond {
			t.Errorf("crossing %d: %+v, want %+v", i, c, w)
		}
	}
	vs, err := sc.Visits(PlazaZone())
	if err != nil {
		t.Fatal(err)
	}
	// Object 3 enters at x = 0.06 (0.08/0.22 of its 2 s walk from 0.5 s) and leaves at
	// x = 0.36 (0.14/0.26 of its 2.5 s walk from 6.5 s).
	if len(vs) != 1 || vs[0].ObjectID != 3 || (vs[0].Enter-1227272727).Abs() > time.Millisecond ||
		(vs[0].Exit-7846153846).Abs() > time.Millisecond || vs[0].Open {
		t.Errorf("visits %+v", vs)
	}
	for _, o := range sc.Objects {
		if end := o.Path[len(o.Path)-1].T; end > PlazaDuration-time.Second {
			t.Errorf("object %d's path ends at %v, later than a second before the end", o.ID, end)
		}
	}
	// Object 2 passes in front of object 1 (drawn later, part of 1 hidden), and object 3's
	// anchor comes within 2% of the line's x without crossing.
	pl, err := NewScene(sc)
	if err != nil {
		t.Fatal(err)
	}
	hidden, closest := 1.0, 0.0
	for i := range sc.Frames() {
		for _, o := range pl.Truth(i).Objects {
			if o.ID == 1 && o.Anchor.X > 0.2 && o.Anchor.X < 0.8 {
				hidden = min(hidden, o.Visible)
			}
			if o.ID == 3 {
				closest = max(closest, o.Anchor.X)
			}
		}
	}
	if hidden > 0.9 || hidden == 0 || closest < 0.47 || closest >= 0.5 {
		t.Errorf("object 1 at least %.2f visible, object 3's anchor at most at x %.3f: want a partial occlusion and a near miss", hidden, closest)
	}
	if _, err := Plaza(&Media{}, 5); err == nil || !strings.Contains(err.Error(), `no sprite "walker-220"`) {
		t.Errorf("no sprites: %v", err)
	}
}

// writePlaza writes Plaza at fps into a temporary directory.
func writePlaza(t *testing.T, m *Media, fps int) (*Scene, string, []Frame) {
	t.Helper()
	s, err := Plaza(m, fps)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NewScene(s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), fmt.Sprintf("plaza-%d.ts", fps))
	start := time.Now()
	frames, err := sc.WriteTS(t.Context(), file)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d frames, %d KiB, written in %v", filepath.Base(file), len(frames), fi.Size()>>10, time.Since(start).Round(time.Millisecond))
	return sc, file, frames
}

// newDetector opens yolov8n in this process, on the CPU.
func newDetector(t *testing.T) *worker.Detector {
	t.Helper()
	d, err := worker.NewDetector(infer.DetectorOptions{Model: testutil.ThirdParty(t, "yolov8n.onnx"),
		Library: testutil.ThirdParty(t, "libonnxruntime.so.1"), Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// bestPerson returns the highest IoU of a person detection with box, and its score.
func bestPerson(dets []infer.Detection, box geom.Box) (iou float64, score float32) {
	for _, det := range dets {
		if v := IoU(det.Box, box); det.Label == "person" && v > iou {
			iou, score = v, det.Score
		}
	}
	return iou, score
}

// checkPeopleDetected draws each person of m, alone, at four places of the empty plaza
// (on the road, the paving and the grass), and runs the real detector on the frames: it
// must find the person with IoU >= 0.7 everywhere, which is how the cuts were chosen.
func checkPeopleDetected(t *testing.T, m *Media) {
	d := newDetector(t)
	pix := make([]byte, 640*640*3)
	for _, p := range m.People {
		worstIoU, worstScore := 1.0, float32(1)
		for _, at := range []Point{{0.2, 0.5}, {0.5, 0.45}, {0.8, 0.6}, {0.3, 0.85}} {
			sc, err := NewScene(Scenario{W: 768, H: 576, FPS: 1, Duration: time.Second, Background: m.Background,
				Objects: []Object{still(1, p, at.X, at.Y, 0, time.Second)}})
			if err != nil {
				t.Fatal(err)
			}
			img, f := sc.Render(0, nil)
			dets, _, err := d.Detect(pix, letterbox(t, img, pix), nil)
			if err != nil {
				t.Fatal(err)
			}
			iou, score := bestPerson(dets, f.Objects[0].Box)
			if iou < 0.7 {
				t.Errorf("%s at %v: best person IoU %.2f (score %.2f), want >= 0.7; detections %+v", p.Name, at, iou, score, dets)
			}
			worstIoU, worstScore = min(worstIoU, iou), min(worstScore, score)
		}
		t.Logf("%s (%v): worst IoU %.2f, worst score %.2f", p.Name, p.Image.Rect.Size(), worstIoU, worstScore)
	}
}

// TestPlazaVideo writes Plaza at 10 fps; reads it back; runs the real detector on every
// third frame (each person fully visible on a frame must be found with IoU >= 0.5 on at
// least 90% of those frames, so that tracking tests can rely on the video); and plays it
// on the daemon's cameras.
func TestPlazaVideo(t *testing.T) {
	m := loadMedia(t)
	sc, file, truth := writePlaza(t, m, 10)
	if len(truth) != 120 {
		t.Fatalf("%d frames of truth, want 120", len(truth))
	}
	t.Run("read back", func(t *testing.T) { checkReadBack(t, sc, file, truth) })
	t.Run("cameras", func(t *testing.T) { checkDaemonPlays(t, m, sc, file) })
}

// TestPlazaLowRates writes Plaza at 2 and 5 frames a second, for tests that analyse every
// frame of a kind file camera at those rates: the frame count, rate and truth times follow.
func TestPlazaLowRates(t *testing.T) {
	m := blockMedia()
	for _, fps := range []int{2, 5} {
		sc, file, truth := writePlaza(t, m, fps)
		n := 12 * fps
		if len(truth) != n || truth[n-1].T != time.Duration(n-1)*time.Second/time.Duration(fps) {
			t.Fatalf("%d fps: %d frames of truth, the last at %v", fps, len(truth), truth[len(truth)-1].T)
		}
		out, err := run(t.Context(), nil, "ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
			"-show_entries", "stream=r_frame_rate,nb_read_frames", "-of", "default=nw=1", file)
		if err != nil {
			t.Fatal(err)
		}
		// (MPEG-TS lists the stream twice, under its program and on its own.)
		if want := fmt.Sprintf("r_frame_rate=%d/1\nnb_read_frames=%d\n", fps, n); !strings.HasPrefix(string(out), want) {
			t.Errorf("%d fps: ffprobe says %q, want %q", fps, out, want)
		}
		// Frame Seq of a file camera is the video's frame Seq-1, looping.
		if f := sc.TruthOfSeq(uint64(n + 3)); f.Index != 2 || len(f.Objects) != len(truth[2].Objects) {
			t.Errorf("%d fps: TruthOfSeq(%d) is frame %d", fps, n+3, f.Index)
		}
	}
}

// checkReadBack checks the written file (sc's video, with its truth) with ffprobe, decodes
// it, compares the frames with the drawn ones, and runs the detector on them.
func checkReadBack(t *testing.T, sc *Scene, file string, truth []Frame) {
	out, err := run(t.Context(), nil, "ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames",
		"-show_entries", "stream=codec_name,width,height,pix_fmt,r_frame_rate,nb_read_frames:format=format_name", "-of", "default=nw=1", file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"codec_name=h264", "width=768", "height=576", "pix_fmt=yuv420p", "r_frame_rate=10/1", "nb_read_frames=120", "format_name=mpegts"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ffprobe says\n%s\nwant %s", out, want)
		}
	}
	decoded, err := DecodeAll(t.Context(), file)
	if err != nil {
		t.Fatal(err)
	}
	if len(decoded) != 120 || decoded[0].Rect != image.Rect(0, 0, 768, 576) {
		t.Fatalf("decoded %d frames", len(decoded))
	}
	// Each decoded frame (every 4th checked) is the frame drawn (H.264 at CRF 23 keeps it
	// close), and not its neighbour: the order and count of frames are right.
	worst := math.Inf(1)
	for i := 0; i < len(decoded); i += 4 {
		d := decoded[i]
		img, _ := sc.Render(i, nil)
		p := psnr(t, img, d)
		worst = min(worst, p)
		if p < 32 {
			t.Errorf("frame %d: PSNR %.1f dB against the drawn frame, want >= 32", i, p)
		}
		if i == 60 {
			prev, _ := sc.Render(i-3, nil)
			if q := psnr(t, prev, d); q >= p-3 {
				t.Errorf("frame 60 is as close to frame 57 (%.1f dB) as to itself (%.1f dB)", q, p)
			}
		}
	}
	t.Logf("PSNR of the decoded frames against the drawn ones: worst %.1f dB", worst)

	d := newDetector(t)
	pix := make([]byte, 640*640*3)
	type tally struct {
		visible, found int
		iou            float64
	}
	per := map[int]*tally{}
	var dets []infer.Detection
	strays, sampled := 0, 0
	for i := 0; i < len(decoded); i += 3 {
		sampled++
		lb := letterbox(t, decoded[i], pix)
		dets, _, err = d.Detect(pix, lb, dets[:0])
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range truth[i].Objects {
			if o.Visible < 0.999 {
				continue
			}
			tl := per[o.ID]
			if tl == nil {
				tl = &tally{}
				per[o.ID] = tl
			}
			tl.visible++
			if best, _ := bestPerson(dets, o.Box); best >= 0.5 {
				tl.found++
				tl.iou += best
			}
		}
		// A person where no one was drawn (partly hidden ones included) is a stray.
		for _, det := range dets {
			if det.Label != "person" {
				continue
			}
			matched := false
			for _, o := range truth[i].Objects {
				matched = matched || IoU(det.Box, o.Box) >= 0.3
			}
			if !matched {
				strays++
				t.Logf("frame %d: stray person %.2f at %+v", i, det.Score, det.Box)
			}
		}
	}
	for _, o := range sc.Scenario().Objects {
		tl := per[o.ID]
		if tl == nil || tl.visible < 5 {
			t.Errorf("object %d: fully visible on %v sampled frames, want at least 5", o.ID, tl)
			continue
		}
		rate := float64(tl.found) / float64(tl.visible)
		t.Logf("object %d (%s): detected on %d of %d sampled frames where fully visible (%.0f%%), mean IoU %.2f",
			o.ID, o.Sprite.Name, tl.found, tl.visible, 100*rate, tl.iou/float64(max(1, tl.found)))
		if rate < 0.9 {
			t.Errorf("object %d (%s): detected with IoU >= 0.5 on %.0f%% of the frames where fully visible, want >= 90%%", o.ID, o.Sprite.Name, 100*rate)
		}
	}
	if strays > sampled/10 {
		t.Errorf("%d stray person detections on %d frames, want at most %d", strays, sampled, sampled/10)
	}
}

func TestWriteTSErrors(t *testing.T) {
	sc, err := NewScene(Scenario{W: 64, H: 48, FPS: 10, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := sc.WriteTS(t.Context(), dir); err == nil || !strings.Contains(err.Error(), "ffmpeg") {
		t.Errorf("writing onto a directory: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := sc.WriteTS(ctx, filepath.Join(dir, "x.ts")); err == nil {
		t.Error("WriteTS with a cancelled context succeeded")
	}
}

// BenchmarkRender draws Plaza's frames (four people, noise), the work WriteTS does per frame
// besides encoding.
func BenchmarkRender(b *testing.B) {
	m := loadMedia(b)
	s, err := Plaza(m, 10)
	if err != nil {
		b.Fatal(err)
	}
	sc, err := NewScene(s)
	if err != nil {
		b.Fatal(err)
	}
	var img *image.RGBA
	i := 0
	for b.Loop() {
		img, _ = sc.Render(10+i%100, img)
		i++
	}
}
