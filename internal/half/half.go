// Package half converts between float32 and IEEE 754 binary16 ("half", ONNX's FLOAT16),
// held as uint16 bit patterns: for the workers' float16 tensors (infer/worker) and the
// float16 weights of converted models (infer/model). Standard library only.
package half

import "math"

// FromFloat32 converts f to the nearest half, ties to even. Values beyond the half range
// (|f| >= 65520) become ±Inf, values below half the smallest subnormal (2^-25) become ±0,
// NaN stays NaN (quiet, sign and top payload bits kept).
func FromFloat32(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased half exponent
	switch {
	case e >= 0x1f:
		return sign | 0x7c00
	case e <= 0:
		if e < -10 {
			return sign
		}
		// Subnormal half: value = m * 2^-24.
		mant |= 0x800000
		shift := uint32(14 - e)
		m := mant >> shift
		rem := mant & (1<<shift - 1)
		halfway := uint32(1) << (shift - 1)
		if rem > halfway || (rem == halfway && m&1 == 1) {
			m++ // may carry into the smallest normal: still the right bits
		}
		return sign | uint16(m)
	}
	h := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++ // a carry into the exponent is correct, up to +Inf
	}
	return sign | uint16(h)
}

// ToFloat32 converts a half to float32 exactly.
func ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	case 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
