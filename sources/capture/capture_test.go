package capture

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

func TestMain(m *testing.M) {
	RunIfChild() // returns unless this process is a capture process
	os.Exit(m.Run())
}

func TestWireRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	at := time.Unix(1700000000, 123456789)
	pix := bytes.Repeat([]byte{1, 2, 3}, 4*2)
	if err := w.Opened(); err != nil {
		t.Fatal(err)
	}
	if err := w.Frame(4, 2, 3, pix, at); err != nil {
		t.Fatal(err)
	}
	if err := w.Frame(4, 2, 3, pix, at); err != nil {
		t.Fatal(err)
	}
	if err := w.Error("the pipeline ended"); err != nil {
		t.Fatal(err)
	}
	if err := w.Frame(4, 2, 3, pix[:5], at); err == nil {
		t.Error("a frame with the wrong number of bytes was written")
	}
	r := NewReader(&buf)
	if m, err := r.Next(); err != nil || m.Type != MsgOpened {
		t.Fatalf("first: %+v, %v", m, err)
	}
	m, err := r.Next()
	if err != nil || m.Type != MsgFrame || m.Width != 4 || m.Height != 2 || m.Channels != 3 || !m.At.Equal(at) {
		t.Fatalf("frame: %+v, %v", m, err)
	}
	if err := r.ReadFrame(make([]byte, 5)); err == nil {
		t.Error("ReadFrame into a short buffer")
	}
	m, err = r.Next() // the first frame's payload is skipped (ReadFrame refused to read it)
	if err != nil || m.Type != MsgFrame {
		t.Fatalf("second frame: %+v, %v", m, err)
	}
	got := make([]byte, len(pix))
	if err := r.ReadFrame(got); err != nil || !bytes.Equal(got, pix) {
		t.Fatalf("payload %v, %v", got, err)
	}
	if m, err := r.Next(); err != nil || m.Type != MsgError || m.Text != "the pipeline ended" {
		t.Fatalf("error message: %+v, %v", m, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last message: %v, want EOF", err)
	}
}

func header(typ byte, ch byte, w, h, n uint32) []byte {
	b := make([]byte, HeaderLen)
	b[0], b[1] = typ, ch
	binary.LittleEndian.PutUint32(b[4:], w)
	binary.LittleEndian.PutUint32(b[8:], h)
	binary.LittleEndian.PutUint32(b[12:], n)
	return b
}

// Every malformed message is refused with an error naming what is wrong, before any
// payload is allocated or read.
func TestReaderBadMessages(t *testing.T) {
	reserved := header('O', 0, 0, 0, 0)
	reserved[2] = 1
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"unknown type", header('X', 0, 0, 0, 0), "unknown message type 0x58"},
		{"reserved", reserved, "reserved bytes"},
		{"opened with payload", header('O', 0, 0, 0, 9), "opened message with a payload"},
		{"two channels", header('F', 2, 4, 4, 32), "2 channels"},
		{"zero width", header('F', 3, 0, 4, 0), "frame of 0x4"},
		{"too tall", header('F', 3, 4, MaxDim+1, 4*(MaxDim+1)*3), "want 1 to 16384"},
		{"too big", header('F', 4, MaxDim, MaxDim, 0), "over 268435456 bytes"},
		{"length mismatch", header('F', 3, 4, 4, 47), "payload of 47 bytes"},
		{"huge error", header('E', 0, 0, 0, MaxErrorLen+1), "error message of 65537 bytes"},
		{"error cut short", append(header('E', 0, 0, 0, 10), "abc"...), "error message cut short"},
		{"header cut short", header('O', 0, 0, 0, 0)[:10], "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(tc.in)).Next()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one with %q", err, tc.want)
			}
		})
	}
	// A frame cut short is an error of ReadFrame, and of the Next that skips it.
	in := append(header('F', 1, 4, 4, 16), 1, 2, 3)
	r := NewReader(bytes.NewReader(in))
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadFrame(make([]byte, 16)); err == nil || !strings.Contains(err.Error(), "frame cut short") {
		t.Fatalf("ReadFrame: %v", err)
	}
	r = NewReader(bytes.NewReader(in))
	r.Next()
	if _, err := r.Next(); err == nil || !strings.Contains(err.Error(), "frame cut short") {
		t.Fatalf("Next after a cut frame: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Opened()
	w.Frame(2, 2, 1, []byte{1, 2, 3, 4}, time.Now())
	w.Error("bye")
	f.Add(buf.Bytes())
	f.Add(header('F', 3, 4, 4, 48))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		for range 8 {
			m, err := r.Next()
			if err != nil {
				return
			}
			if m.Type == MsgFrame {
				if m.Len > MaxFrameLen || m.Len != m.Width*m.Height*m.Channels {
					t.Fatalf("accepted %+v", m)
				}
				if m.Len <= 1<<16 {
					if err := r.ReadFrame(make([]byte, m.Len)); err != nil {
						return
					}
				}
			}
		}
	})
}

