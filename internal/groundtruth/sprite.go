package groundtruth

import (
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"strings"
)

// Sprite is an object cut out of a real picture: its pixels with alpha 255 on the object and
// 0 around it, the bounds of Image tight around the object (so the box of a drawn sprite is
// the object's box).
type Sprite struct {
	Name  string
	Class string // the model's label of the object ("person")
	Image *image.NRGBA
	// Source is where the object was in the picture it was cut from (in that picture's
	// pixels; empty when unknown): its bottom row says how deep it stood, which sizes it
	// by perspective (Crowd).
	Source image.Rectangle
	// Facing is which way the object faces in Image: +1 to the right, -1 to the left, 0
	// towards or away from the camera (or unknown). A walker is mirrored to face its way.
	Facing int
}

func (s *Sprite) validate() error {
	switch {
	case s == nil:
		return errors.New("no sprite")
	case s.Image == nil || s.Image.Bounds().Empty():
		return fmt.Errorf("sprite %q has no image", s.Name)
	case s.Class == "":
		return fmt.Errorf("sprite %q has no class", s.Name)
	}
	return nil
}

// Media are the sample media's parts that scenarios are made of: the plaza of vtest.avi
// without its walkers, and people cut out of its frames.
type Media struct {
	// Background is vtest.avi's plaza (768x576) with nobody on it: the per-pixel median of
	// frames across the video, where every walker has moved on. The parked cars and van at
	// the top right stay (static objects the model sees as car/truck, as on the live sample).
	Background *image.RGBA
	// People are the twenty persons cut out of vtest.avi's frames (27-61 x 66-142 pixels,
	// named walker-<frame>, a letter where a frame gives two), each found as a person by
	// yolov8n when drawn on Background.
	People []*Sprite
	// Vehicles holds the van parked at the top right, cut out of Background (class car,
	// named van): see cutVan.
	Vehicles []*Sprite
}

// personCut is a person to cut out of vtest.avi: the frame and a rectangle around the
// person, with a margin, that holds no one else, and which way the person faces.
type personCut struct {
	name   string
	frame  int
	rect   image.Rectangle
	facing int
}

// The background is the per-pixel median of medianFrames frames medianStep apart, from
// the first: 39 frames over 761 of vtest.avi's 795 (76 s at 10 fps), long enough for every
// walker to have moved on. ffmpeg's tmedian filter computes it.
const (
	medianStep   = 20
	medianFrames = 39
)

// vtestW and vtestH are vtest.avi's frame size, which the cuts are given in.
const vtestW, vtestH = 768, 576

// personCuts returns the people to cut, chosen by running yolov8n on vtest.avi's frames
// (every fifth): people with a confident box (score >= 0.7) and no one else within 20
// pixels, each once (the frame where the model was surest), whose cut-outs match the
// model's box (IoU >= 0.85), show nothing of the plaza (the red-and-white tape across the
// road spoiled two, a cone one), and are detected again on the empty background at several
// places with IoU >= 0.7 (TestLoadVTest checks it on every run). Facing is by eye: +1
// walking to the right in profile, -1 to the left, 0 seen from the front or the back.
func personCuts() []personCut {
	return []personCut{
		{"walker-060", 60, image.Rect(604, 222, 662, 352), 0},   // 35x110, dark coat, jeans, from the back
		{"walker-100", 100, image.Rect(579, 144, 629, 245), 0},  // 27x83, far, dark, from the back
		{"walker-140", 140, image.Rect(503, 179, 566, 282), -1}, // 40x81, white jacket
		{"walker-175", 175, image.Rect(447, 204, 514, 315), -1}, // 44x89, black jacket, jeans, arm out
		{"walker-200", 200, image.Rect(694, 243, 753, 366), 0},  // 40x102
		{"walker-220", 220, image.Rect(571, 285, 635, 421), 1},  // 42x119
		{"walker-400", 400, image.Rect(677, 289, 756, 421), 1},  // 61x112, long stride
		{"walker-450", 450, image.Rect(474, 172, 527, 271), 0},  // 30x78, black, from the front
		{"walker-480", 480, image.Rect(452, 227, 520, 347), 0},  // 45x102
		{"walker-540a", 540, image.Rect(596, 167, 655, 273), 0}, // 36x83, grey jacket, from the back
		{"walker-540b", 540, image.Rect(627, 274, 691, 400), 0}, // 41x105, black coat, from the front
		{"walker-615", 615, image.Rect(119, 127, 169, 221), -1}, // 30x70, far, dark jacket
		{"walker-640", 640, image.Rect(322, 374, 398, 537), 0},  // 55x142, near, black coat
		{"walker-655a", 655, image.Rect(447, 201, 504, 307), 0}, // 32x85, black, from the back
		{"walker-655b", 655, image.Rect(615, 172, 673, 279), 0}, // 35x87, red and navy jacket, from the back
		{"walker-680", 680, image.Rect(142, 320, 212, 461), 0},  // 49x121
		{"walker-745", 745, image.Rect(234, 197, 296, 304), 0},  // 38x84, red and navy jacket, from the front
		{"walker-755", 755, image.Rect(643, 198, 701, 325), 0},  // 33x104, black jacket, jeans, from the back
		{"walker-775a", 775, image.Rect(596, 185, 649, 303), 0}, // 30x95, bald, jeans, from the front
		{"walker-775b", 775, image.Rect(661, 122, 712, 212), 0}, // 27x66, far, red jacket, from the front
	}
}

