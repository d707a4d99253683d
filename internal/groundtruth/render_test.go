package groundtruth

import (
	"bytes"
	"image"
	"image/color"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// block returns a sprite of a solid colour, w x h.
func block(name string, w, h int, c color.NRGBA) *Sprite {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetNRGBA(x, y, c)
		}
	}
	return &Sprite{Name: name, Class: "person", Image: img}
}

var (
	red  = color.NRGBA{255, 0, 0, 255}
	blue = color.NRGBA{0, 0, 255, 255}
)

func still(id int, sp *Sprite, x, y float64, from, to time.Duration) Object {
	return Object{ID: id, Sprite: sp, Path: []Waypoint{{from, x, y}, {to, x, y}}}
}

func TestScenarioValidate(t *testing.T) {
	ok := func() Scenario {
		return Scenario{W: 100, H: 80, FPS: 10, Duration: time.Second,
			Objects: []Object{still(1, block("b", 10, 20, red), 0.5, 0.5, 0, time.Second)}}
	}
	if err := ok().Validate(); err != nil {
		t.Fatalf("valid scenario: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Scenario)
		want   string
	}{
		{"odd width", func(s *Scenario) { s.W = 101 }, "size 101x80: want positive even"},
		{"zero height", func(s *Scenario) { s.H = 0 }, "size 100x0"},
		{"fps", func(s *Scenario) { s.FPS = 0 }, "fps 0: want 1..120"},
		{"duration", func(s *Scenario) { s.Duration = 10 * time.Millisecond }, "duration 10ms: want at least one frame"},
		{"noise", func(s *Scenario) { s.Noise = -1 }, "noise -1"},
		{"id", func(s *Scenario) { s.Objects[0].ID = 0 }, "objects[0] (id 0): id 0: want > 0"},
		{"duplicate id", func(s *Scenario) { s.Objects = append(s.Objects, s.Objects[0]) }, "objects[1]: id 1 already used by objects[0]"},
		{"no sprite", func(s *Scenario) { s.Objects[0].Sprite = nil }, "objects[0] (id 1): no sprite"},
		{"no class", func(s *Scenario) { s.Objects[0].Sprite.Class = "" }, `sprite "b" has no class`},
		{"no image", func(s *Scenario) { s.Objects[0].Sprite.Image = nil }, `sprite "b" has no image`},
		{"scale", func(s *Scenario) { s.Objects[0].Scale = -2 }, "scale -2"},
		{"one waypoint", func(s *Scenario) { s.Objects[0].Path = s.Objects[0].Path[:1] }, "path has 1 waypoints, want at least 2"},
		{"time backwards", func(s *Scenario) { s.Objects[0].Path[1].T = 0 }, "path[1]: time 0s is not after path[0]'s 0s"},
		{"negative time", func(s *Scenario) { s.Objects[0].Path[0].T = -time.Second }, "path[0]: time -1s is negative"},
		{"NaN point", func(s *Scenario) { s.Objects[0].Path[1].X = math.NaN() }, "path[1]: point (NaN, 0.5)"},
		{"perspective", func(s *Scenario) { s.Perspective = &Perspective{Horizon: 0.5, Ref: 0.5} }, "perspective horizon 0.5, ref 0.5"},
		{"prop", func(s *Scenario) { s.Props = []Prop{{At: Point{0.5, 0.5}}} }, "props[0]: no sprite image"},
		{"light", func(s *Scenario) { s.Light = []Light{{0, 1, 0}, {0, 1, 0}} }, "light[1]: time 0s is not after light[0]'s 0s"},
		{"gain", func(s *Scenario) { s.Light = []Light{{0, -1, 0}} }, "light[0]: gain -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.change(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to say %q", err, tc.want)
			}
			if _, err := NewScene(s); err == nil || !strings.HasPrefix(err.Error(), "scenario: ") {
				t.Errorf("NewScene: %v", err)
			}
		})
	}
}

