package prep

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/worker"
)

// MinAgreementINT8 is the mAP@0.5 against the FP32 model below which Quantize warns.
const MinAgreementINT8 = 0.90

// Quantization says what Quantize does.
type Quantization struct {
	In, Out     string        // the FP32 model and the file to write the INT8 model to (its folder must exist)
	Calib       string        // the site's frames: a source SiteFrames reads
	Frames      int           // calibration frames, spread over Calib
	Holdout     int           // further frames of Calib, not calibrated on, for an agreement check (0: none; then Eval must name a source)
	Eval        []string      // sources other than Calib for agreement checks, each scored on its own
	EvalFrames  int           // the most frames of each Eval source, spread over it
	Method      model.Method  // how activation ranges are found
	Percentile  float64       // the percentile of model.MethodPercentile, in percent
	ReduceRange bool          // 7-bit weights (x86 CPUs without VNNI)
	Library     string        // ONNX Runtime library to calibrate and check with
	Threads     int           // threads of the calibration runs (the agreement check runs on one)
	Timeout     time.Duration // a config's cameras: the longest to wait for their frames
}

// Quantize is `visiond model quantize`: static INT8 quantization (QDQ) of an FP32 detector,
// calibrated on the site's own frames, then its agreement with the FP32 model on frames the
// calibration did not use: frames of the calibration source held out of it (Holdout) and,
// when Eval names them, frames of other sources. Held-out frames lie between calibration
// frames of the same scenes: they say how the calibration fits its own footage, and a source
// it has not seen is the one to judge the model by (docs/models.md measures both). It prints
// its progress, what it wrote and the agreements to w; log takes the cameras' warnings.
func Quantize(ctx context.Context, w io.Writer, log *slog.Logger, q Quantization) error {
	if err := CheckOut(q.In, q.Out); err != nil {
		return err
	}
	info, err := model.InspectFile(q.In)
	if err != nil {
		return err
	}
	fp32, err := model.Load(q.In)
	if err != nil {
		return err
	}
	if err := model.CheckQuantizable(fp32); err != nil {
		return fmt.Errorf("model %s: %w", q.In, err)
	}
	if _, err := os.Stat(q.Library); err != nil {
		return fmt.Errorf("onnxruntime library: %w (-library names it)", err)
	}

	// The -eval frames first: a bad source fails in seconds, not after the calibration.
	evalSets := make([][][]byte, len(q.Eval))
	for i, e := range q.Eval {
		if evalSets[i], err = SiteFrames(ctx, e, q.EvalFrames, info.InputW, info.InputH, q.Timeout, log); err != nil {
			return fmt.Errorf("-eval: %w", err)
		}
	}
	all, err := SiteFrames(ctx, q.Calib, q.Frames+q.Holdout, info.InputW, info.InputH, q.Timeout, log)
	if err != nil {
		return fmt.Errorf("-calib: %w", err)
	}
	calFrames, heldOut := splitHoldout(all, q.Holdout)
	if len(calFrames) == 0 || q.Holdout > 0 && len(heldOut) == 0 {
		return fmt.Errorf("-calib %s: %d frame(s): too few to calibrate on some and check the agreement on others", q.Calib, len(all))
	}
	for i, e := range q.Eval {
		fmt.Fprintf(w, "-eval %s: %d frames for the agreement check\n", e, len(evalSets[i]))
	}

	t0 := time.Now()
	fmt.Fprintf(w, "calibrating on %d frames of %s (%s)...\n", len(calFrames), q.Calib, q.Method)
	tensors, err := model.CalibrationTensors(fp32)
	if err != nil {
		return fmt.Errorf("model %s: %w", q.In, err)
	}
	cal := model.NewCalibration()
	step, last := max(1, len(calFrames)/5), -1
	err = worker.Calibrate(infer.DetectorOptions{Model: q.In, Library: q.Library, Threads: q.Threads}, fp32, tensors, calFrames,
		func(frame int, name string, shape []int64, data []float32) error {
			if frame != last && frame > 0 && frame%step == 0 {
				fmt.Fprintf(w, "  %d/%d frames, %v\n", frame, len(calFrames), time.Since(t0).Round(time.Second))
			}
			last = frame
			return cal.Observe(name, shape, data)
		})
	if err != nil {
		return err
	}
	qm, sum, err := model.Quantize(fp32, cal, model.QuantizeOptions{Method: q.Method, Percentile: q.Percentile, ReduceRange: q.ReduceRange,
		Note: fmt.Sprintf("calibrated on %d frames of %s", len(calFrames), q.Calib)})
	if err != nil {
		return fmt.Errorf("model %s: %w", q.In, err)
	}
	if err := model.Save(qm, q.Out); err != nil {
		return err
	}
	conv, err := model.InspectFile(q.Out)
	if err != nil {
		os.Remove(q.Out)
		return fmt.Errorf("the quantized model: %w (not kept)", err)
	}
	fmt.Fprintf(w, "wrote %s: %s, %.1f MiB (from %s, %s, %.1f MiB) in %v; %d nodes in int8 (%s), %d left in float (the head)\n",
		q.Out, conv.Precision, conv.SizeMiB, q.In, info.Precision, info.SizeMiB, time.Since(t0).Round(time.Second),
		sum.Nodes, formatOps(sum.ByOp), sum.Float)
	const note = "ONNX Runtime fuses the QDQ pairs into its int8 kernels at load"
	if len(heldOut) > 0 {
		if len(q.Eval) == 0 {
			fmt.Fprintf(w, "scored on held-out frames of the calibration source: %d frames of %s between the calibration frames, of the same scenes; -eval SOURCE scores on frames it has not seen\n",
				len(heldOut), q.Calib)
		}
		check := Check{Library: q.Library, Source: fmt.Sprintf("%s held out from calibration", q.Calib), Provider: infer.ProviderCPU}
		if err := check.Report(w, heldOut, q.In, q.Out, MinAgreementINT8, note); err != nil {
			return err
		}
	}
	for i, e := range q.Eval {
		check := Check{Library: q.Library, Source: e + ", not the calibration source (-eval)", Provider: infer.ProviderCPU}
		if err := check.Report(w, evalSets[i], q.In, q.Out, MinAgreementINT8, note); err != nil {
			return err
		}
	}
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
