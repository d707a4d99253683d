package model

// Calibration statistics for static INT8 quantization (quantize.go): per activation tensor,
// its exact minimum and maximum and a histogram, updated one frame at a time, so that
// calibrating on hundreds of frames holds a few KiB per tensor, never the activations.

import (
	"fmt"
	"math"
	"slices"
)

// Method is how an activation's quantization range is chosen from its calibration
// statistics.
type Method string

// Calibration methods.
const (
	// MethodPercentile clips each tensor at the Percentile-th percentile of its values on
	// both sides (the default): a few outliers do not stretch the range of the rest.
	MethodPercentile Method = "percentile"
	// MethodEntropy chooses the clipping threshold that minimizes the KL divergence between
	// the histogram of |x| and its quantized form (TensorRT's entropy calibration).
	MethodEntropy Method = "entropy"
	// MethodMinMax takes the smallest and largest values seen.
	MethodMinMax Method = "minmax"
)

// Methods returns the calibration methods, the default first.
func Methods() []Method { return []Method{MethodPercentile, MethodEntropy, MethodMinMax} }

// ParseMethod returns the method named s.
func ParseMethod(s string) (Method, error) {
	if slices.Contains(Methods(), Method(s)) {
		return Method(s), nil
	}
	return "", fmt.Errorf("calibration method %q: want percentile, entropy or minmax", s)
}

// DefaultPercentile is the percentile of MethodPercentile, as ONNX Runtime's quantizer
// takes it by default.
const DefaultPercentile = 99.999

// histBins is the number of bins of a tensor's histogram, over [-r, r]; even, so that zero
// is a bin edge and the histogram folds into one of |x| (entropy).
const histBins = 4096

// entropyLevels is the number of quantized levels the entropy method compares against:
// 128 for |x| of a tensor with both signs (TensorRT and ONNX Runtime take 128), all 255
// of uint8 for a one-sided one (a SiLU's output: down to -0.28, up to tens).
const (
	entropyLevels         = 128
	entropyLevelsOneSided = 255
)

// tensorStats are one tensor's streaming statistics.
type tensorStats struct {
	shape    []int64 // as first seen
	min, max float32
	r        float64  // the histogram covers [-r, r); 0 until a non-zero value is seen
	hist     []uint64 // histBins counts; nil while r is 0
	n        uint64   // values seen (NaN excluded), zeros before the histogram included
	zeros    uint64   // zeros seen while r was 0, not yet in hist
}

// Calibration gathers activation statistics over calibration frames: Observe each tensor of
// each frame, then Range. The zero value is not usable: use NewCalibration. Not safe for
// concurrent use.
type Calibration struct {
	stats map[string]*tensorStats
}

// NewCalibration returns an empty Calibration.
func NewCalibration() *Calibration { return &Calibration{stats: map[string]*tensorStats{}} }

