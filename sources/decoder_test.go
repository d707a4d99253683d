package sources

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
)

// testLoop returns a decode loop of an unstarted camera whose frames land in *got.
func testLoop(t testing.TB, w, h int, got *[]*Frame) *decodeLoop {
	t.Helper()
	c := &Camera{ID: "test", InputW: w, InputH: h, Logger: (&testutil.LogBuffer{}).Logger()}
	c.OnFrame = func(f *Frame) {
		*got = append(*got, f)
		f.Release() // keep the pool from running dry; tests copy what they check first
	}
	c.init()
	dec, err := newDecoder(codecH264, DecoderCPU)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dec.close)
	return &decodeLoop{cam: c, dec: dec, needKey: true}
}

func TestDecodeLoopRecovers(t *testing.T) {
	aus, _ := sampleAUs(t, 30)
	for _, i := range []int{0, 10, 20} {
		if !aus[i].key {
			t.Fatalf("AU %d is not an IDR: the sample's GOP is not 10", i)
		}
	}
	var frames []*Frame
	l := testLoop(t, 640, 640, &frames)
	count := func() int { return int(l.cam.frames.Load()) }

	// Joining mid-GOP: skipped until the IDR.
	for _, au := range aus[3:10] {
		l.handle(au)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d frames decoded before any IDR", n)
	}
	for _, au := range aus[10:15] {
		l.handle(au)
	}
	if n := count(); n != 5 {
		t.Fatalf("%d frames from 5 access units", n)
	}

	// Garbage of all kinds: no crash.
	rng := rand.New(rand.NewPCG(1, 2))
	junk := func(n int, head ...byte) []byte {
		b := append([]byte{0, 0, 0, 1}, head...)
		for len(b) < n {
			b = append(b, byte(rng.Uint32()))
		}
		return b
	}
	garbage := [][]byte{
		{},
		{0, 0, 0, 1},
		{0, 0, 1, 0, 0, 1, 0, 0, 1},
		make([]byte, 1000),
		junk(3000),
		junk(3000, 0x41),                   // P slice header, random body
		junk(3000, 0x65),                   // IDR slice header, random body
		junk(200, 0x67),                    // bogus SPS
		junk(200, 0x68),                    // bogus PPS
		aus[15].data[:len(aus[15].data)/2], // truncated P frame
	}
	for _, g := range garbage {
		l.handle(accessUnit{data: g, key: len(g) > 4 && g[4] == 0x65})
	}
	atIDR := count()
	l.handle(accessUnit{data: aus[20].data[:len(aus[20].data)/3], key: true}) // truncated IDR
	for _, au := range aus[21:30] {
		l.handle(au)
	}
	if n := count() - atIDR; n != 0 {
		t.Fatalf("%d frames decoded from a truncated IDR and the frames that refer to it", n)
	}

	// The next real IDR brings the pictures back, correct ones.
	more, _ := sampleAUs(t, 45)
	before := count()
	frames = frames[:0]
	for _, au := range more[30:35] {
		l.handle(au)
	}
	if n := count() - before; n != 5 {
		t.Fatalf("%d frames from 5 access units after the garbage", n)
	}
	for _, f := range frames {
		if f.Letterbox != geom.NewLetterbox(768, 576, 640, 640) {
			t.Fatalf("letterbox %+v", f.Letterbox)
		}
	}
}

func TestDecodeLoopGapWaitsForIDR(t *testing.T) {
	aus, _ := sampleAUs(t, 20)
	var frames []*Frame
	l := testLoop(t, 320, 320, &frames)
	for _, au := range aus[:5] {
		l.handle(au)
	}
	gap := aus[6]
	gap.gap = true
	l.handle(gap)
	for _, au := range aus[7:10] {
		l.handle(au)
	}
	if n := l.cam.frames.Load(); n != 5 {
		t.Fatalf("%d frames: access units after a gap were decoded", n)
	}
	l.handle(aus[10])
	if n := l.cam.frames.Load(); n != 6 {
		t.Fatalf("%d frames: the IDR after a gap was not decoded", n)
	}
}

