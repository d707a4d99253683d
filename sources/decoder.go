package sources

// #cgo pkg-config: libavcodec libavutil libswscale
// #cgo LDFLAGS: -ldl
// #include <dlfcn.h>
// #include <pthread.h>
// #include <string.h>
// #include <libavcodec/avcodec.h>
// #include <libavutil/frame.h>
// #include <libavutil/hwcontext.h>
// #include <libavutil/imgutils.h>
// #include <libavutil/log.h>
// #include <libswscale/swscale.h>
//
// // send_annexb hands one Annex-B access unit to the decoder, with pts as its timestamp
// // (the decoder hands it back on the frame, in display order). data is Go memory: it is only
// // referenced during the call (avcodec_send_packet copies a packet that has no buffer).
// static int send_annexb(AVCodecContext *ctx, AVPacket *pkt, uint8_t *data, int size, int64_t pts) {
// 	pkt->data = data;
// 	pkt->size = size;
// 	pkt->pts = pts;
// 	pkt->dts = AV_NOPTS_VALUE;
// 	int res = avcodec_send_packet(ctx, pkt);
// 	pkt->data = NULL;
// 	pkt->size = 0;
// 	return res;
// }
//
// // frame_corrupt reports whether the decoder concealed errors in the frame or had not yet
// // recovered from missing references.
// static int frame_corrupt(const AVFrame *f) {
// 	return f->decode_error_flags != 0 || (f->flags & AV_FRAME_FLAG_CORRUPT) != 0;
// }
//
// // NVDEC's surfaces. libavcodec 59 (FFmpeg 5.x) gives a decoder it sets up itself as many
// // decode surfaces as the stream's DPB plus 5 (2 for filters holding frames, 3 "base work
// // surfaces"), and as many output surfaces again (nvdec.c: ulNumOutputSurfaces is the pool's
// // size): 12 NV12 surfaces for a stream of one reference frame such as the sample's. A
// // camera here holds one mapped output frame at a time (decode unrefs it before the next)
// // and runs no filter, so sized_frames gives the decoder a frames context of its own with
// // the count avcodec_get_hw_frames_parameters asks for (the DPB plus 2), and a pool that
// // allocates nothing (as libavcodec's own: NVDEC's frames are its mapped surfaces). This
// // follows FFmpeg 5.1's nvdec.c; later majors copy each frame out of its surface into the
// // frames context's pool, which an empty pool cannot serve, so they and earlier ones keep
// // libavcodec's own setup.
// #define SIZED_SURFACES (LIBAVCODEC_VERSION_MAJOR == 59)
// #if SIZED_SURFACES
// static AVBufferRef *empty_buffer(size_t size) { return av_buffer_create(NULL, 0, NULL, NULL, 0); }
// static void free_empty_pool(AVHWFramesContext *fc) { av_buffer_pool_uninit(&fc->pool); }
// static int sized_frames(AVCodecContext *ctx) {
// 	AVBufferRef *ref = NULL;
// 	int res = avcodec_get_hw_frames_parameters(ctx, ctx->hw_device_ctx, AV_PIX_FMT_CUDA, &ref);
// 	if (res < 0) return res;
// 	AVHWFramesContext *fc = (AVHWFramesContext *)ref->data;
// 	fc->pool = av_buffer_pool_init(0, empty_buffer);
// 	if (!fc->pool) { av_buffer_unref(&ref); return AVERROR(ENOMEM); }
// 	fc->free = free_empty_pool;
// 	if ((res = av_hwframe_ctx_init(ref)) < 0) { av_buffer_unref(&ref); return res; }
// 	av_buffer_unref(&ctx->hw_frames_ctx); // get_format runs again at a new SPS
// 	ctx->hw_frames_ctx = ref;
// 	return 0;
// }
// #endif
// static int sized_surfaces(void) { return SIZED_SURFACES; }
// static int avcodec_major(void) { return LIBAVCODEC_VERSION_MAJOR; }
//
// // pick_cuda is the get_format of a decoder on the GPU: frames in CUDA memory, or none.
// // ctx->opaque non-NULL asks for sized_frames.
// static enum AVPixelFormat pick_cuda(AVCodecContext *ctx, const enum AVPixelFormat *fmts) {
// 	for (const enum AVPixelFormat *p = fmts; *p != AV_PIX_FMT_NONE; p++) {
// 		if (*p != AV_PIX_FMT_CUDA) continue;
// #if SIZED_SURFACES
// 		if (ctx->opaque && sized_frames(ctx) < 0) return AV_PIX_FMT_NONE;
// #endif
// 		return *p;
// 	}
// 	return AV_PIX_FMT_NONE; // not for this stream (profile, size): the decode fails
// }
// static void set_sized(AVCodecContext *ctx, int on) { ctx->opaque = on ? (void *)ctx : NULL; }
//
// // open_cuda makes ctx decode on the GPU's video decoder (NVDEC): a CUDA device on the
// // device's primary context (shared with every other user of the GPU in this process; it
// // fails when that context is already active with other flags), frames in CUDA memory.
// // The primary context is asked for with the flags argument, which FFmpeg 4.3's libavutil
// // (56.51) already reads; the "primary_ctx" option of later ones only sets that same flag
// // (5.1's), and one that predates the option ignores it, making a context of the
// // decoder's own without a word. The flag's value is libavutil/hwcontext_cuda.h's, which
// // is not included here because it includes the CUDA toolkit's cuda.h.
// #ifndef AV_CUDA_USE_PRIMARY_CONTEXT
// #define AV_CUDA_USE_PRIMARY_CONTEXT (1 << 0)
// #endif
// static int open_cuda(AVCodecContext *ctx) {
// 	AVBufferRef *dev = NULL;
// 	int res = av_hwdevice_ctx_create(&dev, AV_HWDEVICE_TYPE_CUDA, NULL, NULL, AV_CUDA_USE_PRIMARY_CONTEXT);
// 	if (res < 0) return res;
// 	ctx->hw_device_ctx = dev; // the context owns the reference now
// 	ctx->get_format = pick_cuda;
// 	return 0;
// }
//
// // A CUDA stream of a decoder's own. libavutil's CUDA device queues its work (NVDEC's
// // mapping of each output frame, the copies to the host) on the device's stream, which is
// // NULL, the context's legacy default stream, unless its user sets one: every decoder of
// // the process then queues on that one stream of the shared primary context, and each
// // frame's copy waits, in its cuStreamSynchronize, for the work every other decoder queued
// // before it. own_stream gives the device a non-blocking stream of its own, made on the
// // device's context, which it retains meanwhile; free_stream, after the codec context (and
// // with it the device) is freed, destroys it and releases the context. The driver's
// // functions come from libcuda.so.1, which libavutil has loaded already, looked up once.
// // AVCUDADeviceContext's first two fields, as libavutil/hwcontext_cuda.h (4.x to 7.x)
// // declares them; that header is not included since it includes the CUDA toolkit's cuda.h.
// typedef struct { void *cuda_ctx; void *stream; } cuda_device_head;
// static struct {
// 	int ok;
// 	int (*push)(void *ctx);
// 	int (*pop)(void **ctx);
// 	int (*get_device)(int *dev);
// 	int (*retain)(void **ctx, int dev);
// 	int (*release)(int dev);
// 	int (*create)(void **stream, unsigned flags);
// 	int (*destroy)(void *stream);
// 	int (*host_alloc)(void **p, size_t size, unsigned flags);
// 	int (*host_free)(void *p);
// } cu;
// static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
// static void cu_load(void) {
// 	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
// 	if (!h) return;
// 	cu.push = dlsym(h, "cuCtxPushCurrent_v2");
// 	cu.pop = dlsym(h, "cuCtxPopCurrent_v2");
// 	cu.get_device = dlsym(h, "cuCtxGetDevice");
// 	cu.retain = dlsym(h, "cuDevicePrimaryCtxRetain");
// 	cu.release = dlsym(h, "cuDevicePrimaryCtxRelease_v2");
// 	cu.create = dlsym(h, "cuStreamCreate");
// 	cu.destroy = dlsym(h, "cuStreamDestroy_v2");
// 	cu.host_alloc = dlsym(h, "cuMemHostAlloc");
// 	cu.host_free = dlsym(h, "cuMemFreeHost");
// 	cu.ok = cu.push && cu.pop && cu.get_device && cu.retain && cu.release && cu.create && cu.destroy &&
// 		cu.host_alloc && cu.host_free;
// }
// typedef struct { void *stream; void *ctx; int dev; } cuda_stream;
// #define CU_STREAM_NON_BLOCKING 0x1
// static int own_stream(AVCodecContext *ctx, cuda_stream *out) {
// 	pthread_once(&cu_once, cu_load);
// 	if (!cu.ok || !ctx->hw_device_ctx) return -1;
// 	cuda_device_head *hw = ((AVHWDeviceContext *)ctx->hw_device_ctx->data)->hwctx;
// 	void *popped, *retained = NULL, *stream = NULL;
// 	int dev = 0, res;
// 	if ((res = cu.push(hw->cuda_ctx)) != 0) return res;
// 	if ((res = cu.get_device(&dev)) == 0 && (res = cu.retain(&retained, dev)) == 0 &&
// 			(res = cu.create(&stream, CU_STREAM_NON_BLOCKING)) != 0)
// 		cu.release(dev);
// 	cu.pop(&popped);
// 	if (res != 0) return res;
// 	hw->stream = stream;
// 	out->stream = stream;
// 	out->ctx = retained;
// 	out->dev = dev;
// 	return 0;
// }
// static void free_stream(cuda_stream *s) {
// 	if (!s->stream) return;
// 	void *popped;
// 	if (cu.push(s->ctx) == 0) {
// 		cu.destroy(s->stream);
// 		cu.pop(&popped);
// 	}
// 	cu.release(s->dev);
// 	s->stream = NULL;
// }
//
// // Page-locked host memory for a decoder's frames copied from the GPU. Into pageable memory
// // (what av_hwframe_transfer_data allocates itself) the driver copies through a staging
// // buffer of its own, in pieces; into page-locked memory a frame's planes are one DMA each.
// // pin_host gives host, unreferenced, page-locked planes for frames like src (a CUDA frame:
// // its frames context's software format and src's size), allocated on the decoder's stream's
// // context; unpin_host unreferences host and frees them. av_hwframe_transfer_data copies into
// // a frame's planes when it has them.
// typedef struct { void *ptr; } pinned_buf;
// static void keep_pinned(void *opaque, uint8_t *data) {} // unpin_host frees the memory
// static int pinned_fits(const AVFrame *host, const AVFrame *src) {
// 	const AVHWFramesContext *fc = (const AVHWFramesContext *)src->hw_frames_ctx->data;
// 	return host->buf[0] && host->format == fc->sw_format && host->width == src->width && host->height == src->height;
// }
// static void unpin_host(AVFrame *host, cuda_stream *s, pinned_buf *pb) {
// 	av_frame_unref(host);
// 	if (!pb->ptr) return;
// 	void *popped;
// 	if (cu.push(s->ctx) == 0) {
// 		cu.host_free(pb->ptr);
// 		cu.pop(&popped);
// 	}
// 	pb->ptr = NULL;
// }
// #define CU_MEMHOSTALLOC_PORTABLE 0x1
// static int pin_host(AVFrame *host, const AVFrame *src, cuda_stream *s, pinned_buf *pb) {
// 	const AVHWFramesContext *fc = (const AVHWFramesContext *)src->hw_frames_ctx->data;
// 	int size = av_image_get_buffer_size(fc->sw_format, src->width, src->height, 64);
// 	if (size < 0) return size;
// 	void *popped;
// 	int res = cu.push(s->ctx);
// 	if (res != 0) return res;
// 	res = cu.host_alloc(&pb->ptr, size, CU_MEMHOSTALLOC_PORTABLE);
// 	cu.pop(&popped);
// 	if (res != 0) {
// 		pb->ptr = NULL;
// 		return res;
// 	}
// 	host->buf[0] = av_buffer_create(pb->ptr, size, keep_pinned, NULL, 0);
// 	if (!host->buf[0] || (res = av_image_fill_arrays(host->data, host->linesize, pb->ptr, fc->sw_format, src->width, src->height, 64)) < 0) {
// 		unpin_host(host, s, pb);
// 		return res < 0 ? res : AVERROR(ENOMEM);
// 	}
// 	host->format = fc->sw_format;
// 	host->width = src->width;
// 	host->height = src->height;
// 	return 0;
// }
// static int on_gpu(const AVFrame *f) { return f->format == AV_PIX_FMT_CUDA; }
//
// static int frame_width(const AVFrame *f) { return f->width; }
// static int frame_height(const AVFrame *f) { return f->height; }
// static int frame_format(const AVFrame *f) { return f->format; }
// static int64_t frame_pts(const AVFrame *f) { return f->pts; }
// static int64_t no_pts(void) { return AV_NOPTS_VALUE; }
// static void set_skip_nonref(AVCodecContext *ctx, int on) {
// 	ctx->skip_frame = on ? AVDISCARD_NONREF : AVDISCARD_DEFAULT;
// }
// static int err_again(void) { return AVERROR(EAGAIN); }
// static int err_notsup(void) { return AVERROR(ENOTSUP); }
// static int err_eof(void) { return AVERROR_EOF; }
import "C"

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/visiond/visiond/internal/geom"
)

