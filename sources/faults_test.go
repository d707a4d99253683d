package sources

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/samplecam"
)

// statusRecorder collects a camera's status changes.
type statusRecorder struct{ ch chan StatusChange }

func newStatusRecorder() *statusRecorder { return &statusRecorder{ch: make(chan StatusChange, 64)} }

func (r *statusRecorder) record(c StatusChange) {
	select {
	case r.ch <- c:
	default:
	}
}

// next waits for the next change into state.
func (r *statusRecorder) next(t *testing.T, state State, within time.Duration, logs *testutil.LogBuffer) StatusChange {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case c := <-r.ch:
			if c.State == state {
				return c
			}
		case <-deadline:
			t.Fatalf("no change to %q within %v\nlogs:\n%s", state, within, logs.String())
		}
	}
}

func startSample(t *testing.T, listen string, logs *testutil.LogBuffer, opts ...func(*samplecam.Server)) *samplecam.Server {
	t.Helper()
	srv := &samplecam.Server{Listen: listen, Streams: map[string]string{"cam": testutil.Media(t, sampleFile)}, Logger: logs.Logger()}
	for _, o := range opts {
		o(srv)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// testCamera returns a started camera whose frames are released at once and whose status
// changes are recorded; retries are fast so tests are quick.
func testCamera(t *testing.T, url string, logs *testutil.LogBuffer, opts ...func(*Camera)) (*Camera, *statusRecorder) {
	t.Helper()
	rec := newStatusRecorder()
	c := &Camera{ID: "cam", URL: url, OnStatus: rec.record, Logger: logs.Logger(),
		retryMin: 50 * time.Millisecond, retryMax: 400 * time.Millisecond}
	for _, o := range opts {
		o(c)
	}
	c.Start()
	t.Cleanup(c.Close)
	return c, rec
}

// The RTSP server goes away and comes back on the same address: the camera goes offline
// with the reason, reconnects within the backoff cap and reports the gap in coverage.
func TestCameraSurvivesServerRestart(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs)
	addr := strings.TrimPrefix(strings.TrimSuffix(srv.URL("cam"), "/cam"), "rtsp://")
	cam, rec := testCamera(t, srv.URL("cam"), &logs)

	first := rec.next(t, StateOnline, time.Minute, &logs)
	if first.Previous != StateConnecting || first.Gap != 0 {
		t.Fatalf("first online: %+v, want from connecting with no gap", first)
	}
	srv.Close()
	off := rec.next(t, StateOffline, time.Minute, &logs)
	if off.Reason == "" || off.Previous != StateOnline {
		t.Fatalf("offline: %+v, want a reason", off)
	}
	time.Sleep(300 * time.Millisecond) // an outage long enough to measure
	startSample(t, addr, &logs)
	back := rec.next(t, StateOnline, time.Minute, &logs)
	// The gap runs from the last frame, decoded before the camera went offline (its session
	// ends once its decode goroutine has; access units queued before the server closed may
	// still be decoded after srv.Close returns).
	if back.Previous != StateOffline || back.Gap < back.At.Sub(off.At) || back.Gap < 300*time.Millisecond {
		t.Fatalf("back online: %+v, want from offline with a gap of at least the time offline (%v)", back, back.At.Sub(off.At))
	}
	if st := cam.Status(); st.Reconnects == 0 || st.State != StateOnline {
		t.Fatalf("status %+v, want online after reconnects", st)
	}
}

// A camera that keeps its session open but sends nothing is closed by the stall watchdog
// and reconnected; it comes back when the stream resumes.
func TestCameraStallWatchdog(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs)
	_, rec := testCamera(t, srv.URL("cam"), &logs, func(c *Camera) { c.StallTimeout = 700 * time.Millisecond })
	rec.next(t, StateOnline, time.Minute, &logs)

	srv.Freeze("cam", true)
	off := rec.next(t, StateOffline, time.Minute, &logs)
	if !strings.Contains(off.Reason, "stalled: no frame for") {
		t.Fatalf("offline reason %q, want the stall", off.Reason)
	}
	srv.Freeze("cam", false)
	back := rec.next(t, StateOnline, time.Minute, &logs)
	if back.Gap < 700*time.Millisecond {
		t.Fatalf("back online with gap %v, want at least the stall timeout", back.Gap)
	}
}