// Observe adds the values of one tensor of one frame. NaNs are ignored; infinities are
// refused (the model overflowed on this frame: its range would be useless).
func (c *Calibration) Observe(name string, shape []int64, data []float32) error {
	s := c.stats[name]
	if s == nil {
		s = &tensorStats{shape: slices.Clone(shape), min: float32(math.Inf(1)), max: float32(math.Inf(-1))}
		c.stats[name] = s
	}
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	var n uint64
	for _, v := range data {
		if v == v { // not NaN
			lo, hi = min(lo, v), max(hi, v)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	if math.IsInf(float64(lo), 0) || math.IsInf(float64(hi), 0) {
		return fmt.Errorf("calibration: tensor %s holds an infinite value", name)
	}
	s.min, s.max = min(s.min, lo), max(s.max, hi)
	amax := math.Max(math.Abs(float64(lo)), math.Abs(float64(hi)))
	if amax == 0 {
		s.n += n
		if s.hist == nil {
			s.zeros += n
		} else {
			s.hist[histBins/2] += n
		}
		return nil
	}
	s.cover(amax)
	// float32 arithmetic: r is at most a few thousand and 4096 bins need 12 bits of the 24.
	off, scale := float32(s.r), float32(histBins/(2*s.r))
	h := s.hist
	for _, v := range data {
		if v != v {
			continue
		}
		i := int((v + off) * scale)
		if uint(i) >= histBins {
			i = min(max(i, 0), histBins-1)
		}
		h[i]++
	}
	s.n += n
	return nil
}

// cover makes the histogram's range cover [-amax, amax]: the first time, r is amax (a
// little more, so that amax falls inside the last bin); later, r doubles, pairs of bins
// merging, until it does.
func (s *tensorStats) cover(amax float64) {
	if s.hist == nil {
		s.r = amax * (1 + 1e-6)
		s.hist = make([]uint64, histBins)
		s.hist[histBins/2] += s.zeros
		s.zeros = 0
		return
	}
	for amax >= s.r {
		// New bin j covers old bins 2(j-B/4) and 2(j-B/4)+1, B = histBins.
		merged := make([]uint64, histBins)
		for i, n := range s.hist {
			merged[histBins/4+i/2] += n
		}
		s.hist = merged
		s.r *= 2
	}
}

// Tensors returns the names of the observed tensors, sorted.
func (c *Calibration) Tensors() []string {
	names := make([]string, 0, len(c.stats))
	for n := range c.stats {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Shape returns the shape tensor name had when first observed; ok is false when it was
// never observed.
func (c *Calibration) Shape(name string) (shape []int64, ok bool) {
	s := c.stats[name]
	if s == nil {
		return nil, false
	}
	return s.shape, true
}

// Range returns the quantization range of tensor name by method m (percentile p, in
// percent, for MethodPercentile): lo <= 0 <= hi, so that zero is exact. ok is false when
// the tensor was never observed with a value.
func (c *Calibration) Range(name string, m Method, p float64) (lo, hi float32, ok bool) {
	s := c.stats[name]
	if s == nil || s.n == 0 {
		return 0, 0, false
	}
	lo, hi = s.min, s.max
	if s.hist != nil {
		switch m {
		case MethodPercentile:
			lo, hi = s.percentile(p)
		case MethodEntropy:
			t := float32(s.entropyThreshold())
			lo, hi = max(lo, -t), min(hi, t)
		}
	}
	return min(lo, 0), max(hi, 0), true
}

// percentile returns the values below which (100-p)/100 and p/100 of the values lie,
// within [min, max]: bin edges of the histogram.
func (s *tensorStats) percentile(p float64) (lo, hi float32) {
	w := 2 * s.r / histBins
	tail := uint64(math.Floor(float64(s.n) * (100 - p) / 100))
	var acc uint64
	loIdx := 0
	for i, n := range s.hist {
		if acc+n > tail {
			loIdx = i
			break
		}
		acc += n
	}
	acc = 0
	hiIdx := histBins - 1
	for i := histBins - 1; i >= 0; i-- {
		if acc+s.hist[i] > tail {
			hiIdx = i
			break
		}
		acc += s.hist[i]
	}
	lo = max(s.min, float32(-s.r+float64(loIdx)*w))
	hi = min(s.max, float32(-s.r+float64(hiIdx+1)*w))
	return lo, hi
}

// entropyThreshold returns the threshold t on |x| whose clipped and quantized histogram
// (entropyLevels levels) is closest, by KL divergence, to the histogram of |x|.
func (s *tensorStats) entropyThreshold() float64 {
	const half = histBins / 2
	abs := make([]float64, half) // |x| histogram over [0, r)
	for i := range half {
		abs[i] = float64(s.hist[half+i] + s.hist[half-1-i])
	}
	last := half - 1
	for last > 0 && abs[last] == 0 {
		last--
	}
	w := s.r / half
	levels := entropyLevels
	if -s.min < s.max/16 || -s.max < -s.min/16 {
		levels = entropyLevelsOneSided
	}
	if last+1 <= levels {
		return float64(last+1) * w // fewer bins than levels: nothing to clip
	}
	best, bestKL := last+1, math.Inf(1)
	p := make([]float64, half)
	q := make([]float64, half)
	for i := levels; i <= last+1; i++ {
		copy(p, abs[:i])
		var outliers float64
		for _, v := range abs[i : last+1] {
			outliers += v
		}
		p[i-1] += outliers
		// q: abs[:i] merged into entropyLevels levels, each level's mass spread evenly
		// over its non-empty bins.
		for l := range levels {
			a, b := l*i/levels, (l+1)*i/levels
			var mass float64
			nonEmpty := 0
			for _, v := range abs[a:b] {
				mass += v
				if v != 0 {
					nonEmpty++
				}
			}
			for j := a; j < b; j++ {
				q[j] = 0
				if abs[j] != 0 {
					q[j] = mass / float64(nonEmpty)
				}
			}
		}
		if kl := klDivergence(p[:i], q[:i]); kl < bestKL {
			best, bestKL = i, kl
		}
	}
	return float64(best) * w
}

// klDivergence returns KL(p || q) of two unnormalized histograms; bins where p is zero add
// nothing, bins where q is zero and p is not are smoothed.
func klDivergence(p, q []float64) float64 {
	var sp, sq float64
	for i := range p {
		sp += p[i]
		sq += q[i]
	}
	if sp == 0 || sq == 0 {
		return math.Inf(1)
	}
	const eps = 1e-10
	var kl float64
	for i := range p {
		if p[i] == 0 {
			continue
		}
		pi := p[i] / sp
		qi := max(q[i]/sq, eps)
		kl += pi * math.Log(pi/qi)
	}
	return kl
}