// errCorruptFrame is returned for a frame that the decoder output with concealed errors.
var errCorruptFrame = errors.New("decoder output a corrupt frame")

// decoder is an H.264 or H.265 decoder (libavcodec) plus the scaler (libswscale) that letterboxes its
// frames into RGB24 buffers. It is used by one goroutine at a time.
type decoder struct {
	ctx   *C.AVCodecContext
	pkt   *C.AVPacket
	frame *C.AVFrame
	// host is the current frame copied from the GPU, for a decoder on it (DecoderCUDA): the
	// frame pixFormat and draw read. Unused (nil) on the CPU.
	host *C.AVFrame
	// stream is the decoder's own CUDA stream (DecoderCUDA; own_stream), freed after ctx;
	// zero when it has none (on the CPU, or the default stream). pinned is host's
	// page-locked memory (pin_host), kept from frame to frame while their size and format
	// stay; without it (pageable, or no stream of its own) host's planes are allocated for
	// every frame by its copy. downloaded says that the current frame is in host.
	stream     C.cuda_stream
	pinned     C.pinned_buf
	pageable   bool
	downloaded bool

	// scalers lends the scaler that draws a frame (Camera.Scalers, shared by the cameras of a
	// daemon); without one the decoder makes its own at its first frame (ownScalers), and
	// frees it when closed.
	scalers    *Scalers
	ownScalers bool

	skipping bool // skip_frame is AVDISCARD_NONREF (skipNonRef)

	// spent sums the frames drawn and their times, copy to the host (pixFormat) and scaling (draw), until
	// the decoder's user takes them (takeSpent).
	spent struct {
		frames       uint64
		copy, scaled time.Duration
	}
}

