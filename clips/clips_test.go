package clips

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources"
)

// base is the capture time of a test stream's first unit.
var base = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// packets reads the access units of an MPEG-TS file as a camera's session would hand them
// over (sources.Packet), at capture times from t0 on their timestamps.
func packets(t testing.TB, file string, session uint64, t0 time.Time) []sources.Packet {
	t.Helper()
	pkts, err := sources.ReadPackets(file, session, t0)
	if err != nil {
		t.Fatal(err)
	}
	return pkts
}

// encode makes a test stream with ffmpeg from the sample video: args go between the input
// and the output (codec, size, GOP).
func encode(t testing.TB, name string, args ...string) string {
	t.Helper()
	ffmpeg := testutil.LookPath(t, "ffmpeg")
	out := filepath.Join(t.TempDir(), name)
	argv := append([]string{"-v", "error", "-y", "-i", testutil.Media(t, "vtest.h264.ts")}, args...)
	argv = append(argv, "-an", "-f", "mpegts", out)
	if b, err := exec.Command(ffmpeg, argv...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", argv, err, b)
	}
	return out
}

// rig is a ring and a recorder writing into a temp dir, with the clips it finished.
type rig struct {
	ring *Ring
	rec  *Recorder
	mu   sync.Mutex
	done []Clip
}

func newRig(t *testing.T, keep time.Duration, s Settings) *rig {
	t.Helper()
	g := &rig{ring: NewRing(keep, 64<<20)}
	g.rec = &Recorder{Camera: "door", Ring: g.ring, Dir: t.TempDir(), Settings: s, Logger: testutil.Logger(t),
		Finished: func(c Clip) {
			g.mu.Lock()
			g.done = append(g.done, c)
			g.mu.Unlock()
		}}
	if err := g.rec.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.rec.Close(ClosedShutdown) })
	return g
}

func (g *rig) clips() []Clip {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Clip(nil), g.done...)
}

// wait waits for n clips.
func (g *rig) wait(t *testing.T, n int) []Clip {
	t.Helper()
	testutil.WaitFor(t, time.Minute, strconv.Itoa(n)+" clips", func() bool { return len(g.clips()) >= n })
	return g.clips()
}

// push feeds the packets whose capture time is before until, from *i on, a second of
// video at a time, each read by the recorder before the next: as a live camera would, but
// faster.
func (g *rig) push(t *testing.T, pkts []sources.Packet, i *int, until time.Time) {
	t.Helper()
	for *i < len(pkts) && pkts[*i].At.Before(until) {
		step := pkts[*i].At.Add(time.Second)
		for ; *i < len(pkts) && pkts[*i].At.Before(until) && pkts[*i].At.Before(step); *i++ {
			g.ring.Push(&pkts[*i])
		}
		g.ring.wakeUp() // where a live camera's next keyframe would: each second read before the next
		next := g.ring.Next()
		testutil.WaitFor(t, time.Minute, "the recorder reads the ring", func() bool { return g.rec.readTo.Load() >= next })
	}
}

// follow plays one object seen from first to last through the rig, the video pushed as it
// would come (its new event half a second after its first sighting, its end half a second
// after its last), and the video on to until.
func (g *rig) follow(t *testing.T, pkts []sources.Packet, i *int, id uint64, first, last, until time.Time) {
	t.Helper()
	g.push(t, pkts, i, first.Add(500*time.Millisecond))
	g.rec.Observe(obj(seen, id, "person", first, first.Add(500*time.Millisecond)))
	g.push(t, pkts, i, last.Add(500*time.Millisecond))
	g.rec.Observe(obj(ended, id, "person", first, last))
	g.push(t, pkts, i, until)
}

// Whether an object observed has ended (obj).
const (
	seen  = false
	ended = true
)

// obj is track id as observed, ended or not.
func obj(end bool, id uint64, label string, first, last time.Time, zones ...string) Object {
	return Object{TrackID: id, Label: label, FirstSeen: first, LastSeen: last, Zones: zones, Ended: end}
}

func at(s float64) time.Time { return base.Add(time.Duration(s * float64(time.Second))) }

