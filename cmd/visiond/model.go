package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/worker"
)

const modelUsage = `usage: visiond model <command> [flags]

commands:
  inspect [-json] FILE     input, output layout, classes, opset and precision of a model
  fp16 -model IN -out OUT  convert an fp32 model to float16 weights and compute (for cuda and
                           tensorrt), float32 input and output kept; prints its agreement
  prelude -model IN -out OUT  make a model take the letterboxed uint8 frame as it is and
                           convert it to float inside the graph; prints its agreement
  quantize -model IN -out OUT -calib SOURCE [-eval SOURCE]  static INT8 (QDQ) quantization
                           calibrated on the site's frames (video, images, visiond config);
                           prints its agreement on frames held out of them and on -eval's,
                           a source the calibration has not seen

"visiond model <command> -h" lists a command's flags. docs/models.md tells more.
`

// modelCmd is `visiond model`: it works on ONNX model files, in Go.
func modelCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, modelUsage)
		return usageError{err: errors.New("no model command"), printed: true}
	}
	switch args[0] {
	case "inspect":
		return modelInspectCmd(args[1:], stdout, stderr)
	case "fp16":
		return modelConvertCmd("fp16", args[1:], stdout, stderr)
	case "prelude":
		return modelConvertCmd("prelude", args[1:], stdout, stderr)
	case "quantize":
		return modelQuantizeCmd(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, modelUsage)
		return nil
	}
	fmt.Fprint(stderr, modelUsage)
	return usagef("unknown model command %q", args[0])
}

func modelInspectCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("model inspect", " FILE", stderr)
	asJSON := fs.Bool("json", false, "print JSON (every class name, shapes as arrays, -1 for a dimension not fixed)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("want one model file, got %d arguments", fs.NArg())
	}
	info, err := model.InspectFile(fs.Arg(0))
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	printInfo(stdout, info)
	return nil
}

// printInfo prints what model inspect found, one line per property.
func printInfo(w io.Writer, i model.Info) {
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

// checkFlags are the flags of a conversion's agreement check, shared by the conversions.
type checkFlags struct {
	library  string
	source   string
	frames   int
	provider string
	device   int
}

func (c *checkFlags) register(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
}) {
	def := config.Default()
	fs.StringVar(&c.library, "library", def.Workers.Library, "ONNX Runtime `library` the agreement check runs the models with (default: workers.library's, $ONNXRUNTIME_SHARED_LIBRARY_PATH when set)")
	fs.StringVar(&c.source, "check", def.Sample.File,
		"frames for the agreement check: a video `file` or a folder of images, letterboxed to the model's input (default: the demo's sample video)")
	fs.IntVar(&c.frames, "check-frames", 20, "number of frames of the agreement check (a video: one every 5th frame)")
	fs.StringVar(&c.provider, "provider", string(infer.ProviderCPU), "execution `provider` the agreement check runs both models on: cpu (one thread each), cuda or tensorrt")
	fs.IntVar(&c.device, "device", 0, "CUDA `device` of -provider cuda or tensorrt")
}

// check validates the flags: a usage error names the one that is wrong.
func (c *checkFlags) check() error {
	if c.frames <= 0 {
		return usagef("-check-frames %d: want at least 1", c.frames)
	}
	if _, err := infer.ParseProvider(c.provider); err != nil {
		return usagef("-provider: %v", err)
	}
	if c.device < 0 {
		return usagef("-device %d: want 0 or more", c.device)
	}
	return nil
}

// options are the detector options of model path in the check.
func (c *checkFlags) options(path string) infer.DetectorOptions {
	return infer.DetectorOptions{Model: path, Library: c.library, Provider: infer.Provider(c.provider), Device: c.device}
}

