package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/internal/version"
)

// With VISIOND_CMD_TEST_MAIN=1 the test binary is visiond itself, so tests can check the real
// exit status of a real process.
func TestMain(m *testing.M) {
	if os.Getenv("VISIOND_CMD_TEST_MAIN") == "1" {
		main()
	}
	os.Exit(m.Run())
}

// writeConfig writes body to visiond.yaml in a new temporary directory and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	return testutil.TempFile(t, "visiond.yaml", body)
}

func TestCheck(t *testing.T) {
	t.Chdir(testutil.ModuleRoot(t)) // where the defaults' third_party/ paths lead
	testutil.ThirdParty(t, "yolov8n.onnx")
	good := writeConfig(t, "site: lab\ncameras:\n  - {id: door, url: rtsp://10.0.0.5/stream1}\n")
	// Issue 14: with a labels file, check knows the model's classes.
	labels := testutil.TempFile(t, "labels.txt", "person\ncar\n")
	withLabels := "workers: {labels: %q}\ncameras:\n  - id: door\n    url: rtsp://10.0.0.5/stream1\n    lines: [{id: gate, points: [[0.5, 0], [0.5, 1]], classes: [%s]}]\n"
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string // in stdout for status 0, in stderr otherwise
	}{
		{"embedded default", []string{"check"}, 0, "embedded default config: ok (1 cameras, 1 enabled)"},
		{"example", []string{"check", filepath.Join(testutil.ModuleRoot(t), "configs", "visiond.yaml")}, 1, `workers.model: cannot read "/var/lib/visiond/yolov8n.onnx"`},
		{"missing model", []string{"check", writeConfig(t, "workers: {model: /nonexistent/m.onnx}\ncameras: []\n")}, 1, `line 1: workers.model: cannot read "/nonexistent/m.onnx": no such file or directory`},
		{"unreadable tls file", []string{"check", writeConfig(t, "nats: {url: tls://h:4222, tls: {ca_file: /}}\ncameras: []\n")}, 1, `nats.tls.ca_file: "/" is a directory`},
		{"long site", []string{"check", writeConfig(t, "site: "+strings.Repeat("s", 65)+"\ncameras: []\n")}, 1, "site: too long: 65 characters"},
		{"port out of range", []string{"check", writeConfig(t, "cameras:\n  - {id: a, url: 'rtsp://h:99999/1'}\n")}, 1, "cameras[0].url: port 99999 out of range"},
		{"null camera", []string{"check", writeConfig(t, "cameras: [~]\n")}, 1, "cameras[0]: empty entry"},
		{"too large", []string{"check", writeConfig(t, "cameras: []\n"+strings.Repeat("#\n", 3<<20))}, 1, "larger than 4 MiB"},
		{"good file", []string{"check", good}, 0, good + ": ok (1 cameras, 1 enabled)"},
		{"good file by flag", []string{"check", "-config", good}, 0, "ok"},
		{"missing file", []string{"check", "/nonexistent/visiond.yaml"}, 1, "/nonexistent/visiond.yaml"},
		{"duplicate id", []string{"check", writeConfig(t, "cameras:\n  - {id: a, url: rtsp://h/1}\n  - {id: a, url: rtsp://h/2}\n")}, 1, `cameras[1].id`},
		{"missing url", []string{"check", writeConfig(t, "cameras:\n  - id: a\n")}, 1, "line 2: cameras[0].url"},
		{"http url", []string{"check", writeConfig(t, "cameras:\n  - {id: a, url: 'http://h/1'}\n")}, 1, `"http"`},
		{"fps zero", []string{"check", writeConfig(t, "cameras:\n  - {id: a, url: rtsp://h/1, fps: 0}\n")}, 1, "cameras[0].fps"},
		{"unknown key", []string{"check", writeConfig(t, "cameras:\n  - {id: a, url: rtsp://h/1, fsp: 5}\n")}, 1, "fsp"},
		{"password never shown", []string{"check", writeConfig(t, "cameras:\n  - {id: a, url: 'http://u:hunter2@h/1'}\n")}, 1, "cameras[0].url"},
		{"empty file", []string{"check", writeConfig(t, "# nothing yet\n")}, 1, "empty file"},
		{"labels: known classes", []string{"check", writeConfig(t, fmt.Sprintf(withLabels, labels, "person, car"))}, 0, "ok (1 cameras, 1 enabled)"},
		{"labels: unknown class", []string{"check", writeConfig(t, fmt.Sprintf(withLabels, labels, "person, bus"))}, 1,
			`line 5: cameras[0].lines[0].classes: "bus" is not a class of the model (line "gate", camera "door") (workers.labels ` + labels + ": 2 classes)"},
		{"no cameras key", []string{"check", writeConfig(t, "site: lab\n")}, 1, "cameras: no list of cameras"},
		{"no cameras", []string{"check", writeConfig(t, "site: lab\ncameras: []\n")}, 0, "ok (0 cameras, 0 enabled)"},
		// Issue 22: valid, with a warning.
		{"slow camera", []string{"check", writeConfig(t, "cameras:\n  - {id: yard, url: rtsp://h/1, fps: 0.1}\n")}, 0,
			`: warning: cameras[0].fps: 0.1 (camera "yard") is below 0.2`},
		{"two files", []string{"check", good, good}, 2, "at most one config file"},
		{"check unknown flag", []string{"check", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"run unknown flag", []string{"run", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"run argument", []string{"run", good}, 2, "unexpected argument"},
		{"sub unknown flag", []string{"sub", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"sub argument", []string{"sub", "visiond.>"}, 2, "unexpected argument"},
		{"sub negative count", []string{"sub", "-count", "-1"}, 2, "-count -1"},
		{"sub bad count", []string{"sub", "-count", "many"}, 2, `invalid value "many" for flag -count`},
		{"version unknown flag", []string{"version", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{"version argument", []string{"version", "now"}, 2, "unexpected argument"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"no command", nil, 2, "usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := cli(tc.args, &stdout, &stderr)
			if status != tc.status {
				t.Fatalf("status %d, want %d; stdout %q stderr %q", status, tc.status, stdout.String(), stderr.String())
			}
			out := stdout.String()
			if tc.status != 0 {
				out = stderr.String()
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("output %q, want it to contain %q", out, tc.want)
			}
			if strings.Contains(stdout.String()+stderr.String(), "hunter2") {
				t.Fatalf("output shows a password: %q", stdout.String()+stderr.String())
			}
		})
	}
}

// `run -h` lists the flags with their argument names as the flag package derives them from
// the usage text: -print takes none (its text once held a back-quoted command, which the flag
// package took for the argument's name: "-print visiond sub").
func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if status := cli([]string{"run", "-h"}, &stdout, &stderr); status != 0 {
		t.Fatalf("run -h: status %d, want 0; stderr %q", status, stderr.String())
	}
	help := stderr.String()
	for _, want := range []string{"usage: visiond run [flags]", "\n  -config file\n", "\n  -print\n"} {
		if !strings.Contains(help, want) {
			t.Errorf("run -h does not show %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, "visiond sub") {
		t.Errorf("run -h names an argument after a flag's back-quoted text:\n%s", help)
	}
}

// A usage error exits with status 2 as a process, too: an unknown flag once exited with 1.
func TestUsageErrorExitStatus(t *testing.T) {
	for _, args := range [][]string{{"run", "-bogus"}, {"check", "-bogus"}, {"frobnicate"}, {"version", "extra"}} {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
		var exit *exec.ExitError
		if out, err := cmd.CombinedOutput(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("visiond %s: %v, want exit status 2; output %q", strings.Join(args, " "), err, out)
		}
	}
}

// `visiond version` and `--version`: the build's version and revision, Go's version, ONNX
// Runtime's version and providers; with a library that cannot be loaded, the rest still.
func TestVersion(t *testing.T) {
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	for _, args := range [][]string{{"version", "-library", lib}, {"--version", "-library", lib}} {
		var stdout, stderr bytes.Buffer
		if status := cli(args, &stdout, &stderr); status != 0 {
			t.Fatalf("%q: status %d, want 0; stderr %q", args, status, stderr.String())
		}
		out := stdout.String()
		in := version.Get()
		for _, want := range []string{
			"visiond " + in.Version + "\n", "\nrevision: ", "\ngo: " + runtime.Version() + "\n",
			"\nonnxruntime: 1.", "(" + lib + ")", "\nproviders: ", "CPUExecutionProvider",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: output does not contain %q:\n%s", args, want, out)
			}
		}
	}

	var stdout, stderr bytes.Buffer
	if status := cli([]string{"version", "-library", "/nonexistent/libonnxruntime.so.1"}, &stdout, &stderr); status != 0 {
		t.Fatalf("version with a missing library: status %d, want 0; stderr %q", status, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"visiond ", "\nrevision: ", "\ngo: go", "onnxruntime: not loaded", "/nonexistent/libonnxruntime.so.1"} {
		if !strings.Contains(out, want) {
			t.Errorf("version with a missing library: output does not contain %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "providers:") {
		t.Errorf("version with a missing library lists providers:\n%s", out)
	}

	// Without -library: the config's workers.library (here from -config).
	cfg := writeConfig(t, fmt.Sprintf("workers: {library: %q}\ncameras: []\n", lib))
	stdout.Reset()
	if status := cli([]string{"version", "-config", cfg}, &stdout, &stderr); status != 0 || !strings.Contains(stdout.String(), "("+lib+")") {
		t.Errorf("version -config: status %d, output %q; want the config's library %s", status, stdout.String(), lib)
	}
}

// runVisiond runs this test binary as visiond with args, as a process, and returns its exit
// status and output.
func runVisiond(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), out.String(), errOut.String()
	} else if err != nil {
		t.Fatalf("visiond %v: %v", args, err)
	}
	return 0, out.String(), errOut.String()
}

// `visiond check` on a bad file exits non-zero, as a process, with every problem on stderr.
func TestCheckExitStatus(t *testing.T) {
	bad := writeConfig(t, "workers: {pools: [{count: 0}]}\ncameras:\n  - {id: 'a b', url: rtsp://h/1, fps: -1}\n")
	status, _, stderr := runVisiond(t, "check", bad)
	if status != 1 {
		t.Fatalf("visiond check %s: exit status %d, want 1; stderr %q", bad, status, stderr)
	}
	for _, want := range []string{"workers.pools[0].count", "cameras[0].id", "cameras[0].fps"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not name %s", stderr, want)
		}
	}
}

// `visiond run -print` as a process, as `make run` starts it: the sample camera, an embedded
// NATS server and a worker process; people are printed; SIGINT stops it with status 0.
func TestRunPrintsDetections(t *testing.T) {
	rtspAddr := testutil.FreeAddr(t)
	stderr := runPrintsPerson(t, writeConfig(t, demoConfig(t, rtspAddr)))
	if !strings.Contains(stderr, "msg=stopped") {
		t.Fatalf("no clean stop logged; stderr:\n%s", stderr)
	}
	if os.Getenv("GOGC") == "" && !strings.Contains(stderr, fmt.Sprintf("gogc=%d", defaultGOGC)) {
		t.Fatalf("no gogc=%d in the start's log line; stderr:\n%s", defaultGOGC, stderr)
	}
}

// TestTuneGC: GOGC is defaultGOGC unless the environment sets it.
func TestTuneGC(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	if got := tuneGC(func(string) string { return "" }); got != defaultGOGC {
		t.Errorf("GOGC unset: %d in effect, want %d", got, defaultGOGC)
	}
	debug.SetGCPercent(200) // as the runtime does for GOGC=200
	if got := tuneGC(func(k string) string { return map[string]string{"GOGC": "200"}[k] }); got != 200 {
		t.Errorf("GOGC=200: %d in effect, want the environment's 200", got)
	}
}

// runPrintsPerson runs `visiond run -print -config cfg` (this test binary, and so its
// workers) until it prints a person on the demo's sample camera, then stops it with SIGINT
// and checks that it exits with status 0. It returns the daemon's stderr.
func runPrintsPerson(t *testing.T, cfg string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "run", "-print", "-config", cfg)
	cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1") // its workers inherit it
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(2 * time.Minute) // the daemon's start, a worker's, an RTSP session, a detection
	for found := false; !found; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("visiond run exited before printing a person; stderr:\n%s", stderr.String())
			}
			found = strings.Contains(l, "demo/sample frame") && strings.Contains(l, " person 0.")
		case <-timeout:
			t.Fatalf("no person printed in 2 minutes; stderr:\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range lines { // drain until exit
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("visiond run after SIGINT: %v, want exit status 0; stderr:\n%s", err, stderr.String())
	}
	return stderr.String()
}

func TestFormatEvent(t *testing.T) {
	for _, tc := range []struct{ subject, data, want string }{
		{"visiond.s.door.status", `{"version":1,"site":"s","camera":"door","state":"offline","previous":"online","reason":"stalled: no frame for 10s","at":"2026-11-30T10:00:00Z"}`,
			"s/door offline (was online): stalled: no frame for 10s"},
		{"visiond.s.door.status", `{"version":1,"site":"s","camera":"door","state":"online","previous":"offline","at":"2026-11-30T10:00:00Z","gap_ms":12500}`,
			"s/door online (was offline), no frames for 12.5 s"},
		{"visiond.s.door.detections", `{"version":1,"site":"s","camera":"door","frame":{"seq":7,"width":640,"height":480},"detections":[{"label":"person","score":0.9,"box":{"x":1,"y":2,"w":3,"h":4}}],"latency_ms":{"total":80}}`,
			"s/door frame 7 (640x480) 80 ms: person 0.90 [1,2 3x4]"},
		{"visiond.s.health", `{"version":1,"site":"s","at":"2026-11-30T10:00:00Z","interval_s":10,"cameras":[{"camera":"door","state":"online","fps":5,"fps_achieved":4.9,"frames_analysed":49,"frames_dropped":1}],"workers":2,"publisher":{"published":300,"pending":2}}`,
			"s health, last 10 s: door online 4.9/5 fps (49 analysed, 1 dropped); 2 workers; events published 300, pending 2"},
		{"visiond.s.gaps", `{"version":1,"site":"s","reason":"outbox_full","events":340,"from":"2026-11-30T10:00:00Z","to":"2026-11-30T10:01:00Z","at":"2026-11-30T10:01:01Z"}`,
			"s GAP: 340 events lost (outbox_full)"},
		{"visiond.s.door.detections", `{"version":1,"site":"s","camera":"door","frame":{"seq":8,"width":640,"height":480},"detections":[{"label":"person","score":0.9,"track_id":12,"box":{"x":1,"y":2,"w":3,"h":4}}],"latency_ms":{"total":80}}`,
			"s/door frame 8 (640x480) 80 ms: #12 person 0.90 [1,2 3x4]"},
		{"visiond.s.door.objects", `{"version":1,"site":"s","camera":"door","type":"update","why":["zone_enter"],"track_id":12,"label":"person","score":0.87,"zones":["lower"],"first_seen":"2026-11-30T10:00:00Z","last_seen":"2026-11-30T10:00:04Z"}`,
			"s/door object update #12 person 0.87 (zone_enter) in lower"},
		{"visiond.s.door.objects", `{"version":1,"site":"s","camera":"door","type":"end","track_id":12,"label":"person","score":0.8,"first_seen":"2026-11-30T10:00:00Z","last_seen":"2026-11-30T10:00:04.5Z","path":{"direction":92}}`,
			"s/door object end #12 person 0.80, seen 4.5 s, heading 92°"},
		{"visiond.s.door.objects", `{"version":1,"site":"s","camera":"door","type":"end","reason":"camera_removed","track_id":13,"label":"car","score":0.7,"first_seen":"2026-11-30T10:00:00Z","last_seen":"2026-11-30T10:00:02Z","path":{"direction":0}}`,
			"s/door object end #13 car 0.70, seen 2.0 s, heading 0°, camera_removed"},
		{"visiond.s.door.objects", `{"version":1,"site":"s","camera":"door","type":"clip","track_id":12,"label":"person","score":0.8,"first_seen":"2026-11-30T10:00:00Z","last_seen":"2026-11-30T10:00:04Z","clip":{"name":"door/c1764496795000.mp4","start":"2026-11-30T09:59:55Z","end":"2026-11-30T10:00:09.5Z","duration_s":14.5}}`,
			"s/door object clip #12 person 0.80, clip door/c1764496795000.mp4 (14.5 s)"},
		{"visiond.s.door.zones", `{"version":1,"site":"s","camera":"door","type":"exit","zone":"lower","track_id":12,"label":"person","at":"2026-11-30T10:00:04Z","dwell_s":3.5,"occupancy":{"person":2,"car":1}}`,
			"s/door zone lower exit #12 person after 3.5 s, 3 inside"},
		{"visiond.s.door.lines", `{"version":1,"site":"s","camera":"door","line":"middle","track_id":12,"label":"person","direction":"in","at":"2026-11-30T10:00:04Z","counts":{"in":{"person":7}}}`,
			"s/door line middle in #12 person (in now 7)"},
		{"visiond.s.door.objects", `not json`, "visiond.s.door.objects not json"},
		{"visiond.s.door.detections", `not json`, "visiond.s.door.detections not json"},
		{"other.subject", `{}`, "other.subject {}"},
	} {
		got := formatEvent(&nats.Msg{Subject: tc.subject, Data: []byte(tc.data)})
		if !strings.Contains(got, tc.want) {
			t.Errorf("formatEvent(%s, %s) = %q, want it to contain %q", tc.subject, tc.data, got, tc.want)
		}
	}
}

// demoConfig is the demo with random ports: the sample camera on rtspAddr, the files
// scripts/setup.sh fetched, no HTTP.
func demoConfig(t *testing.T, rtspAddr string) string {
	return demoConfigWith(t, rtspAddr, t.TempDir(), `{listen: "127.0.0.1:0"}`)
}

// demoConfigWith is demoConfig with a given state directory and nats section (YAML flow).
func demoConfigWith(t *testing.T, rtspAddr, stateDir, nats string) string {
	return fmt.Sprintf(`site: demo
state_dir: %q
http: {listen: ""}
nats: %s
workers: {model: %q, library: %q}
sample: {enabled: true, listen: %q, file: %q}
cameras:
  - {id: sample, url: "rtsp://%s/sample"}
`, stateDir, nats, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), rtspAddr,
		testutil.Media(t, "vtest.h264.ts"), rtspAddr)
}

