package half

import (
	"math"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		f    float32
		h    uint16
		back float32 // ToFloat32(h)
	}{
		{0, 0x0000, 0},
		{1, 0x3c00, 1},
		{-2, 0xc000, -2},
		{0.5, 0x3800, 0.5},
		{65504, 0x7bff, 65504}, // largest half
		{65519, 0x7bff, 65504}, // rounds down below the halfway point
		{65520, 0x7c00, inf},   // halfway to 2^16: rounds to even, +Inf
		{1e6, 0x7c00, inf},     // beyond half range
		{-1e6, 0xfc00, -inf},   // beyond half range, negative
		{inf, 0x7c00, inf},
		{-inf, 0xfc00, -inf},
		{0x1p-14, 0x0400, 0x1p-14},    // smallest normal
		{0x1p-24, 0x0001, 0x1p-24},    // smallest subnormal
		{0x1.8p-24, 0x0002, 0x1p-23},  // 1.5 ulp: ties to even (2)
		{0x1p-25, 0x0000, 0},          // half the smallest subnormal: ties to even (0)
		{0x1.01p-25, 0x0001, 0x1p-24}, // just above: rounds up
		{0x1p-26, 0x0000, 0},          // underflow
		{-0x1p-30, 0x8000, float32(math.Copysign(0, -1))},
		{0x3ffp-24, 0x03ff, 0x3ffp-24},    // largest subnormal
		{0x1.ffcp-15, 0x0400, 0x1p-14},    // rounds up from subnormal into normal
		{1 + 0x1p-11, 0x3c00, 1},          // tie: to even (down)
		{1 + 0x3p-11, 0x3c02, 1 + 0x1p-9}, // tie: to even (up)
		{float32(1) / 3, 0x3555, 0.333251953125},
	} {
		if h := FromFloat32(tc.f); h != tc.h {
			t.Errorf("FromFloat32(%g) = %#04x, want %#04x", tc.f, h, tc.h)
		}
		if back := ToFloat32(tc.h); math.Float32bits(back) != math.Float32bits(tc.back) {
			t.Errorf("ToFloat32(%#04x) = %g, want %g", tc.h, back, tc.back)
		}
	}
	nan := float32(math.NaN())
	if h := FromFloat32(nan); h&0x7c00 != 0x7c00 || h&0x3ff == 0 || !math.IsNaN(float64(ToFloat32(h))) {
		t.Errorf("NaN -> %#04x -> %v", h, ToFloat32(h))
	}
	if h := FromFloat32(-nan); h&0x8000 == 0 {
		t.Errorf("-NaN lost its sign: %#04x", h)
	}
	// Every half that is not NaN survives half -> float32 -> half.
	for h := range 1 << 16 {
		f := ToFloat32(uint16(h))
		if math.IsNaN(float64(f)) {
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("%#04x decoded as NaN", h)
			}
			continue
		}
		if back := FromFloat32(f); back != uint16(h) {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}
