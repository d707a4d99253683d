package sources

import (
	"net"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/base"
	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/samplecam"
)

func TestCameraSampleEndToEnd(t *testing.T) {
	base := runtime.NumGoroutine()
	var logs testutil.LogBuffer
	srv := &samplecam.Server{
		Listen:  "127.0.0.1:0",
		Streams: map[string]string{"vtest": testutil.Media(t, sampleFile)},
		Logger:  logs.Logger(),
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	frames := make(chan *Frame, 8)
	cam := &Camera{
		ID:     "cam1",
		URL:    srv.URL("vtest"),
		InputW: 640, InputH: 640,
		OnFrame: func(f *Frame) {
			select {
			case frames <- f:
			default:
				f.Release()
			}
		},
		Logger: logs.Logger(),
	}
	cam.Start()

	want := geom.Letterbox{SrcW: 768, SrcH: 576, DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 480, PadX: 0, PadY: 80}
	var lastSeq uint64
	for i := 0; i < 8; i++ {
		var f *Frame
		select {
		case f = <-frames:
		case <-time.After(time.Minute):
			t.Fatalf("frame %d did not arrive; status %+v\nlogs:\n%s", i, cam.Status(), logs.String())
		}
		lastSeq = checkFrame(t, i, f, "cam1", want, lastSeq)
		// Captured is when its packets came (or the sender report's time for them): not in the
		// future, and not long before it was decoded (however long the frame then waited in the
		// channel for this test).
		if f.Captured.After(time.Now()) || f.Received.Sub(f.Captured) > 5*time.Second {
			t.Fatalf("frame %d: Captured %v, Received %v", i, f.Captured, f.Received)
		}
		f.Release()
	}
	st := cam.Status()
	if st.State != StateOnline || st.Frames < 8 || st.Delivered < 8 || st.LastError != "" {
		t.Fatalf("status %+v", st)
	}

	cam.Close()
	// Closed, its counts are final: a decode call for every frame (one access unit each:
	// the sample has no B-frames) and every frame scaled (none was unneeded), with time
	// spent in both and none waiting (no gate) nor copying (the CPU's decoder).
	st = cam.Status()
	if d := st.Decode; d.Calls < st.Frames || d.Scaled != st.Delivered || d.Busy <= 0 || d.Scale <= 0 ||
		d.Scale > d.Busy || d.Wait != 0 || d.Copy < 0 || d.Copy > d.Busy {
		t.Errorf("decode times %+v, with %d frames decoded and %d delivered", d, st.Frames, st.Delivered)
	}
	cam.Close() // safe twice
	for len(frames) > 0 {
		(<-frames).Release()
	}
	srv.Close()
	srv.Close()
	testutil.CheckGoroutines(t, base)
}

// checkLetterboxed checks that the padding is gray and the picture is a real picture.
func checkLetterboxed(t *testing.T, pix []byte, lb geom.Letterbox) {
	t.Helper()
	stride := lb.DstW * 3
	for y := 0; y < lb.DstH; y++ {
		row := pix[y*stride : (y+1)*stride]
		inside := y >= lb.PadY && y < lb.PadY+lb.ScaledH
		for x := 0; x < lb.DstW; x++ {
			if inside && x >= lb.PadX && x < lb.PadX+lb.ScaledW {
				continue
			}
			for c := 0; c < 3; c++ {
				if v := row[x*3+c]; v != geom.PadValue {
					t.Fatalf("padding pixel (%d,%d) channel %d = %d, want %d", x, y, c, v, geom.PadValue)
				}
			}
		}
	}
	// Real picture: rows across the image differ from each other and within themselves.
	varied := 0
	for y := lb.PadY; y < lb.PadY+lb.ScaledH; y += lb.ScaledH / 8 {
		row := pix[y*stride+lb.PadX*3 : y*stride+(lb.PadX+lb.ScaledW)*3]
		lo, hi := row[0], row[0]
		for _, v := range row {
			lo, hi = min(lo, v), max(hi, v)
		}
		if hi-lo > 40 {
			varied++
		}
	}
	if varied < 6 {
		t.Fatalf("only %d of 8 sampled image rows vary: not a real picture", varied)
	}
}

func TestCameraClosedPortRedacted(t *testing.T) {
	base := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	var logs testutil.LogBuffer
	const secret = "s3cr3tPass"
	cam := &Camera{
		ID:       "gate",
		URL:      "rtsp://admin:" + secret + "@" + addr + "/stream1",
		Logger:   logs.Logger(),
		retryMin: 20 * time.Millisecond,
		retryMax: 80 * time.Millisecond,
	}
	cam.Start()
	testutil.WaitFor(t, time.Minute, "reconnect attempts", func() bool {
		st := cam.Status()
		return st.State == StateOffline && st.Reconnects >= 3
	})
	st := cam.Status()
	t.Logf("status: %+v", st)
	if !strings.Contains(st.LastError, "connection refused") {
		t.Errorf("LastError %q does not say why", st.LastError)
	}
	start := time.Now()
	cam.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v", d)
	}
	for _, s := range []string{st.LastError, logs.String()} {
		if strings.Contains(s, secret) {
			t.Fatalf("secret leaked: %s", s)
		}
	}
	if !strings.Contains(logs.String(), "rtsp://admin:xxxxx@"+addr+"/stream1") {
		t.Errorf("logs lack the redacted URL:\n%s", logs.String())
	}
	testutil.CheckGoroutines(t, base)
}

