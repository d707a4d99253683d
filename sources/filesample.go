package sources

import (
	"context"
	"errors"
	"fmt"
	"os"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/internal/geom"
)

// SampleFile reads n frames spread evenly over the video file at path (every total/n-th
// frame, total as the container states it; the first n when it states none), letterboxed
// into w x h RGB24 exactly as a camera of kind file draws them: the same capture backend
// (OpenCV's FFmpeg) and the same letterbox. It reads as fast as it decodes, without a
// camera's pacing: what calibrating a model on a site's recording needs. Fewer than n frames
// come back when the file has fewer; none is an error.
func SampleFile(ctx context.Context, path string, w, h, n int) ([][]byte, []geom.Letterbox, error) {
	if n <= 0 {
		return nil, nil, fmt.Errorf("sample %s: %d frames asked, want at least 1", path, n)
	}
	if w <= 0 || h <= 0 {
		return nil, nil, fmt.Errorf("sample %s: letterbox %dx%d is not positive", path, w, h)
	}
	st, err := os.Stat(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if st.IsDir() {
		return nil, nil, fmt.Errorf("%s is a directory, not a video file", path)
	}
	if st.Size() == 0 {
		return nil, nil, fmt.Errorf("%s is empty, not a video file", path)
	}
	vc, err := gocv.OpenVideoCaptureWithAPI(path, gocv.VideoCaptureFFmpeg)
	if err != nil || !vc.IsOpened() {
		closeCapture(vc)
		return nil, nil, fmt.Errorf("%s is not a video that FFmpeg can open", path)
	}
	defer closeCapture(vc)
	step := 1
	if total := int(vc.Get(gocv.VideoCaptureFrameCount)); total > n {
		step = total / n
	}
	m := gocv.NewMat()
	defer m.Close()
	lbx := &letterboxer{scaled: gocv.NewMat(), rgb: gocv.NewMat()}
	defer lbx.close()
	var (
		frames [][]byte
		lbs    []geom.Letterbox
	)
	for i := 0; len(frames) < n; i++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if !vc.Read(&m) || m.Empty() {
			break
		}
		if i%step != 0 {
			continue
		}
		lb := geom.NewLetterbox(m.Cols(), m.Rows(), w, h)
		pix := make([]byte, w*h*3)
		fillPad(pix)
		lbx.src = m
		err := lbx.fill(pix, lb)
		lbx.src = gocv.Mat{}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: frame %d: %w", path, i, err)
		}
		frames = append(frames, pix)
		lbs = append(lbs, lb)
	}
	if len(frames) == 0 {
		return nil, nil, fmt.Errorf("%s has no frame that FFmpeg can decode", path)
	}
	return frames, lbs, nil
}
