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
