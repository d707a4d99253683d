package infer

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
)

// workerEnv makes the test binary act as `visiond worker` (see TestMain), so that pool
// tests run real worker processes.
const workerEnv = "VISIOND_INFER_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		err := WorkerMain(ctx, os.Args[1:])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type assets struct {
	library, model, messi string
}

// thirdParty returns the files scripts/setup.sh fetches; the test fails without them.
// $ONNXRUNTIME_SHARED_LIBRARY_PATH, when set, names another ONNX Runtime build (the GPU
// machine's, with the CUDA provider).
func thirdParty(tb testing.TB) assets {
	tb.Helper()
	dir := filepath.Join("..", "third_party")
	a := assets{
		library: filepath.Join(dir, "libonnxruntime.so.1"),
		model:   filepath.Join(dir, "yolov8n.onnx"),
		messi:   filepath.Join(dir, "media", "messi5.jpg"),
	}
	if lib := os.Getenv("ONNXRUNTIME_SHARED_LIBRARY_PATH"); lib != "" {
		a.library = lib
	}
	for _, p := range []string{a.library, a.model, a.messi} {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("%v: run scripts/setup.sh", err)
		}
	}
	for _, p := range []*string{&a.library, &a.model, &a.messi} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			tb.Fatal(err)
		}
		*p = abs
	}
	return a
}
