package pipeline

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/internal/testutil"
)

// silentServer accepts TCP connections and never answers (a camera that hangs); it returns
// its address and the number of connections accepted.
func silentServer(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			accepted.Add(1)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), &accepted
}

// gstCamera is the YAML entry of a gstreamer camera reading rtspsrc from addr, with
// credentials in its URL and properties. Its open waits up to 10 minutes for an answer
// (tcp-timeout), and stall_timeout is as long: only killing its capture process ends it.
func gstCamera(id, addr string) string {
	p := "rtspsrc location=rtsp://admin:Url5ecret@" + addr + "/x user-id=op user-pw=Pr0pSecret protocols=tcp latency=0 " +
		"tcp-timeout=600000000 timeout=600000000 ! rtph264depay ! h264parse ! avdec_h264 ! videoconvert ! " +
		"video/x-raw,format=BGR ! appsink max-buffers=1 drop=true"
	return fmt.Sprintf("  - {id: %s, kind: gstreamer, stall_timeout: 10m, pipeline: %q}\n", id, p)
}

// Issue 13, items 1 and 3, in the daemon: a gstreamer camera stuck in its open is removed by
// a reload while another camera keeps being analysed on the same session, and the daemon
// closes with such a camera (both used to wait for OpenCV's open for as long as it took);
// a gstreamer camera refused at a closed port reports why in its status event and
// /api/cameras without its credentials.
func TestStuckGStreamerCamera(t *testing.T) {
	hungAddr, accepted := silentServer(t)
	cams := sampleCameras(t, 1)
	base := fmt.Sprintf("site: test\nhttp: {listen: \"127.0.0.1:0\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams)
	withHung := base + gstCamera("hung", hungAddr) + strings.Replace(gstCamera("locked", testutil.FreeAddr(t)), "stall_timeout: 10m", "stall_timeout: 5s", 1)
	fd := startFileDaemon(t, withHung)
	nc, err := nats.Connect(fd.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	status := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe("visiond.test.locked.status", status); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	off := nextStatus(t, status, "offline")
	srcs := fd.online(t, "cam0")
	testutil.WaitFor(t, 2*time.Minute, "the hung camera's open to connect", func() bool { return accepted.Load() >= 1 })
	var locked CameraStatus
	for _, c := range fd.Cameras() {
		if c.ID == "locked" {
			locked = c
		}
	}
	t.Logf("locked: reason %q, last_error %q", off.Reason, locked.LastError)
	if !strings.Contains(off.Reason, "kind gstreamer") || !strings.Contains(locked.LastError, "kind gstreamer") {
		t.Errorf("reason %q, last_error %q: want the gstreamer failure", off.Reason, locked.LastError)
	}
	for _, s := range []string{off.Reason, locked.LastError} {
		if strings.Contains(s, "Url5ecret") || strings.Contains(s, "Pr0pSecret") || strings.Contains(s, "user-id=op ") {
			t.Errorf("a credential shows: %s", s)
		}
	}

	// Remove both gstreamer cameras while hung is stuck in its open.
	fd.save(t, base)
	ev := nextConfigEvent(t, fd.events)
	slices.Sort(ev.Removed)
	if ev.Result != "applied" || !slices.Equal(ev.Removed, []string{"hung", "locked"}) {
		t.Fatalf("reload: %+v, want hung and locked removed", ev)
	}
	fd.untouched(t, srcs)
	analysed := fd.camera("cam0").status().Analysed
	testutil.WaitFor(t, time.Minute, "cam0 analysed after the reload", func() bool { return fd.camera("cam0").status().Analysed > analysed })

	// Add it again and stop the daemon while it is stuck.
	fd.save(t, base+gstCamera("hung", hungAddr))
	if ev := nextConfigEvent(t, fd.events); !slices.Equal(ev.Added, []string{"hung"}) {
		t.Fatalf("reload: %+v, want hung added", ev)
	}
	testutil.WaitFor(t, 2*time.Minute, "the hung camera's second open to connect", func() bool { return accepted.Load() >= 2 })
	closed := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(closed)
		fd.Close()
	}()
	select {
	case <-closed:
		t.Logf("closed in %v", time.Since(began).Round(time.Millisecond))
	case <-time.After(time.Minute):
		t.Fatal("the daemon did not close in a minute with a camera stuck in its open")
	}
}