// checkClip checks clip c against ffprobe: H.264 at 768x576 from a keyframe, its frames at
// the stream's 10 fps over its duration, and that its stated times hold want (from, to):
// from at least pre_capture before, within a keyframe interval (1 s).
func checkClip(t *testing.T, c Clip, codec string, from, to time.Time) testutil.Video {
	t.Helper()
	p := testutil.ProbeVideo(t, c.Path)
	if p.Codec != codec || p.Width != 768 || p.Height != 576 || !p.FirstKey {
		t.Errorf("%s: %+v, want %s 768x576 from a keyframe", c.Info.Name, p, codec)
	}
	if p.Errors != "" {
		t.Errorf("%s: decoding reports: %s", c.Info.Name, p.Errors)
	}
	if p.Frames != c.Info.Frames || float64(p.Frames) < p.Duration*10-1 || float64(p.Frames) > p.Duration*10+1 {
		t.Errorf("%s: %d frames decoded, %d stated, over %.2f s: want 10 fps", c.Info.Name, p.Frames, c.Info.Frames, p.Duration)
	}
	if d := p.Duration - c.Info.Duration.Seconds(); d > 0.05 || d < -0.05 {
		t.Errorf("%s: ffprobe says %.3f s, the info %.3f s", c.Info.Name, p.Duration, c.Info.Duration.Seconds())
	}
	if c.Info.Start.After(from) || c.Info.Start.Before(from.Add(-time.Second)) {
		t.Errorf("%s: starts at %s, want within the keyframe interval at or before %s", c.Info.Name, c.Info.Start, from)
	}
	if c.Info.End.Before(to) || c.Info.End.After(to.Add(time.Second)) {
		t.Errorf("%s: ends at %s, want %s (within a keyframe interval after)", c.Info.Name, c.Info.End, to)
	}
	if st, err := os.Stat(c.Path); err != nil || st.Size() != c.Info.Bytes {
		t.Errorf("%s: file %v, info says %d bytes", c.Info.Name, err, c.Info.Bytes)
	}
	return p
}

// TestRingKeepsFromKeyframe pushes the sample stream through rings of several bounds: each
// holds at least its time from a keyframe, never more than a keyframe interval beyond, and
// never more than its bytes.
func TestRingKeepsFromKeyframe(t *testing.T) {
	pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
	for _, keep := range []time.Duration{time.Second, 5 * time.Second, 12 * time.Second} {
		r := NewRing(keep, 64<<20)
		for i := range pkts {
			r.Push(&pkts[i])
			if i < 200 || i%50 != 0 {
				continue
			}
			st := r.Stats()
			if st.Span < keep || st.Span > keep+time.Second+100*time.Millisecond {
				t.Fatalf("keep %v, after %d units: the ring spans %v, want %v to %v", keep, i, st.Span, keep, keep+time.Second)
			}
			seq, _, _, ok := r.keyAtOrBefore(time.Time{}.Add(1))
			if !ok || seq != r.first {
				t.Fatalf("keep %v: the ring does not start at a keyframe (first %d, first key %d)", keep, r.first, seq)
			}
		}
		if st := r.Stats(); st.Held > 3*st.Bytes+maxSpare*64<<10 {
			t.Errorf("keep %v: %d bytes of buffers held for %d bytes of units", keep, st.Held, st.Bytes)
		}
	}
	// A byte bound below the span's size: whole groups of pictures go first.
	r := NewRing(30*time.Second, 1<<20)
	for i := range pkts {
		r.Push(&pkts[i])
		if st := r.Stats(); st.Bytes > 1<<20 {
			t.Fatalf("after %d units: %d bytes held, bound 1 MiB", i, st.Bytes)
		}
	}
	if st := r.Stats(); st.Span < 3*time.Second || st.Units == 0 {
		t.Errorf("bounded to 1 MiB: %+v", st)
	}
}

