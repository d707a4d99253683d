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
	// Scale is the drawn size relative to the sprite's own pixels; 0 means 1.
	Scale float64
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

func (o Object) scale() float64 {
	if o.Scale == 0 {
		return 1
	}
	return o.Scale
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
