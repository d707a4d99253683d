package track

import (
	"fmt"
	"math"
	"time"
)

// Config tunes a Tracker. Zero values take the defaults named on each field (SetDefaults);
// Check says what is wrong with a bad one.
type Config struct {
	// HighScore splits detections: at or above it they are matched first, and may start
	// tracks; below it (down to LowScore) they may only keep a confirmed track going.
	// Default 0.5. Note that the workers drop detections under their own confidence
	// threshold (default 0.25) before the tracker sees them.
	HighScore float64
	// LowScore: detections below it are ignored. Default 0.1.
	LowScore float64
	// NewScore: an unmatched high detection starts a tentative track only at or above it.
	// Default 0.6 (HighScore + 0.1, as ByteTrack).
	NewScore float64
	// MinIoU is the least IoU of a high detection with a track's predicted box for the two
	// to match by overlap (stages 1, 4 and 5). Default 0.2.
	MinIoU float64
	// MinIoULow is the same for low detections (stages 2 and 4). Default 0.3 (ByteTrack:
	// 0.5 at 30 fps; at 2-10 fps predictions are looser, and on TestStreet 0.3 cut the
	// fragmentations by a factor 2-7 with no more switches).
	MinIoULow float64
	// DistanceGate is the largest squared Mahalanobis distance of a detection's centre from
	// a track's predicted centre for the two to match by distance when they do not
	// overlap enough (stages 3 and 5). Default 9.21 (chi-square, 2 degrees of freedom, 99%).
	// -1 turns matching by distance off (IoU only, as ByteTrack).
	DistanceGate float64
	// AppearanceGate is the largest appearance distance (infer/appearance.Distance, 0 the
	// same colours, 1 none shared) of a detection from a track's latest clean looks for a
	// lost track to take it (every stage), and AppearanceGate x appearanceKeep for a
	// confirmed track to (refusing a swap where two objects meet). Tracks and detections
	// without a descriptor are not gated. Default 0.5. -1 turns appearance off (motion only).
	AppearanceGate float64
	// ConfirmHits is the number of matched frames that confirm a tentative track. Default 3.
	// 1 confirms a track at its first detection.
	ConfirmHits int
	// ConfirmWindow is the time from a tentative track's first detection within which it
	// must reach ConfirmHits, or be dropped. Default 2 s.
	ConfirmWindow time.Duration
	// LostTimeout is how long a confirmed track may go unmatched before it ends. Default 5 s
	// (Frigate's default for a lost object).
	LostTimeout time.Duration
	// MeasureNoise is the standard deviation of a detection's box coordinates, as a
	// fraction of the box's size (width for x and width, height for y and height).
	// Default 0.05.
	MeasureNoise float64
	// AccelNoise is the standard deviation of objects' acceleration, in box sizes per
	// second squared (a box size: the square root of its area): how fast they may change
	// speed or direction without the filter being surprised. Default 0.5: more makes the
	// velocity follow the detector's jitter, and the prediction through an occlusion
	// worse (on TestStreet at 2 fps, 1 gave 1.8 times the switches of 0.5).
	AccelNoise float64
	// InitVelocity is the standard deviation of a new track's velocity, in box sizes per
	// second (as for AccelNoise): the prior on how fast things move before a track has a second detection.
	// Default 2.
	InitVelocity float64
	// FrameInterval is the time between the camera's analysed frames (1/fps). The times
	// that stand for a number of frames stretch with it, so that a camera analysed slowly
	// keeps the frames they give at the rates they were made for: a track has at least
	// ConfirmHits intervals to confirm (ConfirmWindow), is ended only after at least two
	// missed frames (LostTimeout at least 2.5 intervals), and a lost track is matched by
	// its prediction and by distance (stages 1-3) for at least two intervals (one missed
	// frame). Default 0: the times as they are (2 fps and faster need no stretching).
	//
	// The tracker also stretches them to the interval it is fed at (smoothed over its
	// latest frames, gaps over maxObservedInterval ignored), when that is longer: a camera
	// whose frames are analysed at a fraction of its fps (the workers are overloaded, and
	// the slicer shares them out) keeps its tracks too.
	FrameInterval time.Duration
	// ClassGroups are sets of labels a detector confuses with each other (a car seen as a
	// truck every few frames): a detection may match a track of any class of its group, and
	// the track's label is the class it was seen as most. A label is in one group at most.
	// Default none: a detection matches only tracks of its own class id.
	ClassGroups [][]string
}

// Defaults of Config's fields.
const (
	DefaultHighScore     = 0.5
	DefaultLowScore      = 0.1
	DefaultNewScore      = 0.6
	DefaultMinIoU        = 0.2
	DefaultMinIoULow     = 0.3
	DefaultDistanceGate  = 9.21
	DefaultAppearance    = 0.5
	DefaultConfirmHits   = 3
	DefaultConfirmWindow = 2 * time.Second
	DefaultLostTimeout   = 5 * time.Second
	DefaultMeasureNoise  = 0.05
	DefaultAccelNoise    = 0.5
	DefaultInitVelocity  = 2
)