// logLines follows a process's stderr; wait returns the first line matching a pattern.
type logLines struct {
	lines chan string
	all   strings.Builder
}

// startCommand starts cmd, the test binary as visiond (or a command running it), and follows
// its log on stderr; the process is killed, if still running, when the test ends.
func startCommand(t *testing.T, cmd *exec.Cmd) (*exec.Cmd, *logLines) {
	t.Helper()
	cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1") // its workers inherit it
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, followLog(t, stderr)
}

func followLog(t *testing.T, r io.Reader) *logLines {
	l := &logLines{lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
		close(l.lines)
	}()
	return l
}

func (l *logLines) wait(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(2 * time.Minute) // a daemon's start, a worker's, an RTSP session: on a loaded machine
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				t.Fatalf("process ended before a log line matching %q:\n%s", re, l.all.String())
			}
			l.all.WriteString(line + "\n")
			if rx.MatchString(line) {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line matching %q in 2 minutes:\n%s", re, l.all.String())
		}
	}
}

// The running daemon follows edits of its config file: a camera added is started, an
// invalid edit is rejected with check's errors while the running config stays, SIGHUP
// reloads too, and SIGINT still stops it cleanly. systemd hears READY=1 at start, and
// RELOADING=1 then READY=1 around each reload.
func TestRunReloadsEditedConfig(t *testing.T) {
	rtspAddr := testutil.FreeAddr(t)
	base := demoConfig(t, rtspAddr)
	path := writeConfig(t, base)
	systemd := fakeSystemd(t)
	notified := func(want string) {
		t.Helper()
		if got := recv(t, systemd, 30*time.Second); !strings.HasPrefix(got, want) {
			t.Fatalf("systemd notified %q, want %s", got, want)
		}
	}

	cmd, logs := startCommand(t, exec.Command(os.Args[0], "run", "-config", path))
	logs.wait(t, `msg="visiond running"`)
	notified("READY=1")

	// An editor's save: a temporary file renamed over the config.
	save := func(body string) {
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	save(base + fmt.Sprintf("  - {id: second, url: \"rtsp://%s/sample\", fps: 2}\n", rtspAddr))
	logs.wait(t, `msg="config reloaded".*added=\[second\]`)
	notified("RELOADING=1\nMONOTONIC_USEC=")
	notified("READY=1")
	logs.wait(t, `camera=second.*msg="camera online"|msg="camera online".*camera=second`)

	save(base + "  - {id: sample, url: \"rtsp://h/dup\"}\n")
	line := logs.wait(t, `config reload rejected`)
	if !strings.Contains(line, `cameras[1].id: duplicate id`) {
		t.Fatalf("rejection does not say why: %s", line)
	}

	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, `trigger=SIGHUP`)
	logs.wait(t, `config reload rejected`) // the file is still the invalid one
	// The invalid edit's reload, then SIGHUP's.
	for range 2 {
		notified("RELOADING=1\nMONOTONIC_USEC=")
		notified("READY=1")
	}

	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, `msg=stopped`)
	go func() {
		for range logs.lines {
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGINT: %v", err)
	}
}