// takeSpent returns the frames drawn and the time their copies to the host and
// their scaling took since the last call, and starts the sums again.
func (d *decoder) takeSpent() (frames uint64, copyTime, scaleTime time.Duration) {
	s := d.spent
	d.spent.frames, d.spent.copy, d.spent.scaled = 0, 0, 0
	return s.frames, s.copy, s.scaled
}

// Codecs the decoder takes.
const (
	codecH264 = "H.264"
	codecH265 = "H.265"
)

// newDecoder returns an H.264 or H.265 decoder (codecH264, codecH265) of the kind named by
// hw (DecoderCPU, DecoderCUDA). On the CPU it decodes on the calling goroutine's thread only
// (thread_count 1): many cameras share a few cores, and frame threads would add latency.
// On the GPU (NVDEC) every frame stays in GPU memory until pixFormat copies it to the host,
// and the decoder's work goes on a CUDA stream of its own.
func newDecoder(codecName string, hw Decoder) (*decoder, error) {
	return newDecoderWith(codecName, hw, decoderOpts{})
}

// decoderOpts are what the benchmarks compare: on the GPU, NVDEC's surfaces left to
// libavcodec (rather than sized to what a camera holds: sized_frames, where libavcodec
// allows), the work of every decoder on the context's default stream (rather than one of
// the decoder's own), and frames copied into pageable host memory (rather than page-locked).
type decoderOpts struct {
	libavSurfaces bool
	defaultStream bool
	pageable      bool // frames copied into pageable host memory (always, with defaultStream: no stream to allocate on)
}

