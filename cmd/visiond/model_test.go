package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/infer/model/onnxpb"
	"github.com/visiond/visiond/internal/testutil"
)

// runBadCLI runs the command of args, which must fail with status and a stderr that says
// want, and leave nothing written at out.
func runBadCLI(t *testing.T, args []string, status int, want, out string) {
	t.Helper()
	got, stdout, stderr := runCLI(t, args...)
	if got != status || !strings.Contains(stderr, want) {
		t.Fatalf("status %d, stderr %q; want %d and %q (stdout %q)", got, stderr, status, want, stdout)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("%s written", out)
	}
}

func runCLI(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	status = cli(args, &out, &errb)
	return status, out.String(), errb.String()
}

func TestModelInspect(t *testing.T) {
	path := testutil.ThirdParty(t, "yolov8n.onnx")
	status, out, errs := runCLI(t, "model", "inspect", path)
	if status != 0 {
		t.Fatalf("status %d, stderr %q", status, errs)
	}
	for _, want := range []string{
		"file       " + path + " (12.2 MiB)\n",
		"precision  fp32\n",
		"opset      17 (IR version 8, producer pytorch",
		"input      images [1 3 640 640] float32: NCHW float, 640x640\n",
		"output     output0 [1 84 8400] float32\n",
		"layout     yolov8 [1,4+C,N], 8400 anchors\n",
		"classes    80: person, bicycle, car,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	status, out, errs = runCLI(t, "model", "inspect", "-json", path)
	if status != 0 {
		t.Fatalf("-json: status %d, stderr %q", status, errs)
	}
	var info model.Info
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("-json: %v:\n%s", err, out)
	}
	if info.Precision != model.FP32 || info.Opset != 17 || info.Layout != "yolov8 [1,4+C,N]" || len(info.Classes) != 80 ||
		info.Input.Name != "images" || fmt.Sprint(info.Output.Shape) != "[1 84 8400]" {
		t.Errorf("-json: %+v", info)
	}
}

// TestModelFP16 converts the real model with the command, checks what it prints (the
// agreement above 0.99), that inspect reports the result as fp16, and that a worker process
// loads it (visiond check -load on a config naming it).
func TestModelFP16(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	out := filepath.Join(t.TempDir(), "yolov8n-fp16.onnx")
	status, stdout, stderr := runCLI(t, "model", "fp16", "-model", in, "-out", out, "-library", lib,
		"-check", testutil.Media(t, "vtest.avi"), "-check-frames", "6")
	if status != 0 {
		t.Fatalf("status %d, stderr %q", status, stderr)
	}
	t.Log(stdout)
	if !strings.Contains(stdout, "wrote "+out+": fp16, 6.1 MiB (from "+in+", fp32, 12.2 MiB); input images [1 3 640 640] float32 (NCHW float), output output0 [1 84 8400] float32") {
		t.Errorf("output lacks the conversion line:\n%s", stdout)
	}
	m := regexp.MustCompile(`mAP@0\.5 ([0-9.]+) against the reference on 6 frames; [0-9.]+ ms per frame against [0-9.]+ ms: speed ratio [0-9.]+x`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("output lacks the agreement:\n%s", stdout)
	}
	if v, _ := strconv.ParseFloat(m[1], 64); v < 0.99 {
		t.Errorf("mAP@0.5 %v, want at least 0.99", v)
	}
	if strings.Contains(stdout, "warning") {
		t.Errorf("warning printed:\n%s", stdout)
	}

	status, stdout, stderr = runCLI(t, "model", "inspect", out)
	if status != 0 || !strings.Contains(stdout, "precision  fp16\n") || !strings.Contains(stdout, "classes    80: person") {
		t.Errorf("inspect the conversion: status %d, stdout %q, stderr %q", status, stdout, stderr)
	}

	cfg := writeConfig(t, fmt.Sprintf("workers: {model: %q, library: %q}\ncameras: []\n", out, lib))
	cmd := exec.Command(os.Args[0], "check", "-load", cfg) // a worker process: the test binary as visiond
	cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
	var outb, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &outb, &errb
	err := cmd.Run()
	stdout, stderr = outb.String(), errb.String()
	if err != nil || !strings.Contains(stdout, "loaded "+out) || !strings.Contains(stdout, "input 640x640, provider cpu, 80 classes: person") {
		t.Errorf("check -load the conversion: %v, stdout %q, stderr %q", err, stdout, stderr)
	}

	status, _, stderr = runCLI(t, "model", "fp16", "-model", out, "-out", out+".again", "-library", lib, "-check", testutil.Media(t, "vtest.avi"))
	if status != 1 || !strings.Contains(stderr, "model "+out+": not an fp32 model: it is fp16 already") {
		t.Errorf("converting an fp16 model: status %d, stderr %q", status, stderr)
	}
}

