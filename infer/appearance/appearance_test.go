package appearance

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/geom"
)

// person is a synthetic walker: a head of skin, a shirt and trousers, arms of the shirt's
// colour held out from the body (the box's sides are partly background, as a real
// person's are).
type person struct {
	name             string
	shirt, trousers  [3]uint8
	skin             [3]uint8
	hair             [3]uint8
	stripes          bool // a shirt of two colours, shirt and shirt2, in horizontal bands
	shirt2           [3]uint8
	x, y, w, h       int // the box on the frame
	armsOut, legsOut bool
}

var (
	red    = [3]uint8{190, 40, 35}
	navy   = [3]uint8{30, 40, 100}
	jeans  = [3]uint8{60, 80, 130}
	black  = [3]uint8{25, 25, 28}
	white  = [3]uint8{225, 225, 220}
	khaki  = [3]uint8{170, 150, 100}
	green  = [3]uint8{40, 120, 60}
	yellow = [3]uint8{220, 190, 40}
	skinA  = [3]uint8{220, 170, 140}
	skinB  = [3]uint8{140, 95, 70}
	hairA  = [3]uint8{40, 30, 20}
	hairB  = [3]uint8{160, 120, 60}
)

// people are five walkers, two of whom differ only in the trousers and two only in the
// shirt, and one in black and white only.
var people = []person{
	{name: "red shirt, jeans", shirt: red, trousers: jeans, skin: skinA, hair: hairA},
	{name: "red shirt, black trousers", shirt: red, trousers: black, skin: skinA, hair: hairA},
	{name: "navy shirt, khaki trousers", shirt: navy, trousers: khaki, skin: skinB, hair: hairA},
	{name: "green shirt, khaki trousers", shirt: green, trousers: khaki, skin: skinB, hair: hairB},
	{name: "white shirt, black trousers", shirt: white, trousers: black, skin: skinA, hair: hairB},
	{name: "yellow-navy striped shirt, jeans", shirt: yellow, shirt2: navy, stripes: true, trousers: jeans, skin: skinA, hair: hairA},
}

// frame is a synthetic w x h RGB24 frame: a textured pavement, then the people drawn at
// their boxes, with per-pixel noise of +-noise levels.
type frame struct {
	w, h int
	pix  []byte
}

func newFrame(w, h int, seed uint64) *frame {
	f := &frame{w: w, h: h, pix: make([]byte, w*h*3)}
	rng := rand.New(rand.NewPCG(seed, 1))
	for y := range h {
		for x := range w {
			// Paving stones: slabs of 40 pixels in two tones of warm grey, with joints.
			v := 150 + 15*((x/40+y/40)%2)
			if x%40 < 2 || y%40 < 2 {
				v = 95
			}
			v += rng.IntN(11) - 5
			f.set(x, y, [3]uint8{uint8(v), uint8(v - 8), uint8(v - 20)})
		}
	}
	return f
}

func (f *frame) set(x, y int, c [3]uint8) {
	if x < 0 || y < 0 || x >= f.w || y >= f.h {
		return
	}
	copy(f.pix[(y*f.w+x)*3:], c[:])
}

func (f *frame) fill(x0, y0, x1, y1 int, c [3]uint8, rng *rand.Rand, noise int) {
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
			var n [3]uint8
			for i := range c {
				n[i] = uint8(min(max(int(c[i])+rng.IntN(2*noise+1)-noise, 0), 255))
			}
			f.set(x, y, n)
		}
	}
}

