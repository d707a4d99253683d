package sources

import (
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/samplecam"
)

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Secrets of the gstreamer pipelines below: none may appear in a log line, a status or a
// status change.
var pipelineSecrets = []string{"LocPw1x", "UsrPw2x", "PrxPw3x", "oper8"}

// securedPipeline reads url through rtspsrc with credentials in the URL and in properties.
func securedPipeline(url string) string {
	return "rtspsrc location=" + url + " user-id=oper8 user-pw=UsrPw2x proxy-id=proxy8 proxy-pw=\"PrxPw3x\" " +
		"protocols=tcp latency=0 ! rtph264depay ! h264parse ! avdec_h264 ! videoconvert ! video/x-raw,format=BGR ! " +
		"appsink max-buffers=1 drop=true"
}

func checkNoSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, sec := range pipelineSecrets {
		if strings.Contains(s, sec) {
			t.Errorf("%s shows the secret %q:\n%s", what, sec, s)
		}
	}
}

// TestCaptureGStreamerClosedPort: a gstreamer camera pointed at a closed port never opens;
// it goes offline saying why, retries, and Close returns at once while a session is under
// way, and no credential of the pipeline shows in the logs, the status or the status changes.
// In process, the third open in a row hung in OpenCV (GStreamer warns that the failed
// pipelines were disposed while PLAYING), and Close waited for it: the 7 minutes.
func TestCaptureGStreamerClosedPort(t *testing.T) {
	requireGStreamer(t)
	base := runtime.NumGoroutine()
	var logs testutil.LogBuffer
	rec := newStatusRecorder()
	cam := &Camera{
		ID:           "gate",
		Kind:         KindGStreamer,
		Pipeline:     securedPipeline("rtsp://admin:LocPw1x@" + closedPort(t) + "/x"),
		StallTimeout: time.Minute, // the refusal ends each session, not the watchdog, even on a loaded machine
		OnStatus:     rec.record,
		Logger:       logs.Logger(),
		retryMin:     20 * time.Millisecond,
		retryMax:     80 * time.Millisecond,
	}
	cam.Start()
	ch := rec.next(t, StateOffline, time.Minute, &logs)
	testutil.WaitFor(t, 2*time.Minute, "two failed sessions", func() bool { return cam.Status().Reconnects >= 2 })
	st := cam.Status()
	t.Logf("status %+v", st)
	t.Logf("reason: %s", ch.Reason)
	if !strings.Contains(st.LastError, "kind gstreamer") || !strings.Contains(st.LastError, "rtsp://admin:xxxxx@") {
		t.Errorf("LastError %q does not say what failed", st.LastError)
	}
	if st.Frames != 0 || st.State != StateOffline {
		t.Errorf("status %+v, want offline without frames", st)
	}
	// Close while a session is under way (a capture process started, not yet cut).
	began := cam.Status().Reconnects
	testutil.WaitFor(t, 2*time.Minute, "a new session", func() bool { return cam.Status().Reconnects > began })
	closeQuickly(t, cam, 20*time.Second)
	for what, s := range map[string]string{"the logs": logs.String(), "LastError": st.LastError, "the status reason": ch.Reason} {
		checkNoSecrets(t, what, s)
	}
	testutil.CheckGoroutines(t, base)
}

// silentServer accepts TCP connections and never answers (a camera that hangs); it returns
// its address.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String()
}

// TestCaptureGStreamerStuckOpen: a pipeline whose source accepts the connection and never
// answers blocks OpenCV's open (here for up to 10 minutes: rtspsrc's tcp-timeout). The
// stall watchdog ends the session after stall_timeout by killing its capture process, which
// is counted (Stuck) and said in the error; Close returns at once, while a session is stuck
// in its open. The old in-process open held the session, and Close, for the whole timeout.
func TestCaptureGStreamerStuckOpen(t *testing.T) {
	requireGStreamer(t)
	addr := silentServer(t)
	base := runtime.NumGoroutine()
	var logs testutil.LogBuffer
	rec := newStatusRecorder()
	cam := &Camera{
		ID:   "hung",
		Kind: KindGStreamer,
		Pipeline: strings.Replace(securedPipeline("rtsp://admin:LocPw1x@"+addr+"/x"), "latency=0",
			"latency=0 tcp-timeout=600000000 timeout=600000000", 1),
		StallTimeout: 2 * time.Second,
		OnStatus:     rec.record,
		Logger:       logs.Logger(),
		retryMin:     20 * time.Millisecond,
		retryMax:     80 * time.Millisecond,
	}
	cam.Start()
	ch := rec.next(t, StateOffline, 2*time.Minute, &logs)
	st := cam.Status()
	t.Logf("status %+v", st)
	if !strings.Contains(ch.Reason, "did not open within stall_timeout 2s") || !strings.Contains(ch.Reason, "killed") {
		t.Errorf("reason %q does not say that the open was stuck and cut", ch.Reason)
	}
	if st.Stuck < 1 {
		t.Errorf("Stuck = %d, want the killed session counted", st.Stuck)
	}
	began := st.Reconnects
	testutil.WaitFor(t, 2*time.Minute, "a new session", func() bool {
		st := cam.Status()
		return st.Reconnects > began && strings.Contains(logs.String(), "capture process started")
	})
	closeQuickly(t, cam, 20*time.Second)
	for what, s := range map[string]string{"the logs": logs.String(), "LastError": cam.Status().LastError, "the status reason": ch.Reason} {
		checkNoSecrets(t, what, s)
	}
	testutil.CheckGoroutines(t, base)
}

// TestCaptureGStreamerWrongPassword: a gstreamer camera whose server refuses its
// credentials goes offline with an error, and neither the password in the URL nor the
// user-id / user-pw properties show in the logs, the status or the status change.
func TestCaptureGStreamerWrongPassword(t *testing.T) {
	requireGStreamer(t)
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs, func(s *samplecam.Server) { s.Username, s.Password = "viewer", "rightpw" })
	url := strings.Replace(srv.URL("cam"), "rtsp://", "rtsp://viewer:LocPw1x@", 1)
	rec := newStatusRecorder()
	cam := &Camera{ID: "door", Kind: KindGStreamer, Pipeline: securedPipeline(url), OnStatus: rec.record,
		Logger: logs.Logger(), retryMin: 20 * time.Millisecond, retryMax: 80 * time.Millisecond}
	cam.Start()
	ch := rec.next(t, StateOffline, time.Minute, &logs)
	testutil.WaitFor(t, time.Minute, "a retry", func() bool { return cam.Status().Reconnects >= 1 })
	cam.Close()
	st := cam.Status()
	t.Logf("reason: %s", ch.Reason)
	if st.Frames != 0 || !strings.Contains(ch.Reason, "kind gstreamer") {
		t.Errorf("status %+v, reason %q", st, ch.Reason)
	}
	for what, s := range map[string]string{"the logs": logs.String(), "LastError": st.LastError, "the status reason": ch.Reason} {
		checkNoSecrets(t, what, s)
	}
}
