package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// Issue 13, item 1: a gstreamer camera whose source accepts the connection and never answers
// holds its open in OpenCV (here up to 10 minutes, rtspsrc's tcp-timeout; a camera at a closed
// port did the same after a few attempts). On SIGTERM the daemon stops anyway, cleanly and
// with its outbox flushed: the camera's capture process is killed. It used to wait for the
// open forever after logging "stopping". Item 3: no credential of a pipeline shows in the
// daemon's log.
func TestRunStopsWithStuckCamera(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var conns []net.Conn
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			accepted.Add(1)
		}
	}()
	defer func() {
		ln.Close()
		<-acceptDone
		for _, c := range conns {
			c.Close()
		}
	}()
	pipeline := "rtspsrc location=rtsp://admin:Url5ecret@" + ln.Addr().String() + "/x protocols=tcp latency=0 " +
		"tcp-timeout=600000000 timeout=600000000 ! rtph264depay ! h264parse ! avdec_h264 ! videoconvert ! " +
		"video/x-raw,format=BGR ! appsink max-buffers=1 drop=true"
	// And one refused at a closed port, with credentials in its URL and properties: its
	// "camera offline" line must not show them.
	locked := "rtspsrc location=rtsp://admin:Url5ecret@" + testutil.FreeAddr(t) + "/x user-id=op user-pw=Pr0pSecret ! " +
		"rtph264depay ! avdec_h264 ! videoconvert ! video/x-raw,format=BGR ! appsink"
	body := demoConfig(t, testutil.FreeAddr(t)) +
		fmt.Sprintf("  - {id: hung, kind: gstreamer, stall_timeout: 10m, pipeline: %q}\n", pipeline) +
		fmt.Sprintf("  - {id: locked, kind: gstreamer, pipeline: %q}\n", locked)
	cmd, logs := startCommand(t, exec.Command(os.Args[0], "run", "-config", writeConfig(t, body)))
	logs.wait(t, `msg="camera online".*camera=sample|camera=sample.*msg="camera online"`)
	logs.wait(t, `msg="camera offline, retrying".*camera=locked|camera=locked.*msg="camera offline, retrying"`)
	testutil.WaitFor(t, 2*time.Minute, "the hung camera's open to connect", func() bool { return accepted.Load() >= 1 })

	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() {
		for line := range logs.lines {
			logs.all.WriteString(line + "\n")
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		took := time.Since(began)
		t.Logf("stopped %v after SIGTERM", took.Round(time.Millisecond))
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.all.String())
		}
	case <-time.After(time.Minute): // the issue asks for 20 s; a loaded machine gets slack
		t.Fatalf("the daemon did not stop within a minute of SIGTERM:\n%s", logs.all.String())
	}
	all := logs.all.String()
	if !strings.Contains(all, `msg=stopped`) || strings.Contains(all, "events not published before the shutdown deadline") {
		t.Errorf("not a clean stop with the outbox flushed:\n%s", all)
	}
	for _, secret := range []string{"Url5ecret", "Pr0pSecret", "user-id=op "} {
		if strings.Contains(all, secret) {
			t.Errorf("the logs show the pipeline's credential %q:\n%s", secret, all)
		}
	}
}
