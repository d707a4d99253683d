package sources

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/internal/geom"
)

// VideoFile reads a video file frame by frame, as fast as it decodes, each frame with its
// time in the video: what replaying a recording needs, where a camera of kind file paces
// its frames in real time, supersedes those it has no time for and loops. It decodes with
// the same capture backend (OpenCV's FFmpeg) and draws with the same letterbox as a camera
// of kind file, so a replay sees the pixels the daemon's file camera would. Next decodes a
// frame; Draw letterboxes the frame just decoded (frames not drawn cost only their
// decoding). One goroutine at a time; Close when done.
type VideoFile struct {
	path   string
	vc     *gocv.VideoCapture
	m      gocv.Mat
	lbx    *letterboxer
	fps    float64       // the container's frame rate; 0 when it states none
	period time.Duration // 1/fps, or 1/fileDefaultFPS
	n      int           // frames decoded
	last   time.Duration // the latest frame's time
}

// OpenVideoFile opens the video at path. Its errors name the file and what is wrong with
// it (missing, a directory, empty, not a video FFmpeg can open).
func OpenVideoFile(path string) (*VideoFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("%s is a directory, not a video file", path)
	}
	if st.Size() == 0 {
		return nil, fmt.Errorf("%s is empty, not a video file", path)
	}
	vc, err := gocv.OpenVideoCaptureWithAPI(path, gocv.VideoCaptureFFmpeg)
	if err != nil || !vc.IsOpened() {
		closeCapture(vc)
		return nil, fmt.Errorf("%s is not a video that FFmpeg can open", path)
	}
	v := &VideoFile{path: path, vc: vc, m: gocv.NewMat(), lbx: &letterboxer{scaled: gocv.NewMat(), rgb: gocv.NewMat()}}
	if fps := vc.Get(gocv.VideoCaptureFPS); fps > 0 && fps < 1000 {
		v.fps = fps
	}
	v.period = time.Duration(float64(time.Second) / fileDefaultFPS)
	if v.fps > 0 {
		v.period = time.Duration(float64(time.Second) / v.fps)
	}
	return v, nil
}

// FPS is the frame rate the file states, 0 when it states none.
func (v *VideoFile) FPS() float64 { return v.fps }

// FrameDuration is how long a frame of the video lasts: 1/FPS, or 1/25 s when the file
// states no rate.
func (v *VideoFile) FrameDuration() time.Duration { return v.period }

// Next decodes the next frame and returns its time in the video, from 0 at the first frame
// (its presentation time as FFmpeg reports it; a frame whose time is not after the
// previous one's, as a damaged or timeless stream may give, is taken to come one frame
// duration after it). At the end of the video it returns io.EOF; a file with no frame
// that decodes is an error.
func (v *VideoFile) Next() (time.Duration, error) {
	if !v.vc.Read(&v.m) || v.m.Empty() {
		if v.n == 0 {
			return 0, fmt.Errorf("%s has no frame that FFmpeg can decode", v.path)
		}
		return 0, io.EOF
	}
	// Milliseconds as a float: round to the microsecond, below what any frame rate needs.
	at := time.Duration(v.vc.Get(gocv.VideoCapturePosMsec)*1000) * time.Microsecond
	if v.n > 0 && at <= v.last {
		at = v.last + v.period
	}
	v.n++
	v.last = at
	return at, nil
}

// Draw letterboxes the frame Next decoded into pix, of w x h RGB24 (the model's input),
// padded as a camera pads its frames, and returns its geometry.
func (v *VideoFile) Draw(pix []byte, w, h int) (geom.Letterbox, error) {
	if v.n == 0 {
		return geom.Letterbox{}, errors.New("no frame decoded yet")
	}
	if len(pix) < w*h*3 {
		return geom.Letterbox{}, fmt.Errorf("buffer of %d bytes for a %dx%d RGB frame", len(pix), w, h)
	}
	lb := geom.NewLetterbox(v.m.Cols(), v.m.Rows(), w, h)
	fillPad(pix[:w*h*3])
	v.lbx.src = v.m
	err := v.lbx.fill(pix, lb)
	v.lbx.src = gocv.Mat{}
	if err != nil {
		return geom.Letterbox{}, fmt.Errorf("%s: frame %d: %w", v.path, v.n, err)
	}
	return lb, nil
}

// Close releases the capture and its buffers.
func (v *VideoFile) Close() {
	closeCapture(v.vc)
	v.m.Close()
	v.lbx.close()
}
