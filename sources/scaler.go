package sources

// #cgo pkg-config: libavutil libswscale
// #include <libavutil/frame.h>
// #include <libavutil/pixfmt.h>
// #include <libswscale/swscale.h>
//
// // scale_frame scales the whole decoded frame f with one sws_scale call into the planes
// // d0, d1, d2 (d1 and d2 NULL for a packed format) at the given strides. The planes may be
// // Go memory, used only during the call.
// static int scale_frame(struct SwsContext *sws, const AVFrame *f,
// 		uint8_t *d0, uint8_t *d1, uint8_t *d2, int s0, int s1, int s2) {
// 	uint8_t *dst[4] = {d0, d1, d2, NULL};
// 	int strides[4] = {s0, s1, s2, 0};
// 	return sws_scale(sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst, strides);
// }
//
// // scale_planar scales a planar picture of h rows (p0, p1, p2 at strides s0, s1, s2) with
// // one sws_scale call into the packed picture at dst with the given stride. Every pointer
// // may be Go memory, used only during the call.
// static int scale_planar(struct SwsContext *sws, const uint8_t *p0, const uint8_t *p1, const uint8_t *p2,
// 		int s0, int s1, int s2, int h, uint8_t *dst, int stride) {
// 	const uint8_t *src[4] = {p0, p1, p2, NULL};
// 	int srcStrides[4] = {s0, s1, s2, 0};
// 	uint8_t *out[4] = {dst, NULL, NULL, NULL};
// 	int outStrides[4] = {stride, 0, 0, 0};
// 	return sws_scale(sws, src, srcStrides, 0, h, out, outStrides);
// }
//
// // planar_format is the format a frame of format fmt, scaled to scaledW, is held in until it
// // is dispatched (PixYUV420P, PixYUVJ420P), or AV_PIX_FMT_NONE when it is scaled straight
// // into RGB24: 4:2:0 (planar, or NV12 as NVDEC outputs) and a width that is a multiple of 16,
// // since the SIMD conversion to RGB24 writes whole blocks of 16 pixels (past the row's end
// // otherwise, into the padding or past the buffer). libswscale has SIMD code for planar
// // resizing and for YUV 4:2:0 to RGB24 at equal sizes, but writes RGB24 from its resizing
// // path with generic C code: the two steps cost about a third of one.
// static int planar_format(int fmt, int scaledW) {
// 	if (scaledW % 16 != 0) return AV_PIX_FMT_NONE;
// 	switch (fmt) {
// 	case AV_PIX_FMT_YUV420P:
// 	case AV_PIX_FMT_YUVJ420P:
// 		return fmt;
// 	case AV_PIX_FMT_NV12:
// 		return AV_PIX_FMT_YUV420P;
// 	}
// 	return AV_PIX_FMT_NONE;
// }
import "C"

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/visiond/visiond/internal/geom"
)

// PixFormat is how a frame holds its picture until it is dispatched (Frame.WriteRGB).
type PixFormat uint8

const (
	// PixRGB24 is the model's input as the model takes it: packed RGB24 (HWC) of the
	// letterbox's DstW x DstH, the picture at its offset, padded with geom.PadValue.
	PixRGB24 PixFormat = iota
	// PixYUV420P is planar YUV 4:2:0 (limited range) of the letterbox's ScaledW x ScaledH
	// alone, as yuvLayout places it: at 4:3 into 640x640, 0.46 MB where RGB24 takes 1.2.
	// WriteRGB converts it. A decoded 4:2:0 frame scaled to a width that is a multiple of 16
	// is held so.
	PixYUV420P
	// PixYUVJ420P is PixYUV420P at full range, as cameras that send yuvj420p have it.
	PixYUVJ420P
)

func (f PixFormat) String() string {
	switch f {
	case PixRGB24:
		return "rgb24"
	case PixYUV420P:
		return "yuv420p"
	case PixYUVJ420P:
		return "yuvj420p"
	}
	return fmt.Sprintf("PixFormat(%d)", uint8(f))
}

// av is the format's AVPixelFormat.
func (f PixFormat) av() int {
	switch f {
	case PixYUV420P:
		return C.AV_PIX_FMT_YUV420P
	case PixYUVJ420P:
		return C.AV_PIX_FMT_YUVJ420P
	}
	return C.AV_PIX_FMT_RGB24
}

// heldFormat is the format a frame of AVPixelFormat avFmt, letterboxed as lb, is held in:
// planar where planar_format allows, RGB24 otherwise.
func heldFormat(avFmt int, lb geom.Letterbox) PixFormat {
	switch C.planar_format(C.int(avFmt), C.int(lb.ScaledW)) {
	case C.AV_PIX_FMT_YUV420P:
		return PixYUV420P
	case C.AV_PIX_FMT_YUVJ420P:
		return PixYUVJ420P
	}
	return PixRGB24
}

