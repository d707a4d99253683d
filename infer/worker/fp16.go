package worker

import (
	"unsafe"

	"github.com/visiond/visiond/internal/half"
)

// IEEE 754 binary16 ("half", ONNX FLOAT16) support for models exported with
// Ultralytics' half=True: their input and output tensors hold float16. Values are kept as
// uint16 bit patterns in native byte order, the order ONNX Runtime reads and writes.

// f32ToF16 converts f to the nearest half (half.FromFloat32).
func f32ToF16(f float32) uint16 { return half.FromFloat32(f) }

// f16ToF32 converts a half to float32 exactly (half.ToFloat32).
func f16ToF32(h uint16) float32 { return half.ToFloat32(h) }

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