// LoadVTest reads vtest.avi (third_party/media/vtest.avi, opencv-doc's sample) with the
// ffmpeg program and returns its empty background and the people cut out of it. It takes
// a second or two (ffmpeg decodes the video twice); load once per test and reuse.
func LoadVTest(ctx context.Context, file string) (*Media, error) {
	bg, err := decodeFiltered(ctx, file, vtestW, vtestH, 1,
		fmt.Sprintf(`select=not(mod(n\,%d)),tmedian=radius=%d`, medianStep, medianFrames/2))
	if err != nil {
		return nil, err
	}
	if len(bg) != 1 {
		return nil, fmt.Errorf("%s: too short for the background: want %d frames or more", file, (medianFrames-1)*medianStep+1)
	}
	cuts := personCuts()
	var sel []string
	at := map[int]int{} // frame -> its index among those read, in increasing order of frame
	for _, c := range cuts {
		if _, ok := at[c.frame]; !ok {
			at[c.frame] = len(sel)
			sel = append(sel, fmt.Sprintf(`eq(n\,%d)`, c.frame))
		}
	}
	frames, err := decodeFiltered(ctx, file, vtestW, vtestH, len(sel), "select="+strings.Join(sel, "+"))
	if err != nil {
		return nil, err
	}
	if len(frames) != len(sel) {
		return nil, fmt.Errorf("%s: %d of the %d frames with people read", file, len(frames), len(sel))
	}
	m := &Media{Background: bg[0]}
	for _, c := range cuts {
		sp, err := CutSprite(frames[at[c.frame]], m.Background, c.rect, 28)
		if err != nil {
			return nil, fmt.Errorf("%s: sprite %s (frame %d): %w", file, c.name, c.frame, err)
		}
		sp.Name, sp.Class, sp.Facing = c.name, "person", c.facing
		m.People = append(m.People, sp)
	}
	van, err := cutVan(m.Background)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	m.Vehicles = append(m.Vehicles, van)
	return m, nil
}