func TestDecodeLoopNoFreeBuffer(t *testing.T) {
	aus, _ := sampleAUs(t, 10)
	c := &Camera{ID: "test", Logger: (&testutil.LogBuffer{}).Logger()}
	var held []*Frame
	c.OnFrame = func(f *Frame) { held = append(held, f) } // never released
	c.init()
	dec, err := newDecoder(codecH264, DecoderCPU)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.close()
	l := &decodeLoop{cam: c, dec: dec, needKey: true}
	for _, au := range aus {
		l.handle(au)
	}
	st := c.Status()
	if st.Frames != 10 || st.Delivered != poolSize || st.Dropped != 10-poolSize || len(held) != poolSize {
		t.Fatalf("status %+v, held %d", st, len(held))
	}
	for i, f := range held {
		if f.Seq != uint64(i+1) {
			t.Fatalf("frame %d has Seq %d", i, f.Seq)
		}
	}
	held[0].Release()
	held[0].Release() // ignored
	if len(c.slots) != 1 {
		t.Fatalf("%d frames free after one release (twice), want 1", len(c.slots))
	}
	if st := c.bufs.Stats().YUV; len(st) != 1 || st[0].InUse != poolSize-1 || st[0].Free != 1 {
		t.Fatalf("buffers after one release (twice): %+v; want %d in use and 1 free", st, poolSize-1)
	}
	l.handle(aus[0])
	if st := c.Status(); st.Delivered != poolSize+1 || held[len(held)-1].Seq != 11 {
		t.Fatalf("status %+v after a release", st)
	}
}