// Ctrl-C on `make run` in a terminal (and `timeout -s INT 30 make run`): one SIGINT to each
// process of the daemon's process group, its worker processes included. The daemon stops
// cleanly (status 0, "stopped") and logs no warning, no error and no worker restart, so that
// a newcomer's first stop does not look like a crash (issue 21). The workers used to end on
// the signal themselves while the daemon drained their jobs, and the pool logged "worker
// ended ... signal: killed" and "restarting worker".
func TestCtrlCStopsWithoutWarnings(t *testing.T) {
	path := writeConfig(t, demoConfig(t, testutil.FreeAddr(t)))
	cmd := exec.Command(os.Args[0], "run", "-print", "-config", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a group of its own, as a shell's job
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd, logs := startCommand(t, cmd)
	events := followLog(t, stdout)
	events.wait(t, `demo/sample frame`) // frames analysed: jobs in flight, as in the demo
	// The terminal's Ctrl-C: SIGINT to the group, the daemon and its workers.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range events.lines {
		}
	}()
	stopsCleanly(t, cmd, logs)
	if w := testutil.Warnings(logs.all.String()); len(w) > 0 {
		t.Errorf("Ctrl-C logged %d warnings:\n%s", len(w), strings.Join(w, "\n"))
	}
	for _, bad := range []string{`msg="worker ended"`, `msg="restarting worker"`} {
		if strings.Contains(logs.all.String(), bad) {
			t.Errorf("Ctrl-C logged %s:\n%s", bad, logs.all.String())
		}
	}
}

