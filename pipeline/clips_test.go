package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/clips"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources/samplecam"
)

// clipEvents collects a camera's object events, the ObjectClip ones apart.
type clipEvents struct {
	mu      sync.Mutex
	objects map[uint64][]sinks.ObjectEvent // the lifecycle events, by track
	clips   map[uint64][]sinks.ObjectEvent // the clip events, by track
}

func subscribeClips(t *testing.T, url, subject string) *clipEvents {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	e := &clipEvents{objects: map[uint64][]sinks.ObjectEvent{}, clips: map[uint64][]sinks.ObjectEvent{}}
	if _, err := nc.Subscribe(subject, func(m *nats.Msg) {
		var ev sinks.ObjectEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Errorf("object event: %v: %s", err, m.Data)
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if ev.Type == sinks.ObjectClip {
			e.clips[ev.TrackID] = append(e.clips[ev.TrackID], ev)
		} else {
			e.objects[ev.TrackID] = append(e.objects[ev.TrackID], ev)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return e
}

// covered returns the objects that ended after they were first seen at least from, whose
// clip events name clips that reach their last sighting plus post: their end event and their
// clips' references, by track.
func (e *clipEvents) covered(from time.Time, post time.Duration) map[uint64][]sinks.ClipRef {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[uint64][]sinks.ClipRef{}
	for id, evs := range e.objects {
		end := evs[len(evs)-1]
		if end.Type != sinks.ObjectEnd || end.FirstSeen.Before(from) || len(e.clips[id]) == 0 {
			continue
		}
		var refs []sinks.ClipRef
		reach := time.Time{}
		for _, c := range e.clips[id] {
			refs = append(refs, *c.Clip)
			if c.Clip.End.After(reach) {
				reach = c.Clip.End
			}
		}
		if !reach.Before(end.LastSeen.Add(post - 100*time.Millisecond)) {
			out[id] = refs
		}
	}
	return out
}

// TestSampleCameraClips runs the daemon on the sample camera with clips on (pre_capture and
// post_capture 5 s, max_length 20 s, so that the sample's steady walkers make runs of clips)
// and reads its object events: every object that ended gets clip events naming the clips
// that show it, which together cover it from pre_capture before its first sighting (within
// a keyframe interval) to post_capture after its last; each clip, fetched from the store,
// is H.264 at the stream's 768x576 starting on a keyframe, with the stream's 10 frames a
// second over its duration, and says it ended at max_length or after its objects.
//
// The same with the sample file as a camera of kind file: its packets demuxed beside its
// decoding make the clips.
func TestSampleCameraClips(t *testing.T) {
	t.Run("rtsp", func(t *testing.T) {
		checkSampleClips(t, strings.Replace(sampleCameras(t, 1), "- {id: cam0,", "- {id: cam0, clips: {enabled: true, max_length: 20s},", 1))
	})
	t.Run("file", func(t *testing.T) {
		checkSampleClips(t, fmt.Sprintf("  - {id: cam0, kind: file, file: %q, clips: {enabled: true, max_length: 20s}}\n", testutil.Media(t, "vtest.h264.ts")))
	})
	t.Run("file mp4", func(t *testing.T) { // the parameter sets apart from the stream, in the avcC
		mp4 := testutil.TempFile(t, "sample.mp4", string(testutil.SampleMP4(t, 80)))
		checkSampleClips(t, fmt.Sprintf("  - {id: cam0, kind: file, file: %q, clips: {enabled: true, max_length: 20s}}\n", mp4))
	})
}

func checkSampleClips(t *testing.T, cams string) {
	const pre, post = 5 * time.Second, 5 * time.Second
	d := startTestDaemon(t, lifeConfig(t, cams))
	ev := subscribeClips(t, d.NATSURL(), "visiond.test.cam0.objects")
	start := time.Now()

	// Objects first seen after the camera's ring holds pre_capture (and the daemon's start).
	var got map[uint64][]sinks.ClipRef
	testutil.WaitFor(t, 5*time.Minute, "2 objects ended with clips that cover them", func() bool {
		got = ev.covered(start.Add(pre+3*time.Second), post)
		return len(got) >= 2
	})
	ev.mu.Lock()
	defer ev.mu.Unlock()
	probed := map[string]sinks.ClipInfo{}
	for _, refs := range got {
		for _, ref := range refs {
			if _, ok := probed[ref.Name]; !ok {
				probed[ref.Name] = fetchClip(t, d, ref.Name, filepath.Join(t.TempDir(), "clip.mp4"))
			}
		}
	}
	joinedLate := 0
	for id, refs := range got {
		end := ev.objects[id][len(ev.objects[id])-1]
		slices.SortFunc(refs, func(a, b sinks.ClipRef) int { return a.Start.Compare(b.Start) })
		// Its video from pre_capture before it: from the keyframe at or before then, when it
		// opened its clip (its first object); from earlier, when it joined one.
		s := refs[0].Start
		if s.After(end.FirstSeen.Add(-pre)) {
			t.Errorf("track %d first seen at %s: its first clip starts at %s, want at or before %s", id, end.FirstSeen, s, end.FirstSeen.Add(-pre))
		}
		if info := probed[refs[0].Name]; len(info.Objects) > 0 && info.Objects[0].TrackID == id && s.Before(end.FirstSeen.Add(-pre-time.Second)) {
			t.Errorf("track %d opened clip %s at %s, more than a keyframe interval before %s", id, refs[0].Name, s, end.FirstSeen.Add(-pre))
		}
		for i := 1; i < len(refs); i++ {
			if gap := refs[i].Start.Sub(refs[i-1].End); gap > 10*time.Millisecond || gap < -10*time.Millisecond {
				t.Errorf("track %d: clip %s starts %v after the one before ends", id, refs[i].Name, gap)
			}
		}
		for i, ref := range refs {
			info := probed[ref.Name]
			if info.Start != ref.Start || info.DurationS != ref.DurationS {
				t.Errorf("clip %s: the event says %+v, the store %+v", ref.Name, ref, info)
			}
			lists := func(info sinks.ClipInfo) bool {
				return slices.ContainsFunc(info.Objects, func(o sinks.ClipObject) bool { return o.TrackID == id })
			}
			// A clip cut at max_length lists the objects confirmed within its Hold; one confirmed
			// later (a loaded box) is listed in the clip that goes on from it, and its event names
			// the earlier clip too, whose video it is in (clips.Recorder.Joined).
			switch {
			case lists(info):
			case i+1 < len(refs) && refs[i+1].Start.Sub(ref.End).Abs() <= 10*time.Millisecond && lists(probed[refs[i+1].Name]):
				joinedLate++
			default:
				t.Errorf("clip %s does not list track %d, nor does a clip going on from it: %+v", ref.Name, id, info.Objects)
			}
			if info.Closed != sinks.ClipClosedEnd && info.Closed != sinks.ClipClosedMaxLength || info.DurationS > 20.2 {
				t.Errorf("clip %s: closed %q after %.1f s, want end or max_length (20 s)", ref.Name, info.Closed, info.DurationS)
			}
		}
	}
	t.Logf("%d objects covered by %d clips; %d named by a clip that lists them in the next", len(got), len(probed), joinedLate)

	// The counts in /metrics and /api/cameras.
	srv := httptest.NewServer(d.metricsHandler())
	defer srv.Close()
	m := scrape(t, srv.URL)
	if n := m.mustHave(t, `visiond_camera_clips_total{camera="cam0"}`); n < float64(len(probed)) {
		t.Errorf("visiond_camera_clips_total %v, want at least the %d clips read", n, len(probed))
	}
	if n := m.mustHave(t, "visiond_clips_stored_total"); n < float64(len(probed)) {
		t.Errorf("visiond_clips_stored_total %v, want at least %d", n, len(probed))
	}
	if n := m.mustHave(t, `visiond_camera_clip_ring_bytes{camera="cam0"}`); n <= 0 || n > ringMaxBytes {
		t.Errorf("visiond_camera_clip_ring_bytes %v", n)
	}
	if n := m.mustHave(t, `visiond_clips_lost_total{reason="refused"}`); n != 0 {
		t.Errorf("clips refused: %v", n)
	}
	if st := d.camera("cam0").status(); st.Clips == nil || st.Clips.Written < uint64(len(probed)) || st.Clips.RingSeconds < pre.Seconds() {
		t.Errorf("camera status clips %+v", st.Clips)
	}
}

// fetchClip reads the clip name from the daemon's store into path, checks it with ffprobe
// and returns its info.
func fetchClip(t *testing.T, d *Daemon, name, path string) sinks.ClipInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, info, err := d.clips.Open(ctx, name)
	if err != nil {
		t.Fatalf("clip %s: %v", name, err)
	}
	defer r.Close()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, r); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p := testutil.ProbeVideo(t, path)
	desc := fmt.Sprintf("clip %s (%+v)", name, p)
	if p.Codec != "h264" || p.Width != 768 || p.Height != 576 || !p.FirstKey || p.Errors != "" {
		t.Errorf("%s: want H.264 768x576 from a keyframe, decoded without errors", desc)
	}
	if p.Frames != info.Frames || float64(p.Frames) < p.Duration*10-1 || float64(p.Frames) > p.Duration*10+1 {
		t.Errorf("%s: %d frames stated: want 10 fps over its duration", desc, info.Frames)
	}
	if d := p.Duration - info.DurationS; d > 0.05 || d < -0.05 {
		t.Errorf("%s: the info says %.3f s", desc, info.DurationS)
	}
	return info
}

// TestReloadClipsLive: clips turned on by an edit of the file start on the camera's running
// session (the camera is updated, not restarted) and make clips; turned off, the clip being
// written ends there (camera_stopped) and the camera keeps no ring.
func TestReloadClipsLive(t *testing.T) {
	fd := startFileDaemon(t, lifeConfig(t, sampleCameras(t, 1)))
	srcs := fd.online(t, "cam0")
	if fd.camera("cam0").recorder.Load() != nil {
		t.Fatal("a recorder without clips")
	}
	ev := subscribeClips(t, fd.NATSURL(), "visiond.test.cam0.objects")
	body := testutil.ReadFile(t, fd.path)
	on := strings.Replace(body, "- {id: cam0,", "- {id: cam0, clips: {enabled: true, pre_capture: 1s, post_capture: 1s, max_length: 10s},", 1)
	fd.save(t, on)
	if c := nextConfigEvent(t, fd.events); c.Result != "applied" || !slices.Equal(c.Updated, []string{"cam0"}) || len(c.Restarted) != 0 {
		t.Fatalf("clips on: config event %+v, want cam0 updated, not restarted", c)
	}
	fd.untouched(t, srcs)
	testutil.WaitFor(t, 3*time.Minute, "a clip event", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		return len(ev.clips) > 0
	})
	fd.save(t, body)
	if c := nextConfigEvent(t, fd.events); c.Result != "applied" || !slices.Equal(c.Updated, []string{"cam0"}) {
		t.Fatalf("clips off: config event %+v, want cam0 updated", c)
	}
	fd.untouched(t, srcs)
	testutil.WaitFor(t, time.Minute, "the recorder stopped", func() bool {
		c := fd.camera("cam0")
		return c.recorder.Load() == nil && c.ring.Load() == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stopped bool
	testutil.WaitFor(t, time.Minute, "the clip cut by the reload stored", func() bool {
		list, err := fd.clips.List(ctx, "cam0", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			stopped = stopped || c.Closed == sinks.ClipClosedStopped
		}
		return stopped
	})
}

// TestClipEndsWhenCameraGoesOffline: the sample camera's server stops while its objects'
// clip is being written: the clip ends there (camera_offline), is stored and plays.
func TestClipEndsWhenCameraGoesOffline(t *testing.T) {
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam0": testutil.Media(t, "vtest.h264.ts")}, Logger: testutil.Logger(t)}
	if err := rtsp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rtsp.Close)
	d := startTestDaemon(t, lifeConfig(t, fmt.Sprintf("  - {id: cam0, url: %q, clips: {enabled: true}}\n", rtsp.URL("cam0"))))
	testutil.WaitFor(t, 3*time.Minute, "a clip being written", func() bool {
		c := d.camera("cam0")
		c.sceneMu.Lock()
		defer c.sceneMu.Unlock()
		return c.stage.scene != nil && c.stage.scene.Objects() > 0 && c.stage.rec != nil && c.stage.rec.Ring.Stats().Units > 0
	})
	testutil.WaitFor(t, time.Minute, "video written into the clip", func() bool {
		st := d.camera("cam0").clipStatus()
		return st != nil && st.RingSeconds >= 5
	})
	cut := time.Now()
	rtsp.Close()
	var info sinks.ClipInfo
	testutil.WaitFor(t, 2*time.Minute, "the clip cut by the outage stored", func() bool {
		list, err := d.clips.List(context.Background(), "cam0", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			if c.Closed == sinks.ClipClosedOffline {
				info = c
				return true
			}
		}
		return false
	})
	if info.End.After(cut.Add(time.Second)) || info.DurationS < 1 {
		t.Errorf("clip %+v: want it to end by the outage at %s", info, cut)
	}
	fetchClip(t, d, info.Name, filepath.Join(t.TempDir(), "clip.mp4"))
}

// TestClipLeftoversRemoved: what a daemon that was killed left in its recording directory
// (a spool, an MP4 never handed to the store) goes at the next start.
func TestClipLeftoversRemoved(t *testing.T) {
	state := t.TempDir()
	rec := filepath.Join(state, "clips", "recording")
	if err := os.MkdirAll(rec, 0o750); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cam0_c1.mp4-123.spool", "cam0_c1.mp4"} {
		testutil.WriteFile(t, filepath.Join(rec, f), "left by a killed daemon")
	}
	d := startTestDaemonIn(t, lifeConfig(t, "  []\n"), state)
	if d.clips == nil {
		t.Fatal("no clip store")
	}
	if left, _ := os.ReadDir(rec); len(left) != 0 {
		t.Errorf("left in %s after the start: %v", rec, left)
	}
}

