package groundtruth

import (
	"cmp"
	"context"
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/image/draw"

	"github.com/visiond/visiond/internal/geom"
)

// Scene is a validated Scenario ready to draw: its background scaled once, its sprites
// scaled (and mirrored) once per size they are drawn at. It is safe for concurrent use
// (Render writes only to the frame it is given; the sizes drawn are cached under a lock).
type Scene struct {
	s     Scenario
	bg    *image.RGBA
	props []placed // the props, placed once
	noise []byte   // noiseTable(s.Noise)

	mu    sync.Mutex
	sized map[sizeKey]*image.RGBA // premultiplied
}

// sizeKey is a sprite drawn at a size, mirrored or not.
type sizeKey struct {
	sp     *Sprite
	mirror bool
	w, h   int
}

// NewScene validates s and prepares it for drawing. It keeps a copy of s's objects, paths,
// props and lights (sprites and background are shared, and must not change).
func NewScene(s Scenario) (*Scene, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s.Objects = slices.Clone(s.Objects)
	for i := range s.Objects {
		s.Objects[i].Path = slices.Clone(s.Objects[i].Path)
	}
	s.Props, s.Light = slices.Clone(s.Props), slices.Clone(s.Light)
	if s.Perspective != nil {
		p := *s.Perspective
		s.Perspective = &p
	}
	sc := &Scene{s: s, bg: image.NewRGBA(image.Rect(0, 0, s.W, s.H)), noise: noiseTable(s.Noise), sized: map[sizeKey]*image.RGBA{}}
	if s.Background == nil {
		draw.Draw(sc.bg, sc.bg.Rect, image.NewUniform(color.Gray{128}), image.Point{}, draw.Src)
	} else {
		draw.CatmullRom.Scale(sc.bg, sc.bg.Rect, s.Background, s.Background.Bounds(), draw.Src, nil)
		for i := 3; i < len(sc.bg.Pix); i += 4 {
			sc.bg.Pix[i] = 255 // a frame is opaque: a translucent background shows over black
		}
	}
	for k, p := range s.Props {
		sc.props = append(sc.props, sc.placeAt(k, true, p.Sprite, p.Scale, p.Mirror, p.At))
	}
	return sc, nil
}

// scaleAt is the drawn scale of a thing of scale (0 means 1) with its anchor at row y.
func (sc *Scene) scaleAt(scale, y float64) float64 {
	if scale == 0 {
		scale = 1
	}
	if sc.s.Perspective != nil {
		scale *= sc.s.Perspective.Factor(y)
	}
	return scale
}

// image returns sp drawn at scale, mirrored or not, scaled once and cached.
func (sc *Scene) image(sp *Sprite, scale float64, mirror bool) *image.RGBA {
	src := sp.Image
	k := sizeKey{sp: sp, mirror: mirror,
		w: max(1, int(math.Round(float64(src.Rect.Dx())*scale))),
		h: max(1, int(math.Round(float64(src.Rect.Dy())*scale)))}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if img := sc.sized[k]; img != nil {
		return img
	}
	dst := image.NewRGBA(image.Rect(0, 0, k.w, k.h))
	if k.w == src.Rect.Dx() && k.h == src.Rect.Dy() {
		draw.Draw(dst, dst.Rect, src, src.Rect.Min, draw.Src)
	} else {
		draw.ApproxBiLinear.Scale(dst, dst.Rect, src, src.Rect, draw.Src, nil)
	}
	if mirror {
		for y := range k.h {
			row := dst.Pix[y*dst.Stride : y*dst.Stride+4*k.w]
			for i, j := 0, k.w-1; i < j; i, j = i+1, j-1 {
				a, b := row[4*i:4*i+4], row[4*j:4*j+4]
				for c := range 4 {
					a[c], b[c] = b[c], a[c]
				}
			}
		}
	}
	sc.sized[k] = dst
	return dst
}

// Scenario returns the scene's scenario; its objects are the scene's: read, do not change.
func (sc *Scene) Scenario() Scenario { return sc.s }

