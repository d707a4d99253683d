package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/model/onnxpb"
	"github.com/visiond/visiond/internal/testutil"
)

// TestModelQuantize quantizes the real model on frames of the sample video with the command
// (few frames, to keep the test short), scored on frames held out of it and on two -eval
// sources (a glob of the sample images, the sample camera's video); checks what it prints,
// that inspect reports int8, and that the daemon, with the quantized model in its worker
// process, finds people on the sample camera.
func TestModelQuantize(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	out := filepath.Join(t.TempDir(), "yolov8n-int8.onnx")
	video := testutil.Media(t, "vtest.avi")
	images := filepath.Join(filepath.Dir(video), "*.[jp][pn]g") // messi5.jpg, basketball1.png
	camera := testutil.Media(t, "vtest.h264.ts")
	status, stdout, stderr := runCLI(t, "model", "quantize", "-model", in, "-out", out, "-library", lib,
		"-calib", video, "-frames", "8", "-holdout", "4", "-threads", "2",
		"-eval", images, "-eval", camera, "-eval-frames", "3")
	if status != 0 {
		t.Fatalf("status %d, stderr %q, stdout %q", status, stderr, stdout)
	}
	t.Log(stdout)
	for _, want := range []string{
		"-eval " + images + ": 2 frames for the agreement check\n",
		"-eval " + camera + ": 3 frames for the agreement check\n",
		"calibrating on 8 frames of " + video + " (percentile)",
		"wrote " + out + ": int8, 3.4 MiB (from " + in + ", fp32, 12.2 MiB)",
		"220 nodes in int8 (63 Conv, 57 Mul, 57 Sigmoid, 6 Add, 16 Concat, 3 MaxPool, 2 Resize, 16 Slice), 22 left in float (the head)",
		"agreement on 4 frames of " + video + " held out from calibration (CPU provider, one thread; ",
		"agreement on 2 frames of " + images + ", not the calibration source (-eval) (CPU provider, one thread; ",
		"agreement on 3 frames of " + camera + ", not the calibration source (-eval) (CPU provider, one thread; ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(stdout, "scored on held-out frames") {
		t.Error("with -eval, the output says it scored on held-out frames only")
	}
	agreements := agreementRe.FindAllStringSubmatch(stdout, -1)
	if len(agreements) != 3 || agreements[0][2] != "4" || agreements[1][2] != "2" || agreements[2][2] != "3" {
		t.Fatalf("want the agreement on 4 held-out frames, then on 2 and 3 frames of -eval's sources:\n%s", stdout)
	}
	for _, a := range agreements {
		if v, err := strconv.ParseFloat(a[1], 64); err != nil || v < 0 || v > 1 {
			t.Errorf("mAP@0.5 %q is not in [0, 1]", a[1])
		}
	}
	if v, _ := strconv.ParseFloat(agreements[0][1], 64); v < 0.8 {
		t.Errorf("mAP@0.5 %v on the held-out frames, want at least 0.8 (8 calibration frames)", v)
	}
	status, stdout, stderr = runCLI(t, "model", "inspect", out)
	if status != 0 || !strings.Contains(stdout, "precision  int8\n") || !strings.Contains(stdout, "classes    80: person") {
		t.Errorf("inspect: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	q, err := model.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := model.CheckQuantizable(q); err == nil || !strings.Contains(err.Error(), "already quantized") {
		t.Errorf("the result is not seen as quantized: %v", err)
	}

	// The daemon with the quantized model: a worker process loads it and people are printed.
	rtspAddr := testutil.FreeAddr(t)
	cfg := writeConfig(t, strings.Replace(demoConfig(t, rtspAddr), strconv.Quote(in), strconv.Quote(out), 1))
	if !strings.Contains(testutil.ReadFile(t, cfg), out) {
		t.Fatalf("config does not name the quantized model:\n%s", testutil.ReadFile(t, cfg))
	}
	if stderr := runPrintsPerson(t, cfg); !strings.Contains(stderr, out) {
		t.Errorf("the log does not name the quantized model %s:\n%s", out, stderr)
	}
}

// agreementRe matches an agreement line: mAP@0.5 and the frames.
var agreementRe = regexp.MustCompile(`mAP@0\.5 ([0-9.]+) against the reference on ([0-9]+) frames; [0-9.]+ ms per frame against [0-9.]+ ms: speed ratio [0-9.]+x`)

// quantizedFile writes the real model with a QuantizeLinear node added: what inspect and
// quantize take for a quantized model.
func quantizedFile(t *testing.T) string {
	m, err := model.Load(testutil.ThirdParty(t, "yolov8n.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	g := m.GetGraph()
	g.Node = append([]*onnxpb.NodeProto{{Name: "q", OpType: "QuantizeLinear", Input: []string{"images", "s", "z"}, Output: []string{"iq"}}}, g.Node...)
	path := filepath.Join(t.TempDir(), "q.onnx")
	if err := model.Save(m, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestModelQuantizeBadInput(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	video := testutil.Media(t, "vtest.avi")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.onnx")
	text := testutil.TempFile(t, "text.onnx", "this is not a model")
	notVideo := testutil.TempFile(t, "clip.mp4", "this is not a video")
	empty := testutil.TempFile(t, "empty.avi", "")
	imagesDir := t.TempDir()
	testutil.WriteFile(t, filepath.Join(imagesDir, "broken.jpg"), "not a JPEG")
	noCams := writeConfig(t, "workers: {model: "+strconv.Quote(in)+"}\ncameras:\n  - {id: a, url: \"rtsp://127.0.0.1:1/a\", enabled: false}\n")
	qdq := quantizedFile(t)
	evalDir := t.TempDir()
	testutil.WriteFile(t, filepath.Join(evalDir, "notes.txt"), "not an image")
	q := func(args ...string) []string {
		return append([]string{"model", "quantize", "-library", lib, "-frames", "2", "-holdout", "1"}, args...)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"no -model", q("-out", out, "-calib", video), 2, "-model is required"},
		{"no -out", q("-model", in, "-calib", video), 2, "-out is required"},
		{"no -calib", q("-model", in, "-out", out), 2, "-calib is required"},
		{"argument", q("-model", in, "-out", out, "-calib", video, in), 2, "unexpected argument"},
		{"frames 0", q("-model", in, "-out", out, "-calib", video, "-frames", "0"), 2, "-frames 0: want at least 1"},
		{"holdout 0", q("-model", in, "-out", out, "-calib", video, "-holdout", "0"), 2, "-holdout 0: want at least 1"},
		{"method", q("-model", in, "-out", out, "-calib", video, "-method", "kl"), 2, `-method: calibration method "kl": want percentile, entropy or minmax`},
		{"percentile", q("-model", in, "-out", out, "-calib", video, "-percentile", "30"), 2, "-percentile 30: want more than 50"},
		{"model not ONNX", q("-model", text, "-out", out, "-calib", video), 1, "model " + text + ": not an ONNX model"},
		{"model missing", q("-model", dir+"/none.onnx", "-out", out, "-calib", video), 1, "none.onnx: no such file"},
		{"model already quantized", q("-model", qdq, "-out", out, "-calib", video), 1, "model " + qdq + ": already quantized (int8)"},
		{"out in a missing folder", q("-model", in, "-out", dir+"/missing/out.onnx", "-calib", video), 1, "folder " + dir + "/missing"},
		{"library missing", q("-model", in, "-out", out, "-calib", video, "-library", dir+"/lib.so"), 1, "onnxruntime library: stat " + dir + "/lib.so: no such file"},
		{"calib missing", q("-model", in, "-out", out, "-calib", dir+"/none.avi"), 1, "-calib: " + dir + "/none.avi: no such file or directory"},
		{"calib empty", q("-model", in, "-out", out, "-calib", empty), 1, "-calib: " + empty + " is empty, not a video file"},
		{"calib not a video", q("-model", in, "-out", out, "-calib", notVideo), 1, "-calib: " + notVideo + " is not a video that FFmpeg can open"},
		{"calib folder without images", q("-model", in, "-out", out, "-calib", dir), 1, "-calib: " + dir + ": no images (.jpg, .jpeg, .png, .bmp) in the folder"},
		{"calib broken image", q("-model", in, "-out", out, "-calib", imagesDir), 1, "broken.jpg: not an image OpenCV reads"},
		{"calib config without cameras", q("-model", in, "-out", out, "-calib", noCams), 1, "-calib: " + noCams + ": no enabled camera"},
		{"calib one frame", q("-model", in, "-out", out, "-calib", testutil.Media(t, "messi5.jpg")), 1, "messi5.jpg: 1 frame(s): too few to calibrate on some"},
		{"eval empty", q("-model", in, "-out", out, "-calib", video, "-eval", ""), 2, `invalid value "" for flag -eval: empty: want a video file`},
		{"eval-frames 0", q("-model", in, "-out", out, "-calib", video, "-eval", notVideo, "-eval-frames", "0"), 2, "-eval-frames 0: want at least 1"},
		{"holdout 0 without eval", q("-model", in, "-out", out, "-calib", video, "-holdout", "0"), 2, "-holdout 0: want at least 1 frame for the agreement check (0 only with -eval)"},
		{"holdout negative", q("-model", in, "-out", out, "-calib", video, "-holdout", "-1", "-eval", notVideo), 2, "-holdout -1: want at least 1"},
		{"eval is calib", q("-model", in, "-out", out, "-calib", video, "-eval", video), 2, "-eval " + video + ": " + video + " is in the calibration source " + video + ": its frames are not unseen"},
		{"eval in calib folder", q("-model", in, "-out", out, "-calib", imagesDir, "-eval", filepath.Join(imagesDir, "*.jpg")), 2, "broken.jpg is in the calibration source " + imagesDir},
		{"eval missing", q("-model", in, "-out", out, "-calib", video, "-eval", dir+"/none.avi"), 1, "-eval: " + dir + "/none.avi: no such file or directory"},
		{"eval empty file", q("-model", in, "-out", out, "-calib", video, "-eval", empty), 1, "-eval: " + empty + " is empty, not a video file"},
		{"eval not a video", q("-model", in, "-out", out, "-calib", video, "-eval", notVideo), 1, "-eval: " + notVideo + " is not a video that FFmpeg can open"},
		{"eval folder without images", q("-model", in, "-out", out, "-calib", video, "-eval", evalDir), 1, "-eval: " + evalDir + ": no images (.jpg, .jpeg, .png, .bmp) in the folder"},
		{"eval broken image", q("-model", in, "-out", out, "-calib", video, "-eval", filepath.Join(imagesDir, "broken.jpg")), 1, "-eval: " + imagesDir + "/broken.jpg: not an image OpenCV reads"},
		{"eval glob without match", q("-model", in, "-out", out, "-calib", video, "-eval", evalDir+"/*.jpg"), 1, "-eval: " + evalDir + "/*.jpg: no such file, and no file matches it as a pattern"},
		{"eval glob of no image", q("-model", in, "-out", out, "-calib", video, "-eval", evalDir+"/*"), 1, "-eval: " + evalDir + "/*: matches " + evalDir + "/notes.txt, not an image"},
		{"second eval bad", q("-model", in, "-out", out, "-calib", video, "-eval", testutil.Media(t, "messi5.jpg"), "-eval", notVideo), 1, "-eval: " + notVideo + " is not a video"},
		{"eval good, calib bad", q("-model", in, "-out", out, "-calib", notVideo, "-eval", testutil.Media(t, "messi5.jpg")), 1, "-calib: " + notVideo + " is not a video"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := runCLI(t, tc.args...)
			if status != tc.status || !strings.Contains(stderr, tc.want) {
				t.Fatalf("status %d, stderr %q; want %d and %q (stdout %q)", status, stderr, tc.status, tc.want, stdout)
			}
			// Every bad input is told before the calibration starts, and nothing is written.
			if strings.Contains(stdout, "calibrating") {
				t.Errorf("the calibration started:\n%s", stdout)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s written", out)
			}
		})
	}
}
