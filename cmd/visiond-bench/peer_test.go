package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// peerPython is a Python with numpy and OpenCV for scripts/bench/peer.py (onnxruntime is
// not needed with --fake-output); the test is skipped without one.
func peerPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(py, "-c", "import numpy, cv2").Run() == nil {
			return py
		}
	}
	t.Skip("no python3 with numpy and cv2 (apt install python3-numpy python3-opencv)")
	return ""
}

const peerScript = "../../scripts/bench/peer.py"

// TestPeerPacer: with --fps, the plain loop analyses the frame at each slot of the stream's
// clock and skips those between (a 10 fps stream at 5 fps: every other frame; 30 fps: every
// sixth), keeps the slots at 5 a second where frames do not fall on them (12.5 fps), and
// starts again when the stream does.
func TestPeerPacer(t *testing.T) {
	py := peerPython(t)
	code := `
import importlib.util, sys
spec = importlib.util.spec_from_file_location("peer", sys.argv[1])
peer = importlib.util.module_from_spec(spec); spec.loader.exec_module(peer)
p = peer.Pacer(5)
print(",".join(str(pos) for pos in range(0, 2000, 100) if p.take(0, pos)))
print(",".join(str(pos) for pos in [0, 33, 67, 100, 133, 167, 200, 233, 267, 300, 333, 367, 400] if p.take(1, pos)))
print(",".join(str(pos) for pos in range(0, 1000, 80) if p.take(2, pos)))
p = peer.Pacer(0)
print(sum(p.take(0, pos) for pos in range(0, 1000, 100)))
`
	out, err := exec.Command(py, "-c", code, peerScript).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"0,200,400,600,800,1000,1200,1400,1600,1800", "0,200,400", "0,240,400,640,800", "10"}
	if len(lines) != len(want) {
		t.Fatalf("output %q", out)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, lines[i], want[i])
		}
	}
}

// TestPeerRun runs peer.py (a fake session: no onnxruntime needed) on two real RTSP cameras
// the way a peer-scale step does, and reads its result as a step.
func TestPeerRun(t *testing.T) {
	py := peerPython(t)
	video := "../../third_party/media/vtest.h264.ts"
	if _, err := os.Stat(video); err != nil {
		t.Skip("no sample video (scripts/setup.sh)")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "out.npy")
	if err := writeNPY(fake, "<f4", []int{1, 84, 8400}, make([]float32, 84*8400)); err != nil {
		t.Fatal(err)
	}
	cams, err := startCameras(video, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer cams.Close()
	urls := filepath.Join(dir, "urls.txt")
	if err := os.WriteFile(urls, []byte(cams.URL(0)+"\n"+cams.URL(1)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := peerSettings{Python: py, Script: peerScript, Mode: "plain", Model: "unused.onnx", Args: []string{"--fake-output", fake, "--fake-infer-ms", "1"}}
	ps, err := runPeer(p, urls, 2, 5, time.Second, 3*time.Second, filepath.Join(dir, "step"))
	if err != nil {
		t.Fatal(err)
	}
	w, c, err := ps.toStep(2)
	if err != nil {
		t.Fatal(err)
	}
	if w.Cameras != 2 || len(w.PerCamera) != 2 || w.Events == 0 || w.TotalP99 <= 0 || w.TotalP99 < w.TotalP50 || c.CPUSeconds <= 0 {
		t.Errorf("step window %+v cost %+v", w, c)
	}
	if ps.Versions["onnxruntime"] != "none (fake session)" {
		t.Errorf("versions %v: the fake session must say so", ps.Versions)
	}
	// A bad argument is peer.py's error, with its message.
	p.Mode = "fastest"
	if _, err := runPeer(p, urls, 1, 5, time.Second, time.Second, filepath.Join(dir, "bad")); err == nil || !strings.Contains(err.Error(), "--mode") {
		t.Errorf("a bad mode: %v, want peer.py's complaint about --mode", err)
	}
}

func TestPeerStepToStep(t *testing.T) {
	p99, p50 := 250.0, 120.0
	ps := peerStep{Seconds: 10, Frames: 100, FramesPerS: 10, PerCamera: map[string]float64{"cam000": 5, "cam001": 5}, MinCamera: 5, MaxCamera: 5,
		LatencyP50: &p50, LatencyP99: &p99, CPUSeconds: 4, CPUPerFrame: 40, CoresBusy: 0.4}
	w, c, err := ps.toStep(2)
	if err != nil {
		t.Fatal(err)
	}
	crit := criterion{FPS: 5, P99MS: 300, MinShare: 0.95, Total: 0.95}
	if ok, why := crit.check(w); !ok || c.CPUPerFrameMS != 40 || c.CoresBusy != 0.4 {
		t.Errorf("check %v %q, cost %+v", ok, why, c)
	}
	p99 = 400
	if ok, why := crit.check(func() window { w, _, _ := ps.toStep(2); return w }()); ok || !strings.Contains(why, "p99") {
		t.Errorf("p99 400 ms passed: %v %q", ok, why)
	}
	if _, _, err := ps.toStep(3); err == nil || !strings.Contains(err.Error(), "asked 3") {
		t.Errorf("3 cameras asked, 2 measured: %v", err)
	}
	ps.LatencyP99 = nil
	if _, _, err := ps.toStep(2); err == nil || !strings.Contains(err.Error(), "latency_p99_ms") {
		t.Errorf("no latency: %v", err)
	}
}