func newDecoderWith(codecName string, hw Decoder, opts decoderOpts) (*decoder, error) {
	// FFmpeg logs every concealed macroblock to stderr; errors reach us as return values.
	// The level is process-wide; setting it again is harmless.
	C.av_log_set_level(C.AV_LOG_QUIET)
	var id C.enum_AVCodecID
	switch codecName {
	case codecH264:
		id = C.AV_CODEC_ID_H264
	case codecH265:
		id = C.AV_CODEC_ID_HEVC
	default:
		return nil, fmt.Errorf("no decoder for %s", codecName)
	}
	codec := C.avcodec_find_decoder(id)
	if codec == nil {
		return nil, fmt.Errorf("libavcodec has no %s decoder", codecName)
	}
	d := &decoder{}
	d.ctx = C.avcodec_alloc_context3(codec)
	if d.ctx == nil {
		return nil, errors.New("avcodec_alloc_context3 failed")
	}
	d.ctx.thread_count = 1
	d.ctx.flags |= C.AV_CODEC_FLAG_LOW_DELAY
	switch hw {
	case DecoderCPU, "":
	case DecoderCUDA:
		if res := C.open_cuda(d.ctx); res < 0 {
			d.close()
			if res == C.err_notsup() { // libavutil: the primary context is active with other flags
				return nil, fmt.Errorf("decoder cuda: this process already holds the GPU's primary CUDA context with other flags (%w)", averror(res))
			}
			return nil, fmt.Errorf("decoder cuda: no CUDA device for NVDEC (%w): is there an NVIDIA GPU and driver here?", averror(res))
		}
		if !opts.libavSurfaces {
			C.set_sized(d.ctx, 1)
		}
		d.pageable = opts.pageable
		if !opts.defaultStream {
			if res := C.own_stream(d.ctx, &d.stream); res != 0 {
				d.close()
				if res < 0 {
					return nil, errors.New("decoder cuda: libcuda.so.1's stream functions not found")
				}
				return nil, fmt.Errorf("decoder cuda: a CUDA stream for the decoder: CUDA error %d", int(res))
			}
		}
		if d.host = C.av_frame_alloc(); d.host == nil {
			d.close()
			return nil, errors.New("av_frame_alloc failed")
		}
	default:
		d.close()
		return nil, fmt.Errorf("unknown decoder %q", hw)
	}
	if res := C.avcodec_open2(d.ctx, codec, nil); res < 0 {
		d.close()
		return nil, fmt.Errorf("avcodec_open2: %w", averror(res))
	}
	d.pkt = C.av_packet_alloc()
	d.frame = C.av_frame_alloc()
	if d.pkt == nil || d.frame == nil {
		d.close()
		return nil, errors.New("av_packet_alloc/av_frame_alloc failed")
	}
	return d, nil
}

