package sources

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/samplecam"
)

func TestIsNonRef(t *testing.T) {
	h264 := func(refIdc, typ byte) []byte { return []byte{refIdc<<5 | typ, 0x88} }
	h265 := func(typ, tid byte) []byte { return []byte{typ << 1, tid + 1} }
	cases := []struct {
		name  string
		codec string
		aus   [][][]byte // fed in order; the last one is judged
		want  bool
	}{
		{"H.264 non-reference B/P slice", codecH264, [][][]byte{{h264(0, 1)}}, true},
		{"H.264 reference P slice", codecH264, [][][]byte{{h264(2, 1)}}, false},
		{"H.264 IDR", codecH264, [][][]byte{{h264(3, 5)}}, false},
		{"H.264 SEI then non-reference slice", codecH264, [][][]byte{{h264(0, 6), h264(0, 1)}}, true},
		{"H.264 slices of both kinds", codecH264, [][][]byte{{h264(0, 1), h264(1, 1)}}, false},
		{"H.264 no slice", codecH264, [][][]byte{{h264(0, 6)}}, false},
		{"H.265 TRAIL_N", codecH265, [][][]byte{{h265(0, 0)}}, true},
		{"H.265 TRAIL_R", codecH265, [][][]byte{{h265(1, 0)}}, false},
		{"H.265 RASL_N", codecH265, [][][]byte{{h265(8, 0)}}, true},
		{"H.265 IDR", codecH265, [][][]byte{{h265(19, 0)}}, false},
		{"H.265 parameter sets only", codecH265, [][][]byte{{h265(32, 0), h265(33, 0)}}, false},
		// With temporal sub-layers, a higher one may reference a TRAIL_N of a lower one.
		{"H.265 TRAIL_N once a sub-layer 1 was seen", codecH265, [][][]byte{{h265(1, 1)}, {h265(0, 0)}}, false},
	}
	for _, tc := range cases {
		track := &videoTrack{codec: tc.codec}
		var got bool
		for _, au := range tc.aus {
			got = track.isNonRef(au)
		}
		if got != tc.want {
			t.Errorf("%s: isNonRef = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Before the camera's first RTCP sender report, capture times come from RTP timestamps:
// frames sent out of display order (a P-frame as soon as it is captured, then the B-frames
// shown before it) get their display times, in display order; the packet with the least
// delay sets the origin, so no time is after its packet's arrival; a jump far from the
// receive time starts again there.
func TestRTPClock(t *testing.T) {
	c := rtpClock{rate: 90000}
	t0 := time.Unix(1000, 0)
	base := uint32(4294960000) // the timestamps wrap around during the test
	const frame = 9000         // 100 ms at 90 kHz
	ms := time.Millisecond
	for i, p := range []struct {
		ts         uint32
		recv, want time.Duration // after t0
	}{
		{0, 0, 0},                         // I0, 100 ms late (the connection's start)
		{3 * frame, 300 * ms, 300 * ms},   // P3
		{1 * frame, 301 * ms, 100 * ms},   // B1
		{2 * frame, 302 * ms, 200 * ms},   // B2
		{6 * frame, 500 * ms, 500 * ms},   // P6, 100 ms sooner than the origin says: the new origin
		{4 * frame, 501 * ms, 300 * ms},   // B4
		{5 * frame, 502 * ms, 400 * ms},   // B5
		{7 * frame, 5000 * ms, 5000 * ms}, // after a stall of 4.5 s: the receive time
		{8 * frame, 5100 * ms, 5100 * ms}, // and on from there
		{9 * frame, 5250 * ms, 5200 * ms}, // 50 ms of network delay
	} {
		if got := c.at(base+p.ts, t0.Add(p.recv)); got.Sub(t0) != p.want {
			t.Errorf("packet %d: %v, want %v", i, got.Sub(t0), p.want)
		}
	}
}

// skipRun is what a camera reading a stream with B-frames delivered, while a consumer took
// frames at a given rate as the pipeline does (NeedFrom).
type skipRun struct {
	mu       sync.Mutex
	frames   []skipFrame
	taken    int
	nextDue  time.Time
	interval time.Duration
	cam      *Camera
}

type skipFrame struct {
	seq      uint64
	captured time.Time
	sum      [32]byte
}

// onFrame records the frame and, like pipeline's slicer, takes it when the camera is due,
// then schedules the next turn (keeping to the grid, never bursting) and tells the camera
// when it wants a frame again.
func (r *skipRun) onFrame(f *Frame) {
	defer f.Release()
	var sum [32]byte // zero, no frame of the clip, if WriteRGB fails
	lb := f.Letterbox
	if pix := make([]byte, lb.DstW*lb.DstH*3); f.WriteRGB(pix) == nil {
		sum = sha256.Sum256(pix)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, skipFrame{f.Seq, f.Captured, sum})
	slack := r.interval / 4
	now := time.Now()
	if r.interval == 0 || now.Before(r.nextDue.Add(-slack)) {
		return
	}
	r.taken++
	next := r.nextDue.Add(r.interval)
	if next.Before(now) {
		next = now.Add(r.interval)
	}
	r.nextDue = next
	r.cam.NeedFrom(next.Add(-slack))
}

func (r *skipRun) takenFrames() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.taken
}

// runSkip plays clip (10 fps) from a sample camera to a camera whose consumer takes
// frames every interval (0: takes none and never calls NeedFrom) until the camera has
// decoded 60 frames and the consumer taken 20.
func runSkip(t *testing.T, clip string, interval time.Duration) (*skipRun, Status) {
	t.Helper()
	var logs testutil.LogBuffer
	srv := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": clip}, Logger: logs.Logger()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	r := &skipRun{interval: interval}
	r.cam = &Camera{ID: "cam", URL: srv.URL("cam"), InputW: 320, InputH: 320, OnFrame: r.onFrame, Logger: logs.Logger()}
	r.cam.AnalysedEvery(interval)
	r.cam.Start()
	defer r.cam.Close()
	// 6 s of the stream: the camera's estimate of its frame interval takes 32 frames.
	testutil.WaitFor(t, 2*time.Minute, "60 frames decoded", func() bool { return r.cam.Status().Frames >= 60 })
	if interval > 0 {
		testutil.WaitFor(t, 2*time.Minute, "20 frames taken", func() bool { return r.takenFrames() >= 20 })
	}
	st := r.cam.Status()
	r.cam.Close()
	if t.Failed() {
		t.Log(logs.String())
	}
	return r, st
}

// A camera analysed at 5 fps from a 10 fps stream with B-frames leaves non-reference frames
// undecoded, counted apart from drops; every frame it delivers is exactly a frame of a full
// decode of the clip (nothing concealed or corrupt), in display order, with capture times
// that follow the clip's timestamps. At the stream's full rate, and with no consumer rate,
// nothing is skipped.
func TestSkipNonRefFrames(t *testing.T) {
	const fps = 10
	clip := encodeBClip(t, "b.ts", "libx264", 320, 240, fps, 2)

	// The reference: every frame of the clip, decoded and letterboxed as the camera does,
	// by display rank.
	aus := clipAUs(t, clip, codecH264)
	nonRef := 0
	for _, au := range aus {
		if au.nonRef {
			nonRef++
		}
	}
	if nonRef == 0 {
		t.Fatal("the clip has no non-reference frames: was it encoded with B-frames?")
	}
	dec, err := newDecoder(codecH264, DecoderCPU)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.close()
	type refFrame struct {
		pts int64
		sum [32]byte
	}
	var ref []refFrame
	pix := make([]byte, 320*320*3)
	var span int64
	for _, au := range aus {
		span = max(span, au.at.UnixNano()+1)
	}
	// Twice over, as the sample camera loops: the second pass's keyframe makes the decoder
	// let go of the first pass's last frames.
	for pass := range int64(2) {
		for _, au := range aus {
			if err := dec.decode(au.data, pass*span+au.at.UnixNano(), func(w, h int, pts int64) {
				if pts >= span {
					return
				}
				fillPad(pix)
				if err := scaleRGB(dec, pix, geom.NewLetterbox(w, h, 320, 320)); err != nil {
					t.Fatal(err)
				}
				ref = append(ref, refFrame{pts, sha256.Sum256(pix)})
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(ref) != len(aus) {
		t.Fatalf("reference decode: %d frames from %d access units", len(ref), len(aus))
	}
	sort.Slice(ref, func(i, j int) bool { return ref[i].pts < ref[j].pts })
	rank := map[[32]byte]int{}
	for i, f := range ref {
		rank[f.sum] = i
	}
	t.Logf("clip: %d access units, %d non-reference; reference decode %d frames", len(aus), nonRef, len(ref))

	t.Run("5 fps", func(t *testing.T) {
		r, st := runSkip(t, clip, 200*time.Millisecond)
		t.Logf("status: %+v", st)
		if st.SkippedNonRef == 0 {
			t.Fatalf("no non-reference frame skipped: %+v", st)
		}
		if st.Resyncs != 0 {
			t.Errorf("%d resyncs: skipping broke decoding", st.Resyncs)
		}
		// Every frame delivered is a frame of the clip, and they come in display order with
		// capture times as far apart as the clip's timestamps (a loop restarts the ranks).
		// Before the camera's first RTCP sender report, capture times are placed from the
		// packet that came with the least delay; a machine so busy that the test stalls for
		// a second makes the clock start again: a pair or two of frames may then be off,
		// where frames without their own times through the decoder are off at every B-frame.
		frame := time.Second / fps
		var off []string
		for i, f := range r.frames {
			k, ok := rank[f.sum]
			if !ok {
				t.Fatalf("frame %d (seq %d) is no frame of the clip: corrupt", i, f.seq)
			}
			if i == 0 {
				continue
			}
			p := r.frames[i-1]
			if f.seq <= p.seq {
				t.Fatalf("frame %d: seq %d after seq %d", i, f.seq, p.seq)
			}
			if !f.captured.After(p.captured) {
				off = append(off, fmt.Sprintf("frame %d (rank %d) captured %v, not after frame %d (rank %d)", i, k, f.captured.Sub(p.captured), i-1, rank[p.sum]))
				continue
			}
			if pk := rank[p.sum]; k > pk {
				got, want := f.captured.Sub(p.captured), time.Duration(k-pk)*frame
				if d := got - want; d > frame/2 || d < -frame/2 {
					off = append(off, fmt.Sprintf("frames of ranks %d and %d: captured %v apart, the clip says %v", pk, k, got, want))
				}
			}
		}
		t.Logf("%d frames delivered, %d pairs off", len(r.frames), len(off))
		if len(off) > 2 {
			t.Errorf("capture times off in %d pairs of %d frames:\n%s", len(off), len(r.frames), strings.Join(off, "\n"))
		}
	})

	t.Run("full rate", func(t *testing.T) {
		_, st := runSkip(t, clip, time.Second/fps)
		if st.SkippedNonRef != 0 {
			t.Fatalf("analysed at the stream's rate, %d frames skipped", st.SkippedNonRef)
		}
	})

	t.Run("no consumer rate", func(t *testing.T) {
		_, st := runSkip(t, clip, 0)
		if st.SkippedNonRef != 0 {
			t.Fatalf("without NeedFrom, %d frames skipped", st.SkippedNonRef)
		}
	})
}
