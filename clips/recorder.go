package clips

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Settings say which of a camera's objects make clips, and how long the clips are.
type Settings struct {
	// PreCapture is how much video before an object a clip shows: it starts at the last
	// keyframe at or before PreCapture before the object's first sighting (or, with Zones,
	// before its entry into one of them).
	PreCapture time.Duration
	// PostCapture is how much video after the last of its objects ends a clip shows.
	PostCapture time.Duration
	// MaxLength bounds a clip: one that reaches it closes at a keyframe and the next goes on
	// from there. Required (config.Clips.Length gives the default).
	MaxLength time.Duration
	// Classes are the labels of the objects that make clips; empty: every object.
	Classes []string
	// Zones, when set, limit the objects that make clips to those inside one of these zones.
	Zones []string
}

// Object is an object of the camera as the recorder follows it: Observe it when it is
// confirmed, each time it changes, and when it ends.
type Object struct {
	TrackID   uint64
	Label     string
	FirstSeen time.Time // capture time of its first sighting
	LastSeen  time.Time // of its latest
	Zones     []string  // the zones it is in now
	Ended     bool      // it ended: LastSeen is its last sighting
	// Data is the caller's (the object's latest event): handed back, as observed last, with
	// the clips that show the object. The recorder never reads it.
	Data any
}

// CloseReason says why a clip ended.
type CloseReason int

// Why a clip ended (Info.Closed).
const (
	ClosedEnd       CloseReason = iota + 1 // PostCapture after its last object ended
	ClosedMaxLength                        // it reached MaxLength: the next clip goes on from here
	ClosedOffline                          // the camera's stream ended (the session failed or was closed)
	ClosedChanged                          // the stream's codec or resolution changed: the next clip has the new one
	ClosedStopped                          // the recorder was closed: the camera was stopped, or clips turned off
	ClosedShutdown                         // the recorder was closed: the daemon stopped
)

func (r CloseReason) String() string {
	switch r {
	case ClosedEnd:
		return "end"
	case ClosedMaxLength:
		return "max_length"
	case ClosedOffline:
		return "offline"
	case ClosedChanged:
		return "changed"
	case ClosedStopped:
		return "stopped"
	case ClosedShutdown:
		return "shutdown"
	}
	return fmt.Sprintf("CloseReason(%d)", int(r))
}

// Name is the name of camera's clip that starts at start: <camera>/c<start, unix ms>.mp4. Two
// clips of a camera never start at the same frame.
func Name(camera string, start time.Time) string {
	return fmt.Sprintf("%s/c%d.mp4", camera, start.UnixMilli())
}

// Info describes a clip written.
type Info struct {
	Name   string // Name(Camera, Start)
	Camera string
	// Start is the capture time of its first frame (a keyframe); End that of its last frame
	// plus the frame's duration; Duration is End - Start, as the MP4 says.
	Start, End time.Time
	Duration   time.Duration
	Codec      string // sources.CodecH264 or sources.CodecH265
	Width      int
	Height     int
	Frames     int
	Bytes      int64 // the MP4 file's size
	Closed     CloseReason
	// Objects are the objects it shows, in the order they came, as last observed.
	Objects []Object
	// Notes say where the clip is not what was asked: it starts later than PreCapture before
	// its first object, packets were lost in it, its timestamps jumped.
	Notes []string
	// PreCapture is the pre_capture asked; PreRoll the video the clip really has before its
	// first object's first sighting (with Settings.Zones, its entry): PreCapture or more (the
	// clip starts at a keyframe), less when the ring held no keyframe as early, and Short
	// says why then (a Short* constant). A clip that goes on from another (Continues, its
	// name) has no pre-roll of its own: 0, and Short "".
	PreCapture, PreRoll time.Duration
	Short               string
	Continues           string
}

// Clip is a finished clip, handed to Recorder.Finished.
type Clip struct {
	Info Info
	// Path is the MP4 file, in Recorder.Dir; Finished takes it (stores, moves or removes it).
	Path string
}

