package testutil

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Video is what ffprobe and ffmpeg say of a video file (ProbeVideo).
type Video struct {
	Codec         string
	Width, Height int
	Frames        int     // frames decoded
	Duration      float64 // the container's, seconds
	FirstKey      bool    // the first frame decoded is a keyframe
	Errors        string  // what decoding the whole clip reported
}

// ProbeVideo reads the first video stream of the file at path with ffprobe (counting its
// frames) and decodes it whole with ffmpeg, failing the test when they cannot run.
func ProbeVideo(t testing.TB, path string) Video {
	t.Helper()
	ffprobe := LookPath(t, "ffprobe")
	b, err := exec.Command(ffprobe, "-v", "error", "-select_streams", "v:0", "-count_frames",
		"-show_entries", "stream=codec_name,width,height,nb_read_frames:format=duration", "-of", "json", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var out struct {
		Streams []struct {
			Codec  string `json:"codec_name"`
			Width  int    `json:"width"`
			Height int    `json:"height"`
			Frames string `json:"nb_read_frames"`
		} `json:"streams"`
		Format struct {
			Duration string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Streams) != 1 {
		t.Fatalf("ffprobe %s: %v: %s", path, err, b)
	}
	s := out.Streams[0]
	p := Video{Codec: s.Codec, Width: s.Width, Height: s.Height}
	p.Frames, _ = strconv.Atoi(s.Frames)
	p.Duration, _ = strconv.ParseFloat(out.Format.Duration, 64)
	first, err := exec.Command(ffprobe, "-v", "error", "-select_streams", "v:0", "-read_intervals", "%+#1",
		"-show_entries", "frame=key_frame", "-of", "csv=p=0", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	p.FirstKey = strings.HasPrefix(strings.TrimSpace(string(first)), "1") // "1" or "1," (then side data)
	dec, _ := exec.Command(LookPath(t, "ffmpeg"), "-v", "error", "-i", path, "-f", "null", "-").CombinedOutput()
	p.Errors = strings.TrimSpace(string(dec))
	return p
}

// SampleMP4 returns an MP4 of the first seconds of the sample stream (768x576 H.264 at 10
// fps, a keyframe every second), remuxed by ffmpeg as a clip is written: the packets as they
// came, the moov first.
func SampleMP4(tb testing.TB, seconds int) []byte {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "clip.mp4")
	cmd := exec.Command(LookPath(tb, "ffmpeg"), "-nostdin", "-v", "error", "-y", "-t", strconv.Itoa(seconds), "-i", Media(tb, "vtest.h264.ts"),
		"-c", "copy", "-movflags", "+faststart", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("ffmpeg: %v\n%s", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}
