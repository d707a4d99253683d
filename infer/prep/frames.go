package prep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/sources"
	"github.com/visiond/visiond/sources/samplecam"
)

// SiteFrames reads n frames of source, letterboxed to w x h RGB24 exactly as the daemon
// draws them for a model of that input:
//   - a visiond config file (.yaml, .yml): frames of its enabled cameras, through the
//     daemon's own sources (RTSP, GStreamer, file), one per camera per analysed interval
//     (the camera's fps), shared evenly among the cameras; the built-in sample camera is
//     started when the config enables it. Within timeout, or what came is used (an error
//     when nothing did);
//   - a folder: its images (.jpg, .jpeg, .png, .bmp) in name order, n spread evenly over them,
//     letterboxed by worker.LetterboxImage as the daemon does still images;
//   - an image file (by those extensions): that one frame, letterboxed the same way;
//   - a glob (a pattern with *, ? or [ that names no file itself, filepath.Match's syntax):
//     the images it matches, in name order, as a folder's; a match that is not an image is
//     an error, for the pattern was the user's choice;
//   - anything else: a video file, n frames spread evenly over it (sources.SampleFile: a
//     camera of kind file's decoding and letterbox, unpaced).
//
// Fewer than n frames come back when the source has fewer.
func SiteFrames(ctx context.Context, source string, n, w, h int, timeout time.Duration, log *slog.Logger) ([][]byte, error) {
	st, err := os.Stat(source)
	if err != nil {
		if isGlob(source) && errors.Is(err, os.ErrNotExist) {
			paths, err := globImages(source)
			if err != nil {
				return nil, err
			}
			return imageFrames(paths, n, w, h)
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if st.IsDir() {
		return folderFrames(source, n, w, h)
	}
	switch ext := strings.ToLower(filepath.Ext(source)); {
	case ext == ".yaml" || ext == ".yml":
		return cameraFrames(ctx, source, n, w, h, timeout, log)
	case slices.Contains(imageExts, ext):
		return imageFrames([]string{source}, n, w, h)
	}
	frames, _, err := sources.SampleFile(ctx, source, w, h, n)
	return frames, err
}

// isGlob reports whether source has filepath.Match's meta characters.
func isGlob(source string) bool { return strings.ContainsAny(source, "*?[") }

// globImages returns the files pattern matches, in name order; each must be an image.
func globImages(pattern string) ([]string, error) {
	paths, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: not a file, and not a pattern: %w", pattern, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no such file, and no file matches it as a pattern", pattern)
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if st.IsDir() || !slices.Contains(imageExts, strings.ToLower(filepath.Ext(p))) {
			return nil, fmt.Errorf("%s: matches %s, not an image (%s): a pattern names images; give a video or a folder as a source of its own",
				pattern, p, strings.Join(imageExts, ", "))
		}
	}
	return paths, nil // filepath.Glob sorts them
}

// sourceFiles returns the files and folders source names: the matches of a glob, else
// source itself. Read errors are left to SiteFrames, which names them.
func sourceFiles(source string) []string {
	if _, err := os.Stat(source); err != nil && isGlob(source) {
		if paths, err := filepath.Glob(source); err == nil {
			return paths
		}
	}
	return []string{source}
}

// SameSource reports whether frames of eval could be frames of calib: a file or folder that
// is calib, or lies in the folder calib is (a config's cameras are not looked into).
func SameSource(calib, eval string) (string, bool) {
	cst, err := os.Stat(calib)
	if err != nil {
		return "", false
	}
	for _, p := range sourceFiles(eval) {
		if st, err := os.Stat(p); err == nil && os.SameFile(st, cst) {
			return p, true
		}
		if cst.IsDir() {
			if st, err := os.Stat(filepath.Dir(p)); err == nil && os.SameFile(st, cst) {
				return p, true
			}
		}
	}
	return "", false
}

