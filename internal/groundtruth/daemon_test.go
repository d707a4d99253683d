package groundtruth

import (
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources"
	"github.com/visiond/visiond/sources/samplecam"
)

// meanAbsDiff is the mean absolute difference of two RGB24 buffers.
func meanAbsDiff(a, b []byte) float64 {
	var sum int
	for i := range a {
		d := int(a[i]) - int(b[i])
		sum += max(d, -d)
	}
	return float64(sum) / float64(len(a))
}

// TestDaemonPlaysTheVideo plays a written scenario as the daemon's cameras would: served by
// the sample RTSP camera (sources/samplecam) to an rtsp camera, and read by a kind file
// camera; both hand out the scenario's frames, letterboxed.
func TestDaemonPlaysTheVideo(t *testing.T) {
	m := loadMedia(t)
	sc, file, _ := writePlaza(t, m, 10)
	want := geom.NewLetterbox(768, 576, 640, 640)
	first := make([]byte, 640*640*3)
	img, _ := sc.Render(0, nil)
	letterbox(img, first)
	other := make([]byte, 640*640*3)
	img, _ = sc.Render(50, nil)
	letterbox(img, other)
	plaza := make([]byte, 640*640*3)
	letterbox(m.Background, plaza)

	// frames starts cam and returns its first n frames' pixels, then closes it.
	frames := func(t *testing.T, cam *sources.Camera, n int) [][]byte {
		t.Helper()
		var logs testutil.LogBuffer
		ch := make(chan *sources.Frame, n)
		cam.InputW, cam.InputH, cam.Logger = 640, 640, logs.Logger()
		cam.OnFrame = func(f *sources.Frame) {
			select {
			case ch <- f:
			default:
				f.Release()
			}
		}
		cam.Start()
		defer func() {
			cam.Close()
			for len(ch) > 0 {
				(<-ch).Release()
			}
		}()
		var out [][]byte
		timeout := time.After(time.Minute)
		for len(out) < n {
			select {
			case f := <-ch:
				if f.Letterbox != want {
					t.Errorf("frame %d: letterbox %+v, want %+v", f.Seq, f.Letterbox, want)
				}
				out = append(out, append([]byte(nil), f.Pix...))
				f.Release()
			case <-timeout:
				t.Fatalf("%d frames of %d in a minute; status %+v\nlogs:\n%s", len(out), n, cam.Status(), logs.String())
			}
		}
		return out
	}

	t.Run("samplecam", func(t *testing.T) {
		srv := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"plaza": file}, Logger: testutil.Logger(t)}
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		for i, pix := range frames(t, &sources.Camera{ID: "plaza", URL: srv.URL("plaza")}, 5) {
			// The stream is live: which frames come first depends on when the session
			// joined. Each shows the plaza (four people on it differ from the empty one by
			// little on average).
			d := meanAbsDiff(pix, plaza)
			t.Logf("frame %d: %.2f gray levels from the empty plaza", i, d)
			if d > 4.5 {
				t.Errorf("frame %d differs from the plaza by %.1f gray levels on average", i, d)
			}
		}
	})
	t.Run("file", func(t *testing.T) {
		got := frames(t, &sources.Camera{ID: "plaza", Kind: sources.KindFile, File: file}, 5)
		// A file plays from its start: the first frame is frame 0 (the daemon's scaling
		// differs a little from this test's).
		d0, d50 := meanAbsDiff(got[0], first), meanAbsDiff(got[0], other)
		t.Logf("first frame: %.2f gray levels from frame 0, %.2f from frame 50", d0, d50)
		if d0 > 2.5 || d0 > d50/2 {
			t.Errorf("first frame differs from frame 0 by %.2f gray levels on average, from frame 50 by %.2f", d0, d50)
		}
		for i, pix := range got {
			if d := meanAbsDiff(pix, plaza); d > 4.5 {
				t.Errorf("frame %d differs from the plaza by %.1f gray levels on average", i, d)
			}
		}
	})
}

