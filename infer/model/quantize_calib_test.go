package model

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// near says whether got is within tol of want.
func near(got, want, tol float32) bool { return math.Abs(float64(got-want)) <= float64(tol) }

// TestCalibrationMinMax: minmax is the exact extremes over every frame, widened to take 0.
func TestCalibrationMinMax(t *testing.T) {
	c := NewCalibration()
	for _, frame := range [][]float32{{1, 2, 3}, {0.5, 7.25}, {4}} {
		if err := c.Observe("x", []int64{1, int64(len(frame))}, frame); err != nil {
			t.Fatal(err)
		}
	}
	lo, hi, ok := c.Range("x", MethodMinMax, 0)
	if !ok || lo != 0 || hi != 7.25 {
		t.Errorf("minmax of positives: %v %v %v, want 0 (zero kept exact) 7.25", lo, hi, ok)
	}
	if err := c.Observe("y", []int64{2}, []float32{-3, -1}); err != nil {
		t.Fatal(err)
	}
	if lo, hi, _ := c.Range("y", MethodMinMax, 0); lo != -3 || hi != 0 {
		t.Errorf("minmax of negatives: %v %v, want -3 0", lo, hi)
	}
	if shape, ok := c.Shape("x"); !ok || len(shape) != 2 || shape[1] != 3 {
		t.Errorf("shape %v %v, want the first frame's [1 3]", shape, ok)
	}
	if _, _, ok := c.Range("never", MethodMinMax, 0); ok {
		t.Error("a tensor never observed has a range")
	}
	if got := strings.Join(c.Tensors(), " "); got != "x y" {
		t.Errorf("tensors %q", got)
	}
}

// TestCalibrationPercentile: 0.1% of outliers far out are clipped by the 99.9th percentile
// on both sides, while minmax takes them; the histogram widens as frames bring larger
// values without losing the counts of earlier frames.
func TestCalibrationPercentile(t *testing.T) {
	c := NewCalibration()
	r := rand.New(rand.NewPCG(1, 2))
	// First frames in [-1, 2], a later one with outliers at -100 and +200: the histogram
	// must grow (doubling) and keep what it had.
	for f := 0; f < 10; f++ {
		v := make([]float32, 10000)
		for i := range v {
			v[i] = float32(r.Float64()*3 - 1)
		}
		if f == 9 {
			for i := range 50 {
				v[i] = 200
				v[50+i] = -100
			}
		}
		if err := c.Observe("x", []int64{10000}, v); err != nil {
			t.Fatal(err)
		}
	}
	lo, hi, _ := c.Range("x", MethodMinMax, 0)
	if lo != -100 || hi != 200 {
		t.Fatalf("minmax %v %v, want -100 200", lo, hi)
	}
	// 100 outliers of 100000 values: 0.05% each side; the 99.9th percentile is inside the
	// uniform part, within a bin (400/4096 after growing) of its edges.
	lo, hi, _ = c.Range("x", MethodPercentile, 99.9)
	if !near(lo, -1, 0.2) || !near(hi, 2, 0.2) {
		t.Errorf("percentile 99.9: %v %v, want about -1 2", lo, hi)
	}
	// 99.99 keeps the outliers (they are 0.05%, more than 0.01%).
	lo, hi, _ = c.Range("x", MethodPercentile, 99.99)
	if !near(lo, -100, 1) || !near(hi, 200, 1) {
		t.Errorf("percentile 99.99: %v %v, want about -100 200", lo, hi)
	}
}

// TestCalibrationEntropy: on a one-sided tensor with a long, thin tail (as after a SiLU), the
// entropy threshold clips the tail, keeps the bulk and keeps the small negative part.
func TestCalibrationEntropy(t *testing.T) {
	c := NewCalibration()
	r := rand.New(rand.NewPCG(3, 4))
	v := make([]float32, 200000)
	for i := range v {
		v[i] = float32(r.ExpFloat64()) - 0.25 // mostly 0..5, a tail to ~12
	}
	v[0] = 60 // one far outlier
	if err := c.Observe("x", []int64{200000}, v); err != nil {
		t.Fatal(err)
	}
	lo, hi, _ := c.Range("x", MethodEntropy, 0)
	if lo != -0.25 && !near(lo, -0.25, 0.01) {
		t.Errorf("entropy lo %v, want the minimum -0.25 (not clipped)", lo)
	}
	if !(hi > 4 && hi < 30) {
		t.Errorf("entropy hi %v, want the bulk (above 4) kept and the outlier at 60 clipped", hi)
	}
}

// TestCalibrationSpecialValues: NaNs are skipped, an infinity is refused by name, an
// all-zero tensor has the range [0, 0].
func TestCalibrationSpecialValues(t *testing.T) {
	c := NewCalibration()
	nan := float32(math.NaN())
	if err := c.Observe("x", []int64{3}, []float32{nan, 2, -1}); err != nil {
		t.Fatal(err)
	}
	if lo, hi, _ := c.Range("x", MethodPercentile, DefaultPercentile); lo > -0.99 || hi < 1.99 || hi > 2.01 {
		t.Errorf("with a NaN: %v %v, want about -1 2", lo, hi)
	}
	err := c.Observe("big", []int64{2}, []float32{1, float32(math.Inf(1))})
	if err == nil || !strings.Contains(err.Error(), "big") || !strings.Contains(err.Error(), "infinite") {
		t.Errorf("infinity: %v, want an error naming the tensor", err)
	}
	if err := c.Observe("z", []int64{2}, []float32{0, 0}); err != nil {
		t.Fatal(err)
	}
	if lo, hi, ok := c.Range("z", MethodEntropy, 0); !ok || lo != 0 || hi != 0 {
		t.Errorf("all zero: %v %v %v", lo, hi, ok)
	}
	// Zeros first, then values: the zeros land in the histogram's zero bin.
	if err := c.Observe("z", []int64{2}, []float32{4, 4}); err != nil {
		t.Fatal(err)
	}
	if lo, hi, _ := c.Range("z", MethodPercentile, 60); lo != 0 || !near(hi, 4, 0.01) {
		t.Errorf("zeros then fours, 60th percentile: %v %v, want 0 4", lo, hi)
	}
}

func TestParseMethod(t *testing.T) {
	for _, m := range Methods() {
		if got, err := ParseMethod(string(m)); err != nil || got != m {
			t.Errorf("%s: %v %v", m, got, err)
		}
	}
	_, err := ParseMethod("kl")
	if err == nil || !strings.Contains(err.Error(), `"kl"`) || !strings.Contains(err.Error(), "percentile, entropy or minmax") {
		t.Errorf("bad method: %v", err)
	}
}