// TestRingWidensForLateObjects: an object whose first event comes later after its first
// sighting than a camera's ring allows for (an overloaded box) widens the ring, so that the
// next objects' clips still reach pre_capture before them; never past maxConfirmWait.
func TestRingWidensForLateObjects(t *testing.T) {
	c := &camera{stage: stageState{interval: 200 * time.Millisecond, recFor: config.Clips{Enabled: true, PreCapture: 5 * time.Second}}}
	c.stage.rec = &clips.Recorder{Ring: clips.NewRing(ringKeep(c.stage.recFor, c.stage.interval, 0), ringMaxBytes)}
	rs := &results{}
	keep := func() time.Duration { k, _ := c.stage.rec.Ring.Limits(); return k }
	if k := keep(); k != 5*time.Second+confirmWait(c.stage.interval) {
		t.Fatalf("keep %v at start", k)
	}
	now := time.Now()
	rs.noteConfirmWait(c, &sinks.ObjectEvent{Type: sinks.ObjectNew, FirstSeen: now.Add(-time.Second)}) // within confirmWait
	if k := keep(); k != 5*time.Second+confirmWait(c.stage.interval) {
		t.Errorf("keep %v after an object on time", k)
	}
	rs.noteConfirmWait(c, &sinks.ObjectEvent{Type: sinks.ObjectNew, FirstSeen: now.Add(-8 * time.Second)})
	if k := keep(); k < 5*time.Second+12*time.Second || k > 5*time.Second+13*time.Second {
		t.Errorf("keep %v after an object 8 s late, want pre_capture and about 12 s", k)
	}
	rs.noteConfirmWait(c, &sinks.ObjectEvent{Type: sinks.ObjectUpdate, FirstSeen: now.Add(-time.Minute)}) // not a first event
	rs.noteConfirmWait(c, &sinks.ObjectEvent{Type: sinks.ObjectNew, FirstSeen: now.Add(-time.Hour)})
	if k := keep(); k != 5*time.Second+maxConfirmWait {
		t.Errorf("keep %v after an object an hour late, want pre_capture and %v", k, maxConfirmWait)
	}
}