// draw draws p in its box: hair and head (the top 15%), shirt and arms (to 55%), trousers
// (to 100%); the body is the middle half of the box's width, the arms the outer quarters
// beside the shirt when armsOut, the legs apart when legsOut.
func (f *frame) draw(p person, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 2))
	const noise = 8
	x, y, w, h := p.x, p.y, p.w, p.h
	at := func(fx, fy float64) (int, int) { return x + int(fx*float64(w)), y + int(fy*float64(h)) }
	hx0, hy0 := at(0.38, 0)
	hx1, hy1 := at(0.62, 0.05)
	f.fill(hx0, hy0, hx1, hy1, p.hair, rng, noise)
	hx0, hy0 = at(0.38, 0.05)
	hx1, hy1 = at(0.62, 0.15)
	f.fill(hx0, hy0, hx1, hy1, p.skin, rng, noise)
	bx0, by0 := at(0.25, 0.15)
	bx1, by1 := at(0.75, 0.55)
	if p.stripes {
		band := max(1, (by1-by0)/6)
		for yy := by0; yy < by1; yy += band {
			c := p.shirt
			if (yy-by0)/band%2 == 1 {
				c = p.shirt2
			}
			f.fill(bx0, yy, bx1, min(yy+band, by1), c, rng, noise)
		}
	} else {
		f.fill(bx0, by0, bx1, by1, p.shirt, rng, noise)
	}
	if p.armsOut {
		ax0, ay0 := at(0.02, 0.17)
		ax1, ay1 := at(0.25, 0.27)
		f.fill(ax0, ay0, ax1, ay1, p.shirt, rng, noise)
		ax0, _ = at(0.75, 0)
		ax1, _ = at(0.98, 0)
		f.fill(ax0, ay0, ax1, ay1, p.shirt, rng, noise)
	}
	lx0, ly0 := at(0.3, 0.55)
	lx1, ly1 := at(0.7, 1)
	if p.legsOut {
		f.fill(lx0-w/8, ly0, lx0+w/8, ly1, p.trousers, rng, noise)
		f.fill(lx1-w/8, ly0, lx1+w/8, ly1, p.trousers, rng, noise)
	} else {
		f.fill(lx0, ly0, lx1, ly1, p.trousers, rng, noise)
	}
}

func (p person) box() geom.Box {
	return geom.Box{X: float64(p.x), Y: float64(p.y), W: float64(p.w), H: float64(p.h)}
}

// scene draws every person of people in a row on a 640x640 frame, at a size and pose that
// differ by take (another frame of the same video: they walked, the camera's noise is new).
func scene(take int) (*frame, []geom.Box) {
	f := newFrame(640, 640, uint64(take))
	var boxes []geom.Box
	for i, p := range people {
		p.w, p.h = 50+10*take, 130+25*take
		p.x, p.y = 20+i*(p.w+30)+7*take, 150+40*take
		p.armsOut, p.legsOut = take%2 == 1, take%2 == 0
		f.draw(p, uint64(100*take+i))
		boxes = append(boxes, p.box())
	}
	return f, boxes
}

// The same person in two frames (another size, place, pose and noise) is closer to
// herself than to anybody else, also when the two differ only in the shirt or only in
// the trousers.
func TestSamePersonCloser(t *testing.T) {
	f0, b0 := scene(0)
	f1, b1 := scene(1)
	var d0, d1 []Descriptor
	for i := range people {
		d0 = append(d0, Compute(f0.pix, f0.w, f0.h, b0[i]))
		d1 = append(d1, Compute(f1.pix, f1.w, f1.h, b1[i]))
	}
	for i, p := range people {
		same := Distance(d0[i], d1[i])
		for j, q := range people {
			if j == i {
				continue
			}
			if other := Distance(d0[i], d1[j]); other <= same {
				t.Errorf("%s: distance to another take of herself %.3f, to %s %.3f", p.name, same, q.name, other)
			}
		}
		t.Logf("%-32s same %.3f, nearest other %.3f", p.name, same, nearestOther(d0[i], d1, i))
	}
}

func nearestOther(d Descriptor, others []Descriptor, skip int) float64 {
	best := 1.0
	for j, o := range others {
		if j != skip {
			best = min(best, Distance(d, o))
		}
	}
	return best
}

