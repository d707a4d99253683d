// Package prep prepares a detector model for a site, the work behind `visiond model`: it
// prints what a model is (inspect), converts it (float16, the uint8 input prelude, static
// INT8 quantization calibrated on the site's own frames) and checks each conversion's
// agreement with the original on frames it reads from videos, images or a config's cameras.
// infer/model rewrites the ONNX graphs; infer/worker runs them; this package puts the two
// together with the frames, so that the command only parses flags.
package prep

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/worker"
)

// PrintInfo prints what model.InspectFile found, one line per property.
func PrintInfo(w io.Writer, i model.Info) {
	fmt.Fprintf(w, "file       %s (%.1f MiB)\n", i.Path, i.SizeMiB)
	fmt.Fprintf(w, "precision  %s\n", i.Precision)
	producer := ""
	if i.Producer != "" {
		producer = ", producer " + i.Producer
	}
	fmt.Fprintf(w, "opset      %d (IR version %d%s)\n", i.Opset, i.IRVersion, producer)
	fmt.Fprintf(w, "input      %s: %s, %dx%d\n", i.Input, i.InputLayout, i.InputW, i.InputH)
	fmt.Fprintf(w, "output     %s\n", i.Output)
	fmt.Fprintf(w, "layout     %s, %d anchors\n", i.Layout, i.Anchors)
	switch {
	case len(i.Classes) > 0:
		fmt.Fprintf(w, "classes    %d: %s\n", len(i.Classes), strings.Join(i.Classes, ", "))
	case i.ClassCount > 0:
		fmt.Fprintf(w, "classes    %d, without names (no \"names\" metadata: give the workers a labels file)\n", i.ClassCount)
	default:
		fmt.Fprintf(w, "classes    not stated (no \"names\" metadata; the layout does not say)\n")
	}
}

// Check is a conversion's agreement check: the original and the converted model run on the
// same frames (worker.Compare) and their detections are compared.
type Check struct {
	Library  string         // ONNX Runtime library both models run with
	Source   string         // the frames: a video file or a folder of images (Frames reads it); named in the report
	Frames   int            // how many frames Frames reads (a video: one every 5th frame)
	Provider infer.Provider // execution provider both models run on; cpu: one thread each
	Device   int            // CUDA device of provider cuda or tensorrt
}

// options are the detector options of model path in the check.
func (c Check) options(path string) infer.DetectorOptions {
	return infer.DetectorOptions{Model: path, Library: c.Library, Provider: c.Provider, Device: c.Device}
}

// Load checks the library and reads the check's frames for a model of info's input size,
// before anything is converted.
func (c Check) Load(info model.Info) ([][]byte, error) {
	if _, err := os.Stat(c.Library); err != nil {
		return nil, fmt.Errorf("agreement check: onnxruntime library: %w (-library names it)", err)
	}
	frames, err := agreementFrames(c.Source, c.Frames, info.InputW, info.InputH)
	if err != nil {
		return nil, fmt.Errorf("agreement check: %w (-check names the frames: a video file or a folder of images)", err)
	}
	return frames, nil
}

// Report runs the reference (in) and the converted model (out) on frames (worker.Compare:
// the CPU provider, one thread each, unless Provider says otherwise) and prints their
// agreement, with a warning when mAP@0.5 is below aim; note follows the provider on the CPU.
// A converted model that the workers' Detector cannot load or run is removed and the error
// returned.
func (c Check) Report(w io.Writer, frames [][]byte, in, out string, aim float64, note string) error {
	ag, err := worker.Compare(c.options(in), c.options(out), frames)
	var ce *worker.CandidateError
	switch {
	case errors.As(err, &ce):
		os.Remove(out)
		return fmt.Errorf("agreement check: the converted model: %w (%s not kept)", err, out)
	case err != nil: // the original failed too: the check's settings, not the conversion
		return fmt.Errorf("agreement check: %w (%s written, not checked)", err, out)
	}
	on := "CPU provider, one thread"
	if c.Provider != infer.ProviderCPU {
		on = fmt.Sprintf("provider %s, device %d", c.Provider, c.Device)
	} else {
		on += "; " + note
	}
	fmt.Fprintf(w, "agreement on %d frames of %s (%s):\n  %s\n", ag.Frames, c.Source, on, ag)
	if ag.MAP50 < aim {
		fmt.Fprintf(w, "warning: mAP@0.5 %.4f is below %.2f: compare the two models' detections on your cameras before using it\n", ag.MAP50, aim)
	}
	return nil
}

// Conversion says what Convert does.
type Conversion struct {
	In, Out    string // the model to convert and the file to write (its folder must exist)
	FP16       bool   // float16 weights and compute (for cuda and tensorrt), float32 input and output kept
	Uint8Input bool   // the uint8 input prelude: the letterboxed frame as it is, converted inside the graph
	Check      Check  // the agreement check of the result against In
}

