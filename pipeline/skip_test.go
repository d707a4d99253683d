package pipeline

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/samplecam"
)

// A camera analysed at 2 fps from a 10 fps stream with B-frames leaves non-reference frames
// undecoded before its turns (the pipeline tells its source how often it takes a frame),
// counted as not decoded rather than dropped; reloaded to the stream's own rate, it decodes
// every frame again.
func TestNonRefFramesNotDecoded(t *testing.T) {
	ffmpeg := testutil.LookPath(t, "ffmpeg")
	clip := filepath.Join(t.TempDir(), "b.ts")
	if out, err := exec.Command(ffmpeg, "-v", "error", "-i", testutil.Media(t, "vtest.avi"), "-t", "4",
		"-vf", "scale=384:288", "-c:v", "libx264", "-preset", "veryfast", "-g", "10", "-bf", "2",
		"-pix_fmt", "yuv420p", "-f", "mpegts", clip).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v\n%s", err, out)
	}
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam0": clip}, Logger: testutil.Logger(t)}
	if err := rtsp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rtsp.Close)
	d := startTestDaemon(t, fmt.Sprintf(`
site: test
http: {listen: ""}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1}]}
cameras:
  - {id: cam0, url: %q, fps: 2}
`, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), rtsp.URL("cam0")))
	status := func() CameraStatus { return d.camera("cam0").status() }

	testutil.WaitFor(t, 3*time.Minute, "cam0 analysing with frames left undecoded", func() bool {
		st := status()
		return st.Analysed >= 2 && st.NotDecoded > 0
	})
	st := status()
	t.Logf("at 2 fps: %d decoded, %d not decoded, %d analysed, drops %+v", st.Decoded, st.NotDecoded, st.Analysed, st.Drops)

	next := *d.Config
	next.Cameras = slices.Clone(d.Config.Cameras)
	next.Cameras[0].FPS = 10
	if _, err := d.Reload(&next); err != nil {
		t.Fatal(err)
	}
	// The new rate is in force from the camera's next turn on.
	a0 := status().Analysed
	testutil.WaitFor(t, 3*time.Minute, "2 turns at 10 fps", func() bool { return status().Analysed >= a0+2 })
	before := status()
	testutil.WaitFor(t, 3*time.Minute, "30 frames decoded and 2 turns more", func() bool {
		st := status()
		return st.Decoded >= before.Decoded+30 && st.Analysed >= before.Analysed+2
	})
	after := status()
	if after.NotDecoded != before.NotDecoded {
		t.Fatalf("analysed at the stream's rate, %d more frames left undecoded", after.NotDecoded-before.NotDecoded)
	}
}