// Under GNU timeout, which passes a SIGTERM it receives to the daemon and then to its whole
// process group, the daemon may see SIGTERM twice within microseconds (or once: the kernel
// merges a signal sent while the same one is pending): either way one stop request, so it
// stops cleanly (outbox flushed, "stopped", status 0) instead of cutting the stop short.
func TestOneSIGTERMIsEnough(t *testing.T) {
	timeout := testutil.LookPath(t, "timeout")
	path := writeConfig(t, demoConfig(t, testutil.FreeAddr(t)))
	cmd, logs := startCommand(t, exec.Command(timeout, "600", os.Args[0], "run", "-config", path))
	logs.wait(t, `msg="visiond running"`)
	logs.wait(t, `msg="camera online"`) // events flowing, so there is something to flush

	// To timeout, which passes it on to the daemon, then to the process group.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopsCleanly(t, cmd, logs)
}

// A SIGTERM repeated while the daemon stops (here as soon as it has logged the first) is the
// same request: logged, and the clean stop goes on. The old daemon exited at once with
// status 1 and "second signal".
func TestRepeatedSIGTERMStopsCleanly(t *testing.T) {
	path := writeConfig(t, demoConfig(t, testutil.FreeAddr(t)))
	cmd, logs := startCommand(t, exec.Command(os.Args[0], "run", "-config", path))
	logs.wait(t, `msg="visiond running"`)
	logs.wait(t, `msg="camera online"`)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	logs.wait(t, `msg=stopping`)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	line := logs.wait(t, `msg="signal repeated|second signal`)
	// A machine so busy that the second signal, sent as soon as the first was logged, reached
	// the daemon only after the window proves nothing either way. (The old daemon's message
	// has no "after".)
	if m := regexp.MustCompile(`second signal \(terminated, (\S+) after`).FindStringSubmatch(line); m != nil {
		if after, err := time.ParseDuration(m[1]); err == nil && after >= signalRepeatWindow {
			t.Skipf("the second SIGTERM reached the daemon %s after the first, past the %s window: too busy a machine to tell", after, signalRepeatWindow)
		}
	}
	stopsCleanly(t, cmd, logs)
}

