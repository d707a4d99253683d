package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
)

// Issue 13, item 5: `visiond check` (CheckFiles) finds the files run would fail on, each
// named with its field and line.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "labels.txt")
	testutil.WriteFile(t, empty, "")
	cert := filepath.Join(dir, "cert.pem")
	testutil.WriteFile(t, cert, "not checked for PEM here, only read\n")
	if err := syscall.Mkfifo(filepath.Join(dir, "c.mp4"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`
workers:
  model: %[1]s/nope.onnx
  library: %[1]s
  labels: %[2]s
http:
  tls: {cert_file: %[3]s, key_file: %[1]s/key.pem}
nats:
  url: tls://h:4222
  tls: {ca_file: %[1]s/ca.pem}
  auth: {credentials_file: %[1]s/box.creds}
sample: {enabled: true, file: %[1]s/sample.ts}
cameras:
  - {id: a, kind: file, file: %[1]s/a.mp4}
  - {id: b, kind: file, file: %[1]s/b.mp4, enabled: false}
  - {id: c, kind: file, file: %[1]s/c.mp4}
`, dir, empty, cert)
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.CheckFiles()
	want := strings.ReplaceAll(`line 3: workers.model: cannot read "DIR/nope.onnx": no such file or directory
line 4: workers.library: "DIR" is a directory, want a file
line 5: workers.labels: "DIR/labels.txt" is empty
line 7: http.tls.key_file: cannot read "DIR/key.pem": no such file or directory
line 10: nats.tls.ca_file: cannot read "DIR/ca.pem": no such file or directory
line 11: nats.auth.credentials_file: cannot read "DIR/box.creds": no such file or directory
line 12: sample.file: cannot read "DIR/sample.ts": no such file or directory
line 14: cameras[0].file: cannot read "DIR/a.mp4": no such file or directory
line 16: cameras[2].file: "DIR/c.mp4" is not a regular file (p---------)`, "DIR", dir)
	var cerr *config.Error
	if err == nil || err.Error() != want || !errors.As(err, &cerr) {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}

	// The real files pass.
	cfg, err = config.Parse(fmt.Appendf(nil, "workers: {model: %q, library: %q}\ncameras: []\n",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1")))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckFiles(); err != nil {
		t.Error(err)
	}
}

// Issue 13, item 5: a config over MaxFileBytes is refused before it is parsed (a 50 MB file
// took 86 s and 3.3 GB), by Load (check, start, reload) and by Parse.
func TestFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "visiond.yaml")
	big := "cameras: []\n" + strings.Repeat("# padding padding padding padding padding padding padding\n", config.MaxFileBytes/58+1)
	testutil.WriteFile(t, path, big)
	_, err := config.Load(path)
	var cerr *config.Error
	if want := fmt.Sprintf("%s: %d bytes: larger than 4 MiB, the most a config may hold", path, len(big)); err == nil ||
		!strings.HasPrefix(err.Error(), want) || !errors.As(err, &cerr) {
		t.Errorf("Load: got %v, want %q", err, want)
	}
	if _, err := config.Parse([]byte(big)); err == nil || !strings.Contains(err.Error(), "larger than 4 MiB") {
		t.Errorf("Parse: got %v", err)
	}

	// Through a pipe, whose size is unknown until read: read up to the limit, no further.
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	written := make(chan struct{})
	go func() {
		defer close(written)
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer f.Close()
		_, _ = f.WriteString(big) // stops with EPIPE once Load has closed its end
	}()
	if _, err := config.Load(fifo); err == nil || !strings.HasPrefix(err.Error(), fifo+": larger than 4 MiB") {
		t.Errorf("Load of a pipe: got %v", err)
	}
	<-written

	// A big file within the limit: 2000 cameras.
	var b strings.Builder
	b.WriteString("cameras:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "  - {id: cam-%04d, url: \"rtsp://user:password@10.0.%d.%d:554/Streaming/Channels/101\", fps: 2}\n", i, i/250, i%250+1)
	}
	testutil.WriteFile(t, path, b.String())
	if cfg, err := config.Load(path); err != nil || len(cfg.Cameras) != 2000 {
		t.Errorf("2000 cameras (%d KiB): %v", b.Len()>>10, err)
	}
}

// TestCheckFilesClipsOfAFile: a file camera with clips on needs a file whose packets can be
// read (MPEG-TS or MP4 with H.264 or H.265): the sample and an MP4 of it pass, an AVI is a
// problem at its clips.
func TestCheckFilesClipsOfAFile(t *testing.T) {
	doc := fmt.Sprintf(`workers: {model: %q, library: %q}
cameras:
  - {id: ts, kind: file, file: %q, clips: {enabled: true}}
  - {id: avi, kind: file, file: %q, clips: {enabled: true}}
  - {id: plain, kind: file, file: %q}
  - {id: mp4, kind: file, file: %q, clips: {enabled: true}}
`, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"),
		testutil.Media(t, "vtest.h264.ts"), testutil.Media(t, "vtest.avi"), testutil.Media(t, "vtest.avi"),
		testutil.TempFile(t, "sample.mp4", string(testutil.SampleMP4(t, 3))))
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.CheckFiles()
	if err == nil || strings.Count(err.Error(), "\n") != 0 ||
		!strings.HasPrefix(err.Error(), `line 4: cameras[1].clips.enabled: camera "avi" makes clips of its file's packets, which need an MPEG-TS or MP4 file with H.264 or H.265 video: `) {
		t.Errorf("got %v, want one problem at the avi camera's clips", err)
	}
}
