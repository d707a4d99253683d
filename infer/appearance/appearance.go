// Package appearance is the compact appearance descriptor of a detection: colour histograms of
// the inside of its box, which the worker computes where the pixels are (infer/worker) and
// sends with each detection (infer.Detection.Appearance), and which the tracker compares
// (Distance) to tell people apart by what they wear as well as by where they move: to take up
// a track lost behind an occluder or between the frames of a low rate again, and to refuse a
// swap of identities when two people cross.
//
// The descriptor of a box is Size bytes:
//
//   - The box is shrunk by ShrinkX of its width on the left and on the right and by
//     ShrinkY of its height at the top and at the bottom, to leave out most of the
//     background around a person, then clipped to the image.
//   - The shrunk box is cut into Stripes horizontal stripes of equal height, top to bottom
//     (for a standing person: head and shoulders, torso, legs).
//   - Each stripe is sampled on a grid of at most MaxSamples/Stripes points (every pixel of
//     a small box, a sparser grid on a large one: the cost is bounded whatever the size),
//     and each sample adds a weight of 1 to the stripe's Bins-bin histogram, shared between
//     a chromatic part and a grey part by how coloured the pixel is:
//   - chromatic bins 0-23: 12 hue bins of 30 degrees (bin centres at 15, 45, ... degrees;
//     red is bins 0 and 11) times 2 saturation bins (centres at saturation 0.3 and 0.7),
//     index 2*hue+sat; a sample's share is split between the two nearest hue bins and the
//     two nearest saturation bins (bilinear), so that a small change of colour moves the
//     histogram a little, not a whole bin. Hue and saturation (HSV) do not change when the
//     light gets brighter or darker.
//   - grey bins 24-31: 8 bins of relative intensity 128*i/m, clamped to [0, 255], centres
//     at (k+0.5)*255/8, for the unsaturated pixels (black, grey, white clothes), again
//     split between the two nearest. i is the pixel's intensity (r+g+b)/3 and m the mean
//     intensity of the frame's picture (NewFrame; at least 16), so that a change of the
//     whole picture's brightness leaves the grey bins as they were, as it leaves hue and
//     saturation.
//   - A pixel's chromatic weight is ramp(saturation, 0.12, 0.28) * ramp(max(r,g,b), 20,
//     50), where ramp(v, lo, hi) goes from 0 at lo to 1 at hi: hue is noise in dark or
//     nearly grey pixels. The rest of its weight goes to the grey bins. (These bounds, in
//     levels of 0-255, are absolute: a dark pixel's hue is noise whatever the exposure.)
//   - Each stripe's histogram is L1-normalised (its bins sum to 1) and byte i of stripe s,
//     Descriptor[s*Bins+i], is round(255*sqrt(p_i)): the square root keeps the resolution
//     of small bins and makes the Bhattacharyya coefficient of two stripes the cosine of
//     their byte vectors (Distance).
//
// A descriptor computed from a box with at least one pixel of the image in it has a
// non-zero byte in every stripe; the zero Descriptor means none (IsZero), and is left out of
// the wire. The package is pure Go with no dependency but internal/geom, so that both sides
// of the worker's process boundary import it.
package appearance

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"

	"github.com/visiond/visiond/internal/geom"
)

// The descriptor's layout: Stripes stripes of Bins bytes, Size in all.
const (
	Stripes    = 3
	HueBins    = 12
	SatBins    = 2
	GreyBins   = 8
	Bins       = HueBins*SatBins + GreyBins // 32 bytes a stripe
	Size       = Stripes * Bins             // 96 bytes
	MaxSamples = 1024                       // samples a box at most
	ShrinkX    = 0.2                        // of the width, left and right
	ShrinkY    = 0.1                        // of the height, top and bottom
)

// Descriptor is the appearance of one detection's box (the package doc says what its bytes
// are). On the wire (JSON) it is the base64 (standard encoding, padded) of its Size bytes.
type Descriptor [Size]byte

// IsZero says whether d is the zero Descriptor: no descriptor.
func (d Descriptor) IsZero() bool { return d == Descriptor{} }

// MarshalJSON writes d as a base64 string.
func (d Descriptor) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+base64.StdEncoding.EncodedLen(Size))
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, d[:])
	return append(b, '"'), nil
}

// UnmarshalJSON reads a base64 string of exactly Size bytes; null, as encoding/json does for
// its own types, leaves d as it is. Its errors say "appearance": encoding/json does not name
// the field of an error that a decoding method returns.
func (d *Descriptor) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("appearance: want a base64 string, got %.20s", b)
	}
	if want := base64.StdEncoding.EncodedLen(Size); len(s) != want {
		return fmt.Errorf("appearance: %d base64 characters, want %d (%d bytes)", len(s), want, Size)
	}
	var buf [Size]byte
	n, err := base64.StdEncoding.Decode(buf[:], []byte(s))
	if err != nil {
		return fmt.Errorf("appearance: not base64: %v", err)
	}
	copy(d[:], buf[:n])
	return nil
}