// Truth is where one object is on a frame: every object whose path covers the frame's
// time, even when it is wholly outside the frame (then Box is empty and Visible 0).
type Truth struct {
	ID    int
	Class string
	// Box is the object's drawn box in pixels (the sprite's tight box), clipped to the frame;
	// compare it with the detector's boxes.
	Box geom.Box
	// Anchor is the object's anchor (bottom-centre) in normalized coordinates as its path
	// gives it, not clipped.
	Anchor Point
	// Visible is the fraction of the object's pixels that show on the frame, 0..1: less than
	// 1 when it is partly outside the frame or behind another object.
	Visible float64
}

// Frame is the truth of one frame: the objects on it, in drawing order (back to front).
type Frame struct {
	Index   int
	T       time.Duration
	Objects []Truth
}

// placed is an object or a prop on a frame: its index in the scenario's objects (or
// props), its image and the image's rectangle on the frame (unclipped), and its anchor.
type placed struct {
	k      int
	prop   bool
	img    *image.RGBA
	r      image.Rectangle
	anchor Point
}

// placeAt places sprite sp at scale (before perspective) with its anchor at a.
func (sc *Scene) placeAt(k int, prop bool, sp *Sprite, scale float64, mirror bool, a Point) placed {
	img := sc.image(sp, sc.scaleAt(scale, a.Y), mirror)
	w, h := img.Rect.Dx(), img.Rect.Dy()
	x := int(math.Round(a.X*float64(sc.s.W) - float64(w)/2))
	y := int(math.Round(a.Y*float64(sc.s.H))) - h
	return placed{k: k, prop: prop, img: img, r: img.Rect.Add(image.Pt(x, y)), anchor: a}
}

// place returns the objects on the video at t and the props, back to front: farther ones
// (anchor higher up the picture) first; at the same row props first, then objects by id.
func (sc *Scene) place(t time.Duration) []placed {
	ps := slices.Clone(sc.props)
	for k, o := range sc.s.Objects {
		a, ok := o.AnchorAt(t)
		if !ok {
			continue
		}
		ps = append(ps, sc.placeAt(k, false, o.Sprite, o.Scale, o.Mirror, a))
	}
	slices.SortStableFunc(ps, func(a, b placed) int {
		switch {
		case a.anchor.Y != b.anchor.Y:
			return cmp.Compare(a.anchor.Y, b.anchor.Y)
		case a.prop != b.prop:
			if a.prop {
				return -1
			}
			return 1
		case a.prop:
			return a.k - b.k
		}
		return sc.s.Objects[a.k].ID - sc.s.Objects[b.k].ID
	})
	return ps
}

// At returns the truth at time t (any time, not only a frame's).
func (sc *Scene) At(t time.Duration) []Truth {
	return sc.compose(t, nil)
}

// Truth returns the truth of frame i without drawing it.
func (sc *Scene) Truth(i int) Frame {
	t := sc.s.FrameTime(i)
	return Frame{Index: i, T: t, Objects: sc.compose(t, nil)}
}

// TruthOfSeq returns the truth of the frame that a kind file camera playing the scene's
// video hands out as frame seq (sources.Frame.Seq, from 1): the video's frame seq-1, modulo
// its length, the file being looped. It holds while the camera's session does not restart.
func (sc *Scene) TruthOfSeq(seq uint64) Frame {
	n := uint64(sc.s.Frames())
	return sc.Truth(int((max(seq, 1) - 1) % n))
}

// Render draws frame i into dst, which must be W x H at the origin (a new one when nil),
// and returns the frame and its truth.
func (sc *Scene) Render(i int, dst *image.RGBA) (*image.RGBA, Frame) {
	frame := image.Rect(0, 0, sc.s.W, sc.s.H)
	if dst == nil || dst.Rect != frame {
		dst = image.NewRGBA(frame)
	}
	copy(dst.Pix, sc.bg.Pix)
	t := sc.s.FrameTime(i)
	f := Frame{Index: i, T: t, Objects: sc.compose(t, dst)}
	var light *[256]byte
	if gain, offset := sc.s.LightAt(t); gain != 1 || offset != 0 {
		light = lightTable(gain, offset)
	}
	switch {
	case sc.noise != nil:
		addNoise(dst.Pix, light, sc.noise, rand.New(rand.NewPCG(sc.s.Seed, uint64(i))))
	case light != nil:
		for j := 0; j+3 < len(dst.Pix); j += 4 {
			dst.Pix[j], dst.Pix[j+1], dst.Pix[j+2] = light[dst.Pix[j]], light[dst.Pix[j+1]], light[dst.Pix[j+2]]
		}
	}
	return dst, f
}