func (d *decoder) close() {
	if d.ownScalers {
		d.scalers.Close()
		d.scalers, d.ownScalers = nil, false
	}
	if d.frame != nil {
		C.av_frame_free(&d.frame)
	}
	if d.host != nil {
		C.unpin_host(d.host, &d.stream, &d.pinned)
		C.av_frame_free(&d.host)
	}
	if d.pkt != nil {
		C.av_packet_free(&d.pkt)
	}
	if d.ctx != nil {
		C.avcodec_free_context(&d.ctx)
	}
	C.free_stream(&d.stream) // after the device, which queues its work on it
}

// ownStream reports whether the decoder's work goes on a CUDA stream of its own.
func (d *decoder) ownStream() bool { return d.stream.stream != nil }

// surfacesSized reports whether this build sizes NVDEC's surfaces (sized_frames), and the
// major version of the libavcodec it was built against, which decides.
func surfacesSized() (bool, int) { return C.sized_surfaces() != 0, int(C.avcodec_major()) }

// noPTS is the pts of a frame whose access unit had none.
var noPTS = int64(C.no_pts())

// decode sends one Annex-B access unit to the decoder, with pts (any int64 but noPTS: visiond
// passes the capture time in unix ns), and calls onFrame for every frame it outputs, with
// that frame's own pts (frames come out in display order, which differs from the order of
// the access units when the stream has B-frames); onFrame may draw that frame (pixFormat, draw).
// A corrupt frame is not passed on: it makes decode return errCorruptFrame. Any error means
// the caller should wait for the next random-access unit.
func (d *decoder) decode(annexb []byte, pts int64, onFrame func(w, h int, pts int64)) error {
	if len(annexb) == 0 {
		return nil
	}
	res := C.send_annexb(d.ctx, d.pkt, (*C.uint8_t)(unsafe.Pointer(&annexb[0])), C.int(len(annexb)), C.int64_t(pts))
	if res < 0 && res != C.err_again() {
		return fmt.Errorf("avcodec_send_packet: %w", averror(res))
	}
	var corrupt bool
	for {
		res = C.avcodec_receive_frame(d.ctx, d.frame)
		if res == C.err_again() || res == C.err_eof() {
			break
		}
		if res < 0 {
			return fmt.Errorf("avcodec_receive_frame: %w", averror(res))
		}
		if C.frame_corrupt(d.frame) != 0 {
			corrupt = true
		} else if onFrame != nil {
			onFrame(int(C.frame_width(d.frame)), int(C.frame_height(d.frame)), int64(C.frame_pts(d.frame)))
		}
		C.av_frame_unref(d.frame)
		d.downloaded = false
		if d.host != nil && d.pinned.ptr == nil {
			C.av_frame_unref(d.host)
		}
	}
	if corrupt {
		return errCorruptFrame
	}
	return nil
}

