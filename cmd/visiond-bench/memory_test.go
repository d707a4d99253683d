package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportMemory: the memory section and its summary row from memory-*.json: a further
// camera's cost by least squares over the steps, in the daemon and by owner, the aim met or
// not, and the owners' columns (the NATS server's store caches apart from the Go runtime).
func TestReportMemory(t *testing.T) {
	var whole string
	in, section := reportSection(t, "## Memory: per camera", &whole)
	report := func() (summary, text string) {
		t.Helper()
		text = section()
		return summaryRow(whole, "| memory:"), text
	}
	if sum, _ := report(); !strings.Contains(sum, "| 2-CPU box | not run |") {
		t.Errorf("without memory-*.json: %q", sum)
	}
	// 1, 4 and 16 cameras: the daemon grows 9 MiB a camera, of which the NATS caches 2 and the C heap 4.
	step := func(n int) memStep {
		c := float64(n)
		return memStep{Cameras: n, DaemonRSS: 130 + 9*(c-1), DaemonPSS: 80 + 9*(c-1), WorkersRSS: 450, WorkersPSS: 330, Workers: 2,
			Window: window{Seconds: 60, Events: int(60 * 5 * c)},
			Owners: memOwners{Resident: 130 + 9*(c-1), Go: 15 + 1.5*(c-1), NATSCaches: 4 + 2*(c-1), FrameBuffers: 2 + 1.2*(c-1),
				SnapshotBuffers: 1 + 0.3*(c-1), CHeap: 20 + 4*(c-1), Code: 82, Shared: 2}}
	}
	m := memResult{Command: []string{"visiond-bench", "memory", "-cameras", "1,4,16"}, Label: "576p, 5 fps", Width: 768, Height: 576,
		WarmupS: 30, WindowS: 60, Steps: []memStep{step(16), step(1), step(4)}, Started: time.Date(2026, 12, 6, 18, 49, 0, 0, time.UTC)}
	if err := writeJSON(filepath.Join(in, "memory-576p.json"), m); err != nil {
		t.Fatal(err)
	}
	sum, s := report()
	for _, want := range []string{
		"| daemon RSS | go | nats caches | frames |",
		"| 576p, 5 fps | 768x576 | 16 | 5.00 | 265 | 38 | 34 | 20 | 6 | 80 | 0 | 82 | 2 | 2: 450 (330) |",
		"576p, 5 fps: **9.0 MiB a further camera** in the daemon's resident memory (aim ≤ 8)",
		"By owner, a further camera: go 1.5, nats caches 2.0, frames 1.2, snapshots 0.3, c heap 4.0, gpu driver 0.0 MiB.",
		"taken 2026-12-06 18:49 UTC", "`visiond-bench memory -cameras 1,4,16`",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(sum, "**9.0 MiB** (aim ≤ 8: **not met**)") || !strings.Contains(sum, "1 to 16 cameras") {
		t.Errorf("summary row %q", sum)
	}
}