// stopsCleanly waits for cmd, stopping, to log "stopped" and exit with status 0, with no
// sign of a stop cut short.
func stopsCleanly(t *testing.T, cmd *exec.Cmd, logs *logLines) {
	t.Helper()
	logs.wait(t, `msg=stopped`)
	go func() {
		for range logs.lines {
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want exit status 0:\n%s", err, logs.all.String())
	}
	for _, bad := range []string{"second signal", "not published before the shutdown deadline"} {
		if strings.Contains(logs.all.String(), bad) {
			t.Errorf("the stop logged %q:\n%s", bad, logs.all.String())
		}
	}
}

// Which signal, after which first one, cuts a clean stop short.
func TestCutsStopShort(t *testing.T) {
	term, intr := syscall.SIGTERM, syscall.SIGINT
	for _, tc := range []struct {
		first, sig os.Signal
		since      time.Duration
		want       bool
	}{
		{term, term, 0, false}, // timeout's pair
		{term, term, signalRepeatWindow - time.Millisecond, false}, // a service manager's repeat
		{term, term, signalRepeatWindow, true},                     // later: the operator insists
		{term, intr, time.Millisecond, false},
		{term, intr, signalRepeatWindow + time.Second, true},
		{intr, intr, time.Millisecond, true}, // Ctrl-C pressed again
		{intr, term, time.Millisecond, false},
		{intr, term, signalRepeatWindow, true},
	} {
		if got := cutsStopShort(tc.first, tc.sig, tc.since); got != tc.want {
			t.Errorf("cutsStopShort(%v, %v, %v) = %v, want %v", tc.first, tc.sig, tc.since, got, tc.want)
		}
	}
}

// One daemon per state directory: a second daemon on the first one's state_dir (other ports)
// exits with status 1 and an error naming the directory and the first one's PID, without
// opening its store; once the first has stopped, a new one starts on it.
func TestOneDaemonPerStateDir(t *testing.T) {
	stateDir := t.TempDir()
	start := func() (*exec.Cmd, *logLines) {
		t.Helper()
		path := writeConfig(t, demoConfigWith(t, testutil.FreeAddr(t), stateDir, `{listen: "127.0.0.1:0"}`))
		cmd := exec.Command(os.Args[0], "run", "-config", path)
		cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, followLog(t, stderr)
	}
	stop := func(cmd *exec.Cmd, logs *logLines) {
		t.Helper()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		stopsCleanly(t, cmd, logs)
	}

	first, firstLogs := start()
	firstLogs.wait(t, `msg="visiond running"`)

	second, secondLogs := start()
	line := secondLogs.wait(t, `state_dir`)
	for range secondLogs.lines {
	}
	var exit *exec.ExitError
	if err := second.Wait(); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second daemon on the same state_dir: %v, want exit status 1:\n%s", err, secondLogs.all.String())
	}
	want := fmt.Sprintf("state_dir %s is in use by another visiond (pid %d", stateDir, first.Process.Pid)
	if !strings.Contains(line, want) {
		t.Fatalf("second daemon's error %q does not contain %q", line, want)
	}
	if strings.Contains(secondLogs.all.String(), "embedded NATS server ready") {
		t.Fatalf("the second daemon started its NATS server on the first one's store:\n%s", secondLogs.all.String())
	}

	stop(first, firstLogs)
	third, thirdLogs := start()
	thirdLogs.wait(t, `msg="visiond running"`)
	stop(third, thirdLogs)
}