// SetDefaults gives every zero field its default.
func (c *Config) SetDefaults() {
	setF := func(f *float64, d float64) {
		if *f == 0 {
			*f = d
		}
	}
	setF(&c.HighScore, DefaultHighScore)
	setF(&c.LowScore, DefaultLowScore)
	setF(&c.NewScore, DefaultNewScore)
	setF(&c.MinIoU, DefaultMinIoU)
	setF(&c.MinIoULow, DefaultMinIoULow)
	setF(&c.DistanceGate, DefaultDistanceGate)
	setF(&c.AppearanceGate, DefaultAppearance)
	setF(&c.MeasureNoise, DefaultMeasureNoise)
	setF(&c.AccelNoise, DefaultAccelNoise)
	setF(&c.InitVelocity, DefaultInitVelocity)
	if c.ConfirmHits == 0 {
		c.ConfirmHits = DefaultConfirmHits
	}
	if c.ConfirmWindow == 0 {
		c.ConfirmWindow = DefaultConfirmWindow
	}
	if c.LostTimeout == 0 {
		c.LostTimeout = DefaultLostTimeout
	}
}

// Check says whether c (with defaults applied) is usable; the error names the field.
func (c *Config) Check() error {
	frac := func(name string, f float64) error {
		if !(f > 0 && f < 1) {
			return fmt.Errorf("track: %s must be between 0 and 1 (exclusive), got %v", name, f)
		}
		return nil
	}
	pos := func(name string, f float64) error {
		if !(f > 0) || math.IsInf(f, 0) {
			return fmt.Errorf("track: %s must be a positive number, got %v", name, f)
		}
		return nil
	}
	for _, err := range []error{
		frac("HighScore", c.HighScore), frac("LowScore", c.LowScore), frac("NewScore", c.NewScore),
		frac("MinIoU", c.MinIoU), frac("MinIoULow", c.MinIoULow),
		pos("MeasureNoise", c.MeasureNoise), pos("AccelNoise", c.AccelNoise),
		pos("InitVelocity", c.InitVelocity),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case c.LowScore > c.HighScore:
		return fmt.Errorf("track: LowScore %v is above HighScore %v", c.LowScore, c.HighScore)
	case c.NewScore < c.HighScore:
		return fmt.Errorf("track: NewScore %v is below HighScore %v (only high detections start tracks)", c.NewScore, c.HighScore)
	case c.DistanceGate != -1 && (!(c.DistanceGate > 0) || math.IsInf(c.DistanceGate, 0)):
		return fmt.Errorf("track: DistanceGate must be a positive number, or -1 for none, got %v", c.DistanceGate)
	case c.AppearanceGate != -1 && !(c.AppearanceGate > 0 && c.AppearanceGate <= 1):
		return fmt.Errorf("track: AppearanceGate must be in (0, 1], or -1 for none, got %v", c.AppearanceGate)
	case c.ConfirmHits < 1:
		return fmt.Errorf("track: ConfirmHits must be at least 1, got %d", c.ConfirmHits)
	case c.ConfirmWindow <= 0:
		return fmt.Errorf("track: ConfirmWindow must be positive, got %v", c.ConfirmWindow)
	case c.LostTimeout <= 0:
		return fmt.Errorf("track: LostTimeout must be positive, got %v", c.LostTimeout)
	case c.FrameInterval < 0:
		return fmt.Errorf("track: FrameInterval must not be negative, got %v", c.FrameInterval)
	}
	_, err := groupsOf(c.ClassGroups)
	return err
}

// groupsOf returns the group index of each label of groups, or an error naming a label that
// is empty or in two groups.
func groupsOf(groups [][]string) (map[string]int, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	m := map[string]int{}
	for g, labels := range groups {
		for _, l := range labels {
			if l == "" {
				return nil, fmt.Errorf("track: ClassGroups[%d] has an empty label", g)
			}
			if h, dup := m[l]; dup {
				return nil, fmt.Errorf("track: ClassGroups[%d] and [%d] both hold %q", h, g, l)
			}
			m[l] = g
		}
	}
	return m, nil
}

// maxObservedInterval is the longest interval between frames that the tracker takes for
// the rate it is fed at: a longer gap is an outage (a camera offline, a stall), not a rate.
// Twice the interval of the slowest rate the tracker is tested at (config.MinTrackedFPS).
const maxObservedInterval = 10 * time.Second

// times are a Config's times in force, stretched to interval, the longer of its
// FrameInterval and the interval the tracker is fed at.
type times struct {
	confirmWindow, lostTimeout, predictMaxLost, distanceMaxLost time.Duration
}

func (c *Config) times(interval time.Duration) times {
	interval = max(interval, c.FrameInterval)
	frames := func(d time.Duration, n float64) time.Duration {
		return max(d, time.Duration(n*float64(interval)))
	}
	return times{
		confirmWindow:   frames(c.ConfirmWindow, float64(c.ConfirmHits)),
		lostTimeout:     frames(c.LostTimeout, 2.5),
		predictMaxLost:  frames(predictMaxLost, 2),
		distanceMaxLost: frames(distanceMaxLost, 2),
	}
}