// Frame is an image to describe boxes of, with the mean intensity of its picture, which
// the grey bins are relative to (the package doc). Make it with NewFrame, once a frame.
type Frame struct {
	img  []byte
	w, h int
	gain float32 // 128 / the picture's mean intensity
}

// MaxFrameSamples is the most pixels NewFrame samples for the picture's mean intensity.
const MaxFrameSamples = 4096

// minMean is the least mean intensity of a picture that grey levels are taken relative to:
// a darker picture is taken as this dark, so that its noise is not amplified to white.
const minMean = 16

// NewFrame returns img, an RGB24 HWC image of w x h pixels (len(img) >= w*h*3), to
// describe boxes of. picture is the part of it that holds the camera's picture, in its
// pixels: the scaled frame of a letterbox, without the padding (the whole image when it is
// empty or has no pixel of it); its mean intensity, sampled on a grid of at most
// MaxFrameSamples pixels, is the reference of the grey bins, so that a change of the whole
// picture's brightness (the camera's exposure, a cloud) leaves the descriptors as they
// were. A Frame of an image shorter than w*h*3 or of no size describes no box.
func NewFrame(img []byte, w, h int, picture geom.Box) Frame {
	f := Frame{img: img, w: w, h: h, gain: 128.0 / minMean}
	if w <= 0 || h <= 0 || len(img) < w*h*3 {
		f.w, f.h = 0, 0
		return f
	}
	x0, x1, y0, y1, ok := clip(picture, w, h)
	if !ok || x1-x0 < 1 || y1-y0 < 1 {
		x0, x1, y0, y1 = 0, float64(w), 0, float64(h)
	}
	bw, bh := x1-x0, y1-y0
	nx := int(max(1, min(math.Ceil(bw), math.Sqrt(MaxFrameSamples*bw/bh))))
	ny := int(max(1, min(math.Ceil(bh), float64(MaxFrameSamples/nx))))
	var sum uint64
	for j := range ny {
		row := pixel(y0+(float64(j)+0.5)*bh/float64(ny), h)
		line := img[row*w*3 : (row+1)*w*3]
		for i := range nx {
			c := pixel(x0+(float64(i)+0.5)*bw/float64(nx), w)
			p := line[c*3 : c*3+3]
			sum += uint64(p[0]) + uint64(p[1]) + uint64(p[2])
		}
	}
	mean := float64(sum) / float64(3*nx*ny)
	f.gain = float32(128 / max(mean, minMean))
	return f
}

// clip returns the corners of box clipped to a w x h image, edges included; ok is false
// when the box is not finite or touches no pixel of the image.
func clip(box geom.Box, w, h int) (x0, x1, y0, y1 float64, ok bool) {
	x0, x1 = box.X, box.X+box.W
	y0, y1 = box.Y, box.Y+box.H
	if !finite(x0) || !finite(x1) || !finite(y0) || !finite(y1) {
		return 0, 0, 0, 0, false
	}
	x0, x1 = min(x0, x1), max(x0, x1) // a negative size is the same box
	y0, y1 = min(y0, y1), max(y0, y1)
	if x1 < 0 || y1 < 0 || x0 > float64(w) || y0 > float64(h) {
		return 0, 0, 0, 0, false
	}
	return max(x0, 0), min(x1, float64(w)), max(y0, 0), min(y1, float64(h)), true
}

// Compute returns the descriptor of box on img, an RGB24 HWC image of w x h pixels whose
// picture is all of it: NewFrame(img, w, h, geom.Box{}).Describe(box). To describe many
// boxes of a frame, make its Frame once.
func Compute(img []byte, w, h int, box geom.Box) Descriptor {
	f := NewFrame(img, w, h, geom.Box{})
	return f.Describe(box)
}

// Describe returns the descriptor of box, in the frame's pixels. A box partly outside the
// image is clipped to it; a box smaller than a pixel (even of zero size) inside the image
// takes the pixel it is in. It returns the zero Descriptor when the box has no pixel of the
// image (entirely outside it, or not finite) or the frame describes no box (NewFrame). It
// samples at most MaxSamples pixels and allocates nothing.
func (f *Frame) Describe(box geom.Box) Descriptor {
	var d Descriptor
	if f.w <= 0 || f.h <= 0 {
		return d
	}
	img, w, h := f.img, f.w, f.h
	shrunk := geom.Box{X: box.X + ShrinkX*box.W, Y: box.Y + ShrinkY*box.H, W: (1 - 2*ShrinkX) * box.W, H: (1 - 2*ShrinkY) * box.H}
	x0, x1, y0, y1, ok := clip(shrunk, w, h)
	if !ok {
		return d
	}
	bw, bh := x1-x0, y1-y0
	sh := bh / Stripes
	nx, ny := grid(bw, sh)
	var cols [perStripe]int32
	for i := range nx {
		cols[i] = int32(pixel(x0+(float64(i)+0.5)*bw/float64(nx), w))
	}
	gain := f.gain
	var hist [Bins]float32
	for s := range Stripes {
		hist = [Bins]float32{}
		for j := range ny {
			row := pixel(y0+(float64(s)+(float64(j)+0.5)/float64(ny))*sh, h)
			line := img[row*w*3 : (row+1)*w*3]
			for _, c := range cols[:nx] {
				p := line[c*3 : c*3+3]
				add(&hist, p[0], p[1], p[2], gain)
			}
		}
		encode(d[s*Bins:(s+1)*Bins], &hist)
	}
	return d
}

