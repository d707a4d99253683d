package groundtruth

import (
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources"
	"github.com/visiond/visiond/sources/samplecam"
)

// checkDaemonPlays plays a written scenario (sc, in file) as the daemon's cameras would:
// served by the sample RTSP camera (sources/samplecam) to an rtsp camera, and read by a
// kind file camera; both must hand out the scenario's frames, letterboxed.
func checkDaemonPlays(t *testing.T, m *Media, sc *Scene, file string) {
	want := geom.NewLetterbox(768, 576, 640, 640)
	plaza := make([]byte, 640*640*3)
	letterbox(t, m.Background, plaza)

	// frames starts cam and returns its first n frames (pixels and Seq), then closes it.
	type frame struct {
		seq uint64
		pix []byte
	}
	frames := func(t *testing.T, cam *sources.Camera, n int) []frame {
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
		var out []frame
		timeout := time.After(time.Minute)
		for len(out) < n {
			select {
			case f := <-ch:
				if f.Letterbox != want {
					t.Errorf("frame %d: letterbox %+v, want %+v", f.Seq, f.Letterbox, want)
				}
				pix := make([]byte, want.DstW*want.DstH*3)
				if err := f.WriteRGB(pix); err != nil {
					t.Fatal(err)
				}
				out = append(out, frame{f.Seq, pix})
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
		for i, f := range frames(t, &sources.Camera{ID: "plaza", URL: srv.URL("plaza")}, 5) {
			// The stream is live: which frames come first depends on when the session
			// joined. Each shows the plaza (four people on it differ from the empty one by
			// little on average).
			d := meanAbsDiff(t, f.pix, plaza)
			t.Logf("frame %d: %.2f gray levels from the empty plaza", i, d)
			if d > 4.5 {
				t.Errorf("frame %d differs from the plaza by %.1f gray levels on average", i, d)
			}
		}
	})
	t.Run("file", func(t *testing.T) {
		// A file plays from its start, every frame: frame Seq is the video's frame Seq-1
		// (modulo its length), so a test can look its truth up. Checked on frames where
		// people walk: each is closer to its own drawn frame than to the one before and after.
		got := frames(t, &sources.Camera{ID: "plaza", Kind: sources.KindFile, File: file}, 25)
		drawn := map[int][]byte{}
		lb := func(i int) []byte {
			if drawn[i] == nil {
				img, _ := sc.Render(i, nil)
				drawn[i] = make([]byte, 640*640*3)
				letterbox(t, img, drawn[i])
			}
			return drawn[i]
		}
		for _, f := range got {
			if d := meanAbsDiff(t, f.pix, plaza); d > 4.5 {
				t.Errorf("frame Seq %d differs from the plaza by %.1f gray levels on average", f.seq, d)
			}
			i := sc.TruthOfSeq(f.seq).Index
			if i < 10 || i+1 >= sc.Scenario().Frames() {
				continue
			}
			own, before, after := meanAbsDiff(t, f.pix, lb(i)), meanAbsDiff(t, f.pix, lb(i-1)), meanAbsDiff(t, f.pix, lb(i+1))
			if own >= before || own >= after {
				t.Errorf("frame Seq %d: %.3f gray levels from frame %d, %.2f from frame %d, %.2f from frame %d: want closest to its own",
					f.seq, own, i, before, i-1, after, i+1)
			}
		}
		t.Logf("frames Seq %d..%d", got[0].seq, got[len(got)-1].seq)
	})
}