// compose computes the truth at t, drawing the sprites and props onto dst when it is not
// nil. Visibility counts an object's pixels of alpha >= 128 that are on the frame and that
// no object or prop drawn later covers with a pixel of alpha >= 128.
func (sc *Scene) compose(t time.Duration, dst *image.RGBA) []Truth {
	ps := sc.place(t)
	frame := image.Rect(0, 0, sc.s.W, sc.s.H)
	opaque := func(p placed, x, y int) bool {
		return p.img.Pix[(y-p.r.Min.Y)*p.img.Stride+(x-p.r.Min.X)*4+3] >= 128
	}
	total, shown := make([]int, len(ps)), make([]int, len(ps))
	for j, p := range ps {
		if p.prop {
			if dst != nil {
				draw.Draw(dst, p.r, p.img, image.Point{}, draw.Over)
			}
			continue
		}
		var over []placed // the objects and props drawn over this one that overlap it
		for _, q := range ps[j+1:] {
			if q.r.Overlaps(p.r) {
				over = append(over, q)
			}
		}
		for y := p.r.Min.Y; y < p.r.Max.Y; y++ {
			for x := p.r.Min.X; x < p.r.Max.X; x++ {
				if !opaque(p, x, y) {
					continue
				}
				total[j]++
				if !(image.Point{x, y}).In(frame) {
					continue
				}
				covered := false
				for _, q := range over {
					if (image.Point{x, y}).In(q.r) && opaque(q, x, y) {
						covered = true
						break
					}
				}
				if !covered {
					shown[j]++
				}
			}
		}
		if dst != nil {
			draw.Draw(dst, p.r, p.img, image.Point{}, draw.Over)
		}
	}
	out := make([]Truth, 0, len(ps))
	for j, p := range ps {
		if p.prop {
			continue
		}
		o := sc.s.Objects[p.k]
		r := p.r.Intersect(frame)
		tr := Truth{ID: o.ID, Class: o.class(), Anchor: p.anchor,
			Box: geom.Box{X: float64(r.Min.X), Y: float64(r.Min.Y), W: float64(r.Dx()), H: float64(r.Dy())}}
		if total[j] > 0 {
			tr.Visible = float64(shown[j]) / float64(total[j])
		}
		out = append(out, tr)
	}
	return out
}

// noiseTable returns the table of addNoise for amplitude a (gray levels): entry n<<8|v is
// v + n - a clamped to 0..255, for n in 0..2a; nil for no noise.
func noiseTable(a float64) []byte {
	amp := int(math.Round(a))
	if amp == 0 {
		return nil
	}
	span := 2*amp + 1
	t := make([]byte, span<<8)
	for n := range span {
		for v := range 256 {
			t[n<<8|v] = byte(min(255, max(0, v+n-amp)))
		}
	}
	return t
}

// lightTable maps a colour level v to Gain*v + Offset, rounded and clamped to 0..255.
func lightTable(gain, offset float64) *[256]byte {
	var t [256]byte
	for v := range t {
		t[v] = byte(min(255, max(0, math.Round(gain*float64(v)+offset))))
	}
	return &t
}

// addNoise adds uniform noise to the colour bytes of pix (RGBA) through table (noiseTable),
// after mapping them through light when it is not nil: 8 random bits per byte, scaled to
// the table's 2a+1 levels.
func addNoise(pix []byte, light *[256]byte, table []byte, r *rand.Rand) {
	span := uint64(len(table) >> 8)
	var bits uint64
	left := 0
	for i := 0; i+3 < len(pix); i += 4 {
		for c := i; c < i+3; c++ {
			if left == 0 {
				bits, left = r.Uint64(), 8
			}
			n := (bits & 0xff) * span >> 8
			bits >>= 8
			left--
			v := pix[c]
			if light != nil {
				v = light[v]
			}
			pix[c] = table[int(n)<<8|int(v)]
		}
	}
}

