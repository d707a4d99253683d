package prep

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/internal/testutil"
)

// TestConvert converts the real model to float16 with the uint8 prelude, checks what it
// prints (the agreement above 0.99 on two frames) and what it wrote; then that Convert
// refuses to write over its input. cmd/visiond's tests run the commands end to end.
func TestConvert(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	out := filepath.Join(t.TempDir(), "fp16-u8.onnx")
	check := Check{Library: testutil.ThirdParty(t, "libonnxruntime.so.1"), Source: testutil.Media(t, "vtest.avi"), Frames: 2, Provider: infer.ProviderCPU}
	var b bytes.Buffer
	if err := Convert(&b, Conversion{In: in, Out: out, FP16: true, Uint8Input: true, Check: check}); err != nil {
		t.Fatal(err)
	}
	t.Log(b.String())
	if !strings.Contains(b.String(), "wrote "+out+": fp16, ") || !strings.Contains(b.String(), "input images [1 640 640 3] uint8 (NHWC uint8)") {
		t.Errorf("output lacks the conversion line:\n%s", b.String())
	}
	m := regexp.MustCompile(`mAP@0\.5 ([0-9.]+) against the reference on 2 frames`).FindStringSubmatch(b.String())
	if m == nil {
		t.Fatalf("output lacks the agreement:\n%s", b.String())
	}
	if v, _ := strconv.ParseFloat(m[1], 64); v < 0.99 {
		t.Errorf("mAP@0.5 %v, want at least 0.99", v)
	}
	if info, err := model.InspectFile(out); err != nil || info.Precision != model.FP16 {
		t.Errorf("%s: %+v, %v", out, info, err)
	}
	if err := Convert(&b, Conversion{In: out, Out: out, FP16: true, Check: check}); err == nil || !strings.Contains(err.Error(), "is the input model") {
		t.Errorf("converting onto the input: %v", err)
	}
}
