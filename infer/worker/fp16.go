package worker

import (
	"math"
	"unsafe"
)

// IEEE 754 binary16 ("half", ONNX FLOAT16) support for models exported with
// Ultralytics' half=True: their input and output tensors hold float16. Values are kept as
// uint16 bit patterns in native byte order, the order ONNX Runtime reads and writes.

// f32ToF16 converts f to the nearest half, ties to even. Values beyond the half range
// (|f| >= 65520) become ±Inf, values below half the smallest subnormal (2^-25) become ±0,
// NaN stays NaN (quiet, sign and top payload bits kept).
func f32ToF16(f float32) uint16 {
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

// f16ToF32 converts a half to float32 exactly.
func f16ToF32(h uint16) float32 {
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

// f16Table returns f16ToF32 of every half, indexed by its bits (256 KiB): a lookup is
// several times faster than the conversion on the 705,600 values of a YOLOv8n output.
func f16Table() []float32 {
	t := make([]float32, 1<<16)
	for h := range t {
		t[h] = f16ToF32(uint16(h))
	}
	return t
}

// f16Decode converts len(dst) halves of src to float32 into dst through table (f16Table).
func f16Decode(dst []float32, src []uint16, table []float32) {
	src = src[:len(dst)]
	table = table[:1<<16]
	for i, h := range src {
		dst[i] = table[h]
	}
}

// preprocessF16 is preprocess writing halves: n pixels of RGB24 HWC uint8 into planar
// CHW float16 in 0..1. Each of the 256 levels is converted once per call.
func preprocessF16(dst []uint16, pix []byte, n int) {
	r, g, b := dst[:n], dst[n:2*n], dst[2*n:3*n]
	pix = pix[:3*n]
	var lut [256]uint16
	for i := range lut {
		lut[i] = f32ToF16(float32(i) / 255)
	}
	for i := range r {
		p := pix[3*i:]
		r[i], g[i], b[i] = lut[p[0]], lut[p[1]], lut[p[2]]
	}
}

// halfBytes views a []uint16 as the bytes an ort.CustomDataTensor is built on, so that the
// tensor and the Go code share one buffer, 2-byte aligned.
func halfBytes(s []uint16) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), 2*len(s))
}
