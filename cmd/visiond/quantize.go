package main

import (
	"context"
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
	"github.com/visiond/visiond/infer/worker"
)

// minAgreementINT8 is the mAP@0.5 against the FP32 model below which quantize warns.
const minAgreementINT8 = 0.90

// modelQuantizeCmd is `visiond model quantize`: static INT8 quantization (QDQ) of an FP32
// detector, calibrated on the site's own frames, then its agreement with the FP32 model on
// frames the calibration did not use: frames of the calibration source held out of it
// (-holdout) and, when -eval names them, frames of other sources. Held-out frames lie
// between calibration frames of the same scenes: they say how the calibration fits its own
// footage, and a source it has not seen is the one to judge the model by (docs/models.md
// measures both).
func modelQuantizeCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("model quantize", "", stderr)
	in := fs.String("model", "", "FP32 ONNX detector `file` to quantize (required)")
	out := fs.String("out", "", "`file` to write the INT8 model to (required; its folder must exist)")
	calib := fs.String("calib", "", "the site's frames (required): a video `file`, an image, a folder of images, a quoted glob of images, or a visiond config file (frames from its cameras)")
	frames := fs.Int("frames", 100, "calibration frames, spread over the source")
	holdout := fs.Int("holdout", 40, "further frames of the calibration source, not used for calibration, for an agreement check on them (0 with -eval: none)")
	var evals evalSources
	fs.Var(&evals, "eval", "frames of a `source` other than -calib for the agreement check, the one to judge the model by: a video file, an image, a folder of images, a quoted glob of images (\"site/*.jpg\") or a visiond config file; repeat it for several sources, each scored on its own")
	evalFrames := fs.Int("eval-frames", 40, "the most frames of each -eval source, spread over it")
	method := fs.String("method", string(model.MethodPercentile), "activation ranges: percentile, entropy or minmax")
	pct := fs.Float64("percentile", model.DefaultPercentile, "the percentile of -method percentile, in percent")
	reduce := fs.Bool("reduce-range", true, "7-bit weights: ONNX Runtime's u8s8 kernels on x86 CPUs without VNNI can saturate with 8-bit ones; -reduce-range=false for 8-bit (e.g. for TensorRT): compare the agreement")
	lib := fs.String("library", config.Default().Workers.Library, "ONNX Runtime `library` to calibrate and check with")
	threads := fs.Int("threads", runtime.NumCPU(), "threads of the calibration runs (the agreement check runs on one)")
	timeout := fs.Duration("calib-timeout", 5*time.Minute, "a config's cameras: the longest to wait for their frames")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	m, err := model.ParseMethod(*method)
	switch {
	case fs.NArg() > 0:
		return usagef("unexpected argument %q (the model goes after -model)", fs.Arg(0))
	case *in == "":
		return usagef("-model is required: the FP32 model to quantize")
	case *out == "":
		return usagef("-out is required: the file to write the INT8 model to")
	case *calib == "":
		return usagef("-calib is required: a video file, a folder of images or a visiond config of the site's cameras")
	case *frames <= 0:
		return usagef("-frames %d: want at least 1 calibration frame", *frames)
	case *holdout < 0 || *holdout == 0 && len(evals) == 0:
		return usagef("-holdout %d: want at least 1 frame for the agreement check (0 only with -eval)", *holdout)
	case *evalFrames <= 0:
		return usagef("-eval-frames %d: want at least 1", *evalFrames)
	case err != nil:
		return usagef("-method: %v", err)
	case !(*pct > 50 && *pct <= 100):
		return usagef("-percentile %v: want more than 50 and at most 100", *pct)
	case *threads <= 0:
		return usagef("-threads %d: want at least 1", *threads)
	case *timeout <= 0:
		return usagef("-calib-timeout %v: want more than 0", *timeout)
	}
	for _, e := range evals {
		if p, same := sameSource(*calib, e); same {
			return usagef("-eval %s: %s is in the calibration source %s: its frames are not unseen (leave -eval out to score on frames held out of the calibration)", e, p, *calib)
		}
	}
	if err := checkOutPath(*in, *out); err != nil {
		return err
	}
	info, err := model.InspectFile(*in)
	if err != nil {
		return err
	}
	fp32, err := model.Load(*in)
	if err != nil {
		return err
	}
	if err := model.CheckQuantizable(fp32); err != nil {
		return fmt.Errorf("model %s: %w", *in, err)
	}
	if _, err := os.Stat(*lib); err != nil {
		return fmt.Errorf("onnxruntime library: %w (-library names it)", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The -eval frames first: a bad source fails in seconds, not after the calibration.
	evalSets := make([][][]byte, len(evals))
	for i, e := range evals {
		if evalSets[i], err = siteFrames(ctx, e, *evalFrames, info.InputW, info.InputH, *timeout, log); err != nil {
			return fmt.Errorf("-eval: %w", err)
		}
	}
	all, err := siteFrames(ctx, *calib, *frames+*holdout, info.InputW, info.InputH, *timeout, log)
	if err != nil {
		return fmt.Errorf("-calib: %w", err)
	}
	calFrames, heldOut := splitHoldout(all, *holdout)
	if len(calFrames) == 0 || *holdout > 0 && len(heldOut) == 0 {
		return fmt.Errorf("-calib %s: %d frame(s): too few to calibrate on some and check the agreement on others", *calib, len(all))
	}
	for i, e := range evals {
		fmt.Fprintf(stdout, "-eval %s: %d frames for the agreement check\n", e, len(evalSets[i]))
	}

	t0 := time.Now()
	fmt.Fprintf(stdout, "calibrating on %d frames of %s (%s)...\n", len(calFrames), *calib, m)
	tensors, err := model.CalibrationTensors(fp32)
	if err != nil {
		return fmt.Errorf("model %s: %w", *in, err)
	}
	cal := model.NewCalibration()
	step, last := max(1, len(calFrames)/5), -1
	err = worker.Calibrate(infer.DetectorOptions{Model: *in, Library: *lib, Threads: *threads}, fp32, tensors, calFrames,
		func(frame int, name string, shape []int64, data []float32) error {
			if frame != last && frame > 0 && frame%step == 0 {
				fmt.Fprintf(stdout, "  %d/%d frames, %v\n", frame, len(calFrames), time.Since(t0).Round(time.Second))
			}
			last = frame
			return cal.Observe(name, shape, data)
		})
	if err != nil {
		return err
	}
	q, sum, err := model.Quantize(fp32, cal, model.QuantizeOptions{Method: m, Percentile: *pct, ReduceRange: *reduce,
		Note: fmt.Sprintf("calibrated on %d frames of %s", len(calFrames), *calib)})
	if err != nil {
		return fmt.Errorf("model %s: %w", *in, err)
	}
	if err := model.Save(q, *out); err != nil {
		return err
	}
	conv, err := model.InspectFile(*out)
	if err != nil {
		os.Remove(*out)
		return fmt.Errorf("the quantized model: %w (not kept)", err)
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %.1f MiB (from %s, %s, %.1f MiB) in %v; %d nodes in int8 (%s), %d left in float (the head)\n",
		*out, conv.Precision, conv.SizeMiB, *in, info.Precision, info.SizeMiB, time.Since(t0).Round(time.Second),
		sum.Nodes, formatOps(sum.ByOp), sum.Float)
	const note = "ONNX Runtime fuses the QDQ pairs into its int8 kernels at load"
	if len(heldOut) > 0 {
		if len(evals) == 0 {
			fmt.Fprintf(stdout, "scored on held-out frames of the calibration source: %d frames of %s between the calibration frames, of the same scenes; -eval SOURCE scores on frames it has not seen\n",
				len(heldOut), *calib)
		}
		check := checkFlags{library: *lib, source: fmt.Sprintf("%s held out from calibration", *calib), provider: string(infer.ProviderCPU)}
		if err := check.print(stdout, heldOut, *in, *out, minAgreementINT8, note); err != nil {
			return err
		}
	}
	for i, e := range evals {
		check := checkFlags{library: *lib, source: e + ", not the calibration source (-eval)", provider: string(infer.ProviderCPU)}
		if err := check.print(stdout, evalSets[i], *in, *out, minAgreementINT8, note); err != nil {
			return err
		}
	}
	return nil
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

// splitHoldout splits frames, spread over a source, into calibration frames and h held-out
// ones interleaved among them, so that both sample the whole source.
func splitHoldout(frames [][]byte, h int) (cal, held [][]byte) {
	n := len(frames)
	h = min(h, n/2)
	for i, f := range frames {
		// Frame i is held out when the count of held-out frames up to it, i*h/n rounded
		// down, steps up at i+1.
		if (i+1)*h/n != i*h/n {
			held = append(held, f)
		} else {
			cal = append(cal, f)
		}
	}
	return cal, held
}

// formatOps lists operator counts in a stable order.
func formatOps(byOp map[string]int) string {
	s := ""
	for _, op := range []string{"Conv", "Mul", "Sigmoid", "Add", "Concat", "MaxPool", "Resize", "Slice", "Split"} {
		if byOp[op] > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%d %s", byOp[op], op)
		}
	}
	return s
}
