package pipeline

import (
	"log/slog"
	"os"
	"reflect"
	"sync"
	"time"

	"github.com/visiond/visiond/clips"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// Event clips in the pipeline (package clips does the recording): a camera with clips on has
// a ring of its encoded video, fed from its session (camera.onPacket), and a recorder that
// the result stage tells of every object event it publishes (results.observeClips, under
// the camera's sceneMu, which also starts, changes and stops the recorder as the camera's
// settings say). A finished clip goes to the clip store (clipStore); once stored, each of
// its objects gets an ObjectClip event naming it (clipLedger, Daemon.clipStored).

// clipStore keeps the clips: the site's JetStream object store, *sinks.Clips. PutClip never
// blocks; it takes the file.
type clipStore interface {
	PutClip(info sinks.ClipInfo, path string) error
}

// ringMaxBytes bounds a camera's ring: 5 s of pre_capture at 100 Mbit/s, far past a camera's
// stream; a ring holds pre_capture x the stream's bitrate, and a group of pictures more.
const ringMaxBytes = 64 << 20

// confirmWait bounds how long after its first sighting an object's first event comes, on a
// camera analysed every interval: a track's confirmation (a few analysed frames), and a
// margin for the analysis and the result stage.
func confirmWait(interval time.Duration) time.Duration { return 4*interval + 2*time.Second }

// ringKeep is how much video camera c's ring keeps for clips of s: pre_capture before an
// object's first sighting, until its first event comes (confirmWait, or wait when the camera's
// objects have come later than that).
func ringKeep(s config.Clips, interval, wait time.Duration) time.Duration {
	return s.PreCapture + max(confirmWait(interval), wait)
}

// maxConfirmWait bounds how far back a ring reaches past pre_capture for objects whose first
// event comes late (an overloaded box analyses frames seconds after they were captured).
const maxConfirmWait = 30 * time.Second

// noteConfirmWait widens camera c's ring when an object's first event ev came later after its
// first sighting than the ring allows for: the clip must still reach pre_capture before it.
// The recorder's Hold grows with it, so that a clip cut at max_length still lists the
// objects first seen in it and confirmed after. Under c.sceneMu.
func (rs *results) noteConfirmWait(c *camera, ev *sinks.ObjectEvent) {
	if ev.Type != sinks.ObjectNew {
		return
	}
	wait := time.Since(ev.FirstSeen)
	if wait <= c.stage.recWait || wait <= confirmWait(c.stage.interval) {
		return
	}
	c.stage.recWait = min(wait+wait/2, maxConfirmWait) // room for it to grow a little more
	c.stage.rec.Ring.SetLimits(ringKeep(c.stage.recFor, c.stage.interval, c.stage.recWait), ringMaxBytes)
	c.stage.rec.SetHold(c.stage.recWait)
}

// clipSettings are the recorder's settings of config's.
func clipSettings(s config.Clips) clips.Settings {
	return clips.Settings{PreCapture: s.PreCapture, PostCapture: s.PostCapture, MaxLength: s.Length(),
		Classes: s.Classes, Zones: s.Zones}
}

// onPacket takes one access unit of the camera's session (the RTP callback).
func (c *camera) onPacket(p *sources.Packet) {
	if r := c.ring.Load(); r != nil {
		r.Push(p)
	}
}

// streamEnded tells the camera's recorder that its stream ended.
func (c *camera) streamEnded() {
	if r := c.recorder.Load(); r != nil {
		r.StreamEnded()
	}
}

// syncClips makes camera c's recorder follow its clip settings in force: started when they
// are on and there is a store, given new ones, or stopped. Under c.sceneMu.
func (rs *results) syncClips(c *camera) {
	set := c.analytics().Clips
	on := set.Enabled && rs.clips != nil && (c.cfg.Kind == sources.KindRTSP || c.cfg.Kind == sources.KindFile)
	switch {
	case !on && c.stage.rec != nil:
		rs.stopClips(c, sinks.ClipClosedStopped)
	case on && c.stage.rec == nil:
		ring := clips.NewRing(ringKeep(set, c.stage.interval, 0), ringMaxBytes)
		rec := &clips.Recorder{Camera: c.cfg.ID, Ring: ring, Dir: rs.clipDir, Settings: clipSettings(set),
			Hold: confirmWait(c.stage.interval), Finished: rs.clipFinished, Joined: rs.clipJoined, Logger: rs.log.With("component", "clips", "camera", c.cfg.ID)}
		if err := rec.Start(); err != nil {
			c.noteError(err)
			return
		}
		c.stage.rec, c.stage.recFor, c.stage.recWait = rec, set, 0
		c.ring.Store(ring)
		c.recorder.Store(rec)
	case on && !reflect.DeepEqual(c.stage.recFor, set):
		c.stage.rec.SetSettings(clipSettings(set))
		c.stage.rec.Ring.SetLimits(ringKeep(set, c.stage.interval, c.stage.recWait), ringMaxBytes)
		c.stage.recFor = set
	}
}

// stopClips closes camera c's recorder (the clip being written ends for reason) and drops
// its ring. Under c.sceneMu.
func (rs *results) stopClips(c *camera, reason string) {
	if c.stage.rec == nil {
		return
	}
	c.ring.Store(nil)
	c.recorder.Store(nil)
	c.stage.rec.Close(reason)
	c.stage.rec = nil
}

// observeClips tells camera c's recorder of the object events of a frame. Under c.sceneMu.
func (rs *results) observeClips(c *camera, evs []*sinks.ObjectEvent) {
	rs.syncClips(c)
	if c.stage.rec == nil {
		return
	}
	for _, ev := range evs {
		rs.noteConfirmWait(c, ev)
		c.stage.rec.Observe(ev)
	}
}

// clipFinished hands a recorder's clip to the store, its objects' events kept for when it
// is stored. It runs on the recorder's goroutine.
func (rs *results) clipFinished(clip clips.Clip) {
	rs.clipLedger.add(clip.Info.Name, clip.Objects)
	if err := rs.clips.PutClip(clip.Info, clip.Path); err != nil {
		rs.clipLedger.take(clip.Info.Name)
		_ = os.Remove(clip.Path) // PutClip removes what it refuses; this is for what it never saw
		rs.log.Warn("clip not stored", "camera", clip.Info.Camera, "clip", clip.Info.Name, "error", err)
	}
}

// clipJoined gives an object that joined a clip going on from an earlier one (max_length),
// while its pre_capture reaches into the earlier one, its ObjectClip event of the earlier
// clip too: with the earlier clip's, when it waits for the store, else at once.
func (rs *results) clipJoined(earlier sinks.ClipInfo, ev sinks.ObjectEvent) {
	if rs.clipLedger.join(earlier.Name, ev) {
		return
	}
	publishClipEvents(rs.pub, rs.log, earlier, []sinks.ObjectEvent{ev})
}

// clipLedger holds the latest events of each clip's objects from the clip's end until the
// store has it, when each gets its ObjectClip event. Bounded: a clip whose storing waits
// behind maxPendingClips newer ones loses its events (the clip itself is kept).
type clipLedger struct {
	mu      sync.Mutex
	pending map[string][]sinks.ObjectEvent
	order   []string
	lost    uint64 // clips whose events went for room
}

// maxPendingClips bounds the clips whose events wait for the store.
const maxPendingClips = 1024

func (l *clipLedger) add(name string, evs []sinks.ObjectEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		l.pending = map[string][]sinks.ObjectEvent{}
	}
	if _, ok := l.pending[name]; !ok {
		l.order = append(l.order, name)
	}
	l.pending[name] = evs
	for len(l.order) > maxPendingClips {
		if _, ok := l.pending[l.order[0]]; ok {
			delete(l.pending, l.order[0])
			l.lost++
		}
		l.order = l.order[1:]
	}
}