// Recorder makes a camera's clips from its Ring and its object events. Set the exported
// fields, Start, then Observe each object event of the camera (from one goroutine at a time)
// and StreamEnded when its stream ends; Close ends the clip being written and waits.
type Recorder struct {
	// Camera is the camera's id. Required.
	Camera string
	// Ring is the camera's ring, fed by its session. Required.
	Ring *Ring
	// Dir is where clips are written (a spool per clip, then the MP4). Required.
	Dir string
	// Settings are the camera's clip settings; change them with SetSettings.
	Settings Settings
	// Finished receives each clip written, from the Recorder's goroutine. Required.
	Finished func(Clip)
	// Hold is how long a clip that the next goes on from (max_length, a new codec or size)
	// waits before Finished, so that an object first seen in it but confirmed after it
	// closed is listed in it too: a track's confirmation. Default 0: none waits. SetHold
	// changes it while the recorder runs.
	Hold time.Duration
	// Joined, when set, receives an object that joined a clip going on from an earlier one
	// while its pre_capture reaches into that earlier clip, already finished (after Hold):
	// the earlier clip shows it too. From the Recorder's goroutine.
	Joined func(earlier Info, o Object)
	// Logger receives the recorder's log lines. Default: none.
	Logger *slog.Logger

	log  *slog.Logger
	stop chan CloseReason // the reason of Close
	kick chan struct{}    // Observe or StreamEnded changed what the goroutine must do
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	set      Settings
	hold     time.Duration      // Hold, or what SetHold set
	objects  map[uint64]*object // the camera's objects seen in events, until they end (or, in a clip, until it closes)
	members  []*object          // the objects of the clip being written, or wanted
	want     bool               // a clip is wanted: it opens at the first keyframe the ring gives from wantAt
	wantAt   time.Time
	cont     bool       // the wanted clip goes on from a closed one (max_length, a new session): cancelled when its objects end first
	endAt    time.Time  // the clip ends at this capture time (PostCapture after its last object); zero while one is live
	ended    bool       // the stream ended (StreamEnded): close what is written
	overflow uint64     // objects not followed: too many at once
	curStart time.Time  // the start of the clip being written; zero when none
	prev     *Info      // the clip the one being written goes on from; nil when none
	late     []lateJoin // objects for Joined
	held     *Clip      // a finished clip waiting Hold before Finished; prev is its Info
	heldTill time.Time

	// The goroutine's own.
	w         *mp4Writer
	name      string
	cursor    uint64
	skipToKey bool
	skipped   int       // frames left out of the clip being written after a loss
	afterPrev bool      // the clip to open was moved past the previous clip's start (ShortPreviousClip)
	progress  time.Time // host time the clip last got a unit
	lastStart uint64    // the ring's sequence number of the last clip's first unit
	started   bool      // a clip was started: lastStart holds
	seq       uint64    // the sequence number of the unit being written
	tailing   bool      // the clip's last frame is written; it closes at the next one shown after it
	tail      time.Time // that frame's capture time
	units     []unit
	buf       []byte

	written, failed, bytes atomic.Uint64
	readTo                 atomic.Uint64 // the ring's sequence number the goroutine has read to
	bufHeld                atomic.Int64  // cap(buf): RecorderStats.ReadBuf
}

// readBufKeep is the most of a large read's buffer the recorder keeps past the read: a
// clip's start reads its whole pre_capture (a ring's worth), the reads after it a unit or
// two.
const readBufKeep = 1 << 20

// lateJoin is an object that joined a clip going on from prev, within prev's time.
type lateJoin struct {
	prev Info
	o    Object
}

// object is an object of the camera as its events showed it.
type object struct {
	o      Object // as last observed
	inClip bool   // it was selected: it is a member of the clip being written or wanted
}

// maxObjects bounds the objects a Recorder follows at once.
const maxObjects = 1024

// stallClose closes a clip that got no unit for this long (the stream froze without ending).
const stallClose = 10 * time.Second

// Start starts the recorder's goroutine.
func (r *Recorder) Start() error {
	if r.Ring == nil || r.Dir == "" || r.Finished == nil || r.Camera == "" || r.Settings.MaxLength <= 0 {
		return errors.New("clips: a recorder needs Camera, Ring, Dir, Finished and Settings.MaxLength")
	}
	if err := os.MkdirAll(r.Dir, 0o750); err != nil {
		return fmt.Errorf("clips: %w", err)
	}
	r.log = r.Logger
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.set, r.hold = r.Settings.checked(), r.Hold
	r.objects = map[uint64]*object{}
	r.stop = make(chan CloseReason, 1)
	r.kick = make(chan struct{}, 1)
	r.done = make(chan struct{})
	r.cursor = r.Ring.Next()
	go r.run()
	return nil
}

