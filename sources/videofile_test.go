package sources

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestVideoFileFramesAndTimes: VideoFile hands out every frame of the file, in order, each
// with its time in the video (frame i of a 10 fps file at i x 100 ms), then io.EOF; each
// frame drawn is, byte for byte, what a camera of kind file draws (SampleFile, which the
// file camera's test holds to it).
func TestVideoFileFramesAndTimes(t *testing.T) {
	clip := makeClip(t, t.TempDir()) // 20 frames at 10 fps
	want, _, err := SampleFile(context.Background(), clip, 640, 640, 20)
	if err != nil {
		t.Fatal(err)
	}
	v, err := OpenVideoFile(clip)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if v.FPS() != 10 || v.FrameDuration() != 100*time.Millisecond {
		t.Errorf("fps %v, frame duration %v; want 10 and 100ms", v.FPS(), v.FrameDuration())
	}
	if _, err := v.Draw(make([]byte, 640*640*3), 640, 640); err == nil {
		t.Error("a frame drawn before any was decoded")
	}
	pix := make([]byte, 640*640*3)
	for i := range 20 {
		at, err := v.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if d := at - time.Duration(i)*100*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("frame %d at %v, want %v", i, at, time.Duration(i)*100*time.Millisecond)
		}
		if i%3 != 0 {
			continue // not drawn: decoded only
		}
		lb, err := v.Draw(pix, 640, 640)
		if err != nil || lb != vtestLetterbox {
			t.Fatalf("frame %d: letterbox %+v, %v; want %+v", i, lb, err, vtestLetterbox)
		}
		if string(pix) != string(want[i]) {
			t.Errorf("frame %d differs from the file camera's", i)
		}
	}
	if _, err := v.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	if _, err := v.Draw(make([]byte, 10), 640, 640); err == nil || !strings.Contains(err.Error(), "buffer of 10 bytes") {
		t.Errorf("a short buffer: %v", err)
	}
}

func TestVideoFileBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.ts")
	text := filepath.Join(dir, "notes.ts")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, []byte("not a video at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.ts"), "cannot read " + filepath.Join(dir, "missing.ts") + ": no such file or directory"},
		{dir, dir + " is a directory, not a video file"},
		{empty, empty + " is empty, not a video file"},
		{text, text + " is not a video that FFmpeg can open"},
	} {
		v, err := OpenVideoFile(tc.path)
		if err == nil {
			v.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
		}
	}
}