// TestModelUint8Input: visiond model prelude, and fp16 -uint8-input, write models that take
// the uint8 frame, agree with the original, and load in a worker process.
func TestModelUint8Input(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	dir := t.TempDir()
	for _, tc := range []struct {
		args      []string
		precision string
	}{
		{[]string{"model", "prelude", "-out", dir + "/prelude.onnx"}, "fp32"},
		{[]string{"model", "fp16", "-uint8-input", "-out", dir + "/fp16-prelude.onnx"}, "fp16"},
	} {
		out := tc.args[len(tc.args)-1]
		args := append(tc.args, "-model", in, "-library", lib, "-check", testutil.Media(t, "vtest.avi"), "-check-frames", "4")
		status, stdout, stderr := runCLI(t, args...)
		if status != 0 {
			t.Fatalf("%v: status %d, stderr %q", args, status, stderr)
		}
		t.Log(stdout)
		if !strings.Contains(stdout, "wrote "+out+": "+tc.precision+", ") || !strings.Contains(stdout, "input images [1 640 640 3] uint8 (NHWC uint8), output output0 [1 84 8400] float32") {
			t.Errorf("%v: output %q", args, stdout)
		}
		m := regexp.MustCompile(`mAP@0\.5 ([0-9.]+) against the reference on 4 frames`).FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("output lacks the agreement:\n%s", stdout)
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v < 0.99 {
			t.Errorf("%v: mAP@0.5 %v, want at least 0.99", args, v)
		}
		cfg := writeConfig(t, fmt.Sprintf("workers: {model: %q, library: %q}\ncameras: []\n", out, lib))
		cmd := exec.Command(os.Args[0], "check", "-load", cfg)
		cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
		if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "input 640x640, provider cpu, 80 classes") {
			t.Errorf("check -load %s: %v, %s", out, err, b)
		}
	}
	status, _, stderr := runCLI(t, "model", "prelude", "-model", dir+"/prelude.onnx", "-out", dir+"/again.onnx", "-library", lib,
		"-check", testutil.Media(t, "vtest.avi"))
	if status != 1 || !strings.Contains(stderr, "the model takes uint8 frames already") {
		t.Errorf("prelude twice: status %d, stderr %q", status, stderr)
	}
}

// TestConvertedModelThroughDaemon: the daemon, on the demo's sample camera, with its worker
// process running yolov8n converted by `visiond model fp16 -uint8-input` (float16 compute,
// the frame handed over as uint8), publishes people.
func TestConvertedModelThroughDaemon(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	out := filepath.Join(t.TempDir(), "yolov8n-fp16-u8.onnx")
	if status, _, stderr := runCLI(t, "model", "fp16", "-uint8-input", "-model", in, "-out", out, "-library", lib,
		"-check", testutil.Media(t, "vtest.avi"), "-check-frames", "1"); status != 0 {
		t.Fatalf("fp16 -uint8-input: status %d, stderr %q", status, stderr)
	}
	rtspAddr := testutil.FreeAddr(t)
	yaml := demoConfig(t, rtspAddr)
	if !strings.Contains(yaml, fmt.Sprintf("model: %q", in)) {
		t.Fatalf("demo config names no model %s:\n%s", in, yaml)
	}
	cfg := writeConfig(t, strings.Replace(yaml, fmt.Sprintf("model: %q", in), fmt.Sprintf("model: %q", out), 1))
	stderr := runPrintsPerson(t, cfg)
	if !strings.Contains(stderr, out) {
		t.Errorf("the log does not name the converted model %s:\n%s", out, stderr)
	}
}

