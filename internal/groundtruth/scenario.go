package groundtruth

import (
	"errors"
	"fmt"
	"image"
	"math"
	"time"
)

// Scenario is a video to make: objects (sprites) moving over a background along paths of
// timed waypoints, and the truth of where they are.
type Scenario struct {
	W, H       int           // frame size in pixels, even (H.264 4:2:0); the background is scaled to it
	FPS        int           // frames per second of the video, 1..120
	Duration   time.Duration // length: round(Duration*FPS) frames, frame i shown at i/FPS
	Background image.Image   // scaled to W x H; nil: plain gray (128)
	Objects    []Object
	// Noise is the amplitude, in gray levels 0..64, of uniform per-pixel noise added to each
	// frame (as a camera's sensor adds); 0: none. Seed makes it repeatable.
	Noise float64
	Seed  uint64
	// Perspective, when set, draws every object and prop at its Scale times
	// Perspective.Factor of its anchor's row, so that its size follows its depth; nil: at
	// its Scale wherever it is.
	Perspective *Perspective
	// Props are static things standing on the scene (pillars, signs): drawn in depth order
	// with the objects (over those whose anchor is higher up the picture, under the others),
	// they hide what is behind them, but they are no objects of the truth.
	Props []Prop
	// Light is the frame's exposure over time (a cloud, the camera's gain): each colour
	// level v of the drawn frame becomes Gain*v + Offset, clamped to 0..255, before the
	// noise is added. Between two lights it changes linearly (two lights a frame apart
	// make a step); before the first and after the last it stays. Empty: unchanged.
	Light []Light
}

// Perspective sizes things by their depth on a ground plane seen from above: an anchor at
// row y (normalized) is drawn at Factor(y) = (y - Horizon) / (Ref - Horizon) times its
// size at row Ref, so that sizes grow linearly down the picture, as a pinhole camera
// looking down at a flat ground draws them.
type Perspective struct {
	Horizon float64 // the row where sizes would shrink to nothing, above Ref
	Ref     float64 // the row where Factor is 1
}

// minFactor bounds Factor below: a thing far beyond the horizon is not drawn at nothing.
const minFactor = 0.05

// Factor is the size at row y relative to the size at row Ref (at least minFactor).
func (p Perspective) Factor(y float64) float64 {
	return max(minFactor, (y-p.Horizon)/(p.Ref-p.Horizon))
}

func (p Perspective) validate() error {
	if !finite(p.Horizon) || !finite(p.Ref) || p.Ref <= p.Horizon || math.Abs(p.Horizon) > 10 || math.Abs(p.Ref) > 10 {
		return fmt.Errorf("perspective horizon %v, ref %v: want finite, horizon < ref", p.Horizon, p.Ref)
	}
	return nil
}

// Prop is a static thing on the scene, drawn with its anchor (bottom-centre) at At, at
// Scale (0 means 1; times the perspective's factor when there is one), and Mirror'ed
// left to right when set. Its sprite's Class may be empty.
type Prop struct {
	Sprite *Sprite
	At     Point
	Scale  float64
	Mirror bool
}

// Light is the exposure from time T: colour levels v become Gain*v + Offset.
type Light struct {
	T      time.Duration
	Gain   float64 // 1: unchanged
	Offset float64 // in gray levels
}

// Object is one thing that moves in a scenario.
type Object struct {
	// ID names the object in the truth: unique in the scenario, > 0.
	ID int
	// Sprite is what is drawn; its Class is the object's class.
	Sprite *Sprite
	// Path is where the object's anchor (the bottom-centre of its box, the daemon's default
	// anchor) is, in normalized coordinates, at two or more times strictly increasing; in
	// between it moves in a straight line at constant speed. The object is on the video
	// from the first waypoint's time to the last's (inclusive), absent before and after.
	// Two waypoints at the same place make it stand still. Anchors may be outside 0..1
	// (an object walking in from beyond an edge).
	Path []Waypoint
	// Scale is the drawn size relative to the sprite's own pixels; 0 means 1. With the
	// scenario's Perspective it is multiplied by the factor of the anchor's row.
	Scale float64
	// Mirror draws the sprite flipped left to right (a walker facing the other way).
	Mirror bool
}

// Waypoint is where an object's anchor is at time T (from the start of the video).
type Waypoint struct {
	T    time.Duration
	X, Y float64
}

func (o Object) class() string {
	if o.Sprite == nil {
		return ""
	}
	return o.Sprite.Class
}

// Frames is the number of frames of the video: round(Duration*FPS).
func (s Scenario) Frames() int {
	return int(math.Round(s.Duration.Seconds() * float64(s.FPS)))
}

// FrameTime is the time of frame i: i/FPS.
func (s Scenario) FrameTime(i int) time.Duration {
	return time.Duration(i) * time.Second / time.Duration(s.FPS)
}

