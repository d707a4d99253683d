package prep

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
)

// TestSiteFrames reads calibration (and -eval) frames from each kind of
// source: a video, a folder of images (a file that is no image is ignored by its name), an
// image file, globs of images (and a glob's bad matches and syntax), and a config whose
// sample camera plays the video over RTSP; each frame is letterboxed to the model's input.
func TestSiteFrames(t *testing.T) {
	log := testutil.Logger(t)
	ctx := context.Background()
	video := testutil.Media(t, "vtest.avi")
	vtestLB := geom.NewLetterbox(768, 576, 640, 640)

	frames, err := SiteFrames(ctx, video, 6, 640, 640, time.Minute, log)
	if err != nil || len(frames) != 6 {
		t.Fatalf("video: %d frames, %v", len(frames), err)
	}
	checkCanvas(t, "video", frames, vtestLB)

	dir := t.TempDir()
	for _, name := range []string{"messi5.jpg", "basketball1.png"} {
		b, err := os.ReadFile(testutil.Media(t, name))
		if err != nil {
			t.Fatal(err)
		}
		testutil.WriteFile(t, filepath.Join(dir, name), string(b))
	}
	testutil.WriteFile(t, filepath.Join(dir, "README.txt"), "not an image")
	frames, err = SiteFrames(ctx, dir, 10, 320, 320, time.Minute, log)
	if err != nil || len(frames) != 2 || len(frames[0]) != 320*320*3 {
		t.Fatalf("folder: %d frames, %v; want the 2 images", len(frames), err)
	}
	folder := frames

	// An image file: one frame, letterboxed as the folder's (basketball1.png comes first).
	frames, err = SiteFrames(ctx, filepath.Join(dir, "basketball1.png"), 10, 320, 320, time.Minute, log)
	if err != nil || len(frames) != 1 || !bytes.Equal(frames[0], folder[0]) {
		t.Fatalf("image: %d frames, %v; want the folder's first frame", len(frames), err)
	}
	// A glob: the images it matches, in name order.
	frames, err = SiteFrames(ctx, filepath.Join(dir, "*.[jp][pn]g"), 10, 320, 320, time.Minute, log)
	if err != nil || len(frames) != 2 || !bytes.Equal(frames[0], folder[0]) || !bytes.Equal(frames[1], folder[1]) {
		t.Fatalf("glob: %d frames, %v; want the folder's 2 frames", len(frames), err)
	}
	frames, err = SiteFrames(ctx, filepath.Join(dir, "m*"), 10, 320, 320, time.Minute, log)
	if err != nil || len(frames) != 1 || !bytes.Equal(frames[0], folder[1]) {
		t.Fatalf("glob m*: %d frames, %v; want messi5.jpg", len(frames), err)
	}
	for _, tc := range []struct{ pattern, want string }{
		{filepath.Join(dir, "*.gif"), "no such file, and no file matches it as a pattern"},
		{filepath.Join(dir, "*"), "matches " + filepath.Join(dir, "README.txt") + ", not an image"},
		{filepath.Join(dir, "[x"), "not a file, and not a pattern: syntax error in pattern"},
	} {
		if _, err := SiteFrames(ctx, tc.pattern, 10, 320, 320, time.Minute, log); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("glob %s: %v, want %q", tc.pattern, err, tc.want)
		}
	}

	rtspAddr := testutil.FreeAddr(t)
	cfg := testutil.TempFile(t, "visiond.yaml", fmt.Sprintf("sample: {enabled: true, listen: %q, file: %q}\ncameras:\n  - {id: sample, url: \"rtsp://%s/sample\"}\n",
		rtspAddr, testutil.Media(t, "vtest.h264.ts"), rtspAddr))
	frames, err = SiteFrames(ctx, cfg, 3, 640, 640, 2*time.Minute, log)
	if err != nil || len(frames) != 3 {
		t.Fatalf("config: %d frames, %v", len(frames), err)
	}
	checkCanvas(t, "config", frames, vtestLB)
	if bytes.Equal(frames[0], frames[2]) {
		t.Error("config: the camera's frames are all the same")
	}
}

// checkCanvas checks that frames are lb's canvas: gray padding above and below the picture.
func checkCanvas(t *testing.T, what string, frames [][]byte, lb geom.Letterbox) {
	t.Helper()
	for i, f := range frames {
		if len(f) != lb.DstW*lb.DstH*3 {
			t.Fatalf("%s frame %d: %d bytes", what, i, len(f))
		}
		top := f[:lb.PadY*lb.DstW*3]
		if bytes.Count(top, []byte{geom.PadValue}) != len(top) {
			t.Fatalf("%s frame %d: the padding above the picture is not gray", what, i)
		}
		pic := f[lb.PadY*lb.DstW*3 : (lb.PadY+lb.ScaledH)*lb.DstW*3]
		if bytes.Count(pic, []byte{geom.PadValue}) == len(pic) {
			t.Fatalf("%s frame %d: no picture", what, i)
		}
	}
}

// TestSameSource tells an -eval source that is, or lies in, the calibration source.
func TestSameSource(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jpg"), filepath.Join(dir, "b.jpg")
	testutil.WriteFile(t, a, "a")
	testutil.WriteFile(t, b, "b")
	other := testutil.TempFile(t, "c.jpg", "c")
	for _, tc := range []struct {
		calib, eval string
		same        bool
	}{
		{a, a, true},
		{a, filepath.Join(dir, ".", "a.jpg"), true},
		{a, b, false},
		{dir, a, true},
		{dir, filepath.Join(dir, "*.jpg"), true},
		{dir, dir, true},
		{dir, other, false},
		{dir, filepath.Join(filepath.Dir(other), "*.jpg"), false},
		{a, filepath.Join(dir, "none.jpg"), false},
		{filepath.Join(dir, "none"), a, false},
	} {
		if _, same := SameSource(tc.calib, tc.eval); same != tc.same {
			t.Errorf("calib %s, eval %s: same %v, want %v", tc.calib, tc.eval, same, tc.same)
		}
	}
}