// checked is s with negative captures as 0; the defaults are config's (config.Clips).
func (s Settings) checked() Settings {
	s.PreCapture, s.PostCapture = max(s.PreCapture, 0), max(s.PostCapture, 0)
	return s
}

// SetSettings puts s in force: the lengths at once, the classes and zones for the objects
// not yet selected. A MaxLength of 0 keeps the one in force.
func (r *Recorder) SetSettings(s Settings) {
	r.mu.Lock()
	if s.MaxLength <= 0 {
		s.MaxLength = r.set.MaxLength
	}
	r.set = s.checked()
	r.mu.Unlock()
	r.wakeUp()
}

// wakeUp tells the goroutine that it has something to do; it never waits.
func (r *Recorder) wakeUp() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// SetHold changes Hold for the clips that close from now on: longer when the camera's
// objects are confirmed later than Hold allows for (an overloaded box).
func (r *Recorder) SetHold(d time.Duration) {
	r.mu.Lock()
	r.hold = d
	r.mu.Unlock()
}

// selects reports whether object o makes clips under r.set.
func (r *Recorder) selects(o *Object) bool {
	if len(r.set.Classes) > 0 && !slices.Contains(r.set.Classes, o.Label) {
		return false
	}
	if len(r.set.Zones) == 0 {
		return true
	}
	for _, z := range o.Zones {
		if slices.Contains(r.set.Zones, z) {
			return true
		}
	}
	return false
}

// Observe follows object ev of the camera: confirmed (new), changed, or ended. It never
// waits for the recorder's writing.
func (r *Recorder) Observe(ev Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.objects[ev.TrackID]
	if ev.Ended {
		if o == nil {
			return
		}
		o.o = ev
		if !o.inClip {
			delete(r.objects, ev.TrackID)
		}
		r.planEnd()
		return
	}
	if o == nil {
		if len(r.objects) >= maxObjects {
			r.overflow++
			return
		}
		o = &object{}
		r.objects[ev.TrackID] = o
	}
	o.o = ev
	if o.inClip || !r.selects(&ev) {
		return
	}
	o.inClip = true
	from := ev.FirstSeen
	if len(r.set.Zones) > 0 {
		from = ev.LastSeen // it makes clips from its entry
	}
	from = from.Add(-r.set.PreCapture)
	switch {
	case len(r.members) == 0 && !r.want:
		r.want, r.wantAt, r.cont = true, from, false
	case r.want && from.Before(r.wantAt):
		r.wantAt, r.cont = from, false
	case r.want:
		r.cont = false
	}
	r.members = append(r.members, o)
	r.endAt = time.Time{}
	if p := r.prev; p != nil && !r.curStart.IsZero() && from.Before(r.curStart) && from.Before(p.End) {
		switch {
		case r.held != nil && p == &r.held.Info: // still held: it lists the object
			p.Objects = append(p.Objects, ev)
		case r.Joined != nil && len(r.late) < maxObjects:
			r.late = append(r.late, lateJoin{prev: *p, o: ev})
		}
	}
	r.wakeUp()
}

// planEnd sets the clip's end once every member has ended: PostCapture after the last one
// was seen. A continuation not yet opened whose members all ended is not wanted any more.
func (r *Recorder) planEnd() {
	if r.want && r.cont && !slices.ContainsFunc(r.members, func(m *object) bool { return !m.o.Ended }) {
		for _, m := range r.members {
			delete(r.objects, m.o.TrackID)
		}
		clear(r.members)
		r.members, r.want, r.cont = r.members[:0], false, false
		return
	}
	var last time.Time
	for _, m := range r.members {
		if !m.o.Ended {
			return
		}
		if m.o.LastSeen.After(last) {
			last = m.o.LastSeen
		}
	}
	if len(r.members) == 0 {
		return
	}
	r.endAt = last.Add(r.set.PostCapture)
	r.wakeUp() // the goroutine asks the ring for the unit at or past it
}

// StreamEnded says that the camera's stream ended (it went offline): the clip being written
// closes at its last unit; one that is still wanted goes on when the stream is back.
func (r *Recorder) StreamEnded() {
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.wakeUp()
}