// TestRingNarrowsWhenLoadPasses: a ring widened for objects confirmed late is narrowed back
// once a window of narrowEvery has passed in which the objects came sooner: to what they
// needed, and to pre_capture and confirmWait alone after a window without a late one.
func TestRingNarrowsWhenLoadPasses(t *testing.T) {
	c := &camera{stage: stageState{interval: 200 * time.Millisecond, recFor: config.Clips{Enabled: true, PreCapture: 5 * time.Second}}}
	c.stage.rec = &clips.Recorder{Ring: clips.NewRing(ringKeep(c.stage.recFor, c.stage.interval, 0), ringMaxBytes)}
	rs := &results{}
	keep := func() time.Duration { k, _ := c.stage.rec.Ring.Limits(); return k }
	base := 5*time.Second + confirmWait(c.stage.interval)
	start := time.Now()
	c.stage.recSince = start
	rs.noteConfirmWait(c, &sinks.ObjectEvent{Type: sinks.ObjectNew, FirstSeen: start.Add(-20 * time.Second)}) // overloaded
	if k := keep(); k != 5*time.Second+maxConfirmWait {
		t.Fatalf("keep %v after an object 20 s late, want pre_capture and %v", k, maxConfirmWait)
	}
	rs.narrowRing(c, start.Add(narrowEvery/2)) // the window has not passed
	if k := keep(); k != 5*time.Second+maxConfirmWait {
		t.Fatalf("keep %v narrowed before the window passed", k)
	}
	// The next window: the load eases, objects come 6 s late.
	rs.narrowRing(c, start.Add(narrowEvery))
	rs.noteConfirmWait(c, &sinks.ObjectEvent{Type: sinks.ObjectNew, FirstSeen: time.Now().Add(-6 * time.Second)})
	rs.narrowRing(c, start.Add(2*narrowEvery))
	if k := keep(); k < 5*time.Second+9*time.Second || k > 5*time.Second+10*time.Second {
		t.Errorf("keep %v after a window whose latest object was 6 s late, want pre_capture and about 9 s", k)
	}
	// A window of objects on time: back to pre_capture and confirmWait.
	rs.noteConfirmWait(c, &sinks.ObjectEvent{Type: sinks.ObjectNew, FirstSeen: time.Now().Add(-time.Second)})
	rs.narrowRing(c, start.Add(3*narrowEvery))
	if k := keep(); k != base {
		t.Errorf("keep %v after a window of objects on time, want %v", k, base)
	}
}