// A command that cannot start is named in the error; one that is not a capture process
// (it exits without a word) ends with how it exited and what it printed.
func TestStartBadCommands(t *testing.T) {
	_, err := Start(Options{Command: []string{"/nonexistent/visiond", "capture"}, Pipeline: "x ! appsink"})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/visiond") {
		t.Fatalf("missing command: %v", err)
	}
	p, err := Start(Options{Command: []string{"/bin/sh", "-c", "read -r req; echo hello from sh; exit 3"}, Pipeline: "x ! appsink",
		Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next: %v, want EOF", err)
	}
	if d := p.Ended(""); !strings.Contains(d, "exit status 3") || !strings.Contains(d, "hello from sh") {
		t.Fatalf("Ended: %s", d)
	}
}

// Close kills a capture process that neither answers nor exits, ends a Next blocked on it,
// and reaps it.
func TestCloseKillsStuckProcess(t *testing.T) {
	p, err := Start(Options{Command: []string{"sleep", "3600"}, Pipeline: "x ! appsink", Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// In its own process group, which a terminal's ^C (or GNU timeout) aimed at the daemon's
	// does not reach.
	if pgid, err := syscall.Getpgid(p.PID()); err != nil || pgid != p.PID() {
		t.Errorf("process group %d (%v), want its own, %d", pgid, err, p.PID())
	}
	next := make(chan error, 1)
	go func() {
		_, err := p.Next()
		next <- err
	}()
	p.Close()
	if err := <-next; err == nil {
		t.Fatal("Next returned a message from a killed process")
	}
	if d := p.ExitDescription(); !strings.Contains(d, "signal: killed") {
		t.Fatalf("ExitDescription: %s", d)
	}
	p.Close() // twice is fine
}

// The real capture process (this test binary, through RunIfChild) refuses arguments and a
// start without the daemon's pipes, with errors saying so; a pipeline that does not open is
// reported on the wire, with its credentials masked.
func TestChild(t *testing.T) {
	cmd := exec.Command(os.Args[0], "extra")
	cmd.Env = append(os.Environ(), ChildEnv)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "no pipe on fd 3") {
		t.Fatalf("without fd 3: %v\n%s", err, out)
	}
	if err := Main([]string{"x"}); err == nil || !strings.Contains(err.Error(), "takes no arguments") {
		t.Fatalf("Main with arguments: %v", err)
	}
	p, err := Start(Options{Command: []string{os.Args[0]}, Pipeline: "nosuchelement user-pw=hunter22 ! appsink",
		Logger: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m, err := p.Next()
	if err != nil || m.Type != MsgError || !strings.Contains(m.Text, "did not open") ||
		!strings.Contains(m.Text, "user-pw=xxxxx") || strings.Contains(m.Text, "hunter22") {
		t.Fatalf("message %+v, %v", m, err)
	}
	if d := p.Ended(m.Text); !strings.Contains(d, "exit status 1") {
		t.Fatalf("Ended: %s", d)
	}
}