// A global change of brightness (the sun behind a cloud, the camera's exposure) moves the
// descriptor less than the difference to the nearest other person.
func TestBrightness(t *testing.T) {
	f, boxes := scene(0)
	var base []Descriptor
	for _, b := range boxes {
		base = append(base, Compute(f.pix, f.w, f.h, b))
	}
	for _, gain := range []float64{0.6, 0.8, 1.25, 1.5} {
		dim := make([]byte, len(f.pix))
		for i, v := range f.pix {
			dim[i] = uint8(min(255, math.Round(float64(v)*gain)))
		}
		for i, b := range boxes {
			d := Compute(dim, f.w, f.h, b)
			same, other := Distance(base[i], d), nearestOther(d, base, i)
			if same >= other {
				t.Errorf("gain %.2f, %s: distance to herself %.3f, to the nearest other %.3f", gain, people[i].name, same, other)
			}
			if gain >= 0.8 && gain <= 1.25 && same > 0.3 {
				t.Errorf("gain %.2f, %s: distance to herself %.3f, want <= 0.3", gain, people[i].name, same)
			}
			t.Logf("gain %.2f %-32s same %.3f, nearest other %.3f", gain, people[i].name, same, other)
		}
	}
}

func TestDistance(t *testing.T) {
	f, boxes := scene(0)
	a := Compute(f.pix, f.w, f.h, boxes[0])
	b := Compute(f.pix, f.w, f.h, boxes[2])
	if d := Distance(a, a); d != 0 {
		t.Errorf("Distance(a, a) = %v, want 0", d)
	}
	if ab, ba := Distance(a, b), Distance(b, a); ab != ba || ab <= 0 || ab > 1 {
		t.Errorf("Distance(a, b) = %v, Distance(b, a) = %v: want the same, in (0, 1]", ab, ba)
	}
	if d := Distance(a, Descriptor{}); d != 1 {
		t.Errorf("Distance to the zero Descriptor = %v, want 1", d)
	}
	// No colour in common: a pure red box against a pure white one.
	red := uniform(8, 8, [3]uint8{255, 0, 0})
	white := uniform(8, 8, [3]uint8{255, 255, 255})
	box := geom.Box{W: 8, H: 8}
	if d := Distance(Compute(red, 8, 8, box), Compute(white, 8, 8, box)); d != 1 {
		t.Errorf("red against white: %v, want 1", d)
	}
}

func uniform(w, h int, c [3]uint8) []byte {
	img := make([]byte, w*h*3)
	for i := 0; i < len(img); i += 3 {
		copy(img[i:], c[:])
	}
	return img
}

// The bytes are what the package doc says: one pixel colour puts its whole stripe in known
// bins. The box is the left half of a 32x16 image whose picture is the right half, grey 128:
// relative intensity is intensity.
func TestLayout(t *testing.T) {
	box := geom.Box{W: 16, H: 16}
	picture := geom.Box{X: 16, W: 16, H: 16}
	for _, tc := range []struct {
		name string
		c    [3]uint8
		want map[int]uint8 // non-zero bytes of each stripe
	}{
		// Hue 0 (red) is between bins 11 and 0 (centres at 345 and 15 degrees), saturation
		// 1 in the second saturation bin: half each of 2*11+1 and 2*0+1.
		{"red", [3]uint8{255, 0, 0}, map[int]uint8{1: 180, 23: 180}},
		// Hue 120 (green) is between bins 3 and 4.
		{"green", [3]uint8{0, 200, 0}, map[int]uint8{7: 180, 9: 180}},
		// Grey 128 is between grey bins 3 and 4 (centres 111.6 and 143.4): 48% and 52%.
		{"grey", [3]uint8{128, 128, 128}, map[int]uint8{24 + 3: 177, 24 + 4: 183}},
		// Black is wholly in grey bin 0 (hue is noise in the dark).
		{"black", [3]uint8{0, 0, 0}, map[int]uint8{24: 255}},
		{"white", [3]uint8{255, 255, 255}, map[int]uint8{31: 255}},
		// Pale magenta: saturation 0.2 makes it half chromatic, half grey. The chromatic half
		// is at hue 300, halfway between hue bins 9 and 10, in the first saturation bin: a
		// quarter each. The grey half is at intensity 238, 3% in grey bin 6 and 97% in 7.
		{"pale magenta", [3]uint8{255, 204, 255}, map[int]uint8{18: 128, 20: 128, 24 + 6: 33, 24 + 7: 177}},
		// Hue 45 (orange): the centre of hue bin 1; saturation 0.5: half each of its two
		// saturation bins.
		{"orange", [3]uint8{200, 175, 100}, map[int]uint8{2: 180, 3: 180}},
	} {
		img := uniform(32, 16, [3]uint8{128, 128, 128})
		for y := range 16 {
			for x := range 16 {
				copy(img[(y*32+x)*3:], tc.c[:])
			}
		}
		f := NewFrame(img, 32, 16, picture)
		d := f.Describe(box)
		for s := range Stripes {
			for i := range Bins {
				if got, want := d[s*Bins+i], tc.want[i]; int(got) < int(want)-1 || int(got) > int(want)+1 {
					t.Errorf("%s: stripe %d byte %d = %d, want %d", tc.name, s, i, got, want)
				}
			}
		}
	}
}