// TestClipOfOneObject: a person seen from 20 s to 26 s makes one clip, from the keyframe at
// or before 15 s to 31 s, that ffprobe reads as the stream's H.264, starting on a keyframe,
// with 10 frames a second; its info names the object, and ends "end".
func TestClipOfOneObject(t *testing.T) {
	pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
	g := newRig(t, 10*time.Second, Settings{PreCapture: 5 * time.Second, PostCapture: 5 * time.Second, MaxLength: time.Minute})
	i := 0
	g.push(t, pkts, &i, at(21))
	g.rec.Observe(obj(seen, 7, "person", at(20), at(20.6)))
	g.push(t, pkts, &i, at(27))
	g.rec.Observe(obj(ended, 7, "person", at(20), at(26)))
	g.push(t, pkts, &i, at(40))
	cs := g.wait(t, 1)
	c := cs[0]
	checkClip(t, c, "h264", at(15), at(31))
	if c.Info.Closed != ClosedEnd || len(c.Info.Objects) != 1 || c.Info.Objects[0].TrackID != 7 ||
		!c.Info.Objects[0].Ended || c.Info.Name != Name("door", c.Info.Start) {
		t.Errorf("clip info %+v, objects %d", c.Info, len(c.Info.Objects))
	}
	if len(c.Info.Notes) != 0 {
		t.Errorf("notes %q, want none", c.Info.Notes)
	}
	if len(g.clips()) != 1 {
		t.Errorf("%d clips, want 1", len(g.clips()))
	}
	// The buffer the recorder read the pre_capture into is counted (the daemon's clip_rings
	// memory), and holds no more than that read needed: about 6 s of the 170 kB/s stream.
	if st := g.rec.Stats(); st.ReadBuf <= 0 || st.ReadBuf > 2<<20 {
		t.Errorf("the recorder's read buffer: %d bytes, want it counted, at most 2 MiB", st.ReadBuf)
	}
}

// TestClipsShareAndSplit: objects whose clips overlap share one; one far later has its
// own; an object longer than max_length makes clips that follow each other at keyframes.
func TestClipsShareAndSplit(t *testing.T) {
	pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
	g := newRig(t, 10*time.Second, Settings{PreCapture: 5 * time.Second, PostCapture: 5 * time.Second, MaxLength: 10 * time.Second})
	i := 0
	g.push(t, pkts, &i, at(20.5))
	g.rec.Observe(obj(seen, 1, "person", at(20), at(20.5)))
	g.push(t, pkts, &i, at(24.5))
	g.rec.Observe(obj(ended, 1, "person", at(20), at(24)))
	g.push(t, pkts, &i, at(27.5)) // within A's post_capture: B joins its clip
	g.rec.Observe(obj(seen, 2, "car", at(27), at(27.5)))
	g.push(t, pkts, &i, at(32.5))
	g.rec.Observe(obj(ended, 2, "car", at(27), at(32)))
	g.push(t, pkts, &i, at(50.5))
	g.rec.Observe(obj(seen, 3, "person", at(50), at(50.5)))
	g.push(t, pkts, &i, at(70.5))
	g.rec.Observe(obj(ended, 3, "person", at(50), at(70)))
	g.push(t, pkts, &i, at(79))
	testutil.WaitFor(t, time.Minute, "track 3's last clip", func() bool {
		cs := g.clips()
		return len(cs) > 0 && cs[len(cs)-1].Info.Closed == ClosedEnd && cs[len(cs)-1].Info.Objects[0].TrackID == 3
	})
	cs := g.clips()
	for _, c := range cs {
		t.Logf("%s %s to %s closed %s objects %v", c.Info.Name, c.Info.Start.Format("05.0"), c.Info.End.Format("05.0"), c.Info.Closed, c.Info.Objects)
	}
	// Tracks 1 and 2 share clips from 15 s to 37 s, each at most 10 s, back to back; track
	// 3 has its own from 45 s to 75 s.
	var parts [][]Clip
	shared := false
	for _, c := range cs {
		three := c.Info.Objects[0].TrackID == 3
		if len(parts) == 0 || three != (parts[len(parts)-1][0].Info.Objects[0].TrackID == 3) {
			parts = append(parts, nil)
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], c)
		shared = shared || len(c.Info.Objects) == 2 && c.Info.Objects[0].TrackID == 1 && c.Info.Objects[1].TrackID == 2
	}
	if !shared {
		t.Errorf("no clip shows tracks 1 and 2 together")
	}
	// A clip lists the objects it shows: none that ended with post_capture before it began.
	for _, c := range cs {
		for _, o := range c.Info.Objects {
			if o.LastSeen.Add(5 * time.Second).Before(c.Info.Start) {
				t.Errorf("%s from %s lists track %d, last seen at %s", c.Info.Name, c.Info.Start, o.TrackID, o.LastSeen)
			}
		}
	}
	if len(parts) != 2 {
		t.Fatalf("%d runs of clips, want 2 (tracks 1 and 2; track 3)", len(parts))
	}
	for k, want := range [][2]time.Time{{at(15), at(37)}, {at(45), at(75)}} {
		run := parts[k]
		if s, e := run[0].Info.Start, run[len(run)-1].Info.End; s.After(want[0]) || s.Before(want[0].Add(-time.Second)) ||
			e.Before(want[1]) || e.After(want[1].Add(time.Second)) {
			t.Errorf("run %d: %s to %s, want %s to %s", k, s, e, want[0], want[1])
		}
		for j, c := range run {
			p := testutil.ProbeVideo(t, c.Path)
			if !p.FirstKey || p.Errors != "" || p.Duration > 10.15 {
				t.Errorf("run %d clip %d: %+v, want from a keyframe, at most 10 s and a frame", k, j, p)
			}
			if j > 0 && c.Info.Start.Sub(run[j-1].Info.End).Abs() > 10*time.Millisecond {
				t.Errorf("run %d clip %d starts at %s, the one before ended at %s", k, j, c.Info.Start, run[j-1].Info.End)
			}
			wantClosed := ClosedMaxLength
			if j == len(run)-1 {
				wantClosed = ClosedEnd
			}
			if c.Info.Closed != wantClosed {
				t.Errorf("run %d clip %d closed %q, want %q", k, j, c.Info.Closed, wantClosed)
			}
		}
	}
}

