package sources

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// systemPython is Debian's interpreter, the one python3-gi is installed for.
const systemPython = "/usr/bin/python3"

// gstRTSPServerScript serves one file over RTSP with GStreamer's RTSP server
// (GstRtspServer), on 127.0.0.1 and a port the kernel picks. It prints "PORT n" once it
// listens and exits when its stdin closes (the test ended or died).
const gstRTSPServerScript = `
import sys
import gi
gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer

path, mount = sys.argv[1], sys.argv[2]
Gst.init(None)
server = GstRtspServer.RTSPServer()
server.set_address("127.0.0.1")
server.set_service("0")
factory = GstRtspServer.RTSPMediaFactory()
factory.set_launch('( filesrc location="%s" ! tsdemux ! h264parse ! rtph264pay name=pay0 pt=96 config-interval=1 )' % path)
factory.set_shared(True)
server.get_mount_points().add_factory(mount, factory)
if server.attach(None) == 0:
    sys.exit("cannot attach the RTSP server")
print("PORT %d" % server.get_bound_port(), flush=True)

loop = GLib.MainLoop()
GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP | GLib.IO_ERR, lambda *a: loop.quit() or False)
loop.run()
`

// startGstRTSPServer runs GStreamer's RTSP server on file at mount and returns its URL.
// The server is killed when the test ends.
func startGstRTSPServer(t *testing.T, file, mount string) string {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		t.Fatalf("%s missing: run scripts/setup.sh", systemPython)
	}
	probe := exec.Command(systemPython, "-c", `import gi; gi.require_version("GstRtspServer", "1.0"); from gi.repository import GstRtspServer`)
	if out, err := probe.CombinedOutput(); err != nil {
		t.Fatalf("python3-gi or gir1.2-gst-rtsp-server-1.0 missing (%v: %s): run scripts/setup.sh", err, strings.TrimSpace(string(out)))
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "rtsp_server.py")
	if err := os.WriteFile(script, []byte(gstRTSPServerScript), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(systemPython, script, abs, mount)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testutil.LogBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		<-exited
	})

	port := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if p, ok := strings.CutPrefix(sc.Text(), "PORT "); ok {
				port <- p
			}
		}
	}()
	var p string
	select {
	case p = <-port:
	case <-exited:
		t.Fatalf("GStreamer RTSP server exited: %s", stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("GStreamer RTSP server did not report its port: %s", stderr.String())
	}
	if n, err := strconv.Atoi(p); err != nil || n <= 0 {
		t.Fatalf("GStreamer RTSP server reported port %q", p)
	}
	addr := net.JoinHostPort("127.0.0.1", p)
	testutil.WaitFor(t, time.Minute, "the RTSP server to accept connections", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return fmt.Sprintf("rtsp://%s%s", addr, mount)
}

// TestThirdPartyGstRTSPServer plays the sample from GStreamer's RTSP server, an
// implementation independent of the gortsplib-based sample camera.
// Over TCP (interleaved) and over UDP, which the sample camera does not offer.
func TestThirdPartyGstRTSPServer(t *testing.T) {
	url := startGstRTSPServer(t, testutil.Media(t, sampleFile), "/vtest")
	for _, transport := range []Transport{TransportTCP, TransportUDP} {
		t.Run(string(transport), func(t *testing.T) { playGstRTSP(t, url, transport) })
	}
}

func playGstRTSP(t *testing.T, url string, transport Transport) {
	base := runtime.NumGoroutine() // the server's pipe readers live until Cleanup
	var logs testutil.LogBuffer
	frames, onFrame, drain := frameSink(4)
	cam := &Camera{ID: "gst-rtsp", URL: url, Transport: transport, InputW: 640, InputH: 640, OnFrame: onFrame, Logger: logs.Logger()}
	cam.Start()
	var lastSeq uint64
	for i := 0; i < 8; i++ {
		f := nextFrame(t, frames, cam, &logs)
		lastSeq = checkFrame(t, i, f, "gst-rtsp", vtestLetterbox, lastSeq)
		f.Release()
	}
	if st := cam.Status(); st.State != StateOnline || st.LastError != "" {
		t.Errorf("status %+v", st)
	}
	closeQuickly(t, cam, 10*time.Second)
	drain()
	testutil.CheckGoroutines(t, base)
}
