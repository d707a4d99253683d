package worker

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/testutil"
)

// RuntimeInfo on the real library: its version and at least the CPU provider; on a path that
// is missing or not ONNX Runtime, an error naming the path.
func TestRuntimeInfo(t *testing.T) {
	lib := testutil.ThirdParty(t, "libonnxruntime.so.1")
	version, providers, err := RuntimeInfo(lib)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^1\.\d+\.\d+`).MatchString(version) {
		t.Errorf("version %q, want 1.x.y", version)
	}
	if !slices.Contains(providers, "CPUExecutionProvider") {
		t.Errorf("providers %q do not list CPUExecutionProvider", providers)
	}

	// An older library (npm's onnxruntime-node 1.23.2: make setup-tests) says its version
	// and why it is refused.
	old := testutil.ThirdParty(t, "ort-1.23.2", "libonnxruntime.so.1")
	if v, _, err := RuntimeInfo(old); v != "1.23.2" || err == nil || !strings.Contains(err.Error(), "1.24 or later is needed") {
		t.Errorf("RuntimeInfo(%s) = %q, %v; want 1.23.2 and the version needed", old, v, err)
	}

	notLib := filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.WriteFile(notLib, []byte("not a library"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", "/nonexistent/libonnxruntime.so.1", notLib} {
		v, p, err := RuntimeInfo(path)
		if err == nil || !strings.Contains(err.Error(), "onnxruntime library") || !strings.Contains(err.Error(), path) {
			t.Errorf("RuntimeInfo(%q) = %q, %q, %v; want an error naming the library", path, v, p, err)
		}
	}
}

// A library's version reads as older than the binding loads below 1.24, whatever follows the
// minor version; what is not a version is not called older (the load's own error stands).
func TestOlderORT(t *testing.T) {
	for v, want := range map[string]bool{"1.23.2": true, "1.20.0": true, "0.9": true, "1.24.0": false, "1.29.0": false,
		"2.0.1": false, "1.23": true, "1.23.0-dev": true, "": false, "unknown": false, "1": false} {
		if got := olderORT(v); got != want {
			t.Errorf("olderORT(%q) = %v, want %v", v, got, want)
		}
	}
}