// folderFrames reads n images spread evenly over the folder's images in name order.
func folderFrames(dir string, n, w, h int) ([][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range ents {
		if !e.IsDir() && slices.Contains(imageExts, strings.ToLower(filepath.Ext(e.Name()))) {
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no images (%s) in the folder", dir, strings.Join(imageExts, ", "))
	}
	return imageFrames(paths, n, w, h)
}

// imageFrames reads n images spread evenly over paths, each letterboxed to w x h.
func imageFrames(paths []string, n, w, h int) ([][]byte, error) {
	var frames [][]byte
	for _, i := range spread(len(paths), n) {
		img := gocv.IMRead(paths[i], gocv.IMReadColor)
		if img.Empty() {
			img.Close()
			return nil, fmt.Errorf("%s: not an image OpenCV reads", paths[i])
		}
		pix := make([]byte, w*h*3)
		_, err := worker.LetterboxImage(img, w, h, pix)
		img.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", paths[i], err)
		}
		frames = append(frames, pix)
	}
	return frames, nil
}

// spread returns min(n, total) indexes spread evenly over 0..total-1.
func spread(total, n int) []int {
	n = min(n, total)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i * total / n
	}
	return idx
}

// cameraFrames takes frames from the enabled cameras of the config file at path.
func cameraFrames(ctx context.Context, path string, n, w, h int, timeout time.Duration, log *slog.Logger) ([][]byte, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	var cams []config.Camera
	for _, c := range cfg.Cameras {
		if c.Enabled {
			cams = append(cams, c)
		}
	}
	if len(cams) == 0 {
		return nil, fmt.Errorf("%s: no enabled camera to take frames from", path)
	}
	if cfg.Sample.Enabled {
		s := &samplecam.Server{Listen: cfg.Sample.Listen, Streams: map[string]string{samplecam.Path: cfg.Sample.File}, Logger: log}
		if err := s.Start(); err != nil {
			return nil, fmt.Errorf("sample camera: %w", err)
		}
		defer s.Close()
	}
	per := (n + len(cams) - 1) / len(cams)
	g := &frameGather{per: per, got: map[string][][]byte{}, due: map[string]time.Time{}, full: make(chan struct{})}
	for _, c := range cams {
		g.every = append(g.every, time.Duration(float64(time.Second)/c.FPS))
	}
	var started []*sources.Camera
	defer func() {
		for _, s := range started {
			s.Close()
		}
	}()
	g.left = len(cams)
	for i, c := range cams {
		src := c.Source()
		src.InputW, src.InputH = w, h
		src.Logger = log
		every := g.every[i]
		src.OnFrame = func(f *sources.Frame) { g.take(f, every) }
		src.Start()
		started = append(started, src)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-g.full:
	case <-timer.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for _, s := range started {
		s.Close()
	}
	started = nil
	var frames [][]byte
	var short []string
	for _, c := range cams {
		got := g.got[c.ID]
		if len(got) < per {
			short = append(short, fmt.Sprintf("%s %d", c.ID, len(got)))
		}
		frames = append(frames, got...)
	}
	if len(short) > 0 {
		if len(frames) == 0 {
			return nil, fmt.Errorf("%s: no camera delivered a frame within %v", path, timeout)
		}
		log.Warn("cameras delivered fewer frames than asked within the time allowed", "want_per_camera", per,
			"got", strings.Join(short, ", "), "timeout", timeout)
	}
	return frames[:min(n, len(frames))], nil
}

// frameGather keeps copies of the cameras' frames, one per camera per interval, until each
// camera has per of them.
type frameGather struct {
	per   int
	every []time.Duration

	mu   sync.Mutex
	got  map[string][][]byte
	due  map[string]time.Time
	left int           // cameras still short
	full chan struct{} // closed when left reaches 0
}

// take is a camera's OnFrame: it copies the frame if the camera is due one, and releases it.
func (g *frameGather) take(f *sources.Frame, every time.Duration) {
	defer f.Release()
	g.mu.Lock()
	defer g.mu.Unlock()
	have := g.got[f.Camera]
	if len(have) >= g.per || f.Received.Before(g.due[f.Camera]) {
		return
	}
	lb := f.Letterbox
	pix := make([]byte, lb.DstW*lb.DstH*3)
	if err := f.WriteRGB(pix); err != nil {
		return // not expected: the frame is of the input's size; the camera's next one is taken
	}
	g.due[f.Camera] = f.Received.Add(every)
	g.got[f.Camera] = append(have, pix)
	if len(have)+1 == g.per {
		g.left--
		if g.left == 0 {
			close(g.full)
		}
	}
}