// Close closes the clip being written (reason: ClosedStopped or ClosedShutdown) with what
// the ring holds, hands it to Finished and stops the goroutine. Safe to call twice.
func (r *Recorder) Close(reason CloseReason) {
	if r.done == nil {
		return
	}
	r.once.Do(func() { r.stop <- reason })
	<-r.done
}

// run reads the ring when there is something to do: a keyframe came (a clip may open, or
// close at max_length), a unit reached the due end of the clip being written (Ring.wakeAt),
// Observe or StreamEnded changed the plan (kick), the held clip's Hold passed, or the clip
// being written got nothing for stallClose.
func (r *Recorder) run() {
	defer close(r.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case reason := <-r.stop:
			r.drain(time.Now())
			if r.w != nil {
				r.close(reason, nil)
			}
			r.release(time.Time{})
			return
		case <-r.Ring.wake:
		case <-r.kick:
		case <-t.C:
		}
		now := time.Now()
		r.drain(now)
		t.Reset(r.nextTimer(now))
	}
}

// nextTimer is how long the goroutine may sleep at now if no unit or call wakes it: until
// the held clip's Hold passes, or the clip being written stalls.
func (r *Recorder) nextTimer(now time.Time) time.Duration {
	next := now.Add(time.Hour)
	if r.w != nil {
		next = r.progress.Add(stallClose + time.Millisecond)
	}
	r.mu.Lock()
	if r.held != nil && r.heldTill.Before(next) {
		next = r.heldTill
	}
	r.mu.Unlock()
	return max(next.Sub(now), time.Millisecond)
}

// release hands the held clip to Finished once its Hold has passed at now (zero: at once).
func (r *Recorder) release(now time.Time) {
	r.mu.Lock()
	c := r.held
	if c == nil || !now.IsZero() && now.Before(r.heldTill) {
		r.mu.Unlock()
		return
	}
	r.held = nil
	r.mu.Unlock()
	r.Finished(*c)
}

// drain writes what the ring got since the last call.
func (r *Recorder) drain(now time.Time) {
	r.release(now)
	r.mu.Lock()
	want, ended := r.want, r.ended
	r.ended = false
	r.mu.Unlock()
	if r.w == nil && !want {
		r.cursor = r.Ring.Next() // nothing to write: only follow the ring
		r.readTo.Store(r.cursor)
		return
	}
	if r.w == nil {
		// A new clip starts back in the ring, at the last keyframe at or before its
		// objects' pre_capture, but after the last clip's start (a name is a start); one
		// that goes on from a closed clip starts at the next keyframe.
		r.mu.Lock()
		from, cont := r.wantAt, r.cont
		r.mu.Unlock()
		r.afterPrev = false
		if seq, _, _, ok := r.Ring.keyAtOrBefore(from); ok && !cont {
			if r.started && seq <= r.lastStart {
				seq, r.afterPrev = r.lastStart+1, true
			}
			r.cursor = seq
		}
	}
	var skipped uint64
	from := r.cursor
	r.mu.Lock()
	late := r.late
	r.late = nil
	r.mu.Unlock()
	for _, j := range late {
		r.Joined(j.prev, j.o)
	}
	r.units, r.buf, r.cursor, skipped = r.Ring.read(r.cursor, r.units[:0], r.buf)
	if skipped > 0 && r.w != nil {
		r.skipToKey = true
		r.skipped += int(skipped)
	}
	from += skipped
	for i := range r.units {
		r.seq = from + uint64(i)
		r.unit(&r.units[i])
	}
	r.readTo.Store(r.cursor)
	clear(r.units) // no buffers past the call
	if cap(r.buf) > readBufKeep && len(r.buf) < cap(r.buf)/4 {
		r.buf = nil // the pre_capture's buffer goes; the next clip's start makes its own
	}
	r.bufHeld.Store(int64(cap(r.buf)))
	if len(r.units) > 0 {
		r.progress = now
	}
	if r.w != nil && (ended || now.Sub(r.progress) > stallClose) {
		r.close(ClosedOffline, nil)
	}
	r.planWake()
}

// planWake asks the ring for a wake-up by the unit that closes the clip being written, or
// goes on with its close: its due end, the frame after its last one, its MaxLength.
func (r *Recorder) planWake() {
	if r.w == nil {
		r.Ring.wakeAt(time.Time{})
		return
	}
	r.mu.Lock()
	due := r.w.start.Add(r.set.MaxLength)
	if !r.endAt.IsZero() && r.endAt.Before(due) {
		due = r.endAt
	}
	r.mu.Unlock()
	if r.tailing && r.tail.Before(due) {
		due = r.tail
	}
	r.Ring.wakeAt(due)
}

