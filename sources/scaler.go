package sources

// #cgo pkg-config: libavutil libswscale
// #include <libavutil/frame.h>
// #include <libavutil/imgutils.h>
// #include <libavutil/mem.h>
// #include <libswscale/swscale.h>
//
// // scale_into converts the whole decoded frame with one sws_scale call into a packed
// // RGB24 image at dst with the given stride. dst is Go memory, used only during the call.
// static int scale_into(struct SwsContext *sws, const AVFrame *f, uint8_t *dst, int stride) {
// 	uint8_t *planes[4] = {dst, NULL, NULL, NULL};
// 	int strides[4] = {stride, 0, 0, 0};
// 	return sws_scale(sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, planes, strides);
// }
//
// // scale_via converts the whole decoded frame in two sws_scale calls: resize into mid, a
// // planar picture of the frame's own format at the scaled size, then convert mid into packed
// // RGB24 at dst with the given stride. libswscale has SIMD code for both steps (planar
// // resizing, and YUV 4:2:0 to RGB at equal sizes) but writes RGB24 from its resizing path with
// // generic C code: two steps cost about a third of one.
// static int scale_via(struct SwsContext *resize, struct SwsContext *convert, const AVFrame *f,
// 		uint8_t **mid, int *midStrides, int midH, uint8_t *dst, int stride) {
// 	int res = sws_scale(resize, (const uint8_t *const *)f->data, f->linesize, 0, f->height, mid, midStrides);
// 	if (res <= 0) return res;
// 	uint8_t *planes[4] = {dst, NULL, NULL, NULL};
// 	int strides[4] = {stride, 0, 0, 0};
// 	return sws_scale(convert, (const uint8_t *const *)mid, midStrides, 0, midH, planes, strides);
// }
//
// // mid_format is the format of scale_via's resized picture for frames of format fmt scaled
// // to scaledW, or AV_PIX_FMT_NONE when they are scaled in one step: 4:2:0 (planar, or NV12 as
// // NVDEC outputs) and a width that is a multiple of 16, since the SIMD conversion writes whole
// // blocks of 16 pixels (past the row's end otherwise, into the padding or past the buffer).
// static int mid_format(int fmt, int scaledW) {
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

// scalerKey is what a scaler is made for: frames of a size and pixel format (an
// AVPixelFormat), letterboxed as lb.
type scalerKey struct {
	srcW, srcH, srcFmt int
	lb                 geom.Letterbox
}

// scaler letterboxes frames of its key into RGB24 (libswscale): one context from the frame
// to RGB24 (sws), or for most 4:2:0 frames two (scale_via, mid_format): sws resizes into
// mid, a planar 4:2:0 picture at the scaled size, and swsRGB converts mid to RGB24. mid is
// most of its memory (460 KB for 640x480). It is used by one goroutine at a time.
type scaler struct {
	key       scalerKey
	sws       *C.struct_SwsContext
	swsRGB    *C.struct_SwsContext
	mid       [4]*C.uint8_t
	midStride [4]C.int
	taken     bool // taken from its Scalers since the last Trim
}

// newScaler returns a scaler for frames of k: in two steps where mid_format allows, in one
// otherwise.
func newScaler(k scalerKey) (*scaler, error) { return newScalerSteps(k, true) }

// newScalerSteps returns a scaler for frames of k, in two steps if twoStep and mid_format
// allows, in one otherwise.
func newScalerSteps(k scalerKey, twoStep bool) (*scaler, error) {
	s := &scaler{key: k}
	lb := k.lb
	if mid := C.mid_format(C.int(k.srcFmt), C.int(lb.ScaledW)); twoStep && mid != C.AV_PIX_FMT_NONE {
		s.sws = C.sws_getContext(C.int(k.srcW), C.int(k.srcH), int32(k.srcFmt),
			C.int(lb.ScaledW), C.int(lb.ScaledH), int32(mid), C.SWS_BILINEAR, nil, nil, nil)
		s.swsRGB = C.sws_getContext(C.int(lb.ScaledW), C.int(lb.ScaledH), int32(mid),
			C.int(lb.ScaledW), C.int(lb.ScaledH), C.AV_PIX_FMT_RGB24, C.SWS_BILINEAR, nil, nil, nil)
		if s.sws == nil || s.swsRGB == nil {
			s.free()
			return nil, fmt.Errorf("sws_getContext %dx%d fmt %d -> %dx%d -> RGB24 failed", k.srcW, k.srcH, k.srcFmt, lb.ScaledW, lb.ScaledH)
		}
		if res := C.av_image_alloc(&s.mid[0], &s.midStride[0], C.int(lb.ScaledW), C.int(lb.ScaledH), int32(mid), 64); res < 0 {
			s.free()
			return nil, fmt.Errorf("av_image_alloc %dx%d: %w", lb.ScaledW, lb.ScaledH, averror(res))
		}
		return s, nil
	}
	s.sws = C.sws_getContext(C.int(k.srcW), C.int(k.srcH), int32(k.srcFmt),
		C.int(lb.ScaledW), C.int(lb.ScaledH), C.AV_PIX_FMT_RGB24, C.SWS_BILINEAR, nil, nil, nil)
	if s.sws == nil {
		return nil, fmt.Errorf("sws_getContext %dx%d fmt %d -> %dx%d RGB24 failed", k.srcW, k.srcH, k.srcFmt, lb.ScaledW, lb.ScaledH)
	}
	return s, nil
}

// scale letterboxes src, a frame of the scaler's key, at the key's offset in dst, which the
// caller checked holds lb.DstW*lb.DstH*3 bytes.
func (s *scaler) scale(src *C.AVFrame, dst []byte) error {
	lb := s.key.lb
	off := (lb.PadY*lb.DstW + lb.PadX) * 3
	out, stride := (*C.uint8_t)(unsafe.Pointer(&dst[off])), C.int(lb.DstW*3)
	var res C.int
	if s.swsRGB != nil {
		res = C.scale_via(s.sws, s.swsRGB, src, &s.mid[0], &s.midStride[0], C.int(lb.ScaledH), out, stride)
	} else {
		res = C.scale_into(s.sws, src, out, stride)
	}
	if res <= 0 {
		return fmt.Errorf("sws_scale: %w", averror(res))
	}
	return nil
}

// free frees the scaler's contexts and picture. A nil scaler is fine.
func (s *scaler) free() {
	if s == nil {
		return
	}
	if s.sws != nil {
		C.sws_freeContext(s.sws)
		s.sws = nil
	}
	if s.swsRGB != nil {
		C.sws_freeContext(s.swsRGB)
		s.swsRGB = nil
	}
	if s.mid[0] != nil {
		C.av_freep(unsafe.Pointer(&s.mid[0])) // one allocation holds every plane
		s.mid, s.midStride = [4]*C.uint8_t{}, [4]C.int{}
	}
}

// Scalers lends the scalers that letterbox decoded frames into the model's input
// (Camera.Scalers). A camera's decoder holds one only while it scales a frame, so cameras
// that share a Scalers hold as many scalers as they scale frames at once, rather than one
// each (about 0.7 MiB for a 768x576 camera into 640x640, mostly the picture between the
// scaler's two steps). A scaler put back and not taken again until the next Trim is freed
// there. Safe for concurrent use; the zero value is ready.
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
	Held int    // lent to a decoder scaling a frame
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

// Close frees the idle scalers; those lent are freed as they are put back.
func (p *Scalers) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, s := range idle {
		s.free()
	}
}
