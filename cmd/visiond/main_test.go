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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/internal/testutil"
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
		{"no cameras key", []string{"check", writeConfig(t, "site: lab\n")}, 1, "cameras: no list of cameras"},
		{"no cameras", []string{"check", writeConfig(t, "site: lab\ncameras: []\n")}, 0, "ok (0 cameras, 0 enabled)"},
		{"two files", []string{"check", good, good}, 1, "at most one config file"},
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

// `visiond check` on a bad file exits non-zero, as a process, with every problem on stderr.
func TestCheckExitStatus(t *testing.T) {
	bad := writeConfig(t, "workers: {pools: [{count: 0}]}\ncameras:\n  - {id: 'a b', url: rtsp://h/1, fps: -1}\n")
	cmd := exec.Command(os.Args[0], "check", bad)
	cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("visiond check %s: %v, want exit status 1; stderr %q", bad, err, stderr.String())
	}
	for _, want := range []string{"workers.pools[0].count", "cameras[0].id", "cameras[0].fps"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not name %s", stderr.String(), want)
		}
	}
}

// `visiond run -print` as a process, as `make run` starts it: the sample camera, an embedded
// NATS server and a worker process; people are printed; SIGINT stops it with status 0.
func TestRunPrintsDetections(t *testing.T) {
	rtspAddr := testutil.FreeAddr(t)
	cfg := writeConfig(t, demoConfig(t, rtspAddr))

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
	if !strings.Contains(stderr.String(), "msg=stopped") {
		t.Fatalf("no clean stop logged; stderr:\n%s", stderr.String())
	}
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

	cmd := exec.Command(os.Args[0], "run", "-config", path)
	cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	logs := followLog(t, stderr)
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