var nan, inf = math.NaN(), math.Inf(1)

// edgeBoxes are boxes on a 640x640 frame, none when they have no pixel of it.
var edgeBoxes = []struct {
	name string
	box  geom.Box
	none bool
}{
	{"whole frame", geom.Box{W: 640, H: 640}, false},
	{"left edge", geom.Box{X: 0, Y: 100, W: 30, H: 80}, false},
	{"bottom right corner", geom.Box{X: 600, Y: 560, W: 40, H: 80}, false},
	{"partly outside left", geom.Box{X: -50, Y: 100, W: 80, H: 100}, false},
	{"partly outside bottom", geom.Box{X: 100, Y: 600, W: 50, H: 200}, false},
	{"larger than the frame", geom.Box{X: -1000, Y: -1000, W: 3000, H: 3000}, false},
	{"1x1", geom.Box{X: 10, Y: 10, W: 1, H: 1}, false},
	{"sub-pixel", geom.Box{X: 10.3, Y: 10.3, W: 0.2, H: 0.4}, false},
	{"zero size", geom.Box{X: 10, Y: 10}, false},
	{"zero size at the far corner", geom.Box{X: 640, Y: 640}, false},
	{"zero width", geom.Box{X: 10, Y: 10, H: 50}, false},
	{"one row", geom.Box{X: 10, Y: 10, W: 300, H: 1}, false},
	{"one column", geom.Box{X: 10, Y: 10, W: 1, H: 300}, false},
	{"negative size", geom.Box{X: 100, Y: 200, W: -50, H: -100}, false},
	{"outside left", geom.Box{X: -100, Y: 10, W: 50, H: 50}, true},
	{"outside below", geom.Box{X: 10, Y: 700, W: 50, H: 50}, true},
	{"NaN", geom.Box{X: nan, Y: 10, W: 50, H: 50}, true},
	{"NaN size", geom.Box{X: 10, Y: 10, W: 50, H: nan}, true},
	{"infinite", geom.Box{X: -inf, Y: 10, W: inf, H: 50}, true},
	{"huge", geom.Box{X: -math.MaxFloat64, Y: -math.MaxFloat64, W: math.MaxFloat64, H: math.MaxFloat64}, true},
}

