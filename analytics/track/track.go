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
//
// # Files
//
// track.go holds the types and Update; config.go the Config, its defaults and checks;
// associate.go the stages, their costs and gates, and what a lost track asks of a
// detection; appearance.go the looks a track keeps and how a detection is compared with
// them; motion.go the filter's use, the boxes it is fed (objects partly hidden, the
// frame's edges) and the sizes; lifecycle.go a track's start, hits and states; kalman.go
// the filter; assign.go the optimal assignment.
package track

import (
	"errors"
	"fmt"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
)

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
	if err := t.check(at, width, height, dets); err != nil {
		return Result{}, err
	}
	t.dets = dets
	defer func() { t.dets = nil }() // the caller's
	t.begin(at, width, height)
	t.associate(at)
	t.settle(at)
	return t.res, nil
}

// check says what is wrong with a frame Update is given, before anything changes.
func (t *Tracker) check(at time.Time, width, height int, dets []infer.Detection) error {
	if width <= 0 || height <= 0 {
		return fmt.Errorf("track: frame size %dx%d is not positive", width, height)
	}
	if t.started && !at.After(t.last) {
		return fmt.Errorf("%w: %s is not after %s", ErrTimeOrder,
			at.Format(time.RFC3339Nano), t.last.Format(time.RFC3339Nano))
	}
	for i, d := range dets {
		if err := checkDetection(d); err != nil {
			name := d.Label
			if name == "" {
				name = fmt.Sprintf("class %d", d.ClassID)
			}
			return fmt.Errorf("track: detections[%d] (%s): %w", i, name, err)
		}
	}
	return nil
}

// begin starts the frame at at, of t.dets: the rate and size it comes at, the per-frame
// scratch, and every track predicted to its time (the tentative ones whose window has passed
// dropped).
func (t *Tracker) begin(at time.Time, width, height int) {
	dets := t.dets
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