func TestAnchorAt(t *testing.T) {
	o := walker(1, "person", 1, 0.2, 0.4, 3, 0.6, 0.8, 4, 0.6, 0.8)
	for _, tc := range []struct {
		t    time.Duration
		want Point
		ok   bool
	}{
		{0, Point{}, false},
		{s, Point{0.2, 0.4}, true},
		{2 * s, Point{0.4, 0.6}, true},
		{3500 * time.Millisecond, Point{0.6, 0.8}, true},
		{4 * s, Point{0.6, 0.8}, true},
		{4*s + 1, Point{}, false},
	} {
		p, ok := o.AnchorAt(tc.t)
		if ok != tc.ok || !near(p.X, tc.want.X) || !near(p.Y, tc.want.Y) {
			t.Errorf("at %v: %v %v, want %v %v", tc.t, p, ok, tc.want, tc.ok)
		}
	}
}

func TestFrames(t *testing.T) {
	sc := Scenario{FPS: 15, Duration: 2 * time.Second}
	if n := sc.Frames(); n != 30 {
		t.Errorf("frames %d, want 30", n)
	}
	if ft := sc.FrameTime(7); ft != 466666666 {
		t.Errorf("frame 7 at %v", ft)
	}
}

func TestRender(t *testing.T) {
	sc, err := NewScene(Scenario{W: 100, H: 80, FPS: 10, Duration: 2 * time.Second, Objects: []Object{
		still(1, block("r", 10, 20, red), 0.5, 0.5, 0, time.Second),                      // box (45, 20) 10x20
		still(2, block("b", 10, 20, blue), 0.55, 0.6, 500*time.Millisecond, time.Second), // box (50, 28), in front
		still(3, block("r", 10, 10, red), 0, 1, 0, 2*time.Second),                        // half out of the left edge
	}})
	if err != nil {
		t.Fatal(err)
	}
	img, f := sc.Render(0, nil)
	if f.Index != 0 || f.T != 0 || len(f.Objects) != 2 {
		t.Fatalf("frame 0 truth %+v, want objects 1 and 3", f)
	}
	o1, o3 := f.Objects[0], f.Objects[1]
	if o1.ID != 1 || o1.Box != (geom.Box{X: 45, Y: 20, W: 10, H: 20}) || o1.Visible != 1 || o1.Class != "person" || o1.Anchor != (Point{0.5, 0.5}) {
		t.Errorf("object 1: %+v", o1)
	}
	if o3.ID != 3 || o3.Box != (geom.Box{X: 0, Y: 70, W: 5, H: 10}) || o3.Visible != 0.5 {
		t.Errorf("object 3 (half outside): %+v", o3)
	}
	for _, p := range []struct {
		x, y int
		want color.RGBA
	}{
		{45, 20, color.RGBA{255, 0, 0, 255}},
		{54, 39, color.RGBA{255, 0, 0, 255}},
		{44, 20, color.RGBA{128, 128, 128, 255}},
		{55, 20, color.RGBA{128, 128, 128, 255}},
		{45, 40, color.RGBA{128, 128, 128, 255}},
		{0, 79, color.RGBA{255, 0, 0, 255}},
		{5, 79, color.RGBA{128, 128, 128, 255}},
	} {
		if got := img.RGBAAt(p.x, p.y); got != p.want {
			t.Errorf("frame 0 pixel (%d, %d) = %v, want %v", p.x, p.y, got, p.want)
		}
	}

	// Frame 5: object 2 stands in front of object 1 (its anchor is lower), covering
	// x 50..59, y 28..47 of it: object 1 keeps 5 columns x 8 rows and 5 x 20.
	img, f = sc.Render(5, img)
	if len(f.Objects) != 3 || f.Objects[0].ID != 1 || f.Objects[1].ID != 2 {
		t.Fatalf("frame 5 truth %+v, want 1 behind 2", f)
	}
	if v := f.Objects[0].Visible; !near(v, (5.0*20+5*8)/200) {
		t.Errorf("object 1 visible %v, want 0.7", v)
	}
	if v := f.Objects[1].Visible; v != 1 {
		t.Errorf("object 2 visible %v", v)
	}
	if got := img.RGBAAt(52, 30); got != (color.RGBA{0, 0, 255, 255}) {
		t.Errorf("overlap pixel %v, want blue in front", got)
	}
	if tr := sc.Truth(5); len(tr.Objects) != 3 || tr.Objects[0] != f.Objects[0] || tr.T != 500*time.Millisecond {
		t.Errorf("Truth(5) %+v differs from Render's %+v", tr, f)
	}

	// After its path, an object is gone.
	_, f = sc.Render(15, nil)
	if len(f.Objects) != 1 || f.Objects[0].ID != 3 {
		t.Errorf("frame 15 truth %+v, want only object 3", f)
	}
	if at := sc.At(1500 * time.Millisecond); len(at) != 1 {
		t.Errorf("At(1.5 s) %+v", at)
	}
}