// TestClipSelection: only the classes and zones asked make clips; a person makes its clip
// from its entry into the zone, not from its first sighting.
func TestClipSelection(t *testing.T) {
	pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
	g := newRig(t, 10*time.Second, Settings{PreCapture: 3 * time.Second, PostCapture: 2 * time.Second, MaxLength: time.Minute,
		Classes: []string{"person"}, Zones: []string{"door"}})
	i := 0
	g.push(t, pkts, &i, at(10.5))
	g.rec.Observe(obj(seen, 1, "car", at(10), at(10.5), "door"))    // not a person
	g.rec.Observe(obj(seen, 2, "person", at(10), at(10.5), "yard")) // not in door
	g.push(t, pkts, &i, at(30.5))
	g.rec.Observe(obj(seen, 2, "person", at(10), at(30), "door")) // enters door
	g.rec.Observe(obj(ended, 1, "car", at(10), at(30.5)))
	g.push(t, pkts, &i, at(36.5))
	g.rec.Observe(obj(ended, 2, "person", at(10), at(36)))
	g.push(t, pkts, &i, at(45))
	cs := g.wait(t, 1)
	checkClip(t, cs[0], "h264", at(27), at(38))
	if len(cs[0].Info.Objects) != 1 || cs[0].Info.Objects[0].TrackID != 2 {
		t.Errorf("objects %+v, want the person alone", cs[0].Info.Objects)
	}
	if n := len(g.clips()); n != 1 {
		t.Errorf("%d clips, want 1", n)
	}
}