// yuvLayout is where a planar 4:2:0 picture of w x h lies in a frame buffer: the Y plane,
// then U and V, each row at a stride that is a multiple of 64 bytes (so that libswscale's
// SIMD code, which reads and writes blocks of 16 pixels, keeps within the rows), each plane
// starting at a multiple of 64 bytes.
type yuvLayout struct {
	off, stride, rows [3]int
	size              int // bytes of the three planes
}

func newYUVLayout(w, h int) yuvLayout {
	ys, cs, ch := align64(w), align64((w+1)/2), (h+1)/2
	return yuvLayout{
		off:    [3]int{0, ys * h, ys*h + cs*ch},
		stride: [3]int{ys, cs, cs},
		rows:   [3]int{h, ch, ch},
		size:   ys*h + 2*cs*ch,
	}
}

func align64(n int) int { return (n + 63) &^ 63 }

// plane returns the start of plane i of the picture in buf, which holds at least l.size bytes.
func (l yuvLayout) plane(buf []byte, i int) *C.uint8_t {
	return (*C.uint8_t)(unsafe.Pointer(&buf[l.off[i]]))
}

// scalerKey is what a scaler is made for: pictures of srcW x srcH in srcFmt, scaled to dstW
// x dstH in dstFmt (AVPixelFormats).
type scalerKey struct {
	srcW, srcH, srcFmt int
	dstW, dstH, dstFmt int
}

// drawKey is the key of the scaler that draws a decoded frame of w x h in avFmt, letterboxed
// as lb, in the format pf that it is held in.
func drawKey(w, h, avFmt int, lb geom.Letterbox, pf PixFormat) scalerKey {
	return scalerKey{srcW: w, srcH: h, srcFmt: avFmt, dstW: lb.ScaledW, dstH: lb.ScaledH, dstFmt: pf.av()}
}

// convertKey is the key of the scaler that converts a frame held in the planar format pf,
// letterboxed as lb, into the packed format to (AV_PIX_FMT_RGB24 or AV_PIX_FMT_BGR24) at the
// same size.
func convertKey(lb geom.Letterbox, pf PixFormat, to int) scalerKey {
	return scalerKey{srcW: lb.ScaledW, srcH: lb.ScaledH, srcFmt: pf.av(), dstW: lb.ScaledW, dstH: lb.ScaledH, dstFmt: to}
}

// scaler is one libswscale context made for its key, used by one goroutine at a time.
type scaler struct {
	key   scalerKey
	sws   *C.struct_SwsContext
	taken bool // taken from its Scalers since the last Trim
}

// newScaler returns a scaler for pictures of k (bilinear).
func newScaler(k scalerKey) (*scaler, error) {
	sws := C.sws_getContext(C.int(k.srcW), C.int(k.srcH), int32(k.srcFmt),
		C.int(k.dstW), C.int(k.dstH), int32(k.dstFmt), C.SWS_BILINEAR, nil, nil, nil)
	if sws == nil {
		return nil, fmt.Errorf("sws_getContext %dx%d fmt %d -> %dx%d fmt %d failed", k.srcW, k.srcH, k.srcFmt, k.dstW, k.dstH, k.dstFmt)
	}
	return &scaler{key: k, sws: sws}, nil
}

// drawRGB scales src, a decoded frame of the scaler's key, into the RGB24 input dst at lb's
// offset; the caller checked that dst holds lb.DstW*lb.DstH*3 bytes.
func (s *scaler) drawRGB(src *C.AVFrame, dst []byte, lb geom.Letterbox) error {
	at, stride := pictureIn(dst, lb)
	return swsResult(C.scale_frame(s.sws, src, at, nil, nil, stride, 0, 0))
}

// drawPlanar scales src, a decoded frame of the scaler's key, into the planar picture in dst
// as l places it; the caller checked that dst holds l.size bytes.
func (s *scaler) drawPlanar(src *C.AVFrame, dst []byte, l yuvLayout) error {
	res := C.scale_frame(s.sws, src, l.plane(dst, 0), l.plane(dst, 1), l.plane(dst, 2),
		C.int(l.stride[0]), C.int(l.stride[1]), C.int(l.stride[2]))
	return swsResult(res)
}

// convert converts the planar picture in src, placed as l, into the packed picture whose
// first pixel is at, its rows stride bytes apart; the caller checked the sizes.
func (s *scaler) convert(src []byte, l yuvLayout, at *C.uint8_t, stride C.int) error {
	return swsResult(C.scale_planar(s.sws, l.plane(src, 0), l.plane(src, 1), l.plane(src, 2),
		C.int(l.stride[0]), C.int(l.stride[1]), C.int(l.stride[2]), C.int(l.rows[0]), at, stride))
}