// modelConvertCmd is `visiond model fp16` and `visiond model prelude`: load, convert, save,
// check the agreement with the original.
func modelConvertCmd(name string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("model "+name, "", stderr)
	in := fs.String("model", "", "ONNX detector `file` to convert (required)")
	out := fs.String("out", "", "`file` to write the converted model to (required; its folder must exist)")
	uint8In := name == "prelude"
	if name == "fp16" {
		fs.BoolVar(&uint8In, "uint8-input", false, "also add the uint8 input prelude (as visiond model prelude)")
	}
	var check checkFlags
	check.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q (the model goes after -model)", fs.Arg(0))
	case *in == "":
		return usagef("-model is required: the model to convert")
	case *out == "":
		return usagef("-out is required: the file to write the converted model to")
	}
	if err := check.check(); err != nil {
		return err
	}
	if err := checkOutPath(*in, *out); err != nil {
		return err
	}
	info, err := model.InspectFile(*in)
	if err != nil {
		return err
	}
	frames, err := check.load(info)
	if err != nil {
		return err
	}
	m, err := model.Load(*in)
	if err != nil {
		return err
	}
	// The prelude first, so that fp16 converts its Cast and Div too.
	if uint8In {
		if err := model.AddUint8Prelude(m); err != nil {
			return fmt.Errorf("model %s: %w", *in, err)
		}
	}
	note := "the uint8 input saves the CPU's conversion and 3/4 of the bytes copied to a GPU"
	if name == "fp16" {
		if err := model.ConvertFP16(m); err != nil {
			return fmt.Errorf("model %s: %w", *in, err)
		}
		note = "ONNX Runtime's CPU provider runs float16 models, but not faster: the gain is on cuda and tensorrt"
	}
	if err := model.Save(m, *out); err != nil {
		return err
	}
	conv, err := model.InspectFile(*out)
	if err != nil {
		os.Remove(*out)
		return fmt.Errorf("the converted model: %w (not kept)", err)
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %.1f MiB (from %s, %s, %.1f MiB); input %s (%s), output %s\n",
		*out, conv.Precision, conv.SizeMiB, *in, info.Precision, info.SizeMiB, conv.Input, conv.InputLayout, conv.Output)
	return check.print(stdout, frames, *in, *out, 0.99, note)
}

// checkOutPath fails when out cannot be written as a model: its folder missing, a folder
// itself, or the input file.
func checkOutPath(in, out string) error {
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

// load checks the library and reads the check's frames for a model of info's input size,
// before anything is converted.
func (c *checkFlags) load(info model.Info) ([][]byte, error) {
	if _, err := os.Stat(c.library); err != nil {
		return nil, fmt.Errorf("agreement check: onnxruntime library: %w (-library names it)", err)
	}
	frames, err := agreementFrames(c.source, c.frames, info.InputW, info.InputH)
	if err != nil {
		return nil, fmt.Errorf("agreement check: %w (-check names the frames: a video file or a folder of images)", err)
	}
	return frames, nil
}

// print runs the reference (in) and the converted model (out) on frames (worker.Compare:
// the CPU provider, one thread each, unless -provider says otherwise) and prints their
// agreement, with a warning when mAP@0.5 is below aim. A converted model that the workers'
// Detector cannot load or run is removed and the error returned.
func (c *checkFlags) print(w io.Writer, frames [][]byte, in, out string, aim float64, note string) error {
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
	if c.provider != string(infer.ProviderCPU) {
		on = fmt.Sprintf("provider %s, device %d", c.provider, c.device)
	} else {
		on += "; " + note
	}
	fmt.Fprintf(w, "agreement on %d frames of %s (%s):\n  %s\n", ag.Frames, c.source, on, ag)
	if ag.MAP50 < aim {
		fmt.Fprintf(w, "warning: mAP@0.5 %.4f is below %.2f: compare the two models' detections on your cameras before using it\n", ag.MAP50, aim)
	}
	return nil
}

// imageExts are the still-image files a folder of check frames may hold (read only; the
// quantizer's calibration frames use it too).
var imageExts = []string{".jpg", ".jpeg", ".png", ".bmp"}

// agreementFrames reads n frames of source, a video file (one every 5th frame from the
// start) or a folder of images (its first n in name order), each letterboxed to w x h
// RGB24 by worker.LetterboxImage: the daemon's geometry, scaled by OpenCV where the cameras'
// path scales with swscale. The frame sources of `visiond model quantize` (infer/model,
// the daemon's own decode and letterbox) are to replace it once merged.
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