// scaledAUs returns the first n access units of the sample video scaled to w x h (a second of
// it, encoded by ffmpeg with a 1 s GOP).
func scaledAUs(t *testing.T, w, h, n int) []accessUnit {
	t.Helper()
	ffmpeg := testutil.LookPath(t, "ffmpeg")
	path := filepath.Join(t.TempDir(), "scaled.ts")
	out, err := exec.Command(ffmpeg, "-v", "error", "-i", testutil.Media(t, "vtest.avi"), "-t", "1",
		"-vf", fmt.Sprintf("scale=%d:%d", w, h), "-c:v", "libx264", "-g", "10", "-bf", "0", "-f", "mpegts", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	aus, _ := fileAUs(t, path, n)
	return aus
}

// TestScaleGeometries checks padding on every side and the rebuild on a resolution change.
func TestScaleGeometries(t *testing.T) {
	smallAUs := scaledAUs(t, 352, 288, 5)
	aus, _ := sampleAUs(t, 3)

	for _, size := range [][2]int{{640, 640}, {1000, 640}, {500, 900}, {768, 576}, {900, 480}} {
		var frames []*Frame
		l := testLoop(t, size[0], size[1], &frames)
		var checked []geom.Letterbox
		l.cam.OnFrame = func(f *Frame) {
			checkLetterboxed(t, rgbOf(t, f), f.Letterbox)
			checked = append(checked, f.Letterbox)
			f.Release()
		}
		for _, au := range append(append(aus[:3:3], smallAUs...), aus[:2]...) {
			l.handle(au)
		}
		want := []geom.Letterbox{
			geom.NewLetterbox(768, 576, size[0], size[1]),
			geom.NewLetterbox(352, 288, size[0], size[1]),
		}
		if len(checked) != 10 || checked[0] != want[0] || checked[3] != want[1] || checked[8] != want[0] {
			t.Fatalf("%v: frames with geometry %+v", size, checked)
		}
	}
}

// TestSharedFrameBuffers checks cameras of different geometries lending their frames'
// buffers from one FrameBuffers: frames of a width scaled to a multiple of 16 are held in
// YUV 4:2:0, the others in RGB24; each frame is letterboxed for its own camera whichever
// camera drew the buffer last, and each pool holds the buffers in flight, not three a camera.
func TestSharedFrameBuffers(t *testing.T) {
	shared, kept := NewFrameBuffers(640, 640), NewFrameBuffers(640, 640)
	defer shared.Close()
	defer kept.Close()
	sample, _ := sampleAUs(t, 6)
	cams := []struct {
		aus    []accessUnit
		w, h   int
		format PixFormat
	}{
		{sample, 768, 576, PixYUV420P},                    // 640x480
		{scaledAUs(t, 352, 160, 6), 352, 160, PixYUV420P}, // 640x291: an odd height
		{scaledAUs(t, 160, 352, 6), 160, 352, PixRGB24},   // 291x640
		{scaledAUs(t, 168, 352, 6), 168, 352, PixRGB24},   // 305x640
	}
	var frames []*Frame
	checked := 0
	loops := make([]*decodeLoop, len(cams))
	for i, c := range cams {
		l := testLoop(t, 640, 640, &frames)
		l.cam.Buffers = shared
		l.cam.init()
		want := geom.NewLetterbox(c.w, c.h, 640, 640)
		l.cam.OnFrame = func(f *Frame) {
			if f.Letterbox != want || f.Format != c.format {
				t.Fatalf("camera %d: frame of geometry %+v in %s, want %+v in %s", i, f.Letterbox, f.Format, want, c.format)
			}
			rgb := rgbOf(t, f)
			checkLetterboxed(t, rgb, f.Letterbox)
			if err := f.WriteRGB(make([]byte, 640*480*3)); err == nil || !strings.Contains(err.Error(), "a buffer of 921600 bytes for a 640x640 RGB24 input of 1228800") {
				t.Fatalf("WriteRGB into a buffer too small: %v", err)
			}
			c, err := f.Copy(kept)
			if err != nil {
				t.Fatal(err)
			}
			f.Release() // the copy is its own
			checkCopy(t, c, rgb, c.Format == PixRGB24)
			c.Release()
			checked++
		}
		loops[i] = l
	}
	for k := range 6 {
		for i, l := range loops {
			l.handle(cams[i].aus[k])
		}
	}
	if checked != 6*len(cams) {
		t.Fatalf("%d frames checked, want %d", checked, 6*len(cams))
	}
	st := shared.Stats()
	if len(st.YUV) != 2 {
		t.Fatalf("the shared buffers: %+v; want a YUV pool for each of the two sizes", st)
	}
	for _, p := range append(st.YUV, st.RGB) {
		if p.Made != 1 || p.InUse != 0 {
			t.Fatalf("the shared buffers after %d frames, each released before the next: %+v; want one buffer made a pool, none in use", checked, st)
		}
	}
	for _, p := range st.YUV { // 640x480 and 640x291: 4:2:0 at their own size
		if p.Size > st.RGB.Size*3/8+2*bufferSlack {
			t.Fatalf("a YUV frame buffer is %d bytes, an RGB24 one %d", p.Size, st.RGB.Size)
		}
	}
	shared.Trim() // the free buffers are new: kept, and their pools
	if st := shared.Stats(); len(st.YUV) != 2 || st.Bytes() == 0 {
		t.Fatalf("after Trim: %+v", st)
	}
	// The copies: a buffer a format and size, each in the format of its frame.
	if st, want := kept.Stats(), shared.Stats(); len(st.YUV) != 2 || st.RGB.Made != 1 || st.RGB.InUse != 0 || st.Bytes() != want.Bytes() {
		t.Fatalf("the copies' buffers: %+v; want the frames' (%+v)", st, want)
	}
	if _, err := (&Frame{Camera: "x", Letterbox: geom.NewLetterbox(64, 48, 64, 64)}).Copy(kept); err == nil || !strings.Contains(err.Error(), "a 64x64 input, buffers for 640x640") {
		t.Fatalf("a copy into buffers for another input: %v", err)
	}
}

// NewFrame holds an RGB24 input of the letterbox's size, and refuses another size, naming
// both; its frame is copied and released like a camera's.
func TestNewFrame(t *testing.T) {
	lb := geom.NewLetterbox(64, 48, 64, 64)
	if _, err := NewFrame("x", 1, lb, make([]byte, 64*48*3)); err == nil || !strings.Contains(err.Error(), "9216 bytes for a 64x64 RGB24 input of 12288") {
		t.Fatalf("NewFrame of a short input: %v", err)
	}
	rgb := bytes.Repeat([]byte{10, 20, 30}, 64*64)
	f, err := NewFrame("x", 1, lb, rgb)
	if err != nil {
		t.Fatal(err)
	}
	bufs := NewFrameBuffers(64, 64)
	defer bufs.Close()
	c, err := f.Copy(bufs)
	if err != nil {
		t.Fatal(err)
	}
	f.Release()
	checkCopy(t, c, rgb, true)
	c.Release()
	if st := bufs.Stats(); st.RGB.InUse != 0 || st.RGB.Made != 1 {
		t.Fatalf("the copy's buffer after its release: %+v", st)
	}
}

// checkCopy checks c, a frame's copy, against rgb, the frame's RGB24 input: its input the
// same, its picture in BGR24 rgb's picture with R and B swapped: exactly when exact (a copy
// of RGB24), else within 4 of 255 (libswscale's YUV to RGB24 and to BGR24 take different
// paths, which round differently; a snapshot shows no difference).
func checkCopy(t *testing.T, c *Frame, rgb []byte, exact bool) {
	t.Helper()
	if got := rgbOf(t, c); !bytes.Equal(got, rgb) {
		t.Fatalf("the copy's input differs from its frame's")
	}
	lb := c.Letterbox
	bgr := make([]byte, lb.ScaledW*lb.ScaledH*3)
	if err := c.WriteBGR(bgr); err != nil {
		t.Fatal(err)
	}
	worst := 0
	for y := range lb.ScaledH {
		for x := range lb.ScaledW {
			in, out := rgb[((lb.PadY+y)*lb.DstW+lb.PadX+x)*3:], bgr[(y*lb.ScaledW+x)*3:]
			for ch := range 3 {
				d := int(in[ch]) - int(out[2-ch])
				worst = max(worst, d, -d)
			}
		}
	}
	if worst > 0 && exact || worst > 4 {
		t.Fatalf("%s copy: its BGR24 picture differs from the RGB24 input's by up to %d", c.Format, worst)
	}
	if err := c.WriteBGR(bgr[1:]); err == nil || !strings.Contains(err.Error(), "BGR24 picture") {
		t.Fatalf("WriteBGR into a buffer too small: %v", err)
	}
}

// FuzzDecodeAccessUnit feeds arbitrary access units to a decoder primed with the sample's
// SPS/PPS and scales whatever comes out.
func FuzzDecodeAccessUnit(f *testing.F) {
	aus, first := sampleAUs(f, 12)
	var params [][]byte
	for _, n := range first {
		if t := n[0] & 0x1F; t == 7 || t == 8 {
			params = append(params, n)
		}
	}
	for _, au := range aus[:4] {
		f.Add(au.data)
		f.Add(au.data[:len(au.data)/2])
	}
	f.Add(aus[10].data)
	f.Add([]byte{0, 0, 0, 1, 0x65, 0x88, 0x84, 0x00})
	pix := make([]byte, 320*320*3)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec, err := newDecoder(codecH264, DecoderCPU)
		if err != nil {
			t.Fatal(err)
		}
		defer dec.close()
		_ = dec.decode(appendAnnexB(nil, params), noPTS, nil)
		for range 2 { // twice: the second call sees the decoder's state after the first
			_ = dec.decode(data, 1, func(w, h int, _ int64) {
				if w <= 0 || h <= 0 {
					t.Fatalf("frame %dx%d", w, h)
				}
				lb := dec.geometry(320, 320)
				if err := scaleRGB(dec, pix, lb); err != nil {
					t.Fatalf("scale %dx%d: %v", w, h, err)
				}
			})
		}
	})
}

