package pipeline

import (
	"log/slog"
	"os"
	"reflect"
	"sync/atomic"
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
// settings say), each object with its event as the recorder's Data. A finished clip goes to
// the clip store (clipStore) with the latest events of its objects, which wait with it in the
// store's queue on disk; once stored, each gets its ObjectClip event (clipStored).

// clipStore keeps the clips: the site's JetStream object store, *sinks.Clips. PutClip never
// blocks; it takes the file, and keeps events with the clip until it is stored (OnStored).
type clipStore interface {
	PutClip(info sinks.ClipInfo, events []sinks.ObjectEvent, path string) error
	// JoinClip adds ev to the events of clip name while it waits in the queue; false when
	// it is not queued (stored already).
	JoinClip(name string, ev sinks.ObjectEvent) bool
}

// ringMaxBytes bounds a camera's ring: 5 s of pre_capture at 100 Mbit/s, far past a camera's
// stream; a ring holds pre_capture x the stream's bitrate, and a group of pictures more.
// With a memory budget, the cameras with clips on share a quarter of it (budget.ringShare).
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

// narrowEvery is how often a camera's ring, widened for objects confirmed late, is narrowed
// back to what the objects of the last window needed.
const narrowEvery = 2 * time.Minute

// noteConfirmWait widens camera c's ring when an object's first event ev came later after its
// first sighting than the ring allows for: the clip must still reach pre_capture before it.
// The recorder's Hold grows with it, so that a clip cut at max_length still lists the
// objects first seen in it and confirmed after. Under c.sceneMu.
func (rs *results) noteConfirmWait(c *camera, ev *sinks.ObjectEvent) {
	if ev.Type != sinks.ObjectNew {
		return
	}
	wait := time.Since(ev.FirstSeen)
	c.stage.recPeak = max(c.stage.recPeak, wait)
	if wait <= c.stage.recWait || wait <= confirmWait(c.stage.interval) {
		return
	}
	rs.setConfirmWait(c, min(wait+wait/2, maxConfirmWait)) // room for it to grow a little more
}

// narrowRing narrows camera c's ring back, once every narrowEvery, to what the objects first
// seen in that window needed (nothing past confirmWait when none came late): a ring widened
// while the box was overloaded does not stay wide once the load has passed. Under c.sceneMu.
func (rs *results) narrowRing(c *camera, now time.Time) {
	if now.Sub(c.stage.recSince) < narrowEvery {
		return
	}
	var need time.Duration
	if c.stage.recPeak > confirmWait(c.stage.interval) {
		need = min(c.stage.recPeak+c.stage.recPeak/2, maxConfirmWait)
	}
	c.stage.recPeak, c.stage.recSince = 0, now
	if need < c.stage.recWait {
		rs.setConfirmWait(c, need)
	}
}

// setConfirmWait makes wait (0: none past confirmWait) camera c's allowance for objects
// confirmed late: its ring's keep and its recorder's Hold. Under c.sceneMu.
func (rs *results) setConfirmWait(c *camera, wait time.Duration) {
	c.stage.recWait = wait
	rs.fitRing(c)
	c.stage.rec.SetHold(max(wait, confirmWait(c.stage.interval)))
}

// fitRing gives camera c's ring the limits of its settings in force: pre_capture and the
// allowance for late objects (ringKeep), and its share of the budget. Under c.sceneMu.
func (rs *results) fitRing(c *camera) {
	c.stage.recShare = rs.budget.ringShare(int(rs.clipCams.Load()))
	c.stage.rec.Ring.SetLimits(ringKeep(c.stage.recFor, c.stage.interval, c.stage.recWait), c.stage.recShare)
}

// clipSettings are the recorder's settings of config's.
func clipSettings(s config.Clips) clips.Settings {
	return clips.Settings{PreCapture: s.PreCapture, PostCapture: s.PostCapture, MaxLength: s.Length(),
		Classes: s.Classes, Zones: s.Zones}
}

// keyframeClock measures a stream's keyframe interval from its packets: the capture times
// of a session's last two keyframes. Written by the session's callback, read by status.
type keyframeClock struct {
	session uint64    // the callback's own
	last    time.Time // the callback's own: the session's last keyframe
	gap     atomic.Int64
}

// push notes packet p; it reports a new interval measured.
func (k *keyframeClock) push(p *sources.Packet) bool {
	if !p.Key {
		return false
	}
	if p.Session != k.session {
		k.session, k.last = p.Session, p.At
		return false
	}
	gap := p.At.Sub(k.last)
	k.last = p.At
	if gap <= 0 {
		return false
	}
	return k.gap.Swap(int64(gap)) != int64(gap)
}

// interval is the latest keyframe interval measured; 0 before two keyframes of a session.
func (k *keyframeClock) interval() time.Duration { return time.Duration(k.gap.Load()) }

// keyframeWarning says, when camera c's keyframe interval is longer than its clips'
// pre_capture, what that does; "" when it is not, or clips are off.
func (c *camera) keyframeWarning() string {
	return c.analytics().Clips.KeyframeWarning(c.keyframes.interval())
}

// warnings are camera c's warnings now (CameraStatus.Warnings).
func (c *camera) warnings() []string {
	if w := c.keyframeWarning(); w != "" {
		return []string{w}
	}
	return nil
}

// onPacket takes one access unit of the camera's session (the RTP callback).
func (c *camera) onPacket(p *sources.Packet) {
	if c.keyframes.push(p) {
		if w := c.keyframeWarning(); w != "" && c.keyframeWarned.CompareAndSwap(false, true) && c.log != nil {
			c.log.Warn("the camera's keyframes come less often than its clips' pre_capture (logged once)", "camera", c.cfg.ID, "warning", w)
		}
	}
	if r := c.ring.Load(); r != nil {
		r.Push(p)
	}
	if m := c.live.Load(); m != nil {
		m.Push(p)
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
	on := set.Enabled && rs.clips != nil && clipsKind(c.cfg.Kind)
	switch {
	case !on && c.stage.rec != nil:
		rs.stopClips(c, clips.ClosedStopped)
	case !on && c.ring.Load() != nil:
		c.ring.Store(nil) // one made at the camera's start (startCamera) for clips a reload turned off since
	case on && c.stage.rec == nil:
		ring := c.ring.Load() // made at the camera's start, holding its stream from the first packet
		if ring == nil {
			ring = clips.NewRing(ringKeep(set, c.stage.interval, 0), ringMaxBytes) // fitRing below gives it its share
		}
		rec := &clips.Recorder{Camera: c.cfg.ID, Ring: ring, Dir: rs.clipDir, Settings: clipSettings(set),
			Hold: confirmWait(c.stage.interval), Finished: rs.clipFinished, Joined: rs.clipJoined, Logger: rs.log.With("component", "clips", "camera", c.cfg.ID)}
		if err := rec.Start(); err != nil {
			c.noteError(err)
			return
		}
		c.stage.rec, c.stage.recFor, c.stage.recWait = rec, set, 0
		c.stage.recPeak, c.stage.recSince = 0, time.Now()
		rs.clipCams.Add(1)
		rs.fitRing(c)
		c.ring.Store(ring)
		c.recorder.Store(rec)
	case on && !reflect.DeepEqual(c.stage.recFor, set):
		c.stage.rec.SetSettings(clipSettings(set))
		c.stage.recFor = set
		rs.fitRing(c)
	case on && c.stage.recShare != rs.budget.ringShare(int(rs.clipCams.Load())): // cameras with clips came or went
		rs.fitRing(c)
	}
}

// clipsKind reports whether a camera of kind makes clips: those whose packets visiond reads
// (RTSP and files; not a GStreamer pipeline, which hands over decoded frames).
func clipsKind(kind sources.Kind) bool { return kind == sources.KindRTSP || kind == sources.KindFile }

// stopClips closes camera c's recorder (the clip being written ends for reason) and drops
// its ring. Under c.sceneMu.
func (rs *results) stopClips(c *camera, reason clips.CloseReason) {
	if c.stage.rec == nil {
		return
	}
	c.ring.Store(nil)
	c.recorder.Store(nil)
	c.stage.rec.Close(reason)
	c.stage.rec = nil
	rs.clipCams.Add(-1)
}

// observeClips tells camera c's recorder of the object events of a frame. Under c.sceneMu.
func (rs *results) observeClips(c *camera, evs []*sinks.ObjectEvent) {
	rs.syncClips(c)
	if c.stage.rec == nil {
		return
	}
	rs.narrowRing(c, time.Now())
	for _, ev := range evs {
		if ev.Type != sinks.ObjectNew && ev.Type != sinks.ObjectUpdate && ev.Type != sinks.ObjectEnd {
			continue
		}
		rs.noteConfirmWait(c, ev)
		c.stage.rec.Observe(clips.Object{TrackID: ev.TrackID, Label: ev.Label, FirstSeen: ev.FirstSeen, LastSeen: ev.LastSeen,
			Zones: ev.Zones, Ended: ev.Type == sinks.ObjectEnd, Data: *ev})
	}
}

// objectEvent is the event a recorder's object carries (observeClips).
func objectEvent(o clips.Object) sinks.ObjectEvent {
	ev, _ := o.Data.(sinks.ObjectEvent)
	return ev
}

// clipFinished hands a recorder's clip to the store with the latest events of its objects.
// It runs on the recorder's goroutine.
func (rs *results) clipFinished(clip clips.Clip) {
	info := sinks.NewClipInfo(clip.Info)
	evs := make([]sinks.ObjectEvent, 0, len(clip.Info.Objects))
	for _, o := range clip.Info.Objects {
		evs = append(evs, objectEvent(o))
	}
	if err := rs.clips.PutClip(info, evs, clip.Path); err != nil {
		_ = os.Remove(clip.Path) // PutClip removes what it refuses; this is for what it never saw
		rs.log.Warn("clip not stored", "camera", info.Camera, "clip", info.Name, "error", err)
	}
}

// clipJoined gives an object that joined a clip going on from an earlier one (max_length),
// while its pre_capture reaches into the earlier one, its ObjectClip event of the earlier
// clip too: with the earlier clip's, when it waits in the store's queue, else at once.
func (rs *results) clipJoined(earlier clips.Info, o clips.Object) {
	ev := objectEvent(o)
	if rs.clips.JoinClip(earlier.Name, ev) {
		return
	}
	clipStored(rs.pub, rs.log, sinks.NewClipInfo(earlier), []sinks.ObjectEvent{ev})
}

// clipStored publishes the ObjectClip event of each of evs, the latest events of the objects
// of clip info, which the store has stored.
func clipStored(pub EventSink, log *slog.Logger, info sinks.ClipInfo, evs []sinks.ObjectEvent) {
	if len(evs) == 0 {
		log.Debug("clip stored without object events", "clip", info.Name)
		return
	}
	ref := info.Ref()
	for _, ev := range evs {
		if err := pub.PublishObject(sinks.NewClipEvent(ev, ref)); err != nil {
			log.Warn("clip event not published", "clip", info.Name, "track", ev.TrackID, "error", err)
		}
	}
}