// Wrong credentials: status unauthorized, a slow retry (not a tight loop), and the password
// nowhere in status or logs. The right ones, given apart from the URL, work.
func TestCameraCredentials(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs, func(s *samplecam.Server) { s.Username, s.Password = "viewer", "s3cret" })
	bad := strings.Replace(srv.URL("cam"), "rtsp://", "rtsp://viewer:hunter2@", 1)
	cam, rec := testCamera(t, bad, &logs, func(c *Camera) { c.retryMax = time.Hour })

	ch := rec.next(t, StateUnauthorized, time.Minute, &logs)
	if !strings.Contains(ch.Reason, "unauthorized") {
		t.Fatalf("reason %q", ch.Reason)
	}
	time.Sleep(time.Second) // with retryMin 50 ms a tight loop would reconnect many times here
	st := cam.Status()
	if st.State != StateUnauthorized || st.Reconnects > 0 {
		t.Fatalf("status %+v, want unauthorized and no retry within a second", st)
	}
	if strings.Contains(st.LastError+logs.String(), "hunter2") {
		t.Fatalf("password in status or logs: %q\n%s", st.LastError, logs.String())
	}

	_, rec = testCamera(t, srv.URL("cam"), &logs, func(c *Camera) { c.Username, c.Password = "viewer", "s3cret" })
	rec.next(t, StateOnline, time.Minute, &logs)
	if strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("password in logs:\n%s", logs.String())
	}
}

// decode: keyframes decodes only the random-access units: one in ten of the sample
// (10 fps, GOP 10), the others counted as skipped.
func TestCameraKeyframesOnly(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs)
	cam, _ := testCamera(t, srv.URL("cam"), &logs, func(c *Camera) { c.Decode = "keyframes" })
	testutil.WaitFor(t, time.Minute, "3 keyframes decoded", func() bool { return cam.Status().Frames >= 3 })
	st := cam.Status()
	if st.Skipped < 5*st.Frames || st.Skipped > 12*(st.Frames+1) {
		t.Fatalf("status %+v: want about 9 access units skipped per keyframe decoded", st)
	}
}

// encodeClip makes a short clip of the sample video with ffmpeg, in MPEG-TS.
func encodeClip(t testing.TB, name string, args ...string) string {
	t.Helper()
	ffmpeg := testutil.LookPath(t, "ffmpeg")
	out := filepath.Join(t.TempDir(), name)
	// The defaults (3 s, 4:2:0, no B-frames) come before args: ffmpeg takes an option's last
	// value, so args may override them.
	full := append([]string{"-v", "error", "-i", testutil.Media(t, "vtest.avi"), "-t", "3", "-pix_fmt", "yuv420p", "-bf", "0"}, args...)
	format := "mpegts"
	if strings.HasSuffix(name, ".mp4") {
		format = "mp4"
	}
	full = append(full, "-f", format, out)
	if b, err := exec.Command(ffmpeg, full...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", full, err, b)
	}
	return out
}

// An H.265 camera whose stream also has an audio track: the video is decoded, the audio
// ignored.
func TestCameraH265WithAudio(t *testing.T) {
	var logs testutil.LogBuffer
	clip := encodeClip(t, "h265.ts", "-vf", "scale=640:360", "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error:keyint=10")
	srv := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": clip}, Audio: true, Logger: logs.Logger()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	got := make(chan *Frame, 1)
	cam, _ := testCamera(t, srv.URL("cam"), &logs, func(c *Camera) {
		c.OnFrame = func(f *Frame) {
			select {
			case got <- f:
			default:
				f.Release()
			}
		}
	})
	select {
	case f := <-got:
		want := geom.NewLetterbox(640, 360, 640, 640)
		if f.Letterbox != want {
			t.Fatalf("letterbox %+v, want %+v", f.Letterbox, want)
		}
		checkLetterboxed(t, rgbOf(t, f), f.Letterbox)
		f.Release()
	case <-time.After(time.Minute):
		t.Fatalf("no frame; status %+v\nlogs:\n%s", cam.Status(), logs.String())
	}
	if !strings.Contains(logs.String(), "codec=H.265") {
		t.Fatalf("logs do not show the H.265 track was chosen:\n%s", logs.String())
	}
}

// A link that loses and damages packets: the decoder skips to the next keyframe after each
// hole, never crashes, and frames keep coming.
func TestCameraDamagedStream(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs, func(s *samplecam.Server) { s.Damage = 0.01 })
	cam, _ := testCamera(t, srv.URL("cam"), &logs)
	testutil.WaitFor(t, time.Minute, "a resync after damage", func() bool { return cam.Status().Resyncs >= 1 })
	before := cam.Status().Frames
	testutil.WaitFor(t, time.Minute, "frames to keep coming", func() bool { return cam.Status().Frames >= before+10 })
	if st := cam.Status(); st.State != StateOnline {
		t.Fatalf("status %+v, want online", st)
	}
}