// pictureIn returns where the picture starts in dst, an RGB24 input letterboxed as lb, and
// its rows' stride.
func pictureIn(dst []byte, lb geom.Letterbox) (*C.uint8_t, C.int) {
	return (*C.uint8_t)(unsafe.Pointer(&dst[(lb.PadY*lb.DstW+lb.PadX)*3])), C.int(lb.DstW * 3)
}

func swsResult(res C.int) error {
	if res <= 0 {
		return fmt.Errorf("sws_scale: %w", averror(res))
	}
	return nil
}

// free frees the scaler's context. A nil scaler is fine.
func (s *scaler) free() {
	if s == nil || s.sws == nil {
		return
	}
	C.sws_freeContext(s.sws)
	s.sws = nil
}

// Scalers lends the scalers that letterbox decoded frames into the model's input, and that
// convert the frames held in a planar format to RGB24 when they are dispatched
// (Camera.Scalers). A decoder, or a frame's conversion, holds one only while it scales a
// picture, so cameras that share a Scalers hold as many scalers as pictures are scaled at
// once, rather than one each. A scaler put back and not taken again until the next Trim is
// freed there. Safe for concurrent use; the zero value is ready.
type Scalers struct {
	mu     sync.Mutex
	idle   []*scaler
	held   int // lent and not yet put back
	made   uint64
	closed bool
}

// ScalerStats are a Scalers' counts.
type ScalerStats struct {
	Idle int    // put back, kept for the next frame
	Held int    // lent, scaling a picture
	Made uint64 // made since the Scalers was
}

// get lends a scaler for frames of k: an idle one, else a new one.
func (p *Scalers) get(k scalerKey) (*scaler, error) {
	p.mu.Lock()
	if i := slices.IndexFunc(p.idle, func(s *scaler) bool { return s.key == k }); i >= 0 {
		s := p.idle[i]
		p.idle = slices.Delete(p.idle, i, i+1)
		s.taken = true
		p.held++
		p.mu.Unlock()
		return s, nil
	}
	p.mu.Unlock()
	s, err := newScaler(k) // outside the lock: it allocates the scaler's tables
	if err != nil {
		return nil, err
	}
	s.taken = true
	p.mu.Lock()
	p.held++
	p.made++
	p.mu.Unlock()
	return s, nil
}

// put gives back a scaler from get; after Close it is freed.
func (p *Scalers) put(s *scaler) {
	p.mu.Lock()
	p.held--
	if p.closed {
		p.mu.Unlock()
		s.free()
		return
	}
	p.idle = append(p.idle, s)
	p.mu.Unlock()
}

// Trim frees the idle scalers that were not taken since the last Trim: those of cameras
// gone, or of a moment when more frames were scaled at once than now.
func (p *Scalers) Trim() {
	p.mu.Lock()
	var gone []*scaler
	p.idle = slices.DeleteFunc(p.idle, func(s *scaler) bool {
		if !s.taken {
			gone = append(gone, s)
			return true
		}
		s.taken = false
		return false
	})
	p.mu.Unlock()
	for _, s := range gone {
		s.free()
	}
}

// Stats returns the Scalers' counts.
func (p *Scalers) Stats() ScalerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return ScalerStats{Idle: len(p.idle), Held: p.held, Made: p.made}
}

// convert converts src, a frame's picture held in the planar format pf, letterboxed as lb,
// into the packed format to (AV_PIX_FMT_RGB24 or AV_PIX_FMT_BGR24) at the same size, its
// first pixel at at and its rows stride bytes apart, with a scaler lent for the call.
func (p *Scalers) convert(src []byte, pf PixFormat, lb geom.Letterbox, to int, at *C.uint8_t, stride C.int) error {
	sc, err := p.get(convertKey(lb, pf, to))
	if err != nil {
		return err
	}
	defer p.put(sc)
	return sc.convert(src, newYUVLayout(lb.ScaledW, lb.ScaledH), at, stride)
}

// convertRGB converts src, a frame's picture held in the planar format pf, into the RGB24
// input dst at lb's offset; the caller checked dst's size.
func (p *Scalers) convertRGB(src []byte, pf PixFormat, dst []byte, lb geom.Letterbox) error {
	at, stride := pictureIn(dst, lb)
	return p.convert(src, pf, lb, C.AV_PIX_FMT_RGB24, at, stride)
}

// convertBGR converts src, a frame's picture held in the planar format pf, into dst: the
// picture alone (lb's ScaledW x ScaledH) in BGR24, as OpenCV takes it; the caller checked
// dst's size.
func (p *Scalers) convertBGR(src []byte, pf PixFormat, dst []byte, lb geom.Letterbox) error {
	return p.convert(src, pf, lb, C.AV_PIX_FMT_BGR24, (*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int(lb.ScaledW*3))
}

// Close frees the idle scalers; those lent are freed as they are put back, and those taken
// after Close are made for the one picture.
func (p *Scalers) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, s := range idle {
		s.free()
	}
}
