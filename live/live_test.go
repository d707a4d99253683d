package live

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources"
)

// packets reads the sample's access units as a session's packets.
func packets(t *testing.T, session uint64) []sources.Packet {
	t.Helper()
	return packetsOf(t, testutil.Media(t, "vtest.h264.ts"), session)
}

// packetsOf reads an MPEG-TS file's access units as a session's packets.
func packetsOf(t *testing.T, file string, session uint64) []sources.Packet {
	t.Helper()
	pkts, err := sources.ReadPackets(file, session, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	return pkts
}

// drain returns what v has queued, concatenated, and the segments' kinds.
func drain(v *Viewer) (data []byte, segs []Segment) {
	for {
		select {
		case s := <-v.C:
			data = append(data, s.Data...)
			segs = append(segs, s)
		default:
			return data, segs
		}
	}
}

// A viewer that watches from the start gets an init segment, then a fragment a unit from the
// first keyframe: together a fragmented MP4 that ffprobe reads as the sample's 768x576 H.264,
// every frame there.
func TestMuxerPlays(t *testing.T) {
	pkts := packets(t, 1)[:100]
	m := NewMuxer()
	v := m.Watch(len(pkts) + 1)
	for i := range pkts {
		m.Push(&pkts[i])
	}
	data, segs := drain(v)
	if len(segs) == 0 || !segs[0].Init || !segs[1].Key {
		t.Fatalf("%d segments, want the init segment, then a keyframe's fragment", len(segs))
	}
	if want := `video/mp4; codecs="avc1.64001f"`; segs[0].MIME != want { // High, level 3.1
		t.Errorf("the init segment's type %q, want %q", segs[0].MIME, want)
	}
	first := 0
	for !pkts[first].Key {
		first++
	}
	if !segs[0].Start.Equal(pkts[first].At) { // no B-frames: media time 0 is the keyframe's capture
		t.Errorf("the init segment's start %v, want the first keyframe's capture time %v", segs[0].Start, pkts[first].At)
	}
	if n := len(segs) - 1; n != len(pkts)-first {
		t.Errorf("%d fragments, want one a unit from the first keyframe: %d", n, len(pkts)-first)
	}
	file := filepath.Join(t.TempDir(), "live.mp4")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	p := testutil.ProbeVideo(t, file)
	if p.Codec != "h264" || p.Width != 768 || p.Height != 576 || !p.FirstKey || p.Frames != len(pkts)-first || p.Errors != "" {
		t.Errorf("ffprobe: %+v, want H.264 768x576 from a keyframe, %d frames, no errors", p, len(pkts)-first)
	}
	if st := m.Stats(); st.Viewers != 1 || st.Sent != uint64(len(data)) || st.Skipped != 0 {
		t.Errorf("stats %+v, want 1 viewer, %d bytes, none skipped", st, len(data))
	}
	v.Close()
	if st := m.Stats(); st.Viewers != 0 {
		t.Errorf("%d viewers after Close", st.Viewers)
	}
}

// A viewer who comes in the middle starts at the last keyframe, after the init segment; a
// slow one (its queue full) misses fragments until a keyframe, never holding up the others,
// and gets no init again while the stream's parameters hold.
func TestMuxerLateAndSlowViewers(t *testing.T) {
	pkts := packets(t, 1)
	m := NewMuxer()
	slow := m.Watch(2)
	var keys []int
	for i := range pkts {
		if pkts[i].Key {
			keys = append(keys, i)
		}
	}
	if len(keys) < 3 {
		t.Fatalf("%d keyframes in the sample", len(keys))
	}
	mid := keys[1] + 3
	for i := range pkts[:mid] {
		m.Push(&pkts[i])
	}
	late := m.Watch(1000)
	_, segs := drain(late)
	if len(segs) != 1+mid-keys[1] || !segs[0].Init || !segs[1].Key {
		t.Fatalf("late viewer: %d segments, want the init and the %d fragments from the last keyframe", len(segs), mid-keys[1])
	}
	// The slow viewer took 2 and has missed the rest; emptied, it resumes at the next keyframe.
	if _, segs := drain(slow); len(segs) != 2 {
		t.Fatalf("slow viewer: %d segments queued, want 2", len(segs))
	}
	for i := mid; i < keys[2]+1; i++ {
		m.Push(&pkts[i])
	}
	_, segs = drain(slow)
	if len(segs) != 1 || !segs[0].Key {
		t.Errorf("slow viewer after draining: %d segments, want the keyframe's fragment alone (the init it has still holds)", len(segs))
	}
	if m.Stats().Skipped == 0 {
		t.Error("no fragment counted as skipped")
	}
	if _, segs := drain(late); len(segs) != keys[2]+1-mid {
		t.Errorf("late viewer: %d fragments, want every one (%d)", len(segs), keys[2]+1-mid)
	}
}

// A new session (a reconnect) starts a new init segment; a unit before the first keyframe
// is not sent.
func TestMuxerNewSession(t *testing.T) {
	one, two := packets(t, 1)[:40], packets(t, 2)[:40]
	m := NewMuxer()
	v := m.Watch(1000)
	for i := range one {
		m.Push(&one[i])
	}
	for i := range two {
		m.Push(&two[i])
	}
	_, segs := drain(v)
	inits := 0
	for i, s := range segs {
		if s.Init {
			inits++
			if i+1 >= len(segs) || !segs[i+1].Key {
				t.Errorf("segment %d: an init not followed by a keyframe's fragment", i)
			}
		}
	}
	if inits != 2 {
		t.Errorf("%d init segments over two sessions, want 2", inits)
	}
	if !bytes.Equal(segs[0].Data[4:8], []byte("ftyp")) {
		t.Errorf("the init segment starts with %q, want ftyp", segs[0].Data[4:8])
	}
}

// An H.265 stream's init segment names its codec as browsers want it (hvc1, profile,
// compatibility, tier and level, constraint bytes), read from the SPS that x265 wrote.
func TestMuxerH265Type(t *testing.T) {
	ffmpeg := testutil.LookPath(t, "ffmpeg")
	file := filepath.Join(t.TempDir(), "h265.ts")
	out, err := exec.Command(ffmpeg, "-v", "error", "-i", testutil.Media(t, "vtest.avi"), "-t", "2", "-an", "-c:v", "libx265",
		"-preset", "ultrafast", "-x265-params", "keyint=10:bframes=0:level-idc=31:log-level=error", "-pix_fmt", "yuv420p",
		"-f", "mpegts", file).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	m := NewMuxer()
	v := m.Watch(64)
	for _, p := range packetsOf(t, file, 1)[:20] {
		m.Push(&p)
	}
	_, segs := drain(v)
	if len(segs) < 2 || !segs[0].Init {
		t.Fatalf("%d segments, want an init segment and fragments", len(segs))
	}
	// Main profile (1), compatible with Main and Main 10 (flags 1 and 2: 0x6 reversed), Main
	// tier, level 3.1 (93); progressive and frame-only (0x90: x265 leaves non-packed unset, as
	// ffmpeg's trace_headers shows).
	if want := `video/mp4; codecs="hvc1.1.6.L93.90"`; segs[0].MIME != want {
		t.Errorf("the init segment's type %q, want %q", segs[0].MIME, want)
	}
}

// BenchmarkMuxerPush is what a viewed camera's session spends a unit on its live view: the
// sample's access units muxed into fragments, to 0, 1 and 16 viewers who read as fast as they
// come. No decode: the units are the camera's packets. B/s is the video's bytes.
func BenchmarkMuxerPush(b *testing.B) {
	pkts, err := sources.ReadPackets(testutil.Media(b, "vtest.h264.ts"), 1, time.Unix(0, 0))
	if err != nil {
		b.Fatal(err)
	}
	var size int
	for _, p := range pkts {
		for _, n := range p.NALUs {
			size += len(n)
		}
	}
	for _, viewers := range []int{0, 1, 16} {
		b.Run(fmt.Sprintf("viewers=%d", viewers), func(b *testing.B) {
			m := NewMuxer()
			var wg sync.WaitGroup
			var vs []*Viewer
			for range viewers {
				v := m.Watch(64)
				vs = append(vs, v)
				wg.Go(func() {
					for range v.C {
					}
				})
			}
			b.SetBytes(int64(size / len(pkts)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m.Push(&pkts[i%len(pkts)])
				i++
			}
			b.StopTimer()
			if viewers > 0 && m.Stats().Sent == 0 {
				b.Fatal("nothing sent to the viewers")
			}
			for _, v := range vs {
				v.Close()
			}
			wg.Wait()
		})
	}
}