// Convert is `visiond model fp16` and `visiond model prelude`: load, convert, save, check the
// agreement with the original; it prints what it wrote and the agreement to w.
func Convert(w io.Writer, c Conversion) error {
	if err := CheckOut(c.In, c.Out); err != nil {
		return err
	}
	info, err := model.InspectFile(c.In)
	if err != nil {
		return err
	}
	frames, err := c.Check.Load(info)
	if err != nil {
		return err
	}
	m, err := model.Load(c.In)
	if err != nil {
		return err
	}
	// The prelude first, so that fp16 converts its Cast and Div too.
	if c.Uint8Input {
		if err := model.AddUint8Prelude(m); err != nil {
			return fmt.Errorf("model %s: %w", c.In, err)
		}
	}
	note := "the uint8 input saves the CPU's conversion and 3/4 of the bytes copied to a GPU"
	if c.FP16 {
		if err := model.ConvertFP16(m); err != nil {
			return fmt.Errorf("model %s: %w", c.In, err)
		}
		note = "ONNX Runtime's CPU provider runs float16 models, but not faster: the gain is on cuda and tensorrt"
	}
	if err := model.Save(m, c.Out); err != nil {
		return err
	}
	conv, err := model.InspectFile(c.Out)
	if err != nil {
		os.Remove(c.Out)
		return fmt.Errorf("the converted model: %w (not kept)", err)
	}
	fmt.Fprintf(w, "wrote %s: %s, %.1f MiB (from %s, %s, %.1f MiB); input %s (%s), output %s\n",
		c.Out, conv.Precision, conv.SizeMiB, c.In, info.Precision, info.SizeMiB, conv.Input, conv.InputLayout, conv.Output)
	return c.Check.Report(w, frames, c.In, c.Out, 0.99, note)
}

// CheckOut fails when out cannot be written as a model converted from in: its folder
// missing, a folder itself, or the input file.
func CheckOut(in, out string) error {
	dir := filepath.Dir(out)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("-out %s: folder %s: %w", out, dir, err)
	case !st.IsDir():
		return fmt.Errorf("-out %s: %s is not a folder", out, dir)
	}
	if st, err := os.Stat(out); err == nil {
		if st.IsDir() {
			return fmt.Errorf("-out %s is a folder: want a file name", out)
		}
		if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
			return fmt.Errorf("-out %s is the input model: write the conversion to another file", out)
		}
	}
	return nil
}

// imageExts are the still-image files a folder of check frames may hold (read only; the
// quantizer's calibration frames use it too).
var imageExts = []string{".jpg", ".jpeg", ".png", ".bmp"}

// agreementFrames reads n frames of source, a video file (one every 5th frame from the
// start) or a folder of images (its first n in name order), each letterboxed to w x h
// RGB24 by worker.LetterboxImage: the daemon's geometry, scaled by OpenCV where the cameras'
// path scales with swscale. SiteFrames, the quantizer's frame sources (the daemon's own
// decode and letterbox), are to replace it.
func agreementFrames(source string, n, w, h int) ([][]byte, error) {
	st, err := os.Stat(source)
	if err != nil {
		return nil, err
	}
	var frames [][]byte
	add := func(img gocv.Mat, what string) error {
		pix := make([]byte, w*h*3)
		if _, err := worker.LetterboxImage(img, w, h, pix); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		frames = append(frames, pix)
		return nil
	}
	if st.IsDir() {
		ents, err := os.ReadDir(source)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if len(frames) == n {
				break
			}
			if e.IsDir() || !slices.Contains(imageExts, strings.ToLower(filepath.Ext(e.Name()))) {
				continue
			}
			p := filepath.Join(source, e.Name())
			img := gocv.IMRead(p, gocv.IMReadColor)
			if img.Empty() {
				img.Close()
				return nil, fmt.Errorf("%s: not an image OpenCV reads", p)
			}
			err := add(img, p)
			img.Close()
			if err != nil {
				return nil, err
			}
		}
		if len(frames) == 0 {
			return nil, fmt.Errorf("%s: no images (%s)", source, strings.Join(imageExts, ", "))
		}
		return frames, nil
	}
	// FFmpeg only: OpenCV would try GStreamer and image sequences too, each printing its
	// complaint about a file that is not a video.
	vc, err := gocv.VideoCaptureFileWithAPI(source, gocv.VideoCaptureFFmpeg)
	if err != nil || !vc.IsOpened() {
		if vc != nil {
			vc.Close()
		}
		return nil, fmt.Errorf("%s: not a video OpenCV reads", source)
	}
	defer vc.Close()
	img := gocv.NewMat()
	defer img.Close()
	for i := 0; len(frames) < n; i++ {
		if !vc.Read(&img) || img.Empty() {
			break
		}
		if i%5 != 0 {
			continue
		}
		if err := add(img, fmt.Sprintf("%s frame %d", source, i)); err != nil {
			return nil, err
		}
	}
	if len(frames) == 0 {
		return nil, fmt.Errorf("%s: no frames: not a video OpenCV reads", source)
	}
	return frames, nil
}