// TestScaleTwoSteps checks that a frame held in YUV 4:2:0 and converted at WriteRGB (4:2:0
// frames scaled to a width that is a multiple of 16) draws the picture that a scaler straight
// into RGB24 draws, within rounding, and leaves the padding alone.
func TestScaleTwoSteps(t *testing.T) {
	aus, _ := sampleAUs(t, 1)
	dec, err := newDecoder(codecH264, DecoderCPU)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.close()
	ran := false
	if err := dec.decode(aus[0].data, 0, func(w, h int, _ int64) {
		ran = true
		for _, dst := range [][2]int{{640, 640}, {900, 480}, {800, 640}} {
			lb := geom.NewLetterbox(w, h, dst[0], dst[1])
			pf, err := dec.pixFormat(lb)
			if err != nil || pf != PixYUV420P {
				t.Fatalf("%dx%d: held in %s (%v), want %s", dst[0], dst[1], pf, err, PixYUV420P)
			}
			one, two := make([]byte, dst[0]*dst[1]*3), make([]byte, dst[0]*dst[1]*3)
			fillPad(one)
			fillPad(two)
			if err := dec.draw(one, lb, PixRGB24); err != nil {
				t.Fatal(err)
			}
			if err := scaleRGB(dec, two, lb); err != nil {
				t.Fatal(err)
			}
			checkLetterboxed(t, two, lb)
			var sum, n float64
			for y := lb.PadY; y < lb.PadY+lb.ScaledH; y++ {
				for x := lb.PadX * 3; x < (lb.PadX+lb.ScaledW)*3; x++ {
					i := (y*lb.DstW)*3 + x
					sum += math.Abs(float64(one[i]) - float64(two[i]))
					n++
				}
			}
			if mean := sum / n; mean > 2 {
				t.Errorf("%dx%d: two steps differ from one by %.2f per byte on average", dst[0], dst[1], mean)
			} else {
				t.Logf("%dx%d: two steps differ from one by %.2f per byte on average", dst[0], dst[1], mean)
			}
		}
	}); err != nil || !ran {
		t.Fatalf("no frame: %v", err)
	}
}