// unit writes one unit of the ring, opening and closing clips as it goes.
func (r *Recorder) unit(u *unit) {
	if r.w != nil {
		r.mu.Lock()
		endAt, maxLen := r.endAt, r.set.MaxLength
		r.mu.Unlock()
		elapsed := u.at.Sub(r.w.start)
		gop := r.Ring.Stats().GOP
		switch {
		case r.tailing && !u.at.Before(r.tail):
			r.close(ClosedEnd, nil)
			return
		case r.tailing:
			// A frame shown before the last one (a B-frame): it belongs to the clip.
		case !endAt.IsZero() && !u.at.Before(endAt):
			// The first frame at or after the end is the clip's last; the frames sent after it
			// but shown before it (B-frames, which reference it) come with it.
			r.tailing, r.tail = true, u.at
		case u.session != r.w.spoolSession():
			r.close(ClosedOffline, u)
		case !u.params.same(r.w.params):
			r.close(ClosedChanged, u)
		case u.key && elapsed+gop > maxLen && len(r.w.samples) > 0, elapsed >= maxLen:
			r.close(ClosedMaxLength, u)
		}
	}
	if r.w == nil {
		r.mu.Lock()
		want, wantAt := r.want, r.wantAt
		r.mu.Unlock()
		if !want || !u.key || !u.params.complete() {
			return
		}
		if err := r.open(u, wantAt); err != nil {
			r.failed.Add(1)
			r.log.Warn("clip not started", "camera", r.Camera, "error", err)
			return
		}
	}
	if r.skipToKey || u.lost {
		if !u.key {
			r.skipToKey = true
			r.skipped++
			return
		}
		r.skipToKey = false
		if r.skipped > 0 {
			r.w.notes = append(r.w.notes, fmt.Sprintf("packets lost before %s: %d frames left out, until this keyframe",
				u.at.UTC().Format(time.RFC3339Nano), r.skipped))
			r.skipped = 0
		}
	}
	if err := r.w.add(u); err != nil {
		r.failed.Add(1)
		r.log.Warn("clip abandoned", "camera", r.Camera, "clip", r.name, "error", err)
		r.w.abort()
		r.w = nil
	}
}

// spoolSession is the session of the writer's units.
func (w *mp4Writer) spoolSession() uint64 { return w.session }

// open starts a clip at key unit u, for video from wantAt.
func (r *Recorder) open(u *unit, wantAt time.Time) error {
	r.name = Name(r.Camera, u.at)
	w, err := newMP4Writer(r.Dir, fileBase(r.name), u)
	if err != nil {
		return err
	}
	w.session = u.session
	r.lastStart, r.started = r.seq, true
	r.mu.Lock()
	cont, pre := r.cont, r.set.PreCapture
	var continues string
	if cont && r.prev != nil {
		continues = r.prev.Name
	}
	r.want, r.cont, r.curStart = false, false, u.at
	if !cont {
		r.prev = nil
	}
	r.mu.Unlock()
	w.preCapture, w.continues = pre, continues
	if !cont {
		w.preRoll = wantAt.Add(pre).Sub(u.at)
		if late := u.at.Sub(wantAt); late > 0 {
			w.short = r.Ring.shortfall(wantAt)
			if r.afterPrev {
				w.short = ShortPreviousClip
			}
			w.notes = append(w.notes, fmt.Sprintf("starts %.1f s after pre_capture before its first object (%s): %s", late.Seconds(), w.short, shortWhy[w.short]))
		}
	}
	r.w, r.skipped, r.skipToKey, r.progress = w, 0, false, time.Now()
	return nil
}

// shortWhy says each Short* in a clip's note.
var shortWhy = map[string]string{
	ShortStreamStart:   "the camera's video begins later (the stream started or reconnected, or clips were turned on)",
	ShortNoKeyframe:    "the camera's ring held no keyframe as early (the stream was joined between keyframes)",
	ShortRingBytes:     "the ring's byte bound pushed that video out",
	ShortConfirmedLate: "the object was confirmed later than the ring keeps video for",
	ShortPreviousClip:  "the video before is in the previous clip, which starts at the same keyframe",
}

