package groundtruth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// The video goes in and out through the ffmpeg program (installed by scripts/setup.sh),
// which keeps this package free of cgo: any package's tests can import it.

// probeSize returns the width and height of file's first video stream.
func probeSize(ctx context.Context, file string) (w, h int, err error) {
	out, err := run(ctx, nil, "ffprobe", "-v", "error", "-select_streams", "v:0",
		"-show_entries", "stream=width,height", "-of", "csv=p=0", file)
	if err != nil {
		return 0, 0, err
	}
	// MPEG-TS files list the stream twice (under its program and on its own): take the first.
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	f := strings.Split(strings.TrimSpace(first), ",")
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ffprobe %s: no video stream size in %q", file, out)
	}
	w, err1 := strconv.Atoi(f[0])
	h, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("ffprobe %s: bad size %q", file, out)
	}
	return w, h, nil
}

// decodeFiltered decodes file, which must be w x h, through the video filter vf, into at
// most max frames.
func decodeFiltered(ctx context.Context, file string, w, h, max int, vf string) ([]*image.RGBA, error) {
	fw, fh, err := probeSize(ctx, file)
	if err != nil {
		return nil, err
	}
	if fw != w || fh != h {
		return nil, fmt.Errorf("%s is %dx%d, want %dx%d", file, fw, fh, w, h)
	}
	args := []string{"-nostdin", "-v", "error", "-i", file, "-an"}
	if vf != "" {
		args = append(args, "-vf", vf, "-vsync", "passthrough")
	}
	if max > 0 {
		args = append(args, "-frames:v", strconv.Itoa(max))
	}
	out, err := run(ctx, nil, "ffmpeg", append(args, "-f", "rawvideo", "-pix_fmt", "rgba", "-")...)
	if err != nil {
		return nil, err
	}
	n := w * h * 4
	if len(out)%n != 0 {
		return nil, fmt.Errorf("ffmpeg %s: %d bytes of frames, not a multiple of %dx%dx4", file, len(out), w, h)
	}
	var frames []*image.RGBA
	for off := 0; off < len(out); off += n {
		frames = append(frames, &image.RGBA{Pix: out[off : off+n : off+n], Stride: w * 4, Rect: image.Rect(0, 0, w, h)})
	}
	return frames, nil
}

// DecodeAll decodes every frame of a video file with ffmpeg, as RGBA w x h (the file's
// size). Meant for tests that read a written video back.
func DecodeAll(ctx context.Context, file string) ([]*image.RGBA, error) {
	w, h, err := probeSize(ctx, file)
	if err != nil {
		return nil, err
	}
	return decodeFiltered(ctx, file, w, h, 0, "")
}

// run runs a program with stdin, returning its standard output; an error carries the end
// of its standard error.
func run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 2048}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, stderr
	if err := cmd.Run(); err != nil {
		return nil, commandError(name, err, stderr)
	}
	return stdout.Bytes(), nil
}

func commandError(name string, err error, stderr *tailBuffer) error {
	if errors.Is(err, exec.ErrNotFound) {
		return fmt.Errorf("%s not installed (run scripts/setup.sh): %w", name, err)
	}
	if msg := strings.TrimSpace(stderr.String()); msg != "" {
		return fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