// TestRingShares: with a memory budget, the cameras with clips on share a quarter of it, each
// ring bounded by its share, between ringMinBytes and ringMaxBytes.
func TestRingShares(t *testing.T) {
	b := &memoryBudget{limit: 512 << 20}
	for _, tc := range []struct{ cams, want int }{{1, ringMaxBytes}, {2, ringMaxBytes}, {4, 32 << 20}, {16, 8 << 20}, {1000, ringMinBytes}} {
		if got := b.ringShare(tc.cams); got != tc.want {
			t.Errorf("%d cameras under a budget of 512 MiB: share %d MiB, want %d", tc.cams, got>>20, tc.want>>20)
		}
	}
	var none *memoryBudget
	if got := none.ringShare(100); got != ringMaxBytes {
		t.Errorf("no budget: share %d, want ringMaxBytes", got)
	}
	c := &camera{stage: stageState{interval: 200 * time.Millisecond, recFor: config.Clips{Enabled: true, PreCapture: 5 * time.Second}}}
	c.stage.rec = &clips.Recorder{Ring: clips.NewRing(ringKeep(c.stage.recFor, c.stage.interval, 0), ringMaxBytes)}
	rs := &results{budget: b}
	rs.clipCams.Store(8)
	rs.fitRing(c)
	if _, maxBytes := c.stage.rec.Ring.Limits(); maxBytes != 16<<20 || c.stage.recShare != maxBytes {
		t.Errorf("a ring of 8 cameras with clips: at most %d MiB (share noted %d), want 16", maxBytes>>20, c.stage.recShare>>20)
	}
}

