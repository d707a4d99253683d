package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReportCrowd: crowd.json (pipeline's TestCrowdReplay with VISIOND_CROWD_OUT) becomes
// the crowd section, its parameters in the caption and a row per rate; without it the
// section says why.
func TestReportCrowd(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(in, "env.json"), envInfo{CPUs: 2}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "BENCHMARKS.md")
	section := func() string {
		t.Helper()
		if err := reportCmd([]string{"-in", in, "-o", out}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		i := strings.Index(text, "## Tracking a crowd")
		if i < 0 {
			t.Fatalf("no crowd section in\n%s", text)
		}
		text = text[i:]
		if j := strings.Index(text[3:], "\n## "); j >= 0 {
			text = text[:j+3]
		}
		return text
	}
	if s := section(); !strings.Contains(s, "Not run here: not run.") {
		t.Errorf("without crowd.json:\n%s", s)
	}
	if err := os.WriteFile(filepath.Join(in, "crowd.failed"), []byte("exit status non-zero; IDF1 0.5, want >= 0.8"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := section(); !strings.Contains(s, "Not run here: failed: exit status non-zero; IDF1 0.5") {
		t.Errorf("failed:\n%s", s)
	}
	c := crowdResult{Params: "24 people (4 full occlusions), seed 0"}
	c.Scene.Objects, c.Scene.Crossings, c.Scene.VideoS = 27, 27, 60
	r := crowdRate{FPS: 0.5, Analysed: 31, IDF1: 0.5936, IDP: 0.7778, IDR: 0.48, IDSwitches: 14, CountAccuracy: 0.5556, Stays: 6, Visits: 13}
	r.Lines = append(r.Lines, struct {
		Direction string `json:"direction"`
		Class     string `json:"class"`
		Counted   int    `json:"counted"`
		True      int    `json:"true"`
	}{"in", "person", 5, 10})
	c.Rates = append(c.Rates, r)
	r.FPS, r.IDF1 = 10, 0.855
	c.Rates = append(c.Rates, r)
	if err := writeJSON(filepath.Join(in, "crowd.json"), c); err != nil {
		t.Fatal(err)
	}
	s := section()
	for _, want := range []string{"Scene: 24 people (4 full occlusions), seed 0; truth: 27 objects", "| 0.5 | 31 | **0.594** | 0.778 / 0.480 |",
		"| 10 | 31 | **0.855** |", "**0.556** | person in 5/10 | 6 / 13 |"} {
		if !strings.Contains(s, want) {
			t.Errorf("section lacks %q:\n%s", want, s)
		}
	}
}
