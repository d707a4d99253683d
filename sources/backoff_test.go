package sources

import (
	"testing"
	"time"
)

// TestBackoffWithinRange: over many draws along the growing sequence of delays (1 s doubling
// to the 30 s cap, and the cap itself after refused credentials), every delay stays within
// the README's 1 s to 30 s and within ±20% of its step, and the draws at the cap still spread
// (cameras that fail together do not retry in lockstep). Before, the jitter went 20% over
// the cap: up to 36 s.
func TestBackoffWithinRange(t *testing.T) {
	c := &Camera{ID: "x"}
	c.init()
	if c.retryMin != time.Second || c.retryMax != 30*time.Second {
		t.Fatalf("defaults %v..%v, want 1s..30s", c.retryMin, c.retryMax)
	}
	const draws = 20000
	lowest, highest := time.Duration(1<<62), time.Duration(0)
	capLow, capHigh := time.Duration(1<<62), time.Duration(0)
	for i := range draws {
		d := c.retryMin
		for step := 0; step < 8; step++ {
			w := c.backoff(d)
			if w < c.retryMin || w > c.retryMax {
				t.Fatalf("draw %d: delay %v for step %v, outside %v..%v", i, w, d, c.retryMin, c.retryMax)
			}
			if w < d*8/10 || w > d*12/10 {
				t.Fatalf("draw %d: delay %v for step %v, outside ±20%%", i, w, d)
			}
			lowest, highest = min(lowest, w), max(highest, w)
			if d == c.retryMax {
				capLow, capHigh = min(capLow, w), max(capHigh, w)
			}
			d = min(2*d, c.retryMax)
		}
	}
	t.Logf("%d sequences: delays %v..%v, at the cap %v..%v", draws, lowest, highest, capLow, capHigh)
	if capLow > 25*time.Second || capHigh < 29*time.Second {
		t.Errorf("delays at the cap span only %v..%v: want them spread over 24 s..30 s", capLow, capHigh)
	}
	if lowest > 1100*time.Millisecond {
		t.Errorf("lowest delay %v: the floor is 1 s", lowest)
	}
}

// A floor above the cap (a camera configured to retry slowly) is honoured, never undercut.
func TestBackoffFloorAboveCap(t *testing.T) {
	c := &Camera{ID: "x", retryMin: time.Hour}
	c.init()
	for range 1000 {
		if w := c.backoff(c.retryMin); w != time.Hour {
			t.Fatalf("delay %v, want the 1h floor", w)
		}
	}
}
