// Package track follows objects across the frames of one camera: a multi-object tracker in
// the manner of ByteTrack (Zhang et al., 2022), made for the low and irregular frame rates
// of visiond (2-10 analysed frames per second, frames skipped under load). It is pure Go.
//
// # Use
//
// One Tracker per camera, fed by one goroutine with the detections of each analysed frame,
// in capture order:
//
//	tr, err := track.New(track.Config{}, firstID) // zero Config fields take the defaults
//	...
//	res, err := tr.Update(capturedAt, width, height, result.Detections)
//	// res.IDs[i]: the track id of detection i (0: none); publish it as track_id.
//	// res.New: tracks confirmed in this frame (object event "new").
//	// res.Ended: tracks ended in this frame (object event "end").
//	// res.Tracks: every live track (the /objects listing, zones, lines).
//	// res.Paths[i]: where res.New[i] was seen while tentative (zones and lines replay it).
//	...
//	ended := tr.EndAll() // on camera removal or shutdown: "end" for every track
//
// Filters and masks (which detections to track at all) apply before Update: a detection
// left out is simply not there for the tracker. A lost track's Box is a prediction, not a
// sighting: zones and lines may want to look at matched tracks only (Track.Matched).
// SetConfig changes the configuration of a running tracker (a hot reload) and keeps its
// tracks.
//
// A Tracker holds no lock: it must not be used by two goroutines at once. Update reuses
// the slices of the Result it returns: they are valid until the next call of Update or
// EndAll; copy what is kept longer or handed to another goroutine.
//
// # Ids
//
// A track gets its id when it is confirmed, so false positives that never confirm use up
// no ids. Ids are firstID, firstID+1, ... in order of confirmation, never reused by the
// Tracker; the caller may seed firstID (for instance from a counter kept across restarts)
// so that ids do not repeat across daemon restarts. NextID says what the next one will be.
//
// # Life of a track
//
//   - tentative: started by a detection of score >= NewScore that matched nothing. It has
//     no id yet (Track.ID 0, and its detections get id 0). It becomes confirmed at its
//     ConfirmHits-th matched frame if that comes within ConfirmWindow of its first;
//     otherwise it is dropped silently when the window has passed. (At f analysed frames
//     per second, ConfirmHits hits take (ConfirmHits-1)/f seconds: the defaults, 3 hits in
//     2 s, confirm at 2 fps with up to two misses. Given the camera's rate,
//     Config.FrameInterval, the window is at least ConfirmHits intervals, so a camera
//     analysed at 1 fps or slower confirms with up to one miss: down to 0.2 fps, 3 hits in
//     15 s, and ever more slowly below.)
//   - confirmed: matched in this frame; reported in Result.New in the frame it is
//     confirmed. Its detections carry its id.
//   - lost: a confirmed track not matched in this frame. Its box is the filter's prediction.
//     It is still matched against new detections (by overlap and by distance), and when it
//     is, it is confirmed again with the same id. It ends when it has not been matched for
//     longer than LostTimeout (a time, so it means the same at every frame rate), or at
//     once when the centre of its predicted box is outside the frame (it left: detections
//     are clipped to the frame, so none would match it but that of the next object to
//     come in there). A track whose predicted centre is outside the frame takes no
//     detection: a box cut by the frame's edge, narrower than its track, is measured as an
//     object partly hidden by the edge (as by another object, below), so that an object
//     more than half out goes out of the frame with its centre, and its track ends instead
//     of shrinking with the part left in view until it takes the next one coming in.
//   - ended: reported once in Result.Ended (State Ended), then forgotten.
//
// A detection matches only tracks of its class id, or of a class of the same group
// (Config.ClassGroups: a car seen as a truck every few frames); a track counts the classes
// of its detections and is labelled with the one it was seen as most (the earlier on a
// tie).
//
// While tentative, a track keeps where it was seen (at most MaxPath sightings): the frame
// that confirms it hands them over (Result.Paths), so that a line crossed or a zone entered
// during the confirmation still counts.
//
// # Association, per frame
//
// Every track is first predicted to the frame's capture time by a constant-velocity Kalman
// filter on (centre x, centre y, width, height) and their velocities (kalman.go), whose
// process noise grows with the real time since the previous frame. Detections below
// LowScore are ignored; the rest split into high (score >= HighScore) and low. Then:
//
//  1. high detections against confirmed and lost tracks, by IoU of the detection with the
//     track's predicted box (at least MinIoU); a lost track may not take the detection a
//     confirmed track overlaps best, where that one overlaps it more (a lost track's
//     prediction come over a standing object would swap ids with it: claimOf);
//  2. low detections against the confirmed and lost tracks left, by IoU (at least
//     MinIoULow): a partly hidden object, detected with a low score, keeps its track
//     without a low score ever starting one (ByteTrack's contribution; ByteTrack leaves
//     lost tracks out of this stage, but at 2 fps one missed frame makes a track lost, and
//     a strict IoU with its prediction is evidence enough). A low detection more than
//     maxGrowth times as wide or high as a confirmed track is two objects seen as one, not
//     that track's (outgrows);
//  3. the high detections left against the confirmed tracks left and those lost for at
//     most a second (past that, a prediction's uncertainty is too wide to be safe), by the
//     distance of the detection's centre from the predicted centre, in standard deviations
//     of the filter's prediction (Mahalanobis, squared, at most DistanceGate), with width
//     and height within a factor 2 of the predicted ones;
//  4. the high and low detections left against the lost tracks left, by IoU (MinIoU,
//     MinIoULow) with the box where each was last seen: a parked object's filtered
//     velocity is the detector's jitter, which a prediction over a few missed frames turns
//     into drift, and where it was last seen is where it is. This comes after the other
//     stages, so that a moving object's place, taken by the next one in a queue, goes to
//     that one's track first;
//     4b. the high detections left against the lost tracks left, by appearance alone
//     (below), nearer than AppearanceGate x appearanceFind: an object come out from
//     behind another where neither its prediction nor where it was last seen overlaps it;
//  5. the high detections left against the tentative tracks: by IoU, then by distance;
//  6. the high detections still left, with score >= NewScore, start tentative tracks.
//
// Each stage is an optimal assignment (Hungarian method, assign.go) that minimises the
// total cost, leaving pairs unmatched rather than matching them past the stage's gate. In
// the stages matched by overlap or distance (1, 2, 3 and 5), a pair's cost also holds its
// appearance distance (lookCost, below): where two tracks' predictions fit two detections
// nearly alike, each takes the one it looks like.
//
// In every stage a lost track may take a detection only when it can be the same object
// (reacquires): of its size (width and height within maxSizeRatio of the medians of its
// latest boxes, a side cut by the frame's edge not compared) and no further from the
// prediction than its speed (at least minReach) could have taken it, either way, in the
// time since it was lost. Overlap alone would give a lost person's id to the next one
// through the same doorway (TestDoorway). A detection much narrower (or lower) than its
// track, next to another detection's box, is an object partly hidden behind another: the
// filter takes it as a box of the track's size from its edge in view (measured), and a lost
// track keeps the size it was seen with, so that two people walking through each other
// keep their ids (TestWalkThrough).
//
// Appearance (issue 37): each detection carries a colour descriptor of its box, computed by
// the worker where the pixels are (infer/appearance). A track keeps the looks of its latest
// clean detections (not cut by the frame's edge, not overlapping another detection, whose
// pixels would be in it), and a detection's appearance distance from a track is the least
// from those. In every stage a lost track takes only a detection within AppearanceGate of
// it, and a confirmed track none further than AppearanceGate x appearanceKeep: where two
// people meet, the one detection of the frame they coincide on no longer goes to the
// hidden one's track (TestWalkThrough: 12 switches in 20 passes at 5 fps by motion alone,
// none with the walkers dressed differently). Pairs with nothing to compare (no
// descriptor, a track with fewer than minLooks clean looks) are gated by motion alone, as
// before. Appearance is no proof of identity (two people may dress alike): it refuses and
// breaks ties, and finds a lost object only within its reach.
//
// Stage 3 is not in ByteTrack, which was made for 30 fps video. At 2 fps a walking person
// moves about their own width between frames, and a car much more: the predicted box may
// miss the detection entirely (IoU 0), most of all at a track's start, when its velocity is
// not yet known, and after a turn. The distance gate follows the filter's uncertainty: tight
// for a track followed at 10 fps, wide for one just started or lost for a second, so it
// catches those jumps without reaching for a neighbour's detection where IoU would have
// decided. Overlap, where there is any, still decides first. TestLargeJumps shows what it
// buys at 2 fps (76% of the detections with an id against 16% with IoU only). Stage 4 is
// not in ByteTrack either: TestParked (parked cars, 20% missed, 5000 frames: one id each)
// fails without it.
package track

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
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