// A host that does not answer (a TEST-NET address, never routed): the camera reports the
// failure and Close does not wait for the connection attempt.
func TestCameraUnreachableHost(t *testing.T) {
	var logs testutil.LogBuffer
	cam, rec := testCamera(t, "rtsp://192.0.2.1:554/stream", &logs, func(c *Camera) { c.readTimeout = time.Second })
	off := rec.next(t, StateOffline, time.Minute, &logs)
	if off.Reason == "" {
		t.Fatalf("offline without a reason: %+v", off)
	}
	start := time.Now()
	cam.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("Close took %v", d)
	}
}

// Capture times come from the camera's RTCP sender reports, on the camera's clock (here an
// hour behind); Received stays on this host's clock, and the skew is reported.
func TestCameraCaptureTimeFromRTCP(t *testing.T) {
	var logs testutil.LogBuffer
	const offset = -time.Hour
	srv := startSample(t, "127.0.0.1:0", &logs, func(s *samplecam.Server) { s.ClockOffset = offset })
	got := make(chan *Frame, 1)
	_, _ = testCamera(t, srv.URL("cam"), &logs, func(c *Camera) {
		c.OnFrame = func(f *Frame) {
			if time.Since(f.Captured) > 30*time.Minute { // once a sender report has arrived
				select {
				case got <- f:
					return
				default:
				}
			}
			f.Release()
		}
	})
	select {
	case f := <-got:
		// An hour earlier, less the time the frame took to come and be decoded: a few ms, but
		// seconds on a loaded machine.
		if skew := f.Captured.Sub(f.Received) - offset; skew > 2*time.Second || skew < -30*time.Second {
			t.Fatalf("captured %v, received %v: want captured an hour earlier", f.Captured, f.Received)
		}
		if time.Since(f.Received) > time.Minute {
			t.Fatalf("received %v: not this host's clock", f.Received)
		}
		f.Release()
	case <-time.After(time.Minute): // gortsplib's server sends a report every 10 s
		t.Fatalf("no frame with the camera's capture time in a minute\nlogs:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "camera clock is off") {
		t.Fatalf("skew not reported:\n%s", logs.String())
	}
}

// A stream whose resolution changes mid-stream (new parameter sets in-band): the decoder
// and scaler follow and frames come with the new geometry.
func TestCameraResolutionChange(t *testing.T) {
	var logs testutil.LogBuffer
	a := encodeClip(t, "a.ts", "-vf", "scale=640:360", "-c:v", "libx264", "-g", "10")
	b := encodeClip(t, "b.ts", "-vf", "scale=320:240", "-c:v", "libx264", "-g", "10")
	list := filepath.Join(t.TempDir(), "list.txt")
	if err := os.WriteFile(list, []byte(fmt.Sprintf("file '%s'\nfile '%s'\n", a, b)), 0o600); err != nil {
		t.Fatal(err)
	}
	both := filepath.Join(t.TempDir(), "both.ts")
	if out, err := exec.Command("ffmpeg", "-v", "error", "-f", "concat", "-safe", "0", "-i", list, "-c", "copy", "-f", "mpegts", both).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg concat: %v\n%s", err, out)
	}
	srv := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": both}, Logger: logs.Logger()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	frames := make(chan *Frame, 2)
	_, _ = testCamera(t, srv.URL("cam"), &logs, func(c *Camera) {
		c.InputW, c.InputH = 320, 320
		c.OnFrame = func(f *Frame) {
			select {
			case frames <- f:
			default:
				f.Release()
			}
		}
	})
	seen := map[[2]int]bool{}
	timeout := time.After(time.Minute)
	for !seen[[2]int{640, 360}] || !seen[[2]int{320, 240}] {
		select {
		case f := <-frames:
			lb := f.Letterbox
			if lb != geom.NewLetterbox(lb.SrcW, lb.SrcH, 320, 320) {
				t.Fatalf("letterbox %+v inconsistent", lb)
			}
			checkLetterboxed(t, rgbOf(t, f), lb)
			seen[[2]int{lb.SrcW, lb.SrcH}] = true
			f.Release()
		case <-timeout:
			t.Fatalf("sizes seen %v, want 640x360 then 320x240\nlogs:\n%s", seen, logs.String())
		}
	}
}
