package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/prep"
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

// modelCmd is `visiond model`: it works on ONNX model files, in Go (infer/prep).
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
	prep.PrintInfo(stdout, info)
	return nil
}

// checkFlags registers the flags of a conversion's agreement check on fs, into c.
func checkFlags(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
}, c *prep.Check, provider *string) {
	def := config.Default()
	fs.StringVar(&c.Library, "library", def.Workers.Library, "ONNX Runtime `library` the agreement check runs the models with (default: workers.library's, $ONNXRUNTIME_SHARED_LIBRARY_PATH when set)")
	fs.StringVar(&c.Source, "check", def.Sample.File,
		"frames for the agreement check: a video `file` or a folder of images, letterboxed to the model's input (default: the demo's sample video)")
	fs.IntVar(&c.Frames, "check-frames", 20, "number of frames of the agreement check (a video: one every 5th frame)")
	fs.StringVar(provider, "provider", string(infer.ProviderCPU), "execution `provider` the agreement check runs both models on: cpu (one thread each), cuda or tensorrt")
	fs.IntVar(&c.Device, "device", 0, "CUDA `device` of -provider cuda or tensorrt")
}

// validCheck validates the check's flags: a usage error names the one that is wrong.
func validCheck(c *prep.Check, provider string) error {
	if c.Frames <= 0 {
		return usagef("-check-frames %d: want at least 1", c.Frames)
	}
	p, err := infer.ParseProvider(provider)
	if err != nil {
		return usagef("-provider: %v", err)
	}
	c.Provider = p
	if c.Device < 0 {
		return usagef("-device %d: want 0 or more", c.Device)
	}
	return nil
}

// modelConvertCmd is `visiond model fp16` and `visiond model prelude` (prep.Convert).
func modelConvertCmd(name string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("model "+name, "", stderr)
	c := prep.Conversion{FP16: name == "fp16", Uint8Input: name == "prelude"}
	fs.StringVar(&c.In, "model", "", "ONNX detector `file` to convert (required)")
	fs.StringVar(&c.Out, "out", "", "`file` to write the converted model to (required; its folder must exist)")
	if name == "fp16" {
		fs.BoolVar(&c.Uint8Input, "uint8-input", false, "also add the uint8 input prelude (as visiond model prelude)")
	}
	var provider string
	checkFlags(fs, &c.Check, &provider)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q (the model goes after -model)", fs.Arg(0))
	case c.In == "":
		return usagef("-model is required: the model to convert")
	case c.Out == "":
		return usagef("-out is required: the file to write the converted model to")
	}
	if err := validCheck(&c.Check, provider); err != nil {
		return err
	}
	return prep.Convert(stdout, c)
}

// modelQuantizeCmd is `visiond model quantize` (prep.Quantize).
func modelQuantizeCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("model quantize", "", stderr)
	var q prep.Quantization
	fs.StringVar(&q.In, "model", "", "FP32 ONNX detector `file` to quantize (required)")
	fs.StringVar(&q.Out, "out", "", "`file` to write the INT8 model to (required; its folder must exist)")
	fs.StringVar(&q.Calib, "calib", "", "the site's frames (required): a video `file`, an image, a folder of images, a quoted glob of images, or a visiond config file (frames from its cameras)")
	fs.IntVar(&q.Frames, "frames", 100, "calibration frames, spread over the source")
	fs.IntVar(&q.Holdout, "holdout", 40, "further frames of the calibration source, not used for calibration, for an agreement check on them (0 with -eval: none)")
	var evals evalSources
	fs.Var(&evals, "eval", "frames of a `source` other than -calib for the agreement check, the one to judge the model by: a video file, an image, a folder of images, a quoted glob of images (\"site/*.jpg\") or a visiond config file; repeat it for several sources, each scored on its own")
	fs.IntVar(&q.EvalFrames, "eval-frames", 40, "the most frames of each -eval source, spread over it")
	method := fs.String("method", string(model.MethodPercentile), "activation ranges: percentile, entropy or minmax")
	fs.Float64Var(&q.Percentile, "percentile", model.DefaultPercentile, "the percentile of -method percentile, in percent")
	fs.BoolVar(&q.ReduceRange, "reduce-range", true, "7-bit weights: ONNX Runtime's u8s8 kernels on x86 CPUs without VNNI can saturate with 8-bit ones; -reduce-range=false for 8-bit (e.g. for TensorRT): compare the agreement")
	fs.StringVar(&q.Library, "library", config.Default().Workers.Library, "ONNX Runtime `library` to calibrate and check with")
	fs.IntVar(&q.Threads, "threads", runtime.NumCPU(), "threads of the calibration runs (the agreement check runs on one)")
	fs.DurationVar(&q.Timeout, "calib-timeout", 5*time.Minute, "a config's cameras: the longest to wait for their frames")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	q.Eval = evals
	m, err := model.ParseMethod(*method)
	q.Method = m
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q (the model goes after -model)", fs.Arg(0))
	case q.In == "":
		return usagef("-model is required: the FP32 model to quantize")
	case q.Out == "":
		return usagef("-out is required: the file to write the INT8 model to")
	case q.Calib == "":
		return usagef("-calib is required: a video file, a folder of images or a visiond config of the site's cameras")
	case q.Frames <= 0:
		return usagef("-frames %d: want at least 1 calibration frame", q.Frames)
	case q.Holdout < 0 || q.Holdout == 0 && len(evals) == 0:
		return usagef("-holdout %d: want at least 1 frame for the agreement check (0 only with -eval)", q.Holdout)
	case q.EvalFrames <= 0:
		return usagef("-eval-frames %d: want at least 1", q.EvalFrames)
	case err != nil:
		return usagef("-method: %v", err)
	case !(q.Percentile > 50 && q.Percentile <= 100):
		return usagef("-percentile %v: want more than 50 and at most 100", q.Percentile)
	case q.Threads <= 0:
		return usagef("-threads %d: want at least 1", q.Threads)
	case q.Timeout <= 0:
		return usagef("-calib-timeout %v: want more than 0", q.Timeout)
	}
	for _, e := range evals {
		if p, same := prep.SameSource(q.Calib, e); same {
			return usagef("-eval %s: %s is in the calibration source %s: its frames are not unseen (leave -eval out to score on frames held out of the calibration)", e, p, q.Calib)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return prep.Quantize(ctx, stdout, log, q)
}

// evalSources is -eval: the sources of the agreement check, in the order given.
type evalSources []string

func (e *evalSources) String() string { return strings.Join(*e, ", ") }

func (e *evalSources) Set(s string) error {
	if s == "" {
		return errors.New("empty: want a video file, an image, a folder of images, a glob or a visiond config")
	}
	*e = append(*e, s)
	return nil
}