// fileBase is a clip's file name in Dir: its name with '/' as '_'.
func fileBase(name string) string { return strings.ReplaceAll(name, "/", "_") }

// close finishes the clip being written for reason and hands it on. With next (the unit
// that closed it, not written), a clip goes on from next when its live members remain.
func (r *Recorder) close(reason CloseReason, next *unit) {
	w := r.w
	r.w, r.tailing = nil, false
	path := filepath.Join(r.Dir, fileBase(r.name))
	info, err := w.finish(path)

	r.mu.Lock()
	clip := Clip{Path: path, Info: Info{Name: r.name, Camera: r.Camera, Start: w.start, End: w.start.Add(info.Duration),
		Duration: info.Duration, Codec: w.params.Codec, Width: w.params.Width, Height: w.params.Height,
		Frames: info.Frames, Bytes: info.Bytes, Closed: reason, Notes: w.notes, Objects: make([]Object, 0, len(r.members)),
		PreCapture: w.preCapture, PreRoll: max(w.preRoll, 0), Short: w.short, Continues: w.continues}}
	live := false
	for _, m := range r.members {
		clip.Info.Objects = append(clip.Info.Objects, m.o)
		live = live || !m.o.Ended
	}
	// The next clip goes on with the same objects while one of them lasts, or their
	// post_capture does (max_length, a new codec or size: it opens at the next unit); one
	// after an outage only while one of them lasts.
	goOn := reason != ClosedEnd && (live || next != nil && reason != ClosedOffline && !r.endAt.IsZero() && next.at.Before(r.endAt))
	r.curStart, r.prev = time.Time{}, nil
	if goOn {
		r.prev = &clip.Info
		r.want, r.cont = true, true
		r.wantAt = w.last
		if next != nil {
			r.wantAt = next.at
		}
		// The next clip shows the objects that last, and those whose post_capture reaches
		// into it; the others end with this one.
		kept := r.members[:0]
		for _, m := range r.members {
			if !m.o.Ended || m.o.LastSeen.Add(r.set.PostCapture).After(r.wantAt) {
				kept = append(kept, m)
			} else {
				delete(r.objects, m.o.TrackID)
			}
		}
		clear(r.members[len(kept):])
		r.members = kept
	} else {
		for _, m := range r.members {
			delete(r.objects, m.o.TrackID)
		}
		clear(r.members)
		r.members, r.endAt = r.members[:0], time.Time{}
	}
	r.mu.Unlock()

	if err != nil {
		if info.Frames == 0 && len(w.samples) == 0 {
			return // closed before its first frame: nothing to write
		}
		r.failed.Add(1)
		r.log.Warn("clip not written", "camera", r.Camera, "clip", r.name, "error", err)
		return
	}
	r.written.Add(1)
	r.bytes.Add(uint64(info.Bytes))
	r.log.Debug("clip written", "camera", r.Camera, "clip", r.name, "closed", reason, "frames", info.Frames,
		"duration", info.Duration.Round(time.Millisecond), "bytes", info.Bytes, "objects", len(clip.Info.Objects))
	r.mu.Lock()
	hold := r.hold
	r.mu.Unlock()
	if !goOn || hold <= 0 {
		r.Finished(clip)
		return
	}
	r.release(time.Time{}) // the one held before, if any
	r.mu.Lock()
	r.held, r.heldTill = &clip, time.Now().Add(hold)
	if r.prev != nil {
		r.prev = &r.held.Info // late objects are listed in the held clip
	}
	r.mu.Unlock()
}

// RecorderStats are a Recorder's counters.
type RecorderStats struct {
	Written  uint64 // clips written and handed to Finished
	Failed   uint64 // clips not started or not written (the spool or the MP4 could not be written)
	Bytes    uint64 // of the clips written
	Overflow uint64 // objects not followed: more than 1024 at once
	ReadBuf  int    // bytes of the buffer the recorder reads the ring into (its pre_capture at a clip's start)
	Ring     RingStats
}

// Stats returns the recorder's counters.
func (r *Recorder) Stats() RecorderStats {
	r.mu.Lock()
	overflow := r.overflow
	r.mu.Unlock()
	return RecorderStats{Written: r.written.Load(), Failed: r.failed.Load(), Bytes: r.bytes.Load(), Overflow: overflow,
		ReadBuf: int(r.bufHeld.Load()), Ring: r.Ring.Stats()}
}
