package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReportLive: the live section and its summary row from live*.json: the cost of a viewer
// by least squares over the steps, the noise between repeated steps, the page's latency, and
// "not run" without a result.
func TestReportLive(t *testing.T) {
	var whole string
	in, section := reportSection(t, "## Live view", &whole)
	report := func() (summary, text string) {
		t.Helper()
		text = section()
		return summaryRow(whole, "| live view:"), text
	}
	if sum, s := report(); !strings.Contains(s, "Not run here: not run.") || !strings.Contains(sum, "| 2-CPU box | not run |") {
		t.Errorf("without live.json: %q\n%s", sum, s)
	}
	// 4 cameras; 0 and 16 viewers a camera, twice: 64 viewers add 4.0% of a core, so 0.0625% a viewer.
	l := liveResult{Command: []string{"visiond-bench", "live", "-cameras", "4"}, Daemon: daemonFlags{Provider: "cpu", Workers: unset, Threads: unset, FPS: 5},
		Cameras: 4, WarmupS: 20, WindowS: 60, Feed: true, Started: time.Date(2026, 12, 6, 14, 21, 0, 0, time.UTC),
		Steps: []liveStep{
			{Viewers: 0, CPUPercent: 20, RSSMiB: 200, EventsPerS: 20},
			{Viewers: 16, CPUPercent: 24.5, RSSMiB: 206.4, BytesPerS: 11.2e6, Messages: 9000, EventsPerS: 20},
			{Viewers: 0, CPUPercent: 21, RSSMiB: 200, EventsPerS: 20},
			{Viewers: 16, CPUPercent: 24.5, RSSMiB: 206.4, BytesPerS: 11.2e6, Messages: 9000, EventsPerS: 20, ViewerErrors: 1},
		},
		Latency: &liveLatency{Browser: "chromium", Samples: []float64{400, 500, 600}, P50: 500, P90: 600, Drawn: 150},
	}
	if err := writeJSON(filepath.Join(in, "live.json"), l); err != nil {
		t.Fatal(err)
	}
	sum, s := report()
	for _, want := range []string{
		"| 16 | 64 | 24.5% | 206 MiB | 11200 KB/s | 20.0 | 1 |",
		"**A viewer costs 0.06% of a core and 0.1 MiB**",
		"steps of the same count differ by up to 1.0% of a core",
		"**Capture to boxes on screen: p50 500 ms, p90 600 ms**", "3 s; 150 results drawn",
		"Taken 2026-12-06 14:21 UTC", "`visiond-bench live -cameras 4`",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
	if !strings.Contains(sum, "**0.06%** of a core (aim < 1%: met; up to 64 viewers), p50 **500 ms** (aim < 1000 ms: met)") {
		t.Errorf("summary row %q", sum)
	}
	// A page that drew nothing says so, in the section and not as a figure in the summary.
	l.Latency = &liveLatency{Browser: "chromium", Error: "the page drew no results"}
	if err := writeJSON(filepath.Join(in, "live.json"), l); err != nil {
		t.Fatal(err)
	}
	if sum, s := report(); !strings.Contains(s, "Capture to screen: not measured (the page drew no results)") || strings.Contains(sum, "p50") {
		t.Errorf("latency not measured: %q\n%s", sum, s)
	}
}