// perStripe is the most samples of a stripe.
const perStripe = MaxSamples / Stripes

// grid returns the sampling grid of a stripe of bw x sh pixels: nx columns and ny rows,
// about as dense across as down, at most perStripe points and at most a point a pixel (at
// least one).
func grid(bw, sh float64) (nx, ny int) {
	nx = int(max(1, min(math.Ceil(bw), perStripe, math.Sqrt(perStripe*bw/max(sh, 1e-3)))))
	ny = int(max(1, min(math.Ceil(sh), float64(perStripe/nx))))
	return nx, ny
}

// pixel is the index of the pixel at coordinate v, clamped to [0, n).
func pixel(v float64, n int) int { return min(max(int(v), 0), n-1) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// ramp goes from 0 at lo to 1 at hi, linearly, and stays there.
func ramp(v, lo, hi float32) float32 { return min(max((v-lo)/(hi-lo), 0), 1) }

// add adds one sample of weight 1 to hist (the package doc's bins).
func add(hist *[Bins]float32, r, g, b uint8, gain float32) {
	mx, mn := max(r, g, b), min(r, g, b)
	grey := float32(1)
	if c := float32(mx - mn); c > 0 {
		v := float32(mx)
		sat := c / v
		chroma := ramp(sat, 0.12, 0.28) * ramp(v, 20, 50)
		if chroma > 0 {
			grey = 1 - chroma
			var hue float32 // in sextants, [0, 6)
			switch mx {
			case r:
				hue = (float32(g) - float32(b)) / c
				if hue < 0 {
					hue += 6
				}
			case g:
				hue = (float32(b)-float32(r))/c + 2
			default:
				hue = (float32(r)-float32(g))/c + 4
			}
			// Hue bins of half a sextant, centres at (k+0.5)/2: circular interpolation.
			hp := hue*HueBins/6 - 0.5
			if hp < 0 {
				hp += HueBins
			}
			h0 := int(hp)
			fh := hp - float32(h0)
			h0 %= HueBins
			h1 := (h0 + 1) % HueBins
			// Saturation bins centred at 0.3 and 0.7.
			fs := ramp(sat, 0.3, 0.7)
			w00, w01 := chroma*(1-fh)*(1-fs), chroma*(1-fh)*fs
			w10, w11 := chroma*fh*(1-fs), chroma*fh*fs
			hist[h0*SatBins] += w00
			hist[h0*SatBins+1] += w01
			hist[h1*SatBins] += w10
			hist[h1*SatBins+1] += w11
		}
	}
	if grey <= 0 {
		return
	}
	// Grey bins of intensity, centres at (k+0.5)*255/GreyBins, clamped at the ends.
	gp := (float32(r)+float32(g)+float32(b))*gain/3*GreyBins/255 - 0.5
	gp = min(max(gp, 0), GreyBins-1)
	g0 := min(int(gp), GreyBins-2)
	fg := gp - float32(g0)
	hist[HueBins*SatBins+g0] += grey * (1 - fg)
	hist[HueBins*SatBins+g0+1] += grey * fg
}

// encode writes round(255*sqrt(p)) of each bin of hist, L1-normalised, into dst.
func encode(dst []byte, hist *[Bins]float32) {
	var sum float32
	for _, v := range hist {
		sum += v
	}
	if sum <= 0 {
		return
	}
	for i, v := range hist {
		dst[i] = uint8(math.Round(255 * math.Sqrt(float64(v/sum))))
	}
}

// Distance is the Hellinger distance of the two descriptors' histograms, in [0, 1]: 0 for
// the same colours in the same stripes, 1 for no colour in common in any stripe. It is
// sqrt(1 - BC), BC the mean over the stripes of their Bhattacharyya coefficients
// (sum over bins of sqrt(p_i*q_i), here the cosine of the stripes' bytes). It is 1 when
// either descriptor has a stripe of zeros, as the zero Descriptor (none) has: check IsZero
// to tell "unknown" from "different".
func Distance(a, b Descriptor) float64 {
	var bc float64
	for s := range Stripes {
		var ab, aa, bb uint32
		for i := s * Bins; i < (s+1)*Bins; i++ {
			x, y := uint32(a[i]), uint32(b[i])
			ab += x * y
			aa += x * x
			bb += y * y
		}
		if aa == 0 || bb == 0 {
			return 1
		}
		bc += float64(ab) / math.Sqrt(float64(aa)*float64(bb))
	}
	return math.Sqrt(max(0, 1-bc/Stripes))
}
