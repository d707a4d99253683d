package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
)

// `visiond replay -json VIDEO` as a process, with the embedded demo config (its sample
// camera's zone and line, 5 fps) on the sample video's first 10 s: every line of stdout
// parses as {"subject", "event"}, the events of the demo's subjects with the daemon's wire
// JSON, one detection event per frame due (50), people tracked; the summary on stderr; exit
// status 0.
func TestReplayCommandJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 10 s of video through a real worker")
	}
	root := testutil.ModuleRoot(t) // where the demo config's third_party/ paths lead
	testutil.ThirdParty(t, "yolov8n.onnx")
	clip := filepath.Join(t.TempDir(), "clip.ts")
	cut := exec.Command(testutil.LookPath(t, "ffmpeg"), "-v", "error", "-i", testutil.Media(t, "vtest.h264.ts"), "-t", "10", "-c", "copy", clip)
	if b, err := cut.CombinedOutput(); err != nil {
		t.Fatalf("cutting the sample: %v: %s", err, b)
	}
	cmd := exec.Command(os.Args[0], "replay", "-json", clip)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1", "VISIOND_CONFIG=") // its workers inherit it
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("visiond replay -json: %v; stderr:\n%s", err, stderr.String())
	}
	bySubject := map[string]int{}
	people := map[uint64]bool{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct {
			Subject string          `json:"subject"`
			Event   json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Subject == "" || len(line.Event) == 0 {
			t.Fatalf("line %q: %v, want {\"subject\": ..., \"event\": {...}}", sc.Text(), err)
		}
		bySubject[line.Subject]++
		switch line.Subject {
		case "visiond.demo.sample.detections":
			var ev sinks.DetectionEvent
			if err := json.Unmarshal(line.Event, &ev); err != nil || ev.Version != sinks.Version || ev.Site != "demo" || ev.Camera != "sample" || ev.Frame.Seq == 0 {
				t.Fatalf("detection event %s: %v", line.Event, err)
			}
			for _, d := range ev.Detections {
				if d.Label == "person" && d.TrackID != 0 {
					people[d.TrackID] = true
				}
			}
		case "visiond.demo.sample.objects":
			var ev sinks.ObjectEvent
			if err := json.Unmarshal(line.Event, &ev); err != nil || ev.TrackID == 0 || ev.Type == "" {
				t.Fatalf("object event %s: %v", line.Event, err)
			}
		case "visiond.demo.sample.zones", "visiond.demo.sample.lines":
		default:
			t.Errorf("event on subject %q", line.Subject)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n := bySubject["visiond.demo.sample.detections"]; n != 50 {
		t.Errorf("%d detection events, want 50 (10 s at the demo camera's 5 fps); by subject %v", n, bySubject)
	}
	if len(people) == 0 || bySubject["visiond.demo.sample.objects"] == 0 {
		t.Errorf("no person tracked: events by subject %v", bySubject)
	}
	if !strings.Contains(stderr.String(), "visiond replay: "+clip+": 100 frames, 50 analysed, 10.0 s of video") {
		t.Errorf("no summary on stderr:\n%s", stderr.String())
	}
	t.Logf("events by subject %v", bySubject)
}

// A replay that cannot run says why and exits with status 1 (2 for a usage error).
func TestReplayCommandErrors(t *testing.T) {
	root := testutil.ModuleRoot(t)
	testutil.ThirdParty(t, "yolov8n.onnx")
	video := testutil.Media(t, "vtest.avi")
	bad := writeConfig(t, "cameras:\n  - {id: a, url: rtsp://h/1, fps: 0}\n")
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"missing file", []string{"replay", "/nonexistent/clip.ts"}, 1, "cannot read /nonexistent/clip.ts: no such file or directory"},
		{"not a video", []string{"replay", filepath.Join(root, "go.mod")}, 1, "go.mod is not a video that FFmpeg can open"},
		{"unknown camera", []string{"replay", "-camera", "gate", video}, 1, `no camera "gate" in the config (its cameras: sample)`},
		{"invalid config", []string{"replay", "-config", bad, video}, 1, "cameras[0].fps"},
		{"no file", []string{"replay"}, 2, "no video file to replay"},
		{"two files", []string{"replay", video, video}, 2, "one video file, got 2 arguments"},
		{"negative fps", []string{"replay", "-fps", "-2", video}, 2, "-fps -2: must be 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], tc.args...)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1", "VISIOND_CONFIG=")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tc.status {
				t.Fatalf("visiond %v: %v, want exit status %d; stderr:\n%s", tc.args, err, tc.status, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not say %q", stderr.String(), tc.want)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}
