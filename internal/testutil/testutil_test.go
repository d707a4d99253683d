package testutil

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestThirdParty(t *testing.T) {
	root := ModuleRoot(t)
	if wd := mustGetwd(t); wd != filepath.Join(root, "internal", "testutil") {
		t.Fatalf("module root %s: not two levels above this package's directory %s", root, wd)
	}
	if got, want := ThirdParty(t, "media", "vtest.h264.ts"), filepath.Join(root, "third_party", "media", "vtest.h264.ts"); got != want {
		t.Errorf("ThirdParty(media, vtest.h264.ts) = %s, want %s", got, want)
	}
	if got := Media(t, "messi5.jpg"); !filepath.IsAbs(got) || !strings.HasSuffix(got, "/third_party/media/messi5.jpg") {
		t.Errorf("Media(messi5.jpg) = %s", got)
	}

	t.Setenv(libraryEnv, "")
	if got := ThirdParty(t, library); got != filepath.Join(root, "third_party", library) {
		t.Errorf("the library without $%s: %s", libraryEnv, got)
	}
	other := TempFile(t, "libonnxruntime.so.other", "")
	t.Setenv(libraryEnv, other)
	if got := ThirdParty(t, library); got != other {
		t.Errorf("the library with $%s=%s: %s", libraryEnv, other, got)
	}
	if got := ThirdParty(t, "yolov8n.onnx"); got != filepath.Join(root, "third_party", "yolov8n.onnx") {
		t.Errorf("the model with $%s set: %s", libraryEnv, got)
	}
}

func mustGetwd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}

// A missing file fails the test and says how to get it.
func TestThirdPartyMissing(t *testing.T) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { // Fatalf ends the goroutine it runs on, as it would end a test
		defer close(done)
		ThirdParty(r, "no", "such.file")
	}()
	<-done
	if !strings.Contains(r.fatal, "such.file") || !strings.Contains(r.fatal, "run scripts/setup.sh") {
		t.Fatalf("failure %q, want the file and what to run", r.fatal)
	}
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, time.Minute, "the third check", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("%d checks, want 3", n)
	}
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		WaitFor(r, 50*time.Millisecond, "nothing", func() bool { return false })
	}()
	<-done
	if r.fatal != "timed out after 50ms waiting for nothing" {
		t.Fatalf("failure %q", r.fatal)
	}
}

// A line logged after the test's cleanups is dropped, not a panic.
func TestLoggerAfterTheTest(t *testing.T) {
	var log func()
	t.Run("sub", func(t *testing.T) {
		l := Logger(t)
		l.Debug("during the test", "k", 1)
		log = func() { l.Info("after the test") }
	})
	log()
}

func TestLogBuffer(t *testing.T) {
	var b LogBuffer
	b.Logger().Debug("hello", "k", "v")
	if !strings.Contains(b.String(), "level=DEBUG msg=hello k=v") {
		t.Fatalf("buffer %q", b.String())
	}
}

func TestFiles(t *testing.T) {
	p := TempFile(t, "a.yaml", "site: a\n")
	if filepath.Base(p) != "a.yaml" || ReadFile(t, p) != "site: a\n" {
		t.Fatalf("%s: %q", p, ReadFile(t, p))
	}
	WriteFile(t, p, "site: b\n")
	if ReadFile(t, p) != "site: b\n" {
		t.Fatalf("after WriteFile: %q", ReadFile(t, p))
	}
}

// recorder is a testing.TB whose Fatal records the message and ends the goroutine.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestWarnings(t *testing.T) {
	var b LogBuffer
	log := b.Logger()
	log.Info("worker log", "line", `time=2026-12-01T21:01:17.649Z level=WARN msg="quoted, not a warning"`)
	log.Warn("worker ended", "err", "exit: signal: killed")
	log.Debug("level=ERROR in a message is not a level")
	log.Error("restart failed")
	log.Log(context.Background(), slog.LevelError+2, "above error")
	got := Warnings(b.String())
	want := []string{`msg="worker ended"`, `msg="restart failed"`, `msg="above error"`}
	if len(got) != len(want) {
		t.Fatalf("Warnings = %q, want %d records: %q\nlog:\n%s", got, len(want), want, b.String())
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("warning %d: %q, want %s", i, got[i], w)
		}
	}
	if got := Warnings(""); len(got) != 0 {
		t.Errorf("Warnings of no log: %q", got)
	}
}