func TestCameraBadURLRedacted(t *testing.T) {
	var logs testutil.LogBuffer
	// Unparsable (bad port) with a password in it.
	cam := &Camera{ID: "x", URL: "rtsp://u:hunter2@host:notaport/x", Logger: logs.Logger(), retryMin: time.Hour}
	cam.Start()
	defer cam.Close()
	testutil.WaitFor(t, time.Minute, "offline", func() bool { return cam.Status().State == StateOffline })
	st := cam.Status()
	t.Logf("LastError: %s", st.LastError)
	if !strings.Contains(st.LastError, "invalid URL") || strings.Contains(st.LastError+logs.String(), "hunter2") {
		t.Fatalf("LastError %q\nlogs:\n%s", st.LastError, logs.String())
	}
}

func TestCameraUnknownTransport(t *testing.T) {
	cam := &Camera{ID: "x", URL: "rtsp://127.0.0.1:1/x", Transport: "quic", Logger: (&testutil.LogBuffer{}).Logger(), retryMin: time.Hour}
	cam.Start()
	defer cam.Close()
	testutil.WaitFor(t, time.Minute, "offline", func() bool { return cam.Status().State == StateOffline })
	if e := cam.Status().LastError; !strings.Contains(e, `unknown transport "quic"`) {
		t.Fatalf("LastError %q", e)
	}
}

// describeOnly serves a fixed description and nothing else.
type describeOnly struct{ stream *gortsplib.ServerStream }

func (h *describeOnly) OnDescribe(*gortsplib.ServerHandlerOnDescribeCtx) (*base.Response, *gortsplib.ServerStream, error) {
	return &base.Response{StatusCode: base.StatusOK}, h.stream, nil
}

func TestCameraNoH264(t *testing.T) {
	base := runtime.NumGoroutine()
	h := &describeOnly{}
	var addr net.Addr
	srv := &gortsplib.Server{
		Handler:     h,
		RTSPAddress: "127.0.0.1:0",
		Listen: func(network, address string) (net.Listener, error) {
			ln, err := net.Listen(network, address)
			if err == nil {
				addr = ln.Addr()
			}
			return ln, err
		},
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	h.stream = &gortsplib.ServerStream{Server: srv, Desc: &description.Session{Medias: []*description.Media{
		{Type: description.MediaTypeVideo, Formats: []format.Format{&format.MJPEG{}}},
		{Type: description.MediaTypeAudio, Formats: []format.Format{&format.G711{PayloadTyp: 0, MULaw: true, SampleRate: 8000, ChannelCount: 1}}},
	}}}
	if err := h.stream.Initialize(); err != nil {
		t.Fatal(err)
	}

	cam := &Camera{ID: "mjpeg", URL: "rtsp://" + addr.String() + "/cam", Logger: (&testutil.LogBuffer{}).Logger(), retryMin: time.Hour}
	cam.Start()
	testutil.WaitFor(t, time.Minute, "offline", func() bool { return cam.Status().State == StateOffline })
	e := cam.Status().LastError
	t.Logf("LastError: %s", e)
	for _, want := range []string{"no H.264", "video M-JPEG", "audio G711"} {
		if !strings.Contains(e, want) {
			t.Errorf("LastError %q lacks %q", e, want)
		}
	}
	cam.Close()
	h.stream.Close()
	srv.Close()
	testutil.CheckGoroutines(t, base)
}

// TestCameraAutoTransport: "auto" tries UDP first; the sample camera serves TCP only, so
// the session must fall back to TCP and deliver frames.
func TestCameraAutoTransport(t *testing.T) {
	var logs testutil.LogBuffer
	srv := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"v": testutil.Media(t, sampleFile)}, Logger: logs.Logger()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cam := &Camera{ID: "auto", URL: srv.URL("v"), Transport: "auto", InputW: 320, InputH: 320, Logger: logs.Logger()}
	cam.Start()
	defer cam.Close()
	testutil.WaitFor(t, time.Minute, "frames over the fallback transport", func() bool { return cam.Status().Delivered >= 3 })
	if !strings.Contains(logs.String(), "switching to TCP") {
		t.Errorf("no transport switch logged:\n%s", logs.String())
	}
}

// NeedFrom: frames that a newer one will replace before the consumer's time are not scaled;
// the last ones before it are, and so is every frame after a pause or without a time.
func TestNeedFromSkipsOnlyReplaceableFrames(t *testing.T) {
	const ms = int64(time.Millisecond)
	c := &Camera{}
	t0 := time.Now().UnixNano()
	at := func(i int) int64 { return t0 + int64(i)*40*ms } // 25 fps
	c.NeedFrom(time.Unix(0, at(10)))                       // the consumer takes a frame from frame 10's time
	var skipped []int
	for i := 1; i <= 12; i++ {
		if c.unneededNow(at(i), at(i-1)) {
			skipped = append(skipped, i)
		}
	}
	// Frame i is left when frame i+1 (40 ms later) arrives before frame 10's time even 20 ms
	// late: i + 1.5 < 10.
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	if c.unneededNow(at(13), 0) {
		t.Error("a frame with no previous one was skipped")
	}
	// A pause: the frame after it is scaled, even with the consumer's time far ahead.
	c.NeedFrom(time.Unix(0, at(100)))
	if c.unneededNow(at(40), at(13)) {
		t.Error("the frame after a pause was skipped")
	}
	c.NeedFrom(time.Time{})
	if c.unneededNow(at(41), at(40)) {
		t.Error("a frame was skipped with no NeedFrom")
	}
}