// State is where a track is in its life.
type State uint8

// Track states.
const (
	Tentative State = iota // not confirmed yet; no id
	Confirmed              // matched in the latest frame
	Lost                   // confirmed before, not matched in the latest frame
	Ended                  // lost too long, left the frame, or ended by EndAll
)

func (s State) String() string {
	switch s {
	case Tentative:
		return "tentative"
	case Confirmed:
		return "confirmed"
	case Lost:
		return "lost"
	case Ended:
		return "ended"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Track is what the tracker knows of one object, as of the latest frame.
type Track struct {
	ID      uint64 // 0 while tentative
	ClassID int
	Label   string
	State   State
	// Matched says whether a detection matched the track in the latest frame.
	Matched bool
	// Box: the detection matched in the latest frame, or the filter's prediction for the
	// frame's time when none did (a lost track). Source-frame pixels.
	Box   geom.Box
	Score float32 // score of the latest matched detection
	// BestScore is the highest score matched so far, BestBox the box of that detection and
	// BestAt its frame's time.
	BestScore float32
	BestBox   geom.Box
	BestAt    time.Time
	FirstSeen time.Time // first matched detection (of the tentative track)
	LastSeen  time.Time // latest matched detection
	Hits      int       // frames with a matched detection
	// VX, VY are the velocity of the box's centre, in pixels per second, as filtered.
	VX, VY float64
}

// Sighting is a detection's box matched by a track, and its frame's time.
type Sighting struct {
	At  time.Time
	Box geom.Box
}

// Result is the outcome of one Update. Its slices belong to the Tracker and are reused by
// the next Update or EndAll.
type Result struct {
	// IDs[i] is the id of the track that detection i matched, 0 when none: a detection
	// under LowScore or of zero size, a low detection that matched no confirmed track, a
	// high one that matched nothing or only a tentative track not confirmed in this frame.
	IDs []uint64
	// Tracks are the live tracks after the frame: tentative, confirmed and lost, in the
	// order they were started.
	Tracks []Track
	New    []Track // tracks confirmed in this frame; also in Tracks
	Ended  []Track // tracks ended in this frame (State Ended); no longer in Tracks
	// Paths[i] are where New[i] was seen while tentative, before this frame, oldest first
	// (at most MaxPath, the latest): with its box in this frame, the whole way it has come
	// since its first detection, for the zones and lines to play through once it has an id.
	Paths [][]Sighting
}

// MaxPath bounds the sightings a tentative track keeps (Result.Paths): at least
// ConfirmHits - 1 of them make the whole way at the defaults (2 of 3 hits).
const MaxPath = 16

// distanceMaxLost is the longest a lost track may have gone unmatched and still be
// matched by distance (stage 3).
const distanceMaxLost = time.Second

// predictMaxLost is the longest a lost track may have gone unmatched and still be matched
// by overlap with its prediction (stages 1 and 2); after that it is matched only where it
// was last seen (stage 4). A prediction carried at the last velocity for seconds drifts
// across the frame and takes whoever appears there (a newcomer 3.4 s after a walker
// vanished, in pipeline's TestLostTrackTakesNewcomer).
const predictMaxLost = 3 * time.Second

// ErrTimeOrder is returned by Update for a frame not later than the previous one.
var ErrTimeOrder = errors.New("track: frame time not after the previous frame's")

// Tracker follows the objects of one camera. Not safe for concurrent use.
type Tracker struct {
	cfg   Config
	times times // cfg's, stretched to its FrameInterval or observed
	// observed is the interval between the latest frames, smoothed: what the camera is
	// analysed at, which overload makes longer than its FrameInterval.
	observed time.Duration
	groups   map[string]int // cfg.ClassGroups: the group of each label in one
	nextID   uint64
	tracks   []*track
	free     []*track // ended tracks kept for reuse

	started bool
	last    time.Time
	w, h    int

	// Per-frame scratch.
	res   Result
	dets  []infer.Detection // the frame's, during Update
	taken []bool            // detections matched in this frame
	claim []float64         // each detection's claim by the confirmed tracks (claimOf), -1 until asked
	frame uint64            // frames updated, for the tracks' per-frame caches
	keys  []int             // each detection's match key (matchKey)
	high  []int
	low   []int
	rows  []*track
	m     matcher
}

type track struct {
	Track
	cx, cy, cw, ch axis
	det            int      // index of the detection matched in this frame
	seen           geom.Box // box of the latest matched detection
	key            int      // the match key of its classes (matchKey)
	pred           geom.Box // the prediction for this frame (Box becomes the detection matched)
	best           int      // bestOf's answer in frame bestFrame
	bestFrame      uint64
	// sizes are the widths and heights of its latest sizeRing detections (sizes[Hits%sizeRing]
	// the next to go; 0 where the frame's edge cut the box), whose medians reacquires
	// compares a lost track's candidates with: the filter's size follows each detection, and
	// a false positive matched while the object was missed would make the object's own
	// detection look like another.
	sizes   [sizeRing]struct{ w, h float64 }
	classes []classCount
	path    []Sighting // while tentative: its sightings, this frame's included
	// looks are the appearance descriptors of its latest clean detections (clean), looks[n%
	// len] the next to go: what a detection must look like to be its object (appearance).
	looks  [lookRing]appearance.Descriptor
	nlooks int
}

// classCount is how many of a track's detections were of one class.
type classCount struct {
	id    int
	label string
	n     int
}

// matchKey is what a detection and a track must share to match: the group of its label
// when it is in one (negative), else its class id.
func (t *Tracker) matchKey(d infer.Detection) int {
	if g, ok := t.groups[d.Label]; ok {
		return -1 - g
	}
	return d.ClassID
}

// New returns a tracker with configuration cfg (zero fields take defaults) whose first
// confirmed track gets id firstID (0 means 1).
func New(cfg Config, firstID uint64) (*Tracker, error) {
	cfg.SetDefaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if firstID == 0 {
		firstID = 1
	}
	groups, _ := groupsOf(cfg.ClassGroups) // checked
	return &Tracker{cfg: cfg, times: cfg.times(0), groups: groups, nextID: firstID}, nil
}

// SetConfig replaces the tracker's configuration (zero fields take defaults), keeping its
// tracks and ids. On a bad configuration it returns Check's error and changes nothing.
func (t *Tracker) SetConfig(cfg Config) error {
	cfg.SetDefaults()
	if err := cfg.Check(); err != nil {
		return err
	}
	t.cfg, t.times = cfg, cfg.times(t.observed)
	t.groups, _ = groupsOf(cfg.ClassGroups) // checked
	for _, tr := range t.tracks {
		tr.key = tr.classKey(t)
	}
	return nil
}

// classKey is the match key of the track's label.
func (tr *track) classKey(t *Tracker) int {
	return t.matchKey(infer.Detection{ClassID: tr.ClassID, Label: tr.Label})
}

// Config returns the tracker's configuration, defaults applied.
func (t *Tracker) Config() Config { return t.cfg }

// NextID returns the id the next confirmed track will get.
func (t *Tracker) NextID() uint64 { return t.nextID }

// observe takes dt, the interval since the previous frame, into the rate the tracker is
// fed at, and stretches its times to it.
func (t *Tracker) observe(dt time.Duration) {
	if dt <= 0 || dt > maxObservedInterval {
		return
	}
	if t.observed == 0 {
		t.observed = dt
	} else {
		t.observed += (dt - t.observed) / 4
	}
	t.times = t.cfg.times(t.observed)
}

// Update feeds the detections of the frame captured at at, of size width x height pixels,
// and returns each detection's track id and the tracks' news. Frames must come in capture
// order: a frame not after the previous one is refused (ErrTimeOrder) and changes nothing.
// So does a bad detection (a box or score not a finite number, a negative size, a score
// outside 0..1); a zero-size box is ignored (id 0), since clipping to the frame makes them.
// A change of frame size rescales the tracks (a camera's resolution changed).
func (t *Tracker) Update(at time.Time, width, height int, dets []infer.Detection) (Result, error) {
	if width <= 0 || height <= 0 {
		return Result{}, fmt.Errorf("track: frame size %dx%d is not positive", width, height)
	}
	if t.started && !at.After(t.last) {
		return Result{}, fmt.Errorf("%w: %s is not after %s", ErrTimeOrder,
			at.Format(time.RFC3339Nano), t.last.Format(time.RFC3339Nano))
	}
	for i, d := range dets {
		if err := checkDetection(d); err != nil {
			name := d.Label
			if name == "" {
				name = fmt.Sprintf("class %d", d.ClassID)
			}
			return Result{}, fmt.Errorf("track: detections[%d] (%s): %w", i, name, err)
		}
	}
	dt := 0.0
	if t.started {
		dt = at.Sub(t.last).Seconds()
		t.observe(at.Sub(t.last))
		if t.w != width || t.h != height {
			t.rescale(float64(width)/float64(t.w), float64(height)/float64(t.h))
		}
	}
	t.started, t.last, t.w, t.h = true, at, width, height

	t.res.IDs = growU64(t.res.IDs, len(dets))
	t.res.Tracks, t.res.New, t.res.Ended = t.res.Tracks[:0], t.res.New[:0], t.res.Ended[:0]
	t.res.Paths = t.res.Paths[:0]
	t.dets = dets
	defer func() { t.dets = nil }() // the caller's
	t.taken = growBool(t.taken, len(dets))
	t.keys = growInt(t.keys, len(dets))
	for i, d := range dets {
		t.res.IDs[i] = 0
		t.taken[i] = false
		t.keys[i] = t.matchKey(d)
	}

	// Predict, and drop the tentative tracks whose window has passed.
	live := t.tracks[:0]
	for _, tr := range t.tracks {
		if tr.State == Tentative && at.Sub(tr.FirstSeen) > t.times.confirmWindow {
			t.free = append(t.free, tr)
			continue
		}
		t.predict(tr, dt)
		tr.Matched = false
		live = append(live, tr)
	}
	clear(t.tracks[len(live):])
	t.tracks = live

	t.high, t.low = t.high[:0], t.low[:0]
	for i, d := range dets {
		s := float64(d.Score)
		switch {
		case d.Box.W <= 0 || d.Box.H <= 0 || s < t.cfg.LowScore:
		case s >= t.cfg.HighScore:
			t.high = append(t.high, i)
		default:
			t.low = append(t.low, i)
		}
	}

	isActive := func(tr *track) bool {
		return tr.State == Confirmed || tr.State == Lost && at.Sub(tr.LastSeen) <= t.times.predictMaxLost
	}
	isTentative := func(tr *track) bool { return tr.State == Tentative }
	gate := t.cfg.DistanceGate
	t.frame++
	t.claim = grow(t.claim, len(dets))
	for i := range t.claim {
		t.claim[i] = -1 // not worked out yet (claimOf)
	}
	// 1. high against confirmed and lost, by overlap.
	t.stage(dets, t.high, isActive, byIoU, overlapLimit(t.cfg.MinIoU), at)
	// 2. low against confirmed and lost left, by overlap.
	t.stage(dets, t.low, isActive, byIoULow, overlapLimit(t.cfg.MinIoULow), at)
	if gate > 0 {
		// 3. high left against confirmed and recently lost left, by distance.
		t.stage(dets, t.high, func(tr *track) bool {
			return tr.State == Confirmed || tr.State == Lost && at.Sub(tr.LastSeen) <= t.times.distanceMaxLost
		}, byDistance, distanceLimit, at)
	}
	// 4. high and low left against lost, by overlap with where they were last seen.
	isLost := func(tr *track) bool { return tr.State == Lost }
	t.stage(dets, t.high, isLost, bySeen, 1-t.cfg.MinIoU, at)
	t.stage(dets, t.low, isLost, bySeen, 1-t.cfg.MinIoULow, at)
	if t.cfg.AppearanceGate > 0 {
		// 4b. high left against lost, by appearance, within their reach.
		t.stage(dets, t.high, isLost, byAppearance, t.cfg.AppearanceGate*appearanceFind, at)
	}
	// 5. high left against tentative, by overlap then distance.
	t.stage(dets, t.high, isTentative, byIoU, overlapLimit(t.cfg.MinIoU), at)
	if gate > 0 {
		t.stage(dets, t.high, isTentative, byDistance, distanceLimit, at)
	}
	// 6. new tentative tracks.
	for _, i := range t.high {
		if !t.taken[i] && float64(dets[i].Score) >= t.cfg.NewScore {
			t.start(dets[i], at, i)
		}
	}

	// States, ids, news.
	live = t.tracks[:0]
	for _, tr := range t.tracks {
		switch {
		case tr.Matched && tr.State == Tentative && tr.Hits >= t.cfg.ConfirmHits:
			tr.State = Confirmed
			tr.ID = t.nextID
			t.nextID++
			t.res.New = append(t.res.New, tr.Track)
			t.res.Paths = append(t.res.Paths, tr.path[:len(tr.path)-1])
		case tr.Matched && tr.State != Tentative:
			tr.State = Confirmed
		case !tr.Matched && tr.State == Confirmed:
			tr.State = Lost
			tr.cw.stopRate()
			tr.ch.stopRate()
			// It keeps the size it was seen with, not the filter's latest, which a box cut
			// by an occluder or the frame's edge may have shrunk.
			if w, h := tr.size(); w > 0 && h > 0 {
				tr.cw.p, tr.ch.p = w, h
				tr.Box = tr.predicted()
			}
		}
		if tr.State == Lost && (at.Sub(tr.LastSeen) > t.times.lostTimeout || t.outside(tr.Box)) {
			tr.State = Ended
			t.res.Ended = append(t.res.Ended, tr.Track)
			t.free = append(t.free, tr)
			continue
		}
		live = append(live, tr)
		t.res.Tracks = append(t.res.Tracks, tr.Track)
	}
	clear(t.tracks[len(live):])
	t.tracks = live
	for _, tr := range t.tracks {
		if tr.Matched && tr.ID != 0 {
			t.res.IDs[tr.det] = tr.ID
		}
	}
	return t.res, nil
}

// EndAll ends every track (confirmed and lost ones are returned, State Ended; tentative
// ones are dropped) and forgets the previous frame's time and size, so that the next
// Update starts afresh; ids go on from NextID. For a camera that is removed or restarted,
// or a clock that jumped back (ErrTimeOrder). The slice is reused by the next call.
func (t *Tracker) EndAll() []Track {
	t.res.Ended = t.res.Ended[:0]
	for _, tr := range t.tracks {
		if tr.State != Tentative {
			tr.State = Ended
			tr.Matched = false
			t.res.Ended = append(t.res.Ended, tr.Track)
		}
		t.free = append(t.free, tr)
	}
	clear(t.tracks)
	t.tracks = t.tracks[:0]
	t.started = false
	return t.res.Ended
}

func checkDetection(d infer.Detection) error {
	b := d.Box
	switch {
	case !finite(b.X) || !finite(b.Y) || !finite(b.W) || !finite(b.H):
		return fmt.Errorf("box %+v is not finite", b)
	case b.W < 0 || b.H < 0:
		return fmt.Errorf("box size %vx%v is negative", b.W, b.H)
	case !(d.Score >= 0 && d.Score <= 1):
		return fmt.Errorf("score %v is outside 0..1", d.Score)
	}
	return nil
}

// start begins a tentative track at detection d, of index i.
func (t *Tracker) start(d infer.Detection, at time.Time, i int) {
	var tr *track
	if n := len(t.free); n > 0 {
		tr, t.free = t.free[n-1], t.free[:n-1]
		classes, path := tr.classes[:0], tr.path[:0]
		*tr = track{classes: classes, path: path} // their arrays are reused
	} else {
		tr = new(track)
	}
	b := d.Box
	tr.ClassID, tr.Label = d.ClassID, d.Label
	tr.key = t.keys[i]
	tr.State = Tentative
	tr.FirstSeen = at
	mw, mh := t.cfg.MeasureNoise*b.W, t.cfg.MeasureNoise*b.H
	vw := t.cfg.InitVelocity * math.Sqrt(b.W*b.H)
	vh := vw
	// Position variance: twice the measurement's standard deviation, as ByteTrack.
	tr.cx.init(b.X+b.W/2, 4*mw*mw, vw*vw)
	tr.cy.init(b.Y+b.H/2, 4*mh*mh, vh*vh)
	tr.cw.init(b.W, 4*mw*mw, vw*vw)
	tr.ch.init(b.H, 4*mh*mh, vh*vh)
	t.tracks = append(t.tracks, tr)
	t.hit(tr, d, at, i, true)
}

// hit records detection d, of index i, as matched by tr in the frame at at; fresh when the
// track was just started from it (the filter holds it already).
func (t *Tracker) hit(tr *track, d infer.Detection, at time.Time, i int, fresh bool) {
	b := d.Box
	if !fresh {
		b = t.measured(tr, i, d.Box)
		t.update(tr, b)
	}
	sz := &tr.sizes[tr.Hits%sizeRing]
	sz.w, sz.h = t.uncut(b)
	if t.clean(i) {
		tr.looks[tr.nlooks%lookRing] = d.Appearance
		tr.nlooks++
	}
	tr.Hits++
	tr.det = i
	tr.Matched = true
	tr.Box = d.Box
	tr.seen = d.Box
	tr.Score = d.Score
	tr.LastSeen = at
	tr.VX, tr.VY = tr.cx.v, tr.cy.v
	if d.Score > tr.BestScore {
		tr.BestScore, tr.BestBox, tr.BestAt = d.Score, d.Box, at
	}
	if tr.State == Tentative {
		if len(tr.path) == MaxPath {
			tr.path = append(tr.path[:0], tr.path[1:]...)
		}
		tr.path = append(tr.path, Sighting{At: at, Box: d.Box})
	}
	tr.count(d)
}

// update corrects tr's filter with box b.
func (t *Tracker) update(tr *track, b geom.Box) {
	mw, mh := t.cfg.MeasureNoise*b.W, t.cfg.MeasureNoise*b.H
	tr.cx.update(b.X+b.W/2, mw*mw)
	tr.cy.update(b.Y+b.H/2, mh*mh)
	tr.cw.update(b.W, mw*mw)
	tr.ch.update(b.H, mh*mh)
}

// count adds d's class to the track's, and labels it with the class it was seen as most
// (the earlier to get there on a tie, so that a label does not flap).
func (tr *track) count(d infer.Detection) {
	j := -1
	for k := range tr.classes {
		if c := &tr.classes[k]; c.id == d.ClassID && c.label == d.Label {
			c.n++
			j = k
			break
		}
	}
	if j < 0 {
		tr.classes = append(tr.classes, classCount{id: d.ClassID, label: d.Label, n: 1})
		j = len(tr.classes) - 1
	}
	if c := tr.classes[j]; c.id != tr.ClassID || c.label != tr.Label {
		for _, o := range tr.classes {
			if o.id == tr.ClassID && o.label == tr.Label && o.n >= c.n {
				return
			}
		}
		tr.ClassID, tr.Label = c.id, c.label
	}
}

// predict moves tr's filter dt seconds ahead and sets its box to the prediction.
func (t *Tracker) predict(tr *track, dt float64) {
	// Motion in the image does not care for the box's shape: one scale for both axes.
	q := sq(t.cfg.AccelNoise) * max(tr.cw.p, 1) * max(tr.ch.p, 1)
	qw, qh := q, q
	tr.cx.predict(dt, qw)
	tr.cy.predict(dt, qh)
	tr.cw.predict(dt, qw)
	tr.ch.predict(dt, qh)
	tr.Box = tr.predicted()
	tr.pred = tr.Box
	tr.VX, tr.VY = tr.cx.v, tr.cy.v
}

// predicted returns the filter's box, at least one pixel wide and high.
func (tr *track) predicted() geom.Box {
	w, h := max(tr.cw.p, 1), max(tr.ch.p, 1)
	return geom.Box{X: tr.cx.p - w/2, Y: tr.cy.p - h/2, W: w, H: h}
}

func (t *Tracker) rescale(sx, sy float64) {
	for _, tr := range t.tracks {
		tr.cx.scale(sx)
		tr.cw.scale(sx)
		tr.cy.scale(sy)
		tr.ch.scale(sy)
		tr.Box = tr.predicted()
		tr.BestBox = scaleBox(tr.BestBox, sx, sy)
		tr.seen = scaleBox(tr.seen, sx, sy)
		for k := range tr.sizes {
			tr.sizes[k].w *= sx
			tr.sizes[k].h *= sy
		}
	}
}

func scaleBox(b geom.Box, sx, sy float64) geom.Box {
	return geom.Box{X: b.X * sx, Y: b.Y * sy, W: b.W * sx, H: b.H * sy}
}

// outside says whether b's centre lies outside the frame. Detections are clipped to the
// frame, so a track's box leaves it only by prediction: such a track's object has gone
// (or is about to), and kept, it would take the detection of the next object to come in
// where it left.
func (t *Tracker) outside(b geom.Box) bool {
	cx, cy := b.X+b.W/2, b.Y+b.H/2
	return cx < 0 || cy < 0 || cx > float64(t.w) || cy > float64(t.h)
}

// costFunc returns the cost of matching track tr with detection d, or ok false when the
// pair is outside the stage's gate.
type costFunc func(t *Tracker, tr *track, i int) (cost float64, ok bool)

// byIoU costs 1 - IoU of a high detection with the predicted box, plus the pair's
// appearance term (lookCost), for an IoU of at least MinIoU; byIoULow the same for a low
// detection, at least MinIoULow. A lost track may not take a detection that a confirmed
// track claims by a larger overlap (claimOf).
func byIoU(t *Tracker, tr *track, i int) (float64, bool) { return t.overlapCost(tr, i, t.cfg.MinIoU) }

func byIoULow(t *Tracker, tr *track, i int) (float64, bool) {
	return t.overlapCost(tr, i, t.cfg.MinIoULow)
}

func (t *Tracker) overlapCost(tr *track, i int, minIoU float64) (float64, bool) {
	v := iou(tr.Box, t.dets[i].Box)
	if v < minIoU || tr.State == Lost && v <= t.claimOf(i) {
		return 0, false
	}
	return 1 - v + t.lookCost(tr, i), true
}

// distanceLimit is the cost limit of a stage matched by distance (byDistance), as
// overlapLimit's.
const distanceLimit = 1 + lookWeight

// overlapLimit is the cost limit of a stage matched by overlap of at least minIoU (byIoU):
// above any pair's cost, so that the gate is the IoU's, and leaving a track and a
// detection unmatched costs as much as a pair of IoU minIoU that looks nothing alike.
func overlapLimit(minIoU float64) float64 { return 1 - minIoU + lookWeight }

// lookCost is the appearance term of a pair's overlap cost: lookWeight x its appearance
// distance, or x lookUnknown when there is nothing to compare. With it, two tracks whose
// predictions overlap two detections nearly alike (two people walking side by side, or
// meeting) take the detections they look like, where overlap alone would decide by a few
// pixels of the detector's noise.
func (t *Tracker) lookCost(tr *track, i int) float64 {
	d, ok := t.appearance(tr, i)
	if !ok {
		d = lookUnknown
	}
	return lookWeight * d
}

// claimOf returns the claim on detection i by the confirmed tracks: the largest IoU of a
// confirmed track's prediction with it among those (of its match key) that overlap it more
// than any other detection, the detection most likely their own; 0 when none. A lost
// track's prediction, carried on at the speed it had, may come over a standing object (one
// it walked behind) and overlap that one's detection nearly as well as its own track does:
// the two would then swap, the standing one's track taking the walker's box as it comes out,
// for an assignment of two pairs where one would do (seen at 10 fps, where frames are
// close and overlaps alike). A confirmed track's prediction is the surer one. Worked out
// when a lost track asks, once a frame (claim, bestOf): lost tracks are few.
func (t *Tracker) claimOf(i int) float64 {
	if c := t.claim[i]; c >= 0 {
		return c
	}
	c, b := 0.0, t.dets[i].Box
	for _, tr := range t.tracks {
		if tr.State != Confirmed || tr.key != t.keys[i] {
			continue
		}
		if v := iou(tr.pred, b); v > c && t.bestOf(tr) == i {
			c = v
		}
	}
	t.claim[i] = c
	return c
}

// bestOf returns the index of the detection that confirmed track tr's prediction overlaps
// most (the first of equals), -1 when none.
func (t *Tracker) bestOf(tr *track) int {
	if tr.bestFrame == t.frame {
		return tr.best
	}
	best, bv := -1, 0.0
	for i, d := range t.dets {
		if t.keys[i] != tr.key || d.Box.W <= 0 || d.Box.H <= 0 || float64(d.Score) < t.cfg.LowScore {
			continue
		}
		if v := iou(tr.pred, d.Box); v > bv {
			best, bv = i, v
		}
	}
	tr.best, tr.bestFrame = best, t.frame
	return best
}

// byAppearance costs the appearance distance of the detection from the track's looks; a
// pair with nothing to compare is not matched.
func byAppearance(t *Tracker, tr *track, i int) (float64, bool) {
	return t.appearance(tr, i)
}

// bySeen costs 1 - IoU of the detection with the box where the track was last seen.
func bySeen(t *Tracker, tr *track, i int) (float64, bool) {
	return 1 - iou(tr.seen, t.dets[i].Box), true
}

// byDistance costs the squared Mahalanobis distance of the detection's centre from the
// predicted centre, as a fraction of DistanceGate (its gate), plus the pair's appearance
// term (lookCost); it gates the size.
func byDistance(t *Tracker, tr *track, i int) (float64, bool) {
	b := t.dets[i].Box
	p := tr.Box
	if b.W > 2*p.W || p.W > 2*b.W || b.H > 2*p.H || p.H > 2*b.H {
		return 0, false
	}
	mw, mh := t.cfg.MeasureNoise*b.W, t.cfg.MeasureNoise*b.H
	yx, sx := tr.cx.innovation(b.X+b.W/2, mw*mw)
	yy, sy := tr.cy.innovation(b.Y+b.H/2, mh*mh)
	m := yx*yx/sx + yy*yy/sy
	if m >= t.cfg.DistanceGate {
		return 0, false
	}
	return m/t.cfg.DistanceGate + t.lookCost(tr, i), true
}

// stage matches the detections of idx not yet taken against the tracks that pick
// accepts and that have not matched yet, at costs below limit.
func (t *Tracker) stage(dets []infer.Detection, idx []int, pick func(*track) bool, cost costFunc, limit float64, at time.Time) {
	t.rows = t.rows[:0]
	for _, tr := range t.tracks {
		if !tr.Matched && pick(tr) && !t.outside(tr.Box) { // gone: see outside
			t.rows = append(t.rows, tr)
		}
	}
	nr, nc := len(t.rows), len(idx)
	if nr == 0 || nc == 0 {
		return
	}
	t.m.reset(nr, nc, limit)
	for r, tr := range t.rows {
		for c, i := range idx {
			if t.taken[i] || t.keys[i] != tr.key {
				continue
			}
			// The cost's gate first: it is cheap, and leaves few pairs for canBe's checks
			// (appearance: a few hundred nanoseconds a pair).
			if v, ok := cost(t, tr, i); ok && v < limit && t.canBe(tr, i, at) {
				t.m.allow(nc, r, c, v)
			}
		}
	}
	t.m.solve(nr, nc, limit, func(r, c int) {
		i := idx[c]
		t.taken[i] = true
		t.hit(t.rows[r], dets[i], at, i, false)
	})
}

// iou is the intersection over union of two boxes.
func iou(a, b geom.Box) float64 {
	inter := intersection(a, b)
	if inter == 0 {
		return 0
	}
	return inter / (a.W*a.H + b.W*b.H - inter)
}

// intersection is the area two boxes share.
func intersection(a, b geom.Box) float64 {
	iw := min(a.X+a.W, b.X+b.W) - max(a.X, b.X)
	ih := min(a.Y+a.H, b.Y+b.H) - max(a.Y, b.Y)
	if iw <= 0 || ih <= 0 {
		return 0
	}
	return iw * ih
}

func sq(f float64) float64 { return f * f }

func growU64(s []uint64, n int) []uint64 {
	if cap(s) < n {
		return make([]uint64, n)
	}
	return s[:n]
}

func growBool(s []bool, n int) []bool {
	if cap(s) < n {
		return make([]bool, n)
	}
	return s[:n]
}

// Reacquisition: what a lost track asks of a detection before it takes it (every stage).
// Overlap alone is not enough: at a doorway, the next person through appears where the
// previous one was last seen and overlaps that box as well as the previous one would.
const (
	// maxSizeRatio bounds how much a detection's width and height may differ from the
	// track's (the medians of its latest detections), either way, and so its area by the
	// square: the detector's noise (MeasureNoise, 5%) gives a few percent, another object of
	// the class commonly more. A side cut by the frame's edge is not compared.
	maxSizeRatio = 1.25
	// sizeRing is how many of a track's latest detections its size is the median of: one
	// odd box among them changes nothing, and an object that grows as it comes nearer is
	// followed with a lag of two frames.
	sizeRing = 5
	// reachSlack is the distance a detection's centre may be from the prediction however
	// short the loss, in sizes of the track's box (its larger side): noise, and an object
	// that turned in the frame it was missed.
	reachSlack = 0.5
	// minReach is the least speed a lost object is taken to be able to reach, in sizes of
	// its box per second: a track that stood still, or was just started, may walk off.
	minReach = 1.0
)

// reacquires says whether detection d, in the frame at at, can be the object of lost track
// tr: of nearly the size it was seen with, and no further from the prediction than its
// speed (at least minReach) could have taken it either way in the time since it was lost
// (twice the speed by the time: the prediction goes on at the last velocity, and the object
// may have turned back).
func (t *Tracker) reacquires(tr *track, i int, at time.Time) bool {
	p, b := tr.Box, t.measured(tr, i, t.dets[i].Box)
	w, h := tr.size()
	dw, dh := t.uncut(b)
	if w > 0 && dw > 0 && ratioOver(dw, w, maxSizeRatio) || h > 0 && dh > 0 && ratioOver(dh, h, maxSizeRatio) {
		return false
	}
	size := max(p.W, p.H)
	speed := max(math.Hypot(tr.cx.v, tr.cy.v), minReach*size)
	reach := reachSlack*size + 2*speed*at.Sub(tr.LastSeen).Seconds()
	dx, dy := b.X+b.W/2-(p.X+p.W/2), b.Y+b.H/2-(p.Y+p.H/2)
	return dx*dx+dy*dy <= reach*reach
}

// canBe says whether detection i, in the frame at at, can be track tr's object at all: a
// lost track's must be of its size and within its reach (reacquires), a confirmed track's
// low one no merged box (outgrows).
func (t *Tracker) canBe(tr *track, i int, at time.Time) bool {
	switch tr.State {
	case Lost:
		return t.reacquires(tr, i, at) && t.looksLike(tr, i, t.cfg.AppearanceGate)
	case Confirmed:
		return (float64(t.dets[i].Score) >= t.cfg.HighScore || !t.outgrows(tr, i)) && t.looksLike(tr, i, t.cfg.AppearanceGate*appearanceKeep)
	}
	return true
}

// Appearance: what a detection must look like to be a track's object.
const (
	// lookRing is how many of a track's latest clean looks a detection is compared with
	// (the nearest counts): a person turning, or in another light, looks a little different.
	lookRing = 6
	// minLooks is how many clean looks a track must have before appearance gates it: a
	// track's first boxes may be cut by the frame's edge or another object.
	minLooks = 2
	// appearanceKeep widens the gate for a confirmed track, followed by overlap with its
	// prediction: only a detection that looks nothing like it (a swap with the object it
	// meets) is refused.
	appearanceKeep = 1.5
	// appearanceFind narrows the gate where appearance alone finds a lost track's object
	// (stage 4b), 0.3: on the synthetic crowd's tuning seeds, the looks of one person
	// 0.5-3 s apart were within 0.336 of each other in 95 pairs of 100 (median 0.166),
	// two people's on one frame as near as 0.275 in 5 (median 0.600); pipeline's
	// TestCrowdDets logs both.
	appearanceFind = 0.6
	// lookWeight weighs a pair's appearance distance against its overlap (1 - IoU) or its
	// distance (a fraction of the gate) in the stages matched by motion (lookCost). On the
	// crowd's tuning seeds, 0.5 to 2 gave the same figures within 0.005 of IDF1; 1 (the
	// one taken) against none: IDF1 0.721 against 0.708 at 2 fps, 0.614 against 0.595 at
	// 1, 0.744 against 0.742 at 5, the crossings no worse.
	lookWeight = 1.0
	// lookUnknown is the distance taken for a pair with nothing to compare: about what
	// one person's looks are from each other (median 0.17, 75% within 0.23 on the tuning
	// seeds), so that a track with no looks yet is neither favoured nor pushed aside.
	lookUnknown = 0.25
)

// appearance returns the appearance distance of detection i from track tr: the least
// distance of its descriptor from the track's latest clean looks; ok false when either has
// none to compare (the gate then lets the pair be).
func (t *Tracker) appearance(tr *track, i int) (dist float64, ok bool) {
	d := t.dets[i].Appearance
	if t.cfg.AppearanceGate < 0 || tr.nlooks < minLooks || d.IsZero() {
		return 0, false
	}
	dist = 1
	for k := range min(tr.nlooks, lookRing) {
		dist = min(dist, appearance.Distance(tr.looks[k], d))
	}
	return dist, true
}

// looksLike says whether detection i looks like track tr's object: its appearance distance
// is at most gate, or there is nothing to compare.
func (t *Tracker) looksLike(tr *track, i int, gate float64) bool {
	d, ok := t.appearance(tr, i)
	return !ok || d <= gate
}

// clean says whether detection i shows one object whole: not cut by the frame's edge, and
// not overlapping another detection (whose pixels would be in its descriptor). Only clean
// looks are kept (track.looks).
func (t *Tracker) clean(i int) bool {
	b := t.dets[i].Box
	if t.dets[i].Appearance.IsZero() || float64(t.dets[i].Score) < t.cfg.HighScore {
		return false
	}
	if w, h := t.uncut(b); w == 0 || h == 0 {
		return false
	}
	for j, o := range t.dets {
		if j != i && float64(o.Score) >= t.cfg.LowScore && overlapOf(b, o.Box) > cleanOverlap {
			return false
		}
	}
	return true
}

// cleanOverlap is the most of a box another detection's may cover for its look to be kept.
const cleanOverlap = 0.1

// overlapOf is the fraction of a's area that b covers.
func overlapOf(a, b geom.Box) float64 {
	if a.W <= 0 || a.H <= 0 {
		return 0
	}
	return intersection(a, b) / (a.W * a.H)
}

// maxGrowth bounds how much larger than a confirmed track's size (the medians of its latest
// boxes) a detection it takes may be, in width or in height (a side cut by the frame's edge
// not compared): a box much taller or wider than the track's is not the object grown in a
// frame but two objects seen as one (a person at the frame's edge merged with the one
// behind would take the first one's track over to the second). An object
// coming nearer grows by a few percent a frame; one coming in over the frame's edge has that
// side cut.
const maxGrowth = 2

// outgrows says whether detection i is too large to be confirmed track tr's object. Only
// low detections are asked (stage 2): a merged box is commonly one, and a high detection
// that has grown is more often the object come nearer between two frames far apart (at
// 0.5 fps, gating high ones too lost crossings of people walking towards the camera).
func (t *Tracker) outgrows(tr *track, i int) bool {
	w, h := tr.size()
	dw, dh := t.uncut(t.dets[i].Box)
	return w > 0 && dw > maxGrowth*w || h > 0 && dh > maxGrowth*h
}

// measured returns the box the filter and the size checks take from detection i of the
// frame, of box b: b itself, or, where b is much narrower (or lower) than the track's size,
// another detection's box covers the side b lacks and b's other edge is where the
// prediction's is, a box of the track's size from that edge. That is an object partly hidden behind
// another: the edge on the other's side is the other's, and following it would shrink the
// track and stop it (the centre of what is left of it stands still while the other comes
// over it), to lose it behind the other for good (TestWalkThrough).
func (t *Tracker) measured(tr *track, i int, b geom.Box) geom.Box {
	w, h := tr.size()
	p := tr.Box // the prediction
	if w > 0 && b.W*maxSizeRatio < w && (h == 0 || !ratioOver(b.H, h, maxSizeRatio)) {
		switch t.hidden(i, b, true, w) {
		case -1: // the low side hidden: the high edge is the object's
			if near(b.X+b.W, p.X+p.W, w) {
				b.X, b.W = b.X+b.W-w, w
			}
		case 1:
			if near(b.X, p.X, w) {
				b.W = w
			}
		}
	}
	if h > 0 && b.H*maxSizeRatio < h && (w == 0 || !ratioOver(b.W, w, maxSizeRatio)) {
		switch t.hidden(i, b, false, h) {
		case -1:
			if near(b.Y+b.H, p.Y+p.H, h) {
				b.Y, b.H = b.Y+b.H-h, h
			}
		case 1:
			if near(b.Y, p.Y, h) {
				b.H = h
			}
		}
	}
	return b
}

// hidden says which side of box b, of detection i, is hidden (as covered says): by another
// detection's box, or else by the frame's edge, which hides an object going out as another
// object in front would. An object half out of the frame is then measured with its centre
// outside it, and its track ends in the next frame (outside) instead of shrinking with the
// part left in view until it takes the box of the next object to come in there (at 5 and
// 10 fps, where an object goes out over several frames).
func (t *Tracker) hidden(i int, b geom.Box, across bool, size float64) int {
	if s := t.covered(i, b, across, size); s != 0 {
		return s
	}
	lo, hi, end := b.X, b.X+b.W, float64(t.w)
	if !across {
		lo, hi, end = b.Y, b.Y+b.H, float64(t.h)
	}
	eps := 2 + 0.1*(hi-lo) // as uncut's
	switch {
	case lo < eps && hi > end-eps:
		return 0
	case lo < eps:
		return -1
	case hi > end-eps:
		return 1
	}
	return 0
}

// near says whether two edges of boxes of size size are within their noise of each other:
// that of the part of an object left in view and of its prediction, say.
func near(a, b, size float64) bool { return math.Abs(a-b) <= 2+0.25*size }

// covered says which side of box b, of detection i, another detection's box covers or
// touches (within the noise of boxes of size pixels): along x (across, false: along y), -1
// the lower side, +1 the upper side, 0 neither or both. The other must span most of b the
// other way, and at least half of what b lacks of size this way.
func (t *Tracker) covered(i int, b geom.Box, across bool, size float64) int {
	lo, hi, s0, s1 := b.X, b.X+b.W, b.Y, b.Y+b.H
	if !across {
		lo, hi, s0, s1 = b.Y, b.Y+b.H, b.X, b.X+b.W
	}
	eps := 2 + 0.15*size // the boxes' noise
	side := 0
	for j, d := range t.dets {
		o := d.Box
		olo, ohi, os0, os1 := o.X, o.X+o.W, o.Y, o.Y+o.H
		if !across {
			olo, ohi, os0, os1 = o.Y, o.Y+o.H, o.X, o.X+o.W
		}
		if j == i || o.W <= 0 || o.H <= 0 || float64(d.Score) < t.cfg.LowScore || min(s1, os1)-max(s0, os0) < 0.5*(s1-s0) {
			continue
		}
		half := (size - (hi - lo)) / 2 // of what b lacks, which the other must cover
		var s int
		switch {
		case olo < lo+eps && ohi > lo-eps && ohi < hi && olo <= lo-half:
			s = -1
		case ohi > hi-eps && olo < hi+eps && olo > lo && ohi >= hi+half:
			s = 1
		default:
			continue
		}
		if side != 0 && side != s {
			return 0
		}
		side = s
	}
	return side
}

// uncut returns b's width and height, each 0 where the frame's edge may have cut it: the
// box is within a tenth of its size (and 2 pixels) of it, a detector's boxes being that
// loose.
func (t *Tracker) uncut(b geom.Box) (w, h float64) {
	w, h = b.W, b.H
	if mx := 2 + 0.1*b.W; b.X < mx || b.X+b.W > float64(t.w)-mx {
		w = 0
	}
	if my := 2 + 0.1*b.H; b.Y < my || b.Y+b.H > float64(t.h)-my {
		h = 0
	}
	return w, h
}

// size returns the medians of the widths and of the heights of tr's latest detections
// that the frame's edge did not cut, 0 when none.
func (tr *track) size() (w, h float64) {
	var ws, hs [sizeRing]float64
	nw, nh := 0, 0
	for i := range min(tr.Hits, sizeRing) {
		if v := tr.sizes[i].w; v > 0 {
			ws[nw] = v
			nw++
		}
		if v := tr.sizes[i].h; v > 0 {
			hs[nh] = v
			nh++
		}
	}
	return median(ws[:nw]), median(hs[:nh])
}

// median returns the median of v (the upper one of an even count), sorting it; 0 if empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// ratioOver says whether a and b differ by more than a factor r.
func ratioOver(a, b, r float64) bool { return a > r*b || b > r*a }
