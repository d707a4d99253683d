package pool

import (
	"os"
	"testing"

	"github.com/visiond/visiond/infer/internal/infertest"
	inferworker "github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/infer/worker/workertest"
	"github.com/visiond/visiond/internal/geom"
)

// TestMain makes the test binary act as `visiond worker` when a pool under test starts it
// (workertest), so that the pool tests run real worker processes.
func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeWorkerEnv); mode != "" && os.Getenv("VISIOND_TEST_WORKER") == "1" {
		if err := fakeWorker(mode); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	workertest.Main()
	os.Exit(m.Run())
}

// messiFrame letterboxes messi5.jpg to 640x640.
func messiFrame(tb testing.TB, a infertest.Assets) ([]byte, geom.Letterbox, int, int) {
	tb.Helper()
	return infertest.MessiFrame(tb, a, inferworker.LetterboxImage)
}
