package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/samplecam"
)

// Issue 13, item 5 (optional part): `visiond check -load` loads the model in a real worker
// process per pool and reports what it loaded; a model ONNX Runtime cannot load fails the
// check with the worker's error, as run would fail at start.
func TestCheckLoad(t *testing.T) {
	model, library := testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1")
	labels := testutil.TempFile(t, "labels.txt", strings.Repeat("thing\n", 79)+"last thing\n")
	notAModel := testutil.TempFile(t, "model.onnx", "not a model\n")
	oldLibrary := testutil.ThirdParty(t, "ort-1.23.2", "libonnxruntime.so.1")
	for _, tc := range []struct {
		name, workers string
		cameras       string // default []
		status        int
		want          []string // in stdout for status 0, in stderr otherwise
	}{
		{"model", fmt.Sprintf("{model: %q, library: %q, pools: [{count: 3, threads: 1}]}", model, library), "", 0,
			[]string{"workers.pools[0] (cpu): loaded " + model, "input 640x640, provider cpu, 80 classes: person, bicycle, car,", "toothbrush\n", ": ok (0 cameras, 0 enabled)"}},
		{"labels and two pools", fmt.Sprintf("{model: %q, library: %q, labels: %q, pools: [{count: 1}, {count: 2, threads: 2}]}", model, library, labels), "", 0,
			[]string{"workers.pools[0] (cpu)", "workers.pools[1] (cpu)", "80 classes: thing, thing,", "last thing\n"}},
		// Issue 14: the analytics settings' class names, checked against the loaded model's.
		{"known class", fmt.Sprintf("{model: %q, library: %q, pools: [{count: 1}]}", model, library),
			"\n  - {id: a, url: rtsp://h, zones: [{id: z, polygon: [[0, 0], [1, 0], [1, 1]], classes: [person]}]}", 0,
			[]string{": ok (1 cameras, 1 enabled)"}},
		{"unknown class", fmt.Sprintf("{model: %q, library: %q, pools: [{count: 1}]}", model, library),
			"\n  - {id: a, url: rtsp://h, zones: [{id: z, polygon: [[0, 0], [1, 0], [1, 1]], classes: [person, unicorn]}]}", 1,
			[]string{"workers.pools[0] (cpu): the analytics settings name classes the model does not have:\n",
				`line 3: cameras[0].zones[0].classes: "unicorn" is not a class of the model (zone "z", camera "a")`}},
		{"not a model", fmt.Sprintf("{model: %q, library: %q}", notAModel, library), "", 1,
			[]string{"workers.pools[0] (cpu): ", "model " + notAModel + ": "}},
		// Issue 41: a library older than the binding loads (ONNX Runtime 1.23.2, from npm's
		// onnxruntime-node: make setup-tests) names its version and the one needed.
		{"older library", fmt.Sprintf("{model: %q, library: %q}", model, oldLibrary), "", 1,
			[]string{"workers.pools[0] (cpu): ", "ONNX Runtime 1.23.2 found at " + oldLibrary + "; this build needs 1.24 or newer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cameras := cmp.Or(tc.cameras, " []")
			cfg := writeConfig(t, "workers: "+tc.workers+"\ncameras:"+cameras+"\n")
			cmd := exec.Command(os.Args[0], "check", "-load", cfg)
			cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			status := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				status = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			out := stdout.String()
			if tc.status != 0 {
				out = stderr.String()
			}
			if status != tc.status {
				t.Fatalf("status %d, want %d; stdout %q stderr %q", status, tc.status, stdout.String(), stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output %q, want it to contain %q", out, w)
				}
			}
			if tc.status != 0 && !strings.HasPrefix(stderr.String(), "visiond check: "+cfg+": workers.pools[0]") {
				t.Errorf("stderr %q: want the file and the pool first", stderr.String())
			}
		})
	}
}

// Issue 41: `visiond run` with a library older than the binding loads stops at the start with
// the same words as check -load, from the worker that could not load it.
func TestRunOlderLibrary(t *testing.T) {
	model := testutil.ThirdParty(t, "yolov8n.onnx")
	oldLibrary := testutil.ThirdParty(t, "ort-1.23.2", "libonnxruntime.so.1")
	cfg := writeConfig(t, fmt.Sprintf("workers: {model: %q, library: %q, pools: [{count: 1}]}\n"+
		"nats: {listen: \"127.0.0.1:0\"}\nhttp: {listen: \"127.0.0.1:0\"}\nstate_dir: %q\ncameras: []\n", model, oldLibrary, t.TempDir()))
	status, _, stderr := runVisiond(t, "run", "-config", cfg)
	if status != 1 {
		t.Fatalf("run: exit status %d, want 1; stderr %q", status, stderr)
	}
	want := "visiond run: workers.pools[0] (cpu): infer: worker 0 (pid "
	need := "ONNX Runtime 1.23.2 found at " + oldLibrary + "; this build needs 1.24 or newer: point workers.library at a newer libonnxruntime.so"
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, need) {
		t.Errorf("stderr %q: want %q ... %q", stderr, want, need)
	}
}

// Issue 41: `visiond check -load` opens the cameras it can reach and reports each one's
// keyframe interval, warning of one longer than the camera's clips' pre_capture (keyframes
// every 1 and 12 s against 5 s); a camera it cannot reach is reported after its first
// attempt, without failing the check.
func TestCheckLoadCameras(t *testing.T) {
	model, library := testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1")
	streams := testutil.GOPStreams(t, 30, 1, 12)
	rtsp := &samplecam.Server{Listen: "127.0.0.1:0", Streams: streams, Logger: testutil.Logger(t)}
	if err := rtsp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rtsp.Close)
	closed := testutil.FreeAddr(t) // nothing listens there
	cfg := writeConfig(t, fmt.Sprintf("workers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n"+
		"  - {id: g1, url: %q, clips: {enabled: true, pre_capture: 5s}}\n"+
		"  - {id: g12, url: %q, clips: {enabled: true, pre_capture: 5s}}\n"+
		"  - {id: gone, url: \"rtsp://%s/x\"}\n", model, library, rtsp.URL("g1"), rtsp.URL("g12"), closed))
	status, stdout, stderr := runVisiond(t, "check", "-load", cfg) // -probe 30s: two keyframes 12 s apart, wherever the stream is joined
	if status != 0 {
		t.Fatalf("check -load: status %d; stderr %q", status, stderr)
	}
	for _, want := range []string{
		"cameras[g1]: keyframe interval 1.0 s\n",
		"cameras[g12]: keyframe interval 12.0 s\n",
		"cameras[g12]: warning: keyframe interval 12.0 s is longer than clips' pre_capture 5.0 s",
		"cameras[gone]: not reached within 30 s: ",
		": ok (3 cameras, 3 enabled)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "cameras[g1]: warning") {
		t.Errorf("a warning for keyframes every second:\n%s", stdout)
	}
}