// Validate checks the scenario; the error names the field and object that is wrong.
func (s Scenario) Validate() error {
	var errs []error
	switch {
	case s.W <= 0 || s.H <= 0 || s.W%2 != 0 || s.H%2 != 0:
		errs = append(errs, fmt.Errorf("size %dx%d: want positive even width and height", s.W, s.H))
	case s.W > 8192 || s.H > 8192:
		errs = append(errs, fmt.Errorf("size %dx%d: larger than 8192x8192", s.W, s.H))
	}
	if s.FPS < 1 || s.FPS > 120 {
		errs = append(errs, fmt.Errorf("fps %d: want 1..120", s.FPS))
	}
	if s.Duration <= 0 || (s.FPS > 0 && s.Frames() < 1) {
		errs = append(errs, fmt.Errorf("duration %v: want at least one frame", s.Duration))
	}
	if !(s.Noise >= 0 && s.Noise <= 64) {
		errs = append(errs, fmt.Errorf("noise %v: want 0..64 gray levels", s.Noise))
	}
	if s.Perspective != nil {
		if err := s.Perspective.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	for i, p := range s.Props {
		switch {
		case p.Sprite == nil || p.Sprite.Image == nil || p.Sprite.Image.Bounds().Empty():
			errs = append(errs, fmt.Errorf("props[%d]: no sprite image", i))
		case !finite(p.At.X) || !finite(p.At.Y) || math.Abs(p.At.X) > 100 || math.Abs(p.At.Y) > 100:
			errs = append(errs, fmt.Errorf("props[%d]: point (%v, %v) is not a finite normalized position", i, p.At.X, p.At.Y))
		case !finite(p.Scale) || p.Scale < 0 || p.Scale > 20:
			errs = append(errs, fmt.Errorf("props[%d]: scale %v: want 0..20 (0 means 1)", i, p.Scale))
		}
	}
	for i, l := range s.Light {
		switch {
		case !finite(l.Gain) || l.Gain < 0 || l.Gain > 4 || !finite(l.Offset) || math.Abs(l.Offset) > 255:
			errs = append(errs, fmt.Errorf("light[%d]: gain %v, offset %v: want gain 0..4, offset -255..255", i, l.Gain, l.Offset))
		case i > 0 && l.T <= s.Light[i-1].T:
			errs = append(errs, fmt.Errorf("light[%d]: time %v is not after light[%d]'s %v", i, l.T, i-1, s.Light[i-1].T))
		}
	}
	ids := map[int]int{}
	for i, o := range s.Objects {
		if err := o.validate(); err != nil {
			errs = append(errs, fmt.Errorf("objects[%d] (id %d): %w", i, o.ID, err))
		}
		if j, dup := ids[o.ID]; dup {
			errs = append(errs, fmt.Errorf("objects[%d]: id %d already used by objects[%d]", i, o.ID, j))
		}
		ids[o.ID] = i
	}
	return errors.Join(errs...)
}

func (o Object) validate() error {
	if o.ID <= 0 {
		return fmt.Errorf("id %d: want > 0", o.ID)
	}
	if err := o.Sprite.validate(); err != nil {
		return err
	}
	if !finite(o.Scale) || o.Scale < 0 || o.Scale > 20 {
		return fmt.Errorf("scale %v: want 0..20 (0 means 1)", o.Scale)
	}
	if len(o.Path) < 2 {
		return fmt.Errorf("path has %d waypoints, want at least 2", len(o.Path))
	}
	for i, w := range o.Path {
		switch {
		case !finite(w.X) || !finite(w.Y) || math.Abs(w.X) > 100 || math.Abs(w.Y) > 100:
			return fmt.Errorf("path[%d]: point (%v, %v) is not a finite normalized position", i, w.X, w.Y)
		case w.T < 0:
			return fmt.Errorf("path[%d]: time %v is negative", i, w.T)
		case i > 0 && w.T <= o.Path[i-1].T:
			return fmt.Errorf("path[%d]: time %v is not after path[%d]'s %v", i, w.T, i-1, o.Path[i-1].T)
		}
	}
	return nil
}

// LightAt returns the exposure's gain and offset at time t (1 and 0 without lights).
func (s Scenario) LightAt(t time.Duration) (gain, offset float64) {
	ls := s.Light
	switch {
	case len(ls) == 0:
		return 1, 0
	case t <= ls[0].T:
		return ls[0].Gain, ls[0].Offset
	}
	for i := 1; i < len(ls); i++ {
		if a, b := ls[i-1], ls[i]; t < b.T {
			u := float64(t-a.T) / float64(b.T-a.T)
			return a.Gain + u*(b.Gain-a.Gain), a.Offset + u*(b.Offset-a.Offset)
		}
	}
	last := ls[len(ls)-1]
	return last.Gain, last.Offset
}

// AnchorAt returns the object's anchor at time t and whether the object is on the video then.
func (o Object) AnchorAt(t time.Duration) (Point, bool) {
	n := len(o.Path)
	if n == 0 || t < o.Path[0].T || t > o.Path[n-1].T {
		return Point{}, false
	}
	for i := 1; i < n; i++ {
		a, b := o.Path[i-1], o.Path[i]
		if t <= b.T {
			u := float64(t-a.T) / float64(b.T-a.T)
			return Point{a.X + u*(b.X-a.X), a.Y + u*(b.Y-a.Y)}, true
		}
	}
	last := o.Path[n-1]
	return Point{last.X, last.Y}, true
}
