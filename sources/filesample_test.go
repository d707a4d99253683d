package sources

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/testutil"
)

// TestSampleFileIsTheFileCamera: SampleFile spreads its frames over the file, and each is,
// byte for byte, the frame a camera of kind file hands out at that position: the same
// decoding and letterbox.
func TestSampleFileIsTheFileCamera(t *testing.T) {
	clip := makeClip(t, t.TempDir()) // 20 frames
	got, lbs, err := SampleFile(context.Background(), clip, 640, 640, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || len(lbs) != 5 {
		t.Fatalf("%d frames, %d letterboxes, want 5: one every 4th of 20", len(got), len(lbs))
	}
	for i, lb := range lbs {
		if lb != vtestLetterbox {
			t.Fatalf("frame %d letterbox %+v, want %+v", i, lb, vtestLetterbox)
		}
		checkLetterboxed(t, got[i], lb)
	}
	if bytes.Equal(got[0], got[1]) {
		t.Fatal("frames 0 and 4 are equal: not spread")
	}

	var logs testutil.LogBuffer
	frames, onFrame, drain := frameSink(32)
	cam := &Camera{ID: "file", Kind: KindFile, File: clip, InputW: 640, InputH: 640, OnFrame: onFrame, Logger: logs.Logger()}
	cam.Start()
	defer func() { cam.Close(); drain() }()
	for k := 0; k <= 8; k++ { // the camera's frames 0..8: sampled ones are 0, 4 and 8
		f := nextFrame(t, frames, cam, &logs)
		if f.Seq != uint64(k+1) {
			t.Fatalf("camera frame Seq %d, want %d (dropped frames)", f.Seq, k+1)
		}
		if k%4 == 0 && !bytes.Equal(rgbOf(t, f)[:len(got[k/4])], got[k/4]) {
			t.Errorf("sampled frame %d differs from the file camera's frame %d", k/4, k)
		}
		f.Release()
	}

	// More frames asked than the file has: all of them.
	all, _, err := SampleFile(context.Background(), clip, 320, 320, 50)
	if err != nil || len(all) != 20 || len(all[0]) != 320*320*3 {
		t.Errorf("50 asked of 20: %d frames of %d bytes, %v", len(all), len(all[0]), err)
	}
}

func TestSampleFileBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.mp4")
	text := filepath.Join(dir, "notes.mp4")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, []byte("not a video at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	video := testutil.Media(t, "vtest.avi")
	for _, tc := range []struct {
		path string
		w, n int
		want string
	}{
		{filepath.Join(dir, "missing.mp4"), 640, 5, "cannot read " + filepath.Join(dir, "missing.mp4") + ": no such file"},
		{dir, 640, 5, dir + " is a directory, not a video file"},
		{empty, 640, 5, empty + " is empty"},
		{text, 640, 5, text + " is not a video that FFmpeg can open"},
		{video, 640, 0, "0 frames asked"},
		{video, 0, 5, "letterbox 0x640"},
	} {
		_, _, err := SampleFile(context.Background(), tc.path, tc.w, 640, tc.n)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s (w %d, n %d): got %v, want %q", tc.path, tc.w, tc.n, err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := SampleFile(ctx, video, 640, 640, 5); err != context.Canceled {
		t.Errorf("cancelled: %v", err)
	}
}
