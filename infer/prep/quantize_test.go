package prep

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/internal/testutil"
)

// agreementRe matches an agreement line: mAP@0.5 and the frames.
var agreementRe = regexp.MustCompile(`mAP@0\.5 ([0-9.]+) against the reference on ([0-9]+) frames; [0-9.]+ ms per frame against [0-9.]+ ms: speed ratio [0-9.]+x`)

// TestQuantizeScoredOn quantizes on two calibration frames (the model it makes
// is poor; what is checked is what it scores and says): without -eval it scores the frames
// held out of the calibration source and says so; with Holdout 0 and Eval every frame of
// the source calibrates and only the -eval source is scored.
func TestQuantizeScoredOn(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	video := testutil.Media(t, "vtest.avi")
	image := testutil.Media(t, "messi5.jpg")
	out := filepath.Join(t.TempDir(), "int8.onnx")
	q := func(holdout int, eval ...string) string {
		t.Helper()
		var b bytes.Buffer
		err := Quantize(context.Background(), &b, testutil.Logger(t), Quantization{In: in, Out: out, Library: lib, Calib: video,
			Frames: 2, Holdout: holdout, Eval: eval, EvalFrames: 40, Method: model.MethodPercentile, Percentile: model.DefaultPercentile,
			ReduceRange: true, Threads: 2, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("holdout %d, eval %q: %v; output %q", holdout, eval, err, b.String())
		}
		return b.String()
	}

	stdout := q(1)
	for _, want := range []string{
		"calibrating on 2 frames of " + video,
		"scored on held-out frames of the calibration source: 1 frames of " + video + " between the calibration frames",
		"agreement on 1 frames of " + video + " held out from calibration (CPU provider",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("without -eval: output lacks %q:\n%s", want, stdout)
		}
	}
	if a := agreementRe.FindAllStringSubmatch(stdout, -1); len(a) != 1 || a[0][2] != "1" || strings.Contains(stdout, "-eval)") {
		t.Errorf("without -eval: want one agreement, on the held-out frame:\n%s", stdout)
	}

	stdout = q(0, image)
	for _, want := range []string{
		"-eval " + image + ": 1 frames for the agreement check",
		"calibrating on 2 frames of " + video,
		"agreement on 1 frames of " + image + ", not the calibration source (-eval) (CPU provider",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("-holdout 0 -eval: output lacks %q:\n%s", want, stdout)
		}
	}
	if a := agreementRe.FindAllStringSubmatch(stdout, -1); len(a) != 1 || strings.Contains(stdout, "held out") {
		t.Errorf("-holdout 0 -eval: want one agreement, on the -eval frame:\n%s", stdout)
	}
}

func TestSplitHoldout(t *testing.T) {
	frames := make([][]byte, 10)
	for i := range frames {
		frames[i] = []byte{byte(i)}
	}
	cal, held := splitHoldout(frames, 3)
	var c, h []byte
	for _, f := range cal {
		c = append(c, f[0])
	}
	for _, f := range held {
		h = append(h, f[0])
	}
	if string(h) != "\x03\x06\x09" || string(c) != "\x00\x01\x02\x04\x05\x07\x08" {
		t.Errorf("held out %v, calibration %v: want 3, 6, 9 held out, spread", h, c)
	}
	// Never more than half held out.
	if cal, held := splitHoldout(frames[:2], 5); len(cal) != 1 || len(held) != 1 {
		t.Errorf("2 frames, 5 held out asked: %d and %d", len(cal), len(held))
	}
}