// TS encoding: H.264 in MPEG-TS, the form of third_party/media/vtest.h264.ts (scripts/setup.sh):
// the sample camera (sources/samplecam) serves it over RTSP and a kind file camera reads it
// through OpenCV. One keyframe a second, no B-frames, x264's default quality (CRF 23): the
// decoded frames of Plaza stay within 36 dB PSNR of the drawn ones, and its 12 s take 1.3 MB.
const (
	tsCRF    = "23"
	tsPreset = "veryfast"
)

// WriteTS renders every frame and encodes the video with the ffmpeg program (libx264) into
// file, an H.264 MPEG-TS file, and returns the truth of every frame. The file is written in
// place: a failed run leaves a partial file. Cancelling ctx stops ffmpeg.
func (sc *Scene) WriteTS(ctx context.Context, file string) ([]Frame, error) {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return nil, err
	}
	fps := strconv.Itoa(sc.s.FPS)
	cmd := exec.CommandContext(ctx, "ffmpeg", "-nostdin", "-v", "error", "-y",
		"-f", "rawvideo", "-pix_fmt", "rgba", "-s", fmt.Sprintf("%dx%d", sc.s.W, sc.s.H), "-framerate", fps, "-i", "-",
		"-an", "-c:v", "libx264", "-preset", tsPreset, "-tune", "zerolatency", "-crf", tsCRF,
		"-pix_fmt", "yuv420p", "-g", fps, "-bf", "0", "-f", "mpegts", file)
	stderr := &tailBuffer{max: 2048}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, commandError("ffmpeg", err, stderr)
	}
	frames, werr := sc.writeFrames(stdin)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return nil, commandError("ffmpeg", err, stderr)
	}
	if werr != nil {
		return nil, fmt.Errorf("ffmpeg: writing frames: %w", werr)
	}
	return frames, nil
}

// writeFrames renders every frame into w as raw RGBA, in order, drawing up to
// renderWorkers frames at a time (each worker its own frames, in turn, into its own
// buffer).
func (sc *Scene) writeFrames(w io.Writer) ([]Frame, error) {
	n := sc.s.Frames()
	frames := make([]Frame, n)
	workers := max(1, min(runtime.GOMAXPROCS(0), renderWorkers, n))
	ready := make([]chan *image.RGBA, workers) // a worker's frame, drawn
	free := make([]chan *image.RGBA, workers)  // its buffer, written out
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := range workers {
		ready[k], free[k] = make(chan *image.RGBA, 1), make(chan *image.RGBA, 1)
		free[k] <- nil
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < n; i += workers {
				var img *image.RGBA
				select {
				case img = <-free[k]:
				case <-stop:
					return
				}
				img, frames[i] = sc.Render(i, img)
				select {
				case ready[k] <- img:
				case <-stop:
					return
				}
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for i := range n {
		img := <-ready[i%workers]
		if _, err := w.Write(img.Pix); err != nil {
			return nil, err
		}
		free[i%workers] <- img
	}
	return frames, nil
}

// renderWorkers is the most frames writeFrames draws at a time.
const renderWorkers = 4

// IoU is the intersection over union of two boxes, 0..1; 0 when either is empty.
func IoU(a, b geom.Box) float64 {
	x1, y1 := max(a.X, b.X), max(a.Y, b.Y)
	x2, y2 := min(a.X+a.W, b.X+b.W), min(a.Y+a.H, b.Y+b.H)
	if x2 <= x1 || y2 <= y1 || a.W <= 0 || a.H <= 0 || b.W <= 0 || b.H <= 0 {
		return 0
	}
	in := (x2 - x1) * (y2 - y1)
	return in / (a.W*a.H + b.W*b.H - in)
}