// skipNonRef sets whether the access units sent from now on are decoded when no other
// frame references them (libavcodec's skip_frame AVDISCARD_NONREF): such a unit then costs
// only the parsing of its slice headers and outputs no frame. Reference frames, and so every
// frame after, decode as before.
func (d *decoder) skipNonRef(on bool) {
	if on == d.skipping {
		return
	}
	var v C.int
	if on {
		v = 1
	}
	C.set_skip_nonref(d.ctx, v)
	d.skipping = on
}

// format returns the pixel format (an AVPixelFormat) of the current frame as draw reads
// it: for a frame in GPU memory, that of its copy on the host (after download).
func (d *decoder) format() int { return int(C.frame_format(d.source())) }

// source is the current frame as draw reads it: the decoder's, or its copy on the host
// (download) when it is in GPU memory.
func (d *decoder) source() *C.AVFrame {
	if C.on_gpu(d.frame) != 0 {
		return d.host
	}
	return d.frame
}

// download copies the current frame from GPU memory to d.host, once per frame, into
// page-locked memory when the decoder has a stream of its own; a frame decoded on the CPU
// needs none.
func (d *decoder) download() error {
	if C.on_gpu(d.frame) == 0 || d.downloaded {
		return nil
	}
	if !d.pageable && d.ownStream() && (d.pinned.ptr == nil || C.pinned_fits(d.host, d.frame) == 0) {
		C.unpin_host(d.host, &d.stream, &d.pinned)
		if res := C.pin_host(d.host, d.frame, &d.stream, &d.pinned); res != 0 {
			if res < 0 {
				return fmt.Errorf("decoder cuda: page-locked host memory for the frame: %w", averror(res))
			}
			return fmt.Errorf("decoder cuda: page-locked host memory for the frame: CUDA error %d", int(res))
		}
	}
	if res := C.av_hwframe_transfer_data(d.host, d.frame, 0); res < 0 {
		return fmt.Errorf("decoder cuda: copy of the frame to the host: %w", averror(res))
	}
	d.downloaded = true
	return nil
}

