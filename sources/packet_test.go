package sources

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/samplecam"
)

// TestRTPUnwrap: timestamps go on past the 32-bit wrap, and one a little out of order goes
// back a little.
func TestRTPUnwrap(t *testing.T) {
	var u rtpUnwrap
	for _, c := range []struct {
		ts   uint32
		want int64
	}{{4294967000, 0}, {4294967200, 200}, {100, 396}, {50, 346}, {9100, 9396}} {
		if got := u.unwrap(c.ts); got != c.want {
			t.Errorf("unwrap(%d) = %d, want %d", c.ts, got, c.want)
		}
	}
}

// TestCameraPackets: a camera's OnPacket gets the sample stream's access units as sent,
// before decoding: H.264 with the SDP's parameter sets, a keyframe a second, timestamps
// from 0 at the 90 kHz clock that follow the capture times, one session number; a second
// session (the server restarted) numbers itself 2 and starts its timeline again.
func TestCameraPackets(t *testing.T) {
	var logs testutil.LogBuffer
	addr := testutil.FreeAddr(t)
	srv := &samplecam.Server{Listen: addr, Streams: map[string]string{"v": testutil.Media(t, sampleFile)}, Logger: logs.Logger()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	type seen struct {
		session uint64
		key     bool
		pts     int64
		at      time.Time
		params  int
		codec   string
		nalus   int
		clock   int
	}
	var (
		mu  sync.Mutex
		got []seen
	)
	cam := &Camera{ID: "cam", URL: srv.URL("v"), Logger: logs.Logger(), retryMin: 100 * time.Millisecond, retryMax: 200 * time.Millisecond,
		OnPacket: func(p *Packet) {
			mu.Lock()
			got = append(got, seen{p.Session, p.Key, p.PTS, p.At, len(p.Params), p.Codec, len(p.NALUs), p.ClockRate})
			mu.Unlock()
		}}
	cam.Start()
	defer cam.Close()
	count := func(session uint64) (n, keys int) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range got {
			if s.session == session {
				n++
				if s.key {
					keys++
				}
			}
		}
		return n, keys
	}
	testutil.WaitFor(t, time.Minute, "3 s of the first session", func() bool { n, _ := count(1); return n >= 30 })
	srv.Close()
	srv = &samplecam.Server{Listen: addr, Streams: map[string]string{"v": testutil.Media(t, sampleFile)}, Logger: logs.Logger()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	testutil.WaitFor(t, time.Minute, "a second session", func() bool { n, _ := count(2); return n >= 20 })

	n1, keys1 := count(1)
	if keys1 < n1/12 || keys1 > n1/8+1 {
		t.Errorf("session 1: %d keyframes in %d units, want one in 10", keys1, n1)
	}
	mu.Lock()
	defer mu.Unlock()
	var first [3]*seen
	for i := range got {
		s := &got[i]
		if s.codec != CodecH264 || s.clock != 90000 || s.params != 2 || s.nalus == 0 {
			t.Fatalf("packet %d: %+v, want H.264 at 90 kHz with SPS and PPS from the SDP", i, *s)
		}
		if s.session < 1 || s.session > 2 {
			t.Fatalf("packet %d: session %d", i, s.session)
		}
		if first[s.session] == nil {
			first[s.session] = s
			if s.pts != 0 {
				t.Errorf("session %d starts at PTS %d, want 0", s.session, s.pts)
			}
			continue
		}
		// The stream's clock and the capture times agree to a frame.
		f := first[s.session]
		if d := time.Duration(s.pts-f.pts)*time.Second/90000 - s.at.Sub(f.at); d > 100*time.Millisecond || d < -100*time.Millisecond {
			t.Errorf("packet %d of session %d: PTS says %v after the first, the capture time %v", i, s.session,
				time.Duration(s.pts-f.pts)*time.Second/90000, s.at.Sub(f.at))
		}
	}
}

// TestFileCameraPackets: a camera of kind file hands its MPEG-TS or MP4 file's access units
// to OnPacket as it plays them: each loop a session of its own, from PTS 0, a keyframe first,
// each unit at the capture time of the frame it is (no B-frames here).
func TestFileCameraPackets(t *testing.T) {
	for _, name := range []string{"file.ts", "file.mp4"} {
		t.Run(name, func(t *testing.T) { fileCameraPackets(t, name) })
	}
}

func fileCameraPackets(t *testing.T, name string) {
	var logs testutil.LogBuffer
	clip := encodeClip(t, name, "-c:v", "libx264", "-preset", "ultrafast", "-g", "10")
	type seen struct {
		session uint64
		key     bool
		pts     int64
		at      time.Time
		params  int
	}
	var (
		mu     sync.Mutex
		pkts   []seen
		frames = map[time.Time]bool{}
	)
	cam := &Camera{ID: "file", Kind: KindFile, File: clip, InputW: 320, InputH: 320, Logger: logs.Logger(),
		OnPacket: func(p *Packet) {
			mu.Lock()
			pkts = append(pkts, seen{p.Session, p.Key, p.PTS, p.At, len(p.Params)})
			mu.Unlock()
		},
		OnFrame: func(f *Frame) {
			mu.Lock()
			frames[f.Captured] = true
			mu.Unlock()
			f.Release()
		}}
	cam.Start()
	defer cam.Close()
	testutil.WaitFor(t, 2*time.Minute, "a third loop of the file", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(pkts) > 0 && pkts[len(pkts)-1].session >= 3
	})
	cam.Close()
	mu.Lock()
	defer mu.Unlock()
	per := map[uint64]int{}
	for i, p := range pkts {
		if i == 0 || p.session != pkts[i-1].session {
			if !p.key || p.pts != 0 || (i > 0 && p.session != pkts[i-1].session+1) {
				t.Fatalf("unit %d starts session %d: %+v, want a keyframe at PTS 0, the session after the last", i, p.session, p)
			}
		}
		per[p.session]++
		// An MP4 holds its SPS and PPS apart from the stream, an MPEG-TS in it.
		if want := map[bool]int{true: 2, false: 0}[strings.HasSuffix(name, ".mp4")]; p.params != want {
			t.Fatalf("unit %d: %d parameter sets given apart, want %d", i, p.params, want)
		}
		if !frames[p.at] {
			t.Errorf("unit %d (session %d, PTS %d) at %s: no frame was played then", i, p.session, p.pts, p.at)
		}
	}
	for s := uint64(1); s < pkts[len(pkts)-1].session; s++ { // whole loops: the 3 s file at 10 fps
		if per[s] != 30 {
			t.Errorf("session %d: %d units, want the file's 30", s, per[s])
		}
	}
}