// TestReloadFPSWhileRecording: the fps of a camera that records clips is reloaded again and
// again while objects come and its recorder records: the camera keeps its session and takes
// each new schedule, its recorder goes on (a clip is stored and named), and the result stage,
// which sizes the recorder's ring and hold by the camera's interval, never reads the run
// goroutine's schedule (issue 38: it read the interval that a reload writes, a race that
// -race reports here).
func TestReloadFPSWhileRecording(t *testing.T) {
	cams := strings.Replace(sampleCameras(t, 1), "- {id: cam0,", "- {id: cam0, clips: {enabled: true, pre_capture: 1s, post_capture: 1s, max_length: 10s},", 1)
	d := startTestDaemon(t, lifeConfig(t, cams))
	ev := subscribeClips(t, d.NATSURL(), "visiond.test.cam0.objects")
	news := func() int {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		n := 0
		for _, evs := range ev.objects {
			for _, e := range evs {
				if e.Type == sinks.ObjectNew {
					n++
				}
			}
		}
		return n
	}
	testutil.WaitFor(t, 3*time.Minute, "the recorder recording and an object followed", func() bool {
		st := d.camera("cam0").clipStatus()
		return st != nil && st.RingSeconds > 0 && news() > 0
	})
	// Reload as fast as the daemon applies them, for a while: the fps, and with it the
	// pre_capture, so that the recorder's ring is sized anew by the camera's interval
	// (syncClips), and each object's first event checks it too (noteConfirmWait).
	from, reloads := news(), 0
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); reloads++ {
		cfg := *d.Running()
		cfg.Cameras = slices.Clone(cfg.Cameras)
		cc := &cfg.Cameras[0]
		cc.FPS = []float64{4, 5}[reloads%2]
		cc.Clips.PreCapture = time.Duration(1+reloads%2) * time.Second
		res, err := d.Reload(&cfg)
		if err != nil || !slices.Equal(res.Updated, []string{"cam0"}) || len(res.Restarted) != 0 {
			t.Fatalf("reload %d to %v fps: %+v, %v; want cam0 updated, not restarted", reloads, cc.FPS, res, err)
		}
	}
	t.Logf("%d reloads while %d new objects came", reloads, news()-from)
	if c := d.camera("cam0"); c.recorder.Load() == nil {
		t.Fatal("the recorder stopped")
	}
	testutil.WaitFor(t, 2*time.Minute, "a clip event", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		return len(ev.clips) > 0
	})
}