// pinnedHost reports whether the current frame's copy on the host is in page-locked memory.
func (d *decoder) pinnedHost() bool { return d.pinned.ptr != nil }

// geometry returns the letterbox of the current frame into a dstW x dstH input.
func (d *decoder) geometry(dstW, dstH int) geom.Letterbox {
	return geom.NewLetterbox(int(C.frame_width(d.frame)), int(C.frame_height(d.frame)), dstW, dstH)
}

// pixFormat is the format the current frame (valid inside decode's onFrame) is held in,
// letterboxed as lb (heldFormat): a frame in GPU memory is first copied to the host, whose
// copy it reads. It is the frame's picture for Camera.emit, with draw.
func (d *decoder) pixFormat(lb geom.Letterbox) (PixFormat, error) {
	t0 := time.Now()
	if err := d.download(); err != nil {
		return 0, err
	}
	d.spent.copy += time.Since(t0)
	return heldFormat(d.format(), lb), nil
}

// draw scales the current frame, after pixFormat, into dst in the format pf that pixFormat
// chose: for PixRGB24, RGB24 at lb's offset in dst, which is lb.DstW*lb.DstH*3 bytes, without
// touching the padding (the caller fills it once per buffer and geometry); for a planar
// format, lb's scaled picture as yuvLayout places it. The scaler comes from the decoder's
// Scalers, lent for the call.
func (d *decoder) draw(dst []byte, lb geom.Letterbox, pf PixFormat) error {
	t0 := time.Now()
	defer func() {
		d.spent.frames++
		d.spent.scaled += time.Since(t0)
	}()
	src := d.source()
	w, h, avFmt := int(C.frame_width(src)), int(C.frame_height(src)), d.format()
	if w != lb.SrcW || h != lb.SrcH {
		return fmt.Errorf("frame is %dx%d, geometry is for %dx%d", w, h, lb.SrcW, lb.SrcH)
	}
	var l yuvLayout
	if pf == PixRGB24 {
		if len(dst) < lb.DstW*lb.DstH*3 {
			return fmt.Errorf("buffer of %d bytes is too small for %dx%d RGB24", len(dst), lb.DstW, lb.DstH)
		}
	} else if l = newYUVLayout(lb.ScaledW, lb.ScaledH); len(dst) < l.size {
		return fmt.Errorf("buffer of %d bytes is too small for %dx%d %s", len(dst), lb.ScaledW, lb.ScaledH, pf)
	}
	if d.scalers == nil {
		d.scalers, d.ownScalers = &Scalers{}, true
	}
	sc, err := d.scalers.get(drawKey(w, h, avFmt, lb, pf))
	if err != nil {
		return err
	}
	defer d.scalers.put(sc)
	if pf == PixRGB24 {
		return sc.drawRGB(src, dst, lb)
	}
	return sc.drawPlanar(src, dst, l)
}

// averror turns a negative libav return code into an error carrying FFmpeg's message.
func averror(code C.int) error {
	var buf [C.AV_ERROR_MAX_STRING_SIZE]C.char
	C.av_strerror(code, &buf[0], C.size_t(len(buf)))
	return fmt.Errorf("%s (%d)", C.GoString(&buf[0]), int(code))
}