func TestRenderScaleAndBackground(t *testing.T) {
	bg := image.NewRGBA(image.Rect(0, 0, 50, 40))
	for i := range bg.Pix {
		bg.Pix[i] = 200
	}
	sc, err := NewScene(Scenario{W: 100, H: 80, FPS: 5, Duration: time.Second, Background: bg,
		Objects: []Object{{ID: 9, Sprite: block("r", 10, 20, red), Scale: 1.5, Path: []Waypoint{{0, 0.5, 1}, {time.Second, 0.5, 1}}}}})
	if err != nil {
		t.Fatal(err)
	}
	img, f := sc.Render(0, nil)
	if b := f.Objects[0].Box; b != (geom.Box{X: 43, Y: 50, W: 15, H: 30}) {
		t.Errorf("scaled box %+v, want 15x30 standing on the bottom edge", b)
	}
	if got := img.RGBAAt(5, 5); got != (color.RGBA{200, 200, 200, 255}) {
		t.Errorf("background pixel %v, want the background scaled", got)
	}
}

func TestNoise(t *testing.T) {
	mk := func(seed uint64) *Scene {
		sc, err := NewScene(Scenario{W: 64, H: 48, FPS: 10, Duration: time.Second, Noise: 6, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	a, _ := mk(1).Render(3, nil)
	b, _ := mk(1).Render(3, nil)
	c, _ := mk(2).Render(3, nil)
	d, _ := mk(1).Render(4, nil)
	if !bytes.Equal(a.Pix, b.Pix) {
		t.Error("the same seed and frame drew different noise")
	}
	if bytes.Equal(a.Pix, c.Pix) || bytes.Equal(a.Pix, d.Pix) {
		t.Error("another seed or frame drew the same noise")
	}
	hist := map[int]int{}
	for i, v := range a.Pix {
		if i%4 == 3 {
			if v != 255 {
				t.Fatalf("alpha %d", v)
			}
			continue
		}
		hist[int(v)-128]++
	}
	for dv, n := range hist {
		if dv < -6 || dv > 6 {
			t.Errorf("noise %+d (%d times) beyond the amplitude 6", dv, n)
		}
	}
	if len(hist) != 13 {
		t.Errorf("noise took %d values, want all 13 of -6..6: %v", len(hist), hist)
	}
}

func TestIoU(t *testing.T) {
	a := geom.Box{X: 0, Y: 0, W: 10, H: 10}
	for _, tc := range []struct {
		b    geom.Box
		want float64
	}{
		{a, 1},
		{geom.Box{X: 5, Y: 0, W: 10, H: 10}, 50.0 / 150},
		{geom.Box{X: 10, Y: 0, W: 10, H: 10}, 0},
		{geom.Box{X: 2, Y: 2, W: 0, H: 5}, 0},
	} {
		if got := IoU(a, tc.b); !near(got, tc.want) {
			t.Errorf("IoU(%v, %v) = %v, want %v", a, tc.b, got, tc.want)
		}
	}
}

func TestSceneKeepsItsOwnPaths(t *testing.T) {
	s := Scenario{W: 100, H: 80, FPS: 10, Duration: time.Second,
		Objects: []Object{still(1, block("r", 10, 20, red), 0.5, 0.5, 0, time.Second)}}
	sc, err := NewScene(s)
	if err != nil {
		t.Fatal(err)
	}
	s.Objects[0].Path[0].X = 0.1
	s.Objects[0].ID = 2
	if f := sc.Truth(0); len(f.Objects) != 1 || f.Objects[0].ID != 1 || f.Objects[0].Anchor.X != 0.5 {
		t.Errorf("truth %+v changed with the caller's scenario", f)
	}
	// An object wholly outside the frame is in the truth, with an empty box.
	sc, err = NewScene(Scenario{W: 100, H: 80, FPS: 10, Duration: time.Second,
		Objects: []Object{still(1, block("r", 10, 20, red), -0.5, 0.5, 0, time.Second)}})
	if err != nil {
		t.Fatal(err)
	}
	if f := sc.Truth(0); len(f.Objects) != 1 || f.Objects[0].Box != (geom.Box{}) || f.Objects[0].Visible != 0 {
		t.Errorf("object outside the frame: %+v", f)
	}
}

// TestRenderPerspectiveMirrorProps draws an object by perspective, mirrored, behind and
// in front of a prop, under a light that changes.
func TestRenderPerspectiveMirrorProps(t *testing.T) {
	half := block("half", 10, 20, red) // left half red, right half blue
	for y := range 20 {
		for x := 5; x < 10; x++ {
			half.Image.SetNRGBA(x, y, blue)
		}
	}
	wall := block("wall", 30, 40, color.NRGBA{0, 255, 0, 255})
	wall.Class = ""
	sc, err := NewScene(Scenario{W: 100, H: 80, FPS: 10, Duration: 2 * time.Second,
		Perspective: &Perspective{Horizon: 0, Ref: 0.5},
		Props:       []Prop{{Sprite: wall, At: Point{0.5, 0.6}, Scale: 1 / 1.2}}, // drawn 30x40 at factor 1.2
		Light:       []Light{{0, 1, 0}, {900 * time.Millisecond, 1, 0}, {time.Second, 0.5, 10}},
		Objects: []Object{
			// Walks down the picture from behind the wall (row 0.5, factor 1) to in front
			// of it (row 1, factor 2), mirrored.
			{ID: 1, Sprite: half, Mirror: true, Path: []Waypoint{{0, 0.5, 0.5}, {time.Second, 0.5, 1}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	img, f := sc.Render(0, nil)
	if len(f.Objects) != 1 {
		t.Fatalf("frame 0 truth %+v: want the object alone, not the prop", f)
	}
	// At row 0.5 (y 40), factor 1: 10x20 at (45, 20), wholly behind the wall (30x40 at
	// (35, 8)).
	if o := f.Objects[0]; o.Box != (geom.Box{X: 45, Y: 20, W: 10, H: 20}) || o.Visible != 0 {
		t.Errorf("frame 0: %+v, want 10x20 at (45, 20) wholly hidden by the prop", o)
	}
	if got := img.RGBAAt(50, 30); got != (color.RGBA{0, 255, 0, 255}) {
		t.Errorf("frame 0 pixel %v, want the prop's green", got)
	}
	// At row 1 (frame 10, y 80), factor 2: 20x40 at (40, 40), in front of the wall,
	// mirrored (blue on the left), under the light's step (0.5 v + 10).
	img, f = sc.Render(10, nil)
	if o := f.Objects[0]; o.Box != (geom.Box{X: 40, Y: 40, W: 20, H: 40}) || o.Visible != 1 {
		t.Errorf("frame 10: %+v, want 20x40 at (40, 40), in full", o)
	}
	if l, r := img.RGBAAt(42, 60), img.RGBAAt(57, 60); l != (color.RGBA{10, 10, 138, 255}) || r != (color.RGBA{138, 10, 10, 255}) {
		t.Errorf("frame 10 pixels %v, %v: want blue left and red right, at half light plus 10", l, r)
	}
	if g, o := sc.Scenario().LightAt(950 * time.Millisecond); !near(g, 0.75) || !near(o, 5) {
		t.Errorf("light half way through the step: %v, %v", g, o)
	}
	if got := (Perspective{Horizon: 0.2, Ref: 0.6}).Factor(0); got != minFactor {
		t.Errorf("factor above the horizon %v", got)
	}
}