// Boxes at the edge, partly outside, tiny, empty, inverted or not finite: a descriptor
// with every stripe filled where the box has a pixel of the image, the zero Descriptor
// where it has none, never a NaN.
func TestEdgeBoxes(t *testing.T) {
	f, _ := scene(0)
	for _, tc := range edgeBoxes {
		d := Compute(f.pix, f.w, f.h, tc.box)
		checkDescriptor(t, tc.name, d, tc.none)
	}
	// An image shorter than its size, or of no size, has no descriptor.
	box := geom.Box{W: 10, H: 10}
	for _, tc := range []struct {
		name string
		img  []byte
		w, h int
	}{
		{"short", make([]byte, 10*10*3-1), 10, 10},
		{"nil", nil, 10, 10},
		{"zero width", f.pix, 0, 640},
		{"negative height", f.pix, 640, -1},
	} {
		if d := Compute(tc.img, tc.w, tc.h, box); !d.IsZero() {
			t.Errorf("%s image: got a descriptor", tc.name)
		}
	}
}

// checkDescriptor fails unless d is the zero Descriptor (none) or, if not none, a
// descriptor with a non-zero byte in every stripe at a distance of 0 from itself.
func checkDescriptor(t testing.TB, name string, d Descriptor, none bool) {
	t.Helper()
	if none {
		if !d.IsZero() {
			t.Errorf("%s: got a descriptor, want none", name)
		}
		return
	}
	for s := range Stripes {
		var sum int
		for _, v := range d[s*Bins : (s+1)*Bins] {
			sum += int(v) * int(v)
		}
		// The squares of the bytes are 255^2 times an L1-normalised histogram, within rounding.
		if math.Abs(float64(sum)-255*255) > 255*Bins {
			t.Errorf("%s: stripe %d squares sum to %d, want about %d: %v", name, s, sum, 255*255, d)
		}
	}
	if dd := Distance(d, d); dd != 0 || math.IsNaN(dd) {
		t.Errorf("%s: Distance to itself %v", name, dd)
	}
}

// Whatever the box, a stripe takes at most MaxSamples/Stripes samples, and a small box
// every pixel.
func TestGrid(t *testing.T) {
	for _, bw := range []float64{0, 0.5, 1, 3, 17, 64, 200, 640, 5000} {
		for _, bh := range []float64{0, 0.5, 1, 3, 17, 64, 200, 640, 5000} {
			sh := bh / Stripes
			nx, ny := grid(bw, sh)
			if nx < 1 || ny < 1 || nx*ny > MaxSamples/Stripes {
				t.Errorf("box %vx%v: grid %dx%d a stripe, want 1..%d samples", bw, bh, nx, ny, MaxSamples/Stripes)
			}
			if max(1, math.Ceil(bw))*max(1, math.Ceil(sh)) <= MaxSamples/Stripes && (float64(nx) < math.Floor(bw) || float64(ny) < math.Floor(sh)) {
				t.Errorf("box %vx%v: grid %dx%d a stripe, want every pixel", bw, bh, nx, ny)
			}
		}
	}
}

