package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/model/onnxpb"
	"github.com/visiond/visiond/internal/geom"
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

// TestModelQuantizeScoredOn runs the command on two calibration frames (the model it makes
// is poor; what is checked is what it scores and says): without -eval it scores the frames
// held out of the calibration source and says so; with -holdout 0 and -eval every frame of
// the source calibrates and only the -eval source is scored.
func TestModelQuantizeScoredOn(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	video := testutil.Media(t, "vtest.avi")
	image := testutil.Media(t, "messi5.jpg")
	out := filepath.Join(t.TempDir(), "int8.onnx")
	q := func(args ...string) string {
		t.Helper()
		args = append([]string{"model", "quantize", "-model", in, "-out", out, "-library", lib, "-calib", video, "-frames", "2", "-threads", "2"}, args...)
		status, stdout, stderr := runCLI(t, args...)
		if status != 0 {
			t.Fatalf("%q: status %d, stderr %q, stdout %q", args, status, stderr, stdout)
		}
		return stdout
	}

	stdout := q("-holdout", "1")
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

	stdout = q("-holdout", "0", "-eval", image)
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

// TestModelQuantizeSiteFrames reads calibration (and -eval) frames from each kind of
// source: a video, a folder of images (a file that is no image is ignored by its name), an
// image file, globs of images (and a glob's bad matches and syntax), and a config whose
// sample camera plays the video over RTSP; each frame is letterboxed to the model's input.
func TestModelQuantizeSiteFrames(t *testing.T) {
	log := testutil.Logger(t)
	ctx := context.Background()
	video := testutil.Media(t, "vtest.avi")
	vtestLB := geom.NewLetterbox(768, 576, 640, 640)

	frames, err := siteFrames(ctx, video, 6, 640, 640, time.Minute, log)
	if err != nil || len(frames) != 6 {
		t.Fatalf("video: %d frames, %v", len(frames), err)
	}
	checkCanvas(t, "video", frames, vtestLB)

	dir := t.TempDir()
	for _, name := range []string{"messi5.jpg", "basketball1.png"} {
		b, err := os.ReadFile(testutil.Media(t, name))
		if err != nil {
			t.Fatal(err)
		}
		testutil.WriteFile(t, filepath.Join(dir, name), string(b))
	}
	testutil.WriteFile(t, filepath.Join(dir, "README.txt"), "not an image")
	frames, err = siteFrames(ctx, dir, 10, 320, 320, time.Minute, log)
	if err != nil || len(frames) != 2 || len(frames[0]) != 320*320*3 {
		t.Fatalf("folder: %d frames, %v; want the 2 images", len(frames), err)
	}
	folder := frames

	// An image file: one frame, letterboxed as the folder's (basketball1.png comes first).
	frames, err = siteFrames(ctx, filepath.Join(dir, "basketball1.png"), 10, 320, 320, time.Minute, log)
	if err != nil || len(frames) != 1 || !bytes.Equal(frames[0], folder[0]) {
		t.Fatalf("image: %d frames, %v; want the folder's first frame", len(frames), err)
	}
	// A glob: the images it matches, in name order.
	frames, err = siteFrames(ctx, filepath.Join(dir, "*.[jp][pn]g"), 10, 320, 320, time.Minute, log)
	if err != nil || len(frames) != 2 || !bytes.Equal(frames[0], folder[0]) || !bytes.Equal(frames[1], folder[1]) {
		t.Fatalf("glob: %d frames, %v; want the folder's 2 frames", len(frames), err)
	}
	frames, err = siteFrames(ctx, filepath.Join(dir, "m*"), 10, 320, 320, time.Minute, log)
	if err != nil || len(frames) != 1 || !bytes.Equal(frames[0], folder[1]) {
		t.Fatalf("glob m*: %d frames, %v; want messi5.jpg", len(frames), err)
	}
	for _, tc := range []struct{ pattern, want string }{
		{filepath.Join(dir, "*.gif"), "no such file, and no file matches it as a pattern"},
		{filepath.Join(dir, "*"), "matches " + filepath.Join(dir, "README.txt") + ", not an image"},
		{filepath.Join(dir, "[x"), "not a file, and not a pattern: syntax error in pattern"},
	} {
		if _, err := siteFrames(ctx, tc.pattern, 10, 320, 320, time.Minute, log); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("glob %s: %v, want %q", tc.pattern, err, tc.want)
		}
	}

	rtspAddr := testutil.FreeAddr(t)
	cfg := writeConfig(t, demoConfig(t, rtspAddr))
	frames, err = siteFrames(ctx, cfg, 3, 640, 640, 2*time.Minute, log)
	if err != nil || len(frames) != 3 {
		t.Fatalf("config: %d frames, %v", len(frames), err)
	}
	checkCanvas(t, "config", frames, vtestLB)
	if bytes.Equal(frames[0], frames[2]) {
		t.Error("config: the camera's frames are all the same")
	}
}

// checkCanvas checks that frames are lb's canvas: gray padding above and below the picture.
func checkCanvas(t *testing.T, what string, frames [][]byte, lb geom.Letterbox) {
	t.Helper()
	for i, f := range frames {
		if len(f) != lb.DstW*lb.DstH*3 {
			t.Fatalf("%s frame %d: %d bytes", what, i, len(f))
		}
		top := f[:lb.PadY*lb.DstW*3]
		if bytes.Count(top, []byte{geom.PadValue}) != len(top) {
			t.Fatalf("%s frame %d: the padding above the picture is not gray", what, i)
		}
		pic := f[lb.PadY*lb.DstW*3 : (lb.PadY+lb.ScaledH)*lb.DstW*3]
		if bytes.Count(pic, []byte{geom.PadValue}) == len(pic) {
			t.Fatalf("%s frame %d: no picture", what, i)
		}
	}
}

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

// TestModelQuantizeSameSource tells an -eval source that is, or lies in, the calibration source.
func TestModelQuantizeSameSource(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jpg"), filepath.Join(dir, "b.jpg")
	testutil.WriteFile(t, a, "a")
	testutil.WriteFile(t, b, "b")
	other := testutil.TempFile(t, "c.jpg", "c")
	for _, tc := range []struct {
		calib, eval string
		same        bool
	}{
		{a, a, true},
		{a, filepath.Join(dir, ".", "a.jpg"), true},
		{a, b, false},
		{dir, a, true},
		{dir, filepath.Join(dir, "*.jpg"), true},
		{dir, dir, true},
		{dir, other, false},
		{dir, filepath.Join(filepath.Dir(other), "*.jpg"), false},
		{a, filepath.Join(dir, "none.jpg"), false},
		{filepath.Join(dir, "none"), a, false},
	} {
		if _, same := sameSource(tc.calib, tc.eval); same != tc.same {
			t.Errorf("calib %s, eval %s: same %v, want %v", tc.calib, tc.eval, same, tc.same)
		}
	}
}

func TestModelQuantizeSplitHoldout(t *testing.T) {
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