// join adds ev to the events of clip name when it waits for the store, and reports whether
// it did.
func (l *clipLedger) join(name string, ev sinks.ObjectEvent) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs, ok := l.pending[name]
	if ok {
		l.pending[name] = append(evs, ev)
	}
	return ok
}

func (l *clipLedger) take(name string) []sinks.ObjectEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	evs, ok := l.pending[name]
	if ok {
		delete(l.pending, name)
		for i, n := range l.order {
			if n == name {
				l.order = append(l.order[:i], l.order[i+1:]...)
				break
			}
		}
	}
	return evs
}

// clipStored publishes the ObjectClip event of each object of a clip the store has stored:
// its latest event before, with the clip. A clip left from an earlier run has no events
// here: it is in the store, named by none.
func clipStored(pub EventSink, l *clipLedger, log *slog.Logger, info sinks.ClipInfo) {
	evs := l.take(info.Name)
	if evs == nil {
		log.Debug("clip stored without object events (from an earlier run)", "clip", info.Name)
		return
	}
	publishClipEvents(pub, log, info, evs)
}

// publishClipEvents publishes the ObjectClip event of clip info for each of evs, the latest
// events of its objects.
func publishClipEvents(pub EventSink, log *slog.Logger, info sinks.ClipInfo, evs []sinks.ObjectEvent) {
	ref := info.Ref()
	for i := range evs {
		ev := evs[i]
		ev.Type, ev.Why, ev.Reason, ev.Clip, ev.Seq = sinks.ObjectClip, nil, "", &ref, 0
		if err := pub.PublishObject(&ev); err != nil {
			log.Warn("clip event not published", "clip", info.Name, "track", ev.TrackID, "error", err)
		}
	}
}