func TestJSON(t *testing.T) {
	f, boxes := scene(0)
	d := Compute(f.pix, f.w, f.h, boxes[0])
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 2+128 { // 96 bytes: 128 base64 characters, no padding
		t.Errorf("JSON of %d bytes: %s", len(b), b)
	}
	var back Descriptor
	if err := json.Unmarshal(b, &back); err != nil || back != d {
		t.Fatalf("round trip: %v, %v", back, err)
	}
	// The zero Descriptor is left out of a struct with omitzero.
	type wrap struct {
		A Descriptor `json:"appearance,omitzero"`
	}
	if b, _ := json.Marshal(wrap{}); string(b) != "{}" {
		t.Errorf("zero descriptor: %s, want it left out", b)
	}
	if err := json.Unmarshal([]byte("null"), &back); err != nil || back != d {
		t.Errorf("null: %v, %v: want no error, the descriptor unchanged", back, err)
	}
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"short", `"AAAA"`, "appearance: 4 base64 characters, want 128 (96 bytes)"},
		{"long", `"` + strings.Repeat("A", 132) + `"`, "appearance: 132 base64 characters, want 128 (96 bytes)"},
		{"not base64", `"` + strings.Repeat("!", 128) + `"`, "appearance: not base64"},
		{"URL alphabet", `"` + strings.Repeat("_", 128) + `"`, "appearance: not base64"},
		{"a number", `12`, "appearance: want a base64 string, got 12"},
		{"an array", `[1,2,3]`, "appearance: want a base64 string"},
	} {
		var d Descriptor
		if err := json.Unmarshal([]byte(tc.in), &d); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// FuzzCompute describes any box of any small image: no panic, and either the zero
// Descriptor or one whose every stripe is a histogram, at a distance in [0, 1] (never NaN)
// from another, 0 from itself. Seeded from edgeBoxes, scaled to the fuzz image.
func FuzzCompute(f *testing.F) {
	for _, tc := range edgeBoxes {
		b := tc.box
		f.Add([]byte{1, 2, 3, 200, 100, 50}, 64, 64, b.X/10, b.Y/10, b.W/10, b.H/10)
	}
	f.Add([]byte{}, 0, 0, 0.0, 0.0, 1.0, 1.0)
	f.Add([]byte{255}, 1, 1, 0.0, 0.0, 1.0, 1.0)
	f.Add([]byte{9}, 3, -2, 0.0, 0.0, 1.0, 1.0)
	f.Fuzz(func(t *testing.T, seed []byte, w, h int, x, y, bw, bh float64) {
		if w > 256 || h > 256 {
			t.Skip()
		}
		var img []byte
		if w > 0 && h > 0 && len(seed) > 0 {
			img = make([]byte, w*h*3)
			for i := range img {
				img[i] = seed[i%len(seed)] + byte(i/len(seed))
			}
		}
		box := geom.Box{X: x, Y: y, W: bw, H: bh}
		d := Compute(img, w, h, box)
		if d.IsZero() {
			return
		}
		checkDescriptor(t, "fuzz", d, false)
		whole := Compute(img, w, h, geom.Box{W: float64(w), H: float64(h)})
		if dist := Distance(d, whole); !(dist >= 0 && dist <= 1) {
			t.Fatalf("distance to the whole image's %v", dist)
		}
		// Describing through a Frame whose picture is a part of the image: the same rules.
		fr := NewFrame(img, w, h, geom.Box{X: x, Y: y, W: 1, H: 1})
		if d2 := fr.Describe(box); d2.IsZero() {
			t.Fatalf("Describe through a Frame of another picture gave no descriptor for %+v", box)
		}
	})
}

// BenchmarkCompute measures one box of a walker's size on a 640x640 frame (its grid is
// capped at MaxSamples), 50 boxes of sizes from 12x30 to 192x480 through one Frame, and
// NewFrame alone (a frame's mean intensity, once a frame).
func BenchmarkCompute(b *testing.B) {
	f, boxes := scene(0)
	b.Run("box", func(b *testing.B) {
		fr := NewFrame(f.pix, f.w, f.h, geom.Box{W: 640, H: 640})
		b.ReportAllocs()
		for b.Loop() {
			_ = fr.Describe(boxes[0])
		}
	})
	var many []geom.Box
	for i := range 50 {
		s := 0.2 + 3*float64(i)/49 // 12x30 to 192x480
		many = append(many, geom.Box{X: float64(i%10) * 60, Y: float64(i/10) * 30, W: 60 * s, H: 150 * s})
	}
	b.Run("50-boxes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			fr := NewFrame(f.pix, f.w, f.h, geom.Box{W: 640, H: 640})
			for _, box := range many {
				_ = fr.Describe(box)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(many)), "ns/box")
	})
	b.Run("frame", func(b *testing.B) {
		for b.Loop() {
			_ = NewFrame(f.pix, f.w, f.h, geom.Box{W: 640, H: 640})
		}
	})
}

func BenchmarkDistance(b *testing.B) {
	f, boxes := scene(0)
	x, y := Compute(f.pix, f.w, f.h, boxes[0]), Compute(f.pix, f.w, f.h, boxes[1])
	for b.Loop() {
		_ = Distance(x, y)
	}
}