// TestClipOfTheFirstSecond: an object the camera shows from its first frames gets a clip
// from the stream's first keyframe, never one that starts after the object was first seen
// (the camera's ring holds its stream from the first packet, before the first result); the
// clip says how much pre-roll it got and why that is less than pre_capture (the stream
// began then). The sample file as a camera: people walk in it from its first frame.
func TestClipOfTheFirstSecond(t *testing.T) {
	const pre = 5 * time.Second
	cams := fmt.Sprintf("  - {id: cam0, kind: file, file: %q, clips: {enabled: true, pre_capture: 5s, post_capture: 1s, max_length: 20s}}\n",
		testutil.Media(t, "vtest.h264.ts"))
	d := startTestDaemon(t, lifeConfig(t, cams))
	ev := subscribeClips(t, d.NATSURL(), "visiond.test.cam0.objects")

	// The object first seen first, once it has ended and its clip is stored.
	var first sinks.ObjectEvent
	var refs []sinks.ClipRef
	testutil.WaitFor(t, 5*time.Minute, "the first object's clip", func() bool {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		first, refs = sinks.ObjectEvent{}, nil
		for id, evs := range ev.objects {
			if first.TrackID == 0 || evs[0].FirstSeen.Before(first.FirstSeen) {
				first = evs[len(evs)-1]
				refs = nil
				for _, c := range ev.clips[id] {
					refs = append(refs, *c.Clip)
				}
			}
		}
		return first.Type == sinks.ObjectEnd && len(refs) > 0
	})
	slices.SortFunc(refs, func(a, b sinks.ClipRef) int { return a.Start.Compare(b.Start) })
	c := refs[0]
	t.Logf("track %d first seen at %s; its clip %s starts at %s: %+v",
		first.TrackID, first.FirstSeen.Format(time.StampMicro), c.Name, c.Start.Format(time.StampMicro), c.ClipPreRoll)
	if c.Start.After(first.FirstSeen.Add(time.Millisecond)) { // an event's times are to the millisecond
		t.Errorf("the first object's clip starts %v after the object was first seen", c.Start.Sub(first.FirstSeen))
	}
	if c.PreCaptureS != pre.Seconds() || c.PreRollS == nil || c.Continues != "" {
		t.Fatalf("the clip's pre-roll: %+v, want pre_capture 5 s and a pre-roll", c.ClipPreRoll)
	}
	if got := *c.PreRollS; got < pre.Seconds() && c.Short != sinks.ClipShortStreamStart || got > pre.Seconds() && c.Short != "" {
		t.Errorf("pre-roll %.3f s of 5, short %q: want stream_start when less, nothing when not", got, c.Short)
	}
	if want := first.FirstSeen.Sub(c.Start).Seconds(); math.Abs(*c.PreRollS-want) > 0.002 {
		t.Errorf("pre-roll %.3f s, but the object was first seen %.3f s after the clip's start", *c.PreRollS, want)
	}
}