// CutSprite cuts the object inside rect out of frame by its difference from background (the
// same scene without the object): the pixels differing by more than threshold gray levels
// in some channel, closed, the largest connected part, its holes filled. rect must hold the
// whole object with a margin and nothing else that moved. The sprite has no name or class.
func CutSprite(frame, background *image.RGBA, rect image.Rectangle, threshold uint8) (*Sprite, error) {
	if frame.Rect != background.Rect {
		return nil, fmt.Errorf("frame %v and background %v differ in size", frame.Rect, background.Rect)
	}
	if !rect.In(frame.Rect) || rect.Dx() < 8 || rect.Dy() < 8 {
		return nil, fmt.Errorf("rectangle %v: want at least 8x8 inside the frame %v", rect, frame.Rect)
	}
	w, h := rect.Dx(), rect.Dy()
	mask := make([]bool, w*h)
	for y := range h {
		for x := range w {
			i := frame.PixOffset(rect.Min.X+x, rect.Min.Y+y)
			var d uint8
			for c := range 3 {
				a, b := frame.Pix[i+c], background.Pix[i+c]
				d = max(d, max(a, b)-min(a, b))
			}
			mask[y*w+x] = d > threshold
		}
	}
	mask = erode(dilate(mask, w, h), w, h) // close small gaps between parts of the body
	mask = largestPart(mask, w, h)
	fillHoles(mask, w, h)
	var box image.Rectangle
	area := 0
	for y := range h {
		for x := range w {
			if mask[y*w+x] {
				box = box.Union(image.Rect(x, y, x+1, y+1))
				area++
			}
		}
	}
	if area < 64 {
		return nil, fmt.Errorf("rectangle %v: only %d pixels differ from the background by more than %d", rect, area, threshold)
	}
	if box.Min.X == 0 || box.Min.Y == 0 || box.Max.X == w || box.Max.Y == h {
		return nil, fmt.Errorf("rectangle %v: the object (%v) touches its edge: give a margin", rect, box.Add(rect.Min))
	}
	img := image.NewNRGBA(image.Rect(0, 0, box.Dx(), box.Dy()))
	for y := range box.Dy() {
		for x := range box.Dx() {
			if !mask[(box.Min.Y+y)*w+box.Min.X+x] {
				continue
			}
			c := frame.RGBAAt(rect.Min.X+box.Min.X+x, rect.Min.Y+box.Min.Y+y)
			img.SetNRGBA(x, y, color.NRGBA{c.R, c.G, c.B, 255})
		}
	}
	return &Sprite{Image: img, Source: box.Add(rect.Min)}, nil
}

// dilate and erode apply a 3x3 square structuring element, ignoring what is outside the
// image (as OpenCV's default border does): closing does not eat into an object at the edge.
func dilate(m []bool, w, h int) []bool { return morph(m, w, h, true) }
func erode(m []bool, w, h int) []bool  { return morph(m, w, h, false) }

func morph(m []bool, w, h int, grow bool) []bool {
	out := make([]bool, len(m))
	for y := range h {
		for x := range w {
			v := !grow
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					xx, yy := x+dx, y+dy
					if xx < 0 || yy < 0 || xx >= w || yy >= h {
						continue
					}
					in := m[yy*w+xx]
					if grow && in {
						v = true
					}
					if !grow && !in {
						v = false
					}
				}
			}
			out[y*w+x] = v
		}
	}
	return out
}

// largestPart keeps the largest 8-connected set of true pixels.
func largestPart(m []bool, w, h int) []bool {
	label := make([]int32, len(m))
	var best, bestN int32
	n := int32(0)
	var stack []int
	for start := range m {
		if !m[start] || label[start] != 0 {
			continue
		}
		n++
		size := int32(0)
		stack = append(stack[:0], start)
		label[start] = n
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			size++
			x, y := p%w, p/w
			for dy := -1; dy <= 1; dy++ {
				for dx := -1; dx <= 1; dx++ {
					xx, yy := x+dx, y+dy
					if xx < 0 || yy < 0 || xx >= w || yy >= h {
						continue
					}
					q := yy*w + xx
					if m[q] && label[q] == 0 {
						label[q] = n
						stack = append(stack, q)
					}
				}
			}
		}
		if size > bestN {
			best, bestN = n, size
		}
	}
	out := make([]bool, len(m))
	for i := range m {
		out[i] = best != 0 && label[i] == best
	}
	return out
}

// fillHoles sets the false pixels that the image's border cannot reach through false
// pixels (4-connected).
func fillHoles(m []bool, w, h int) {
	seen := make([]bool, len(m))
	var stack []int
	push := func(p int) {
		if !m[p] && !seen[p] {
			seen[p] = true
			stack = append(stack, p)
		}
	}
	for x := range w {
		push(x)
		push((h-1)*w + x)
	}
	for y := range h {
		push(y * w)
		push(y*w + w - 1)
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		x, y := p%w, p/w
		if x > 0 {
			push(p - 1)
		}
		if x < w-1 {
			push(p + 1)
		}
		if y > 0 {
			push(p - w)
		}
		if y < h-1 {
			push(p + w)
		}
	}
	for i := range m {
		if !m[i] && !seen[i] {
			m[i] = true
		}
	}
}
