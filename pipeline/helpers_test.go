package pipeline

import (
	"log/slog"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// The names this package's tests had for internal/testutil's helpers before it existed, kept
// for tests written against them (another branch's slicer_test.go); new code calls testutil.

func thirdParty(tb testing.TB, rel string) string { tb.Helper(); return testutil.ThirdParty(tb, rel) }

func testLogger(tb testing.TB) *slog.Logger { return testutil.Logger(tb) }

func waitUntil(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	testutil.WaitFor(tb, d, what, cond)
}

func closedAddr(tb testing.TB) string { tb.Helper(); return testutil.FreeAddr(tb) }