// TestKeyframeInterval: each camera's keyframe interval, measured from its packets, is in
// /api/cameras and /metrics; a camera whose keyframes come less often than its clips'
// pre_capture (12 s against 5 s) gets a warning in its status (the status page shows it) and
// one log line; those of 1 and 4 s do not.
func TestKeyframeInterval(t *testing.T) {
	streams := testutil.GOPStreams(t, 40, 1, 4, 12)
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: streams, Logger: testutil.Logger(t)}
	if err := rtsp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rtsp.Close)
	var cams strings.Builder
	for _, gop := range []int{1, 4, 12} {
		fmt.Fprintf(&cams, "  - {id: g%d, url: %q, fps: 2, clips: {enabled: true, pre_capture: 5s}}\n", gop, rtsp.URL(fmt.Sprintf("g%d", gop)))
	}
	var logs testutil.LogBuffer
	cfg, err := config.Parse([]byte(lifeConfig(t, cams.String())))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir, cfg.NATS.Listen = t.TempDir(), "127.0.0.1:0"
	d := &Daemon{Config: cfg, Logger: logs.Logger(), WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	testutil.WaitFor(t, 2*time.Minute, "two keyframe intervals of every camera", func() bool {
		for _, id := range []string{"g1", "g4", "g12"} {
			if d.camera(id).status().KeyframeIntervalS == 0 {
				return false
			}
		}
		return true
	})
	srv := httptest.NewServer(d.metricsHandler())
	defer srv.Close()
	m := scrape(t, srv.URL)
	for _, gop := range []float64{1, 4, 12} {
		id := fmt.Sprintf("g%g", gop)
		st := d.camera(id).status()
		if math.Abs(st.KeyframeIntervalS-gop) > 0.05 {
			t.Errorf("camera %s: keyframe interval %.3f s, want %g", id, st.KeyframeIntervalS, gop)
		}
		if v := m.mustHave(t, fmt.Sprintf(`visiond_camera_keyframe_interval_seconds{camera=%q}`, id)); math.Abs(v-gop) > 0.05 {
			t.Errorf("visiond_camera_keyframe_interval_seconds of %s: %v", id, v)
		}
		warned := len(st.Warnings) == 1 && strings.Contains(st.Warnings[0], "keyframe interval 12.0 s is longer than clips' pre_capture 5.0 s")
		if warned != (gop > 5) {
			t.Errorf("camera %s (keyframes every %g s, pre_capture 5 s): warnings %q", id, gop, st.Warnings)
		}
	}
	if n := strings.Count(logs.String(), "keyframes come less often than its clips' pre_capture"); n != 1 || !strings.Contains(logs.String(), "camera=g12") {
		t.Errorf("the warning logged %d times, want once, for g12:\n%s", n, logs.String())
	}
}