// TestClipCodecs: H.265, and H.264 with B-frames (decoding order apart from display order),
// are written as they came and play through.
func TestClipCodecs(t *testing.T) {
	for _, tc := range []struct {
		name, codec string
		args        []string
	}{
		{"h265", "hevc", []string{"-t", "25", "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "keyint=10:min-keyint=10:bframes=0:log-level=error"}},
		{"h264-bframes", "h264", []string{"-t", "25", "-c:v", "libx264", "-preset", "ultrafast", "-bf", "2", "-g", "10", "-x264-params", "b-pyramid=0:scenecut=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pkts := packets(t, encode(t, tc.name+".ts", tc.args...), 1, base)
			g := newRig(t, 10*time.Second, Settings{PreCapture: 2 * time.Second, PostCapture: 2 * time.Second, MaxLength: time.Minute})
			i := 0
			g.follow(t, pkts, &i, 1, at(8), at(15), at(24))
			cs := g.wait(t, 1)
			checkClip(t, cs[0], tc.codec, at(6), at(17))
			if len(cs[0].Info.Notes) != 0 {
				t.Errorf("notes %q", cs[0].Info.Notes)
			}
		})
	}
}

// TestClipStreamChanges: a new resolution mid-event closes the clip (stream_changed) and the
// next starts at the new stream's first keyframe; a session that ends mid-event closes its
// clip there (camera_offline), and the object's clip goes on in the next session.
func TestClipStreamChanges(t *testing.T) {
	small := packets(t, encode(t, "small.ts", "-t", "20", "-vf", "scale=640:480", "-c:v", "libx264", "-preset", "ultrafast", "-g", "10", "-bf", "0"), 1, at(40))
	pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)[:400] // 0 to 40 s
	for i := range small {
		small[i].PTS += 40 * 90000 // the same session's clock goes on
	}
	g := newRig(t, 10*time.Second, Settings{PreCapture: 2 * time.Second, PostCapture: 2 * time.Second, MaxLength: time.Minute})
	all := append(pkts, small...)
	i := 0
	g.follow(t, all, &i, 1, at(30), at(50), at(59))
	cs := g.wait(t, 2)
	if cs[0].Info.Closed != ClosedChanged || cs[0].Info.Width != 768 || cs[1].Info.Width != 640 || cs[1].Info.Height != 480 {
		t.Errorf("clips %+v, %+v: want 768x576 closed stream_changed, then 640x480", cs[0].Info, cs[1].Info)
	}
	checkClip(t, cs[0], "h264", at(28), at(40))
	if p := testutil.ProbeVideo(t, cs[1].Path); p.Width != 640 || p.Height != 480 || !p.FirstKey || p.Errors != "" ||
		cs[1].Info.Start.Sub(at(40)).Abs() > 10*time.Millisecond || cs[1].Info.End.Before(at(52)) {
		t.Errorf("second clip %+v, info %+v: want 640x480 from 40 s to 52 s", p, cs[1].Info)
	}

	// Offline mid-event, then the camera back in a new session.
	g = newRig(t, 10*time.Second, Settings{PreCapture: 2 * time.Second, PostCapture: 2 * time.Second, MaxLength: time.Minute})
	second := packets(t, testutil.Media(t, "vtest.h264.ts"), 2, at(30))
	i = 0
	g.push(t, pkts, &i, at(20.5))
	g.rec.Observe(obj(seen, 1, "person", at(20), at(20.5)))
	g.push(t, pkts, &i, at(25))
	g.rec.StreamEnded()
	cs = g.wait(t, 1)
	if cs[0].Info.Closed != ClosedOffline || cs[0].Info.End.Before(at(24.8)) || cs[0].Info.End.After(at(25.1)) {
		t.Errorf("clip %+v: want closed camera_offline at 25 s", cs[0].Info)
	}
	i = 0
	g.push(t, second, &i, at(35.5))
	g.rec.Observe(obj(ended, 1, "person", at(20), at(35)))
	g.push(t, second, &i, at(40))
	cs = g.wait(t, 2)
	if cs[1].Info.Closed != ClosedEnd || cs[1].Info.Start.Sub(at(30)).Abs() > 10*time.Millisecond || cs[1].Info.End.Before(at(37)) {
		t.Errorf("clip after the outage %+v: want from 30 s (the new session's first keyframe) to 37 s", cs[1].Info)
	}
	checkClip(t, cs[1], "h264", at(30), at(37))
}

// TestClipBadStreams: timestamps that jump mid-clip (the clip goes on, frame after frame,
// and says so), packets lost mid-clip (the frames to the next keyframe are left out, the
// clip plays without errors and says so), and a stream whose keyframes are further apart
// than the ring holds (the clip starts at the first keyframe, late, and says by how much).
func TestClipBadStreams(t *testing.T) {
	t.Run("jump", func(t *testing.T) {
		pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
		for i := range pkts {
			if pkts[i].At.After(at(22.05)) {
				pkts[i].PTS += 3600 * 90000 // the camera's clock jumps an hour; the capture times go on
			}
		}
		g := newRig(t, 10*time.Second, Settings{PreCapture: 2 * time.Second, PostCapture: 2 * time.Second, MaxLength: time.Minute})
		i := 0
		g.follow(t, pkts, &i, 1, at(20), at(25), at(30))
		c := g.wait(t, 1)[0]
		checkClip(t, c, "h264", at(18), at(27))
		if len(c.Info.Notes) != 1 || !strings.Contains(c.Info.Notes[0], "jumped") {
			t.Errorf("notes %q, want one on the jump", c.Info.Notes)
		}
	})
	t.Run("loss", func(t *testing.T) {
		pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
		for i := range pkts {
			if pkts[i].At.Equal(at(22.5)) {
				pkts[i].Lost = true // the frames from 22.5 s to the keyframe at 23 s go
			}
		}
		g := newRig(t, 10*time.Second, Settings{PreCapture: 2 * time.Second, PostCapture: 2 * time.Second, MaxLength: time.Minute})
		i := 0
		g.follow(t, pkts, &i, 1, at(20), at(25), at(30))
		c := g.wait(t, 1)[0]
		p := testutil.ProbeVideo(t, c.Path)
		if !p.FirstKey || p.Errors != "" || p.Frames != c.Info.Frames || c.Info.Frames != 86 {
			t.Errorf("%+v, info %+v: want 86 frames (18 s to 27.1 s less 5) decoded without errors", p, c.Info)
		}
		if len(c.Info.Notes) != 1 || !strings.Contains(c.Info.Notes[0], "5 frames left out") {
			t.Errorf("notes %q, want one on the 5 frames lost", c.Info.Notes)
		}
	})
	t.Run("sparse keyframes", func(t *testing.T) {
		pkts := packets(t, encode(t, "sparse.ts", "-t", "60", "-c:v", "libx264", "-preset", "ultrafast", "-g", "300", "-bf", "0", "-x264-params", "scenecut=0"), 1, base)
		g := &rig{ring: NewRing(5*time.Second, 1<<20)} // a 30 s group of pictures does not fit
		g.rec = &Recorder{Camera: "door", Ring: g.ring, Dir: t.TempDir(), Logger: testutil.Logger(t),
			Settings: Settings{PreCapture: 5 * time.Second, PostCapture: 2 * time.Second, MaxLength: time.Minute},
			Finished: func(c Clip) { g.mu.Lock(); g.done = append(g.done, c); g.mu.Unlock() }}
		if err := g.rec.Start(); err != nil {
			t.Fatal(err)
		}
		defer g.rec.Close(ClosedShutdown)
		i := 0
		g.follow(t, pkts, &i, 1, at(20), at(35), at(45))
		c := g.wait(t, 1)[0]
		p := testutil.ProbeVideo(t, c.Path)
		if !p.FirstKey || p.Errors != "" || c.Info.Start.Sub(at(30)).Abs() > 10*time.Millisecond || c.Info.End.Before(at(37)) {
			t.Errorf("%+v, info %+v: want from the keyframe at 30 s to 37 s", p, c.Info)
		}
		if len(c.Info.Notes) != 1 || !strings.Contains(c.Info.Notes[0], "starts 15.0 s after pre_capture") {
			t.Errorf("notes %q, want one saying it starts 15 s late", c.Info.Notes)
		}
	})
}

// TestClipLateJoin: an object first seen just before a clip reaches max_length, and
// confirmed after it closed, joins the clip that goes on; its pre_capture lies in the clip
// before, which Joined names for it.
func TestClipLateJoin(t *testing.T) {
	pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
	g := newRig(t, 10*time.Second, Settings{PreCapture: 5 * time.Second, PostCapture: 2 * time.Second, MaxLength: 10 * time.Second})
	var joined []string
	g.rec.Joined = func(earlier Info, o Object) {
		g.mu.Lock()
		joined = append(joined, fmt.Sprintf("%s t%d", earlier.Name, o.TrackID))
		g.mu.Unlock()
	}
	i := 0
	g.push(t, pkts, &i, at(20.5))
	g.rec.Observe(obj(seen, 1, "person", at(20), at(20.5))) // clips from 15 s: 15-25, 25-...
	g.push(t, pkts, &i, at(25.5))
	g.rec.Observe(obj(seen, 2, "person", at(24.8), at(25.5))) // first seen in the first clip, confirmed in the second
	g.push(t, pkts, &i, at(30.5))
	g.rec.Observe(obj(ended, 1, "person", at(20), at(30)))
	g.rec.Observe(obj(ended, 2, "person", at(24.8), at(30)))
	g.push(t, pkts, &i, at(34))
	cs := g.wait(t, 2)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(joined) != 1 || joined[0] != cs[0].Info.Name+" t2" {
		t.Errorf("joined %q, want track 2 in %s", joined, cs[0].Info.Name)
	}
	if len(cs[1].Info.Objects) != 2 || cs[1].Info.Closed != ClosedEnd {
		t.Errorf("second clip %+v, want tracks 1 and 2, ended", cs[1].Info)
	}

	// With a Hold, the clip cut at max_length waits and lists it itself.
	h := &rig{ring: NewRing(10*time.Second, 64<<20)}
	h.rec = &Recorder{Camera: "door", Ring: h.ring, Dir: t.TempDir(), Logger: testutil.Logger(t), Hold: time.Hour,
		Settings: Settings{PreCapture: 5 * time.Second, PostCapture: 2 * time.Second, MaxLength: 10 * time.Second},
		Finished: func(c Clip) { h.mu.Lock(); h.done = append(h.done, c); h.mu.Unlock() },
		Joined:   func(Info, Object) { t.Error("Joined called for a clip held") }}
	if err := h.rec.Start(); err != nil {
		t.Fatal(err)
	}
	i = 0
	h.push(t, pkts, &i, at(20.5))
	h.rec.Observe(obj(seen, 1, "person", at(20), at(20.5)))
	h.push(t, pkts, &i, at(25.5))
	h.rec.Observe(obj(seen, 2, "person", at(24.8), at(25.5)))
	h.push(t, pkts, &i, at(30.5))
	h.rec.Observe(obj(ended, 1, "person", at(20), at(30)))
	h.rec.Observe(obj(ended, 2, "person", at(24.8), at(30)))
	h.push(t, pkts, &i, at(34))
	h.rec.Close(ClosedShutdown) // the held clip goes at Close
	hs := h.clips()
	if len(hs) != 2 {
		t.Fatalf("%d clips, want 2", len(hs))
	}
	first := hs[0]
	if first.Info.Start.After(hs[1].Info.Start) {
		first = hs[1]
	}
	if len(first.Info.Objects) != 2 || first.Info.Objects[1].TrackID != 2 {
		t.Errorf("the clip cut at max_length lists %+v, want tracks 1 and 2", first.Info.Objects)
	}
}

// TestRecorderWakes: with no poll and no poke, the recorder reads the ring when a keyframe
// comes, when an object comes or ends, and when a unit reaches the clip's due end: a clip
// opens, and closes at its end, from the pushes alone.
func TestRecorderWakes(t *testing.T) {
	pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
	// The pushes do not wait for the recorder: a ring that keeps the whole test's video lets a
	// recorder woken late (every core busy) still find the clip's start, as a camera's real
	// pace would.
	g := newRig(t, time.Minute, Settings{PreCapture: 2 * time.Second, PostCapture: 2 * time.Second, MaxLength: time.Minute})
	i := 0
	pushTo := func(until time.Time) {
		for ; i < len(pkts) && pkts[i].At.Before(until); i++ {
			g.ring.Push(&pkts[i])
		}
	}
	pushTo(at(20.5))
	g.rec.Observe(obj(seen, 1, "person", at(20), at(20.5)))
	pushTo(at(25.5))
	g.rec.Observe(obj(ended, 1, "person", at(20), at(25)))
	pushTo(at(30))
	c := g.wait(t, 1)[0]
	checkClip(t, c, "h264", at(18), at(27))
	if c.Info.Closed != ClosedEnd {
		t.Errorf("closed %v, want end", c.Info.Closed)
	}
}

// TestClipPreRoll: a clip says the pre-roll it got before its first object (Info.PreRoll) and
// why it is shorter than pre_capture (Info.Short). Streams whose keyframes come every 1, 4
// and 12 s against a pre_capture of 5 s: an object seen after the ring holds its keep gets
// 5 s or more, less than a keyframe interval more; an object in the stream's first seconds
// gets what there is from the stream's first keyframe (stream_start), never less; a ring
// whose byte bound holds less than pre_capture gives less (ring_bytes); a clip going on from
// another has no pre-roll of its own (Continues).
func TestClipPreRoll(t *testing.T) {
	const pre = 5 * time.Second
	set := Settings{PreCapture: pre, PostCapture: time.Second, MaxLength: time.Minute}
	for _, gop := range []int{1, 4, 12} {
		t.Run(fmt.Sprintf("keyframes every %d s", gop), func(t *testing.T) {
			// The sample is 10 fps: -g in frames.
			stream := encode(t, fmt.Sprintf("g%d.ts", gop), "-c:v", "libx264", "-preset", "ultrafast", "-g", strconv.Itoa(10*gop),
				"-keyint_min", strconv.Itoa(10*gop), "-sc_threshold", "0", "-bf", "0")
			pkts := packets(t, stream, 1, base)
			g := newRig(t, pre+3*time.Second, set)
			i := 0
			// In the stream's first second: from the first keyframe, the stream's start.
			g.follow(t, pkts, &i, 1, at(0.8), at(1.5), at(6))
			// Well after the start: pre_capture or more, from the keyframe at or before.
			g.follow(t, pkts, &i, 2, at(25.3), at(26), at(40))
			cs := g.wait(t, 2)
			first, later := cs[0].Info, cs[1].Info
			if first.PreCapture != pre || first.Short != ShortStreamStart || first.Start != base ||
				first.PreRoll != 800*time.Millisecond || len(first.Notes) != 1 || !strings.Contains(first.Notes[0], "(stream_start)") {
				t.Errorf("the clip of an object first seen 0.8 s into the stream: start %s, pre-roll %v (asked %v), short %q, notes %q; want the stream's start, 0.8 s, stream_start",
					first.Start.Sub(base), first.PreRoll, first.PreCapture, first.Short, first.Notes)
			}
			if later.Short != "" || later.PreRoll < pre || later.PreRoll >= pre+time.Duration(gop)*time.Second || later.Continues != "" {
				t.Errorf("the clip of an object first seen 25.3 s in: pre-roll %v, short %q; want %v to %v, none short",
					later.PreRoll, later.Short, pre, pre+time.Duration(gop)*time.Second)
			}
			if off := later.Start.Sub(base); off%time.Duration(gop*int(time.Second)) != 0 {
				t.Errorf("the later clip starts %v into the stream, not at a keyframe (every %d s)", off, gop)
			}
		})
	}
	t.Run("ring bytes", func(t *testing.T) {
		pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base) // a keyframe a second, about 170 kB/s
		g := newRig(t, pre+3*time.Second, set)
		g.ring.SetLimits(pre+3*time.Second, 400<<10) // about 2 s of it
		i := 0
		g.follow(t, pkts, &i, 1, at(20.2), at(21), at(25))
		c := g.wait(t, 1)[0].Info
		if c.Short != ShortRingBytes || c.PreRoll >= pre || c.PreRoll <= 0 {
			t.Errorf("a ring of 400 KiB: pre-roll %v, short %q; want less than %v, ring_bytes", c.PreRoll, c.Short, pre)
		}
	})
	t.Run("continued", func(t *testing.T) {
		pkts := packets(t, testutil.Media(t, "vtest.h264.ts"), 1, base)
		g := newRig(t, pre+3*time.Second, Settings{PreCapture: pre, PostCapture: time.Second, MaxLength: 10 * time.Second})
		i := 0
		g.follow(t, pkts, &i, 1, at(10.2), at(24), at(30))
		cs := g.wait(t, 2)
		if cs[0].Info.Continues != "" || cs[0].Info.PreRoll < pre || cs[1].Info.Continues != cs[0].Info.Name || cs[1].Info.PreRoll != 0 || cs[1].Info.Short != "" {
			t.Errorf("a clip cut at max_length and the next: %+v / %+v", cs[0].Info, cs[1].Info)
		}
	})
}
