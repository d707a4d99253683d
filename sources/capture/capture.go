// Package capture runs a GStreamer capture in a child process (`visiond capture`) that the
// daemon can kill, and carries its frames back over a pipe.
//
// OpenCV's VideoCapture blocks in C: opening a pipeline whose source never answers (rtspsrc
// to a closed port or a silent camera) can take minutes, and a read blocks for as long as the
// pipeline delivers nothing. Inside the daemon such a call could be neither bounded nor
// abandoned, so one stuck camera held up shutdown and reloads. In a child process it can be
// killed: Start launches the process (the daemon's own executable, as the inference workers
// are), Process.Next and ReadFrame read its messages, and Process.Close kills it and returns
// at once, whatever the capture was doing.
//
// The child's side is Main: it reads a Request on stdin, opens the pipeline, and writes a
// MsgOpened, then each frame (a small header and the raw pixels), then a MsgError saying why
// it stopped, on fd 3 (wire.go). Its stdout and stderr (OpenCV's and GStreamer's warnings)
// go to the daemon's log.
package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/internal/redact"
)

// Subcommand is the argument of the daemon's executable that makes it a capture process.
const Subcommand = "capture"

// childEnvVar is set in the environment of every capture process. A process that has it never
// starts capture processes itself, and RunIfChild makes a test binary serve as one.
const childEnvVar = "VISIOND_CAPTURE_CHILD"

// ChildEnv is the environment entry Start adds for the capture process.
const ChildEnv = childEnvVar + "=1"

// RunIfChild returns at once unless this process was started by Start (the environment has
// ChildEnv); then it serves as a capture process and exits. Test binaries whose tests start
// gstreamer cameras call it first in TestMain, since there the daemon's executable is the
// test binary:
//
//	func TestMain(m *testing.M) {
//		capture.RunIfChild()
//		os.Exit(m.Run())
//	}
func RunIfChild() {
	if os.Getenv(childEnvVar) != "1" {
		return
	}
	if err := Main(nil); err != nil {
		fmt.Fprintln(os.Stderr, "capture:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Main is `visiond capture`: it serves one capture for the daemon (stdin: the Request; fd 3:
// messages) until the pipeline ends or fails or the daemon goes away. It takes no arguments.
func Main(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("takes no arguments (started by the daemon, which writes the pipeline on stdin), got %q", args)
	}
	out := os.NewFile(3, "frames")
	if st, err := out.Stat(); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return errors.New("no pipe on fd 3 to write frames to: this command is started by the daemon, not by hand")
	}
	defer out.Close()
	w := NewWriter(out)
	var req Request
	dec := json.NewDecoder(io.LimitReader(os.Stdin, maxRequestLen))
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("reading the request on stdin: %w", err)
	}
	err := serve(req, w)
	if err != nil {
		// The daemon scrubs too; this keeps the process's own stderr clean.
		msg := redact.Pipeline(req.Pipeline).Scrub(err.Error())
		if werr := w.Error(msg); werr != nil {
			return fmt.Errorf("%s (and telling the daemon: %v)", msg, werr)
		}
		return errors.New(msg)
	}
	return nil
}

// serve opens the pipeline and writes its frames until it ends, fails or the daemon stops
// reading.
func serve(req Request, w *Writer) error {
	vc, err := gocv.OpenVideoCaptureWithAPI(req.Pipeline, gocv.VideoCaptureGstreamer)
	if err != nil || !vc.IsOpened() {
		if vc != nil {
			vc.Close()
		}
		return fmt.Errorf("the pipeline did not open (an element is missing or misspelt, "+
			"it does not end in appsink, or its source failed): %s", redact.Pipeline(req.Pipeline).URL)
	}
	defer vc.Close()
	if err := w.Opened(); err != nil {
		return fmt.Errorf("writing to the daemon: %w", err)
	}
	m := gocv.NewMat()
	defer m.Close()
	for n := 0; ; n++ {
		if !vc.Read(&m) || m.Empty() {
			return fmt.Errorf("the pipeline ended (end of stream or a pipeline error) after %d frames", n)
		}
		at := time.Now()
		if m.Type() != gocv.MatTypeCV8UC3 && m.Type() != gocv.MatTypeCV8UC4 && m.Type() != gocv.MatTypeCV8UC1 {
			return fmt.Errorf("frame Mat type %v (%d channels), want 8-bit BGR: end the pipeline with "+
				"videoconvert ! video/x-raw,format=BGR ! appsink", m.Type(), m.Channels())
		}
		var pix []byte
		if m.IsContinuous() {
			pix, err = m.DataPtrUint8()
		} else {
			pix = m.ToBytes()
		}
		if err != nil {
			return err
		}
		if err := w.Frame(m.Cols(), m.Rows(), m.Channels(), pix, at); err != nil {
			return fmt.Errorf("writing to the daemon: %w", err)
		}
	}
}