// notDetector writes the real model with its output flattened: ONNX, but no layout the
// workers know.
func notDetector(t *testing.T) string {
	m, err := model.Load(testutil.ThirdParty(t, "yolov8n.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	g := m.GetGraph()
	g.Node = append(g.Node, &onnxpb.NodeProto{OpType: "Flatten", Input: []string{"output0"}, Output: []string{"flat"}})
	g.Output[0].Name = "flat"
	dims := g.Output[0].GetType().GetTensorType().GetShape().GetDim()
	dims[1].Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 84 * 8400}
	g.Output[0].GetType().GetTensorType().GetShape().Dim = dims[:2]
	path := filepath.Join(t.TempDir(), "flat.onnx")
	if err := model.Save(m, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestModelBadInput(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	video := testutil.Media(t, "vtest.avi")
	dir := t.TempDir()
	text := testutil.TempFile(t, "text.onnx", "this is not a model")
	flat := notDetector(t)
	out := filepath.Join(dir, "out.onnx")
	fp16 := func(args ...string) []string {
		return append([]string{"model", "fp16", "-library", lib, "-check", video, "-check-frames", "2"}, args...)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"no command", []string{"model"}, 2, "usage: visiond model <command>"},
		{"unknown command", []string{"model", "frob"}, 2, `unknown model command "frob"`},
		{"inspect: no file", []string{"model", "inspect"}, 2, "want one model file, got 0 arguments"},
		{"inspect: two files", []string{"model", "inspect", in, in}, 2, "want one model file, got 2 arguments"},
		{"inspect: unknown flag", []string{"model", "inspect", "-bogus", in}, 2, "flag provided but not defined: -bogus"},
		{"inspect: folder", []string{"model", "inspect", dir}, 1, "model " + dir + ": not a regular file"},
		{"inspect: missing", []string{"model", "inspect", dir + "/none.onnx"}, 1, "none.onnx: no such file or directory"},
		{"inspect: not ONNX", []string{"model", "inspect", text}, 1, "model " + text + ": not an ONNX model"},
		{"inspect: not a detector", []string{"model", "inspect", flat}, 1, `not a detector visiond can run: output "flat": shape [1 705600] is not [1,A,B]`},
		{"fp16: no -model", fp16("-out", out), 2, "-model is required"},
		{"fp16: no -out", fp16("-model", in), 2, "-out is required"},
		{"fp16: argument", fp16("-model", in, "-out", out, in), 2, "unexpected argument"},
		{"fp16: no frames", fp16("-model", in, "-out", out, "-check-frames", "0"), 2, "-check-frames 0: want at least 1"},
		{"fp16: bad provider", fp16("-model", in, "-out", out, "-provider", "tpu"), 2, `-provider: provider "tpu": want cpu, cuda or tensorrt`},
		{"fp16: bad device", fp16("-model", in, "-out", out, "-device", "-1"), 2, "-device -1: want 0 or more"},
		{"fp16: out in a missing folder", fp16("-model", in, "-out", dir+"/missing/out.onnx"), 1, "-out " + dir + "/missing/out.onnx: folder " + dir + "/missing: stat"},
		{"fp16: out is a folder", fp16("-model", in, "-out", dir), 1, "is a folder: want a file name"},
		{"fp16: out is the input", fp16("-model", in, "-out", in), 1, "is the input model"},
		{"fp16: input a folder", fp16("-model", dir, "-out", out), 1, "not a regular file"},
		{"fp16: input missing", fp16("-model", dir+"/none.onnx", "-out", out), 1, "none.onnx: no such file"},
		{"fp16: not ONNX", fp16("-model", text, "-out", out), 1, "not an ONNX model"},
		{"fp16: not a detector", fp16("-model", flat, "-out", out), 1, "not a detector visiond can run"},
		{"fp16: library missing", fp16("-model", in, "-out", out, "-library", dir+"/libonnxruntime.so.1"), 1, "onnxruntime library: stat " + dir + "/libonnxruntime.so.1: no such file or directory (-library names it)"},
		{"fp16: check source missing", fp16("-model", in, "-out", out, "-check", dir+"/none.avi"), 1, "none.avi: no such file or directory (-check names the frames"},
		{"fp16: check folder without images", fp16("-model", in, "-out", out, "-check", dir), 1, dir + ": no images"},
		{"fp16: check not a video", fp16("-model", in, "-out", out, "-check", text), 1, text + ": not a video OpenCV reads"},
	} {
		t.Run(tc.name, func(t *testing.T) { runBadCLI(t, tc.args, tc.status, tc.want, out) })
	}
}

// A check that cannot run the original model either (here: a provider this machine lacks)
// leaves the conversion written, unchecked, and fails.
func TestModelCheckProviderUnavailable(t *testing.T) {
	out := filepath.Join(t.TempDir(), "f.onnx")
	status, _, stderr := runCLI(t, "model", "fp16", "-model", testutil.ThirdParty(t, "yolov8n.onnx"), "-out", out,
		"-library", testutil.ThirdParty(t, "libonnxruntime.so.1"), "-check", testutil.Media(t, "vtest.avi"), "-check-frames", "1",
		"-provider", "cuda")
	if status != 1 || !strings.Contains(stderr, "compare: reference: ") || !strings.Contains(stderr, "provider cuda (device 0) unavailable") ||
		!strings.Contains(stderr, out+" written, not checked") {
		t.Fatalf("status %d, stderr %q", status, stderr)
	}
	if info, err := model.InspectFile(out); err != nil || info.Precision != model.FP16 {
		t.Errorf("%s: %+v, %v", out, info, err)
	}
}

// The exit statuses of visiond model as a process: 0 done, 1 failed, 2 usage.
func TestModelExitStatus(t *testing.T) {
	in := testutil.ThirdParty(t, "yolov8n.onnx")
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{[]string{"model", "inspect", in}, 0},
		{[]string{"model", "inspect", "-json", in}, 0},
		{[]string{"model", "inspect", t.TempDir()}, 1},
		{[]string{"model", "fp16", "-model", in, "-out", "/nonexistent/f.onnx"}, 1},
		{[]string{"model", "fp16", "-model", in}, 2},
		{[]string{"model"}, 2},
		{[]string{"model", "inspect"}, 2},
	} {
		cmd := exec.Command(os.Args[0], tc.args...)
		cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
		out, err := cmd.CombinedOutput()
		status := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			status = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.status {
			t.Errorf("visiond %s: status %d, want %d; output %q", strings.Join(tc.args, " "), status, tc.status, out)
		}
	}
}
