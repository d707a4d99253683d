package samplecam

import (
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/base"
	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/pion/rtp"

	"github.com/visiond/visiond/internal/testutil"
)

func ffmpeg(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(testutil.LookPath(t, "ffmpeg"), append([]string{"-v", "error", "-y"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	audio := filepath.Join(dir, "audio.ts")
	ffmpeg(t, "-f", "lavfi", "-i", "sine=duration=1", "-c:a", "aac", "-f", "mpegts", audio)

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	for _, tc := range []struct {
		name, listen, file string
		want               []string
	}{
		{"missing", "", filepath.Join(dir, "nope.ts"), []string{"nope.ts", "no such file"}},
		{"neither MPEG-TS nor MP4", "", testutil.Media(t, "messi5.jpg"), []string{"messi5.jpg", "neither an MPEG-TS nor an MP4 file"}},
		{"no H.264", "", audio, []string{"audio.ts", "no H.264 or H.265 track", "AAC"}},
		{"address in use", busy.Addr().String(), testutil.Media(t, "vtest.h264.ts"), []string{busy.Addr().String(), "address already in use"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listen := tc.listen
			if listen == "" {
				listen = "127.0.0.1:0"
			}
			s := &Server{Listen: listen, Streams: map[string]string{"cam": tc.file}}
			err := s.Start()
			if err == nil {
				s.Close()
				t.Fatal("Start succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			s.Close() // harmless after a failed Start
		})
	}
}

// TestLoopedStream plays a 1 s file, MPEG-TS and MP4, and checks the RTP stream: SPS/PPS in
// the SDP, the file's rate, and timestamps that keep increasing by one frame across the loop.
func TestLoopedStream(t *testing.T) {
	for _, c := range []struct{ name, format string }{{"MPEG-TS", "mpegts"}, {"MP4", "mp4"}} {
		t.Run(c.name, func(t *testing.T) {
			short := filepath.Join(t.TempDir(), "short."+c.format)
			ffmpeg(t, "-i", testutil.Media(t, "vtest.avi"), "-t", "1", "-r", "10", "-c:v", "libx264", "-g", "10", "-bf", "0", "-f", c.format, short)
			loopedStream(t, short)
		})
	}
}

func loopedStream(t *testing.T, short string) {
	before := runtime.NumGoroutine()

	s := &Server{Listen: "127.0.0.1:0", Streams: map[string]string{"/short": short}, Logger: slog.New(slog.DiscardHandler)}
	started := time.Now() // before the stream's clock starts
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	u := s.URL("short")
	if strings.HasSuffix(u, ":0/short") || !strings.HasPrefix(u, "rtsp://127.0.0.1:") {
		t.Fatalf("URL %q", u)
	}

	c := gortsplib.Client{}
	pu, err := base.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c.Scheme, c.Host = pu.Scheme, pu.Host
	tcp := gortsplib.TransportTCP
	c.Transport = &tcp
	if err := c.Start2(); err != nil {
		t.Fatal(err)
	}
	desc, _, err := c.Describe(pu)
	if err != nil {
		t.Fatal(err)
	}
	var forma *format.H264
	medi := desc.FindFormat(&forma)
	if medi == nil || len(forma.SPS) == 0 || len(forma.PPS) == 0 {
		t.Fatalf("no H.264 with SPS/PPS in %+v", desc)
	}
	if _, err := c.Setup(desc.BaseURL, medi, 0, 0); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stamps []uint32
	var arrivals []time.Time
	c.OnPacketRTP(medi, forma, func(p *rtp.Packet) {
		mu.Lock()
		defer mu.Unlock()
		if len(stamps) == 0 || stamps[len(stamps)-1] != p.Timestamp {
			stamps = append(stamps, p.Timestamp)
			arrivals = append(arrivals, time.Now())
		}
	})
	if _, err := c.Play(nil); err != nil {
		t.Fatal(err)
	}
	// 1 s file at 10 fps: 25 frames cross at least one loop.
	testutil.WaitFor(t, time.Minute, "25 frames", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(stamps) >= 25
	})
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(stamps); i++ {
		if d := stamps[i] - stamps[i-1]; d != 9000 {
			t.Fatalf("frame %d: timestamp step %d, want 9000 (10 fps at 90 kHz)", i, d)
		}
	}
	// The stream is sent on the file's schedule from when the server started, never ahead of
	// it (when late, as on a loaded machine, it catches up in a burst): the i-th frame after
	// the first one received was sent, and came, at least i frames' time after the start.
	if d := arrivals[len(arrivals)-1].Sub(started); d < time.Duration(len(arrivals)-1)*100*time.Millisecond {
		t.Fatalf("%d frames within %v of the server's start: faster than the file's rate", len(arrivals), d)
	}
	s.Close()
	s.Close()
	testutil.CheckGoroutines(t, before)
}

func TestUnknownPath(t *testing.T) {
	s := &Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": testutil.Media(t, "vtest.h264.ts")}, Logger: slog.New(slog.DiscardHandler)}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pu, err := base.ParseURL(s.URL("other"))
	if err != nil {
		t.Fatal(err)
	}
	c := gortsplib.Client{Scheme: pu.Scheme, Host: pu.Host}
	if err := c.Start2(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, _, err := c.Describe(pu); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("DESCRIBE of an unknown path: %v", err)
	}
}