// BenchmarkDecode measures H.264 decoding of the 768x576 sample, per frame.
func BenchmarkDecode(b *testing.B) {
	aus, _ := sampleAUs(b, 100) // ten whole GOPs: looping restarts at an IDR
	dec, err := newDecoder(codecH264, DecoderCPU)
	if err != nil {
		b.Fatal(err)
	}
	defer dec.close()
	frames := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := dec.decode(aus[i%len(aus)].data, int64(i), func(int, int, int64) { frames++ }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if frames < b.N-1 {
		b.Fatalf("%d frames from %d access units", frames, b.N)
	}
}

// BenchmarkScaleLetterbox measures the letterbox of one 768x576 frame into 640x640, per
// frame, with scalers borrowed from a Scalers as a daemon's cameras do: draw, the decoder's
// step (resized into YUV 4:2:0, as the frame is held); convert, the dispatch's step (the held
// frame to RGB24 in the worker's slot, WriteRGB); one-step, straight into RGB24, as frames
// that cannot be held in YUV are drawn.
func BenchmarkScaleLetterbox(b *testing.B) {
	aus, _ := sampleAUs(b, 1)
	dec, err := newDecoder(codecH264, DecoderCPU)
	if err != nil {
		b.Fatal(err)
	}
	defer dec.close()
	dec.scalers = &Scalers{}
	defer dec.scalers.Close()
	pix := make([]byte, 640*640*3)
	fillPad(pix)
	ran := false
	if err := dec.decode(aus[0].data, 0, func(w, h int, _ int64) {
		ran = true
		lb := geom.NewLetterbox(w, h, 640, 640)
		held := make([]byte, newYUVLayout(lb.ScaledW, lb.ScaledH).size+bufferSlack)
		pf, err := dec.pixFormat(lb)
		if err != nil || pf != PixYUV420P {
			b.Fatalf("held in %s (%v)", pf, err)
		}
		for _, c := range []struct {
			name string
			step func() error
		}{
			{"draw", func() error { return dec.draw(held, lb, pf) }},
			{"convert", func() error { return dec.scalers.convertRGB(held, pf, pix, lb) }},
			{"one-step", func() error { return dec.draw(pix, lb, PixRGB24) }},
		} {
			b.Run(c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := c.step(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}); err != nil || !ran {
		b.Fatalf("no frame to scale: %v", err)
	}
}
