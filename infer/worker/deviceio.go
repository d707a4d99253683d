package worker

/*
#cgo LDFLAGS: -ldl
#include "ortapi.h"

typedef void *(*createMemoryInfoFn)(const char *name, int type, int id, int memType, void **out);
typedef void (*releaseMemoryInfoFn)(void *info);
typedef void *(*createTensorWithDataFn)(const void *info, void *data, size_t len, const int64_t *shape, size_t shapeLen, int type, void **out);
typedef void (*releaseValueFn)(void *value);
typedef void *(*bindValueFn)(void *binding, const char *name, const void *value);

// deviceTensor makes *value, an OrtValue over len bytes of CUDA memory at data on device
// (its OrtMemoryInfo in *info, made on the first call and shared by the later ones). It
// returns NULL, or an error message to free.
static char *deviceTensor(const void *const *api, int device, void **info, void *data, size_t len,
		const int64_t *shape, size_t shapeLen, int type, void **value) {
	char *err;
	if (!*info) {
		// "Cuda" is the CUDA provider's allocator name; 0, 0: OrtDeviceAllocator, OrtMemTypeDefault.
		err = ortStatusMessage(api, ((createMemoryInfoFn)api[idxCreateMemoryInfo])("Cuda", 0, device, 0, info));
		if (err) return err;
	}
	return ortStatusMessage(api, ((createTensorWithDataFn)api[idxCreateTensorWithDataAsOrtValue])(*info, data, len, shape, shapeLen, type, value));
}

static char *bindValue(const void *const *api, int output, void *binding, const char *name, const void *value) {
	return ortStatusMessage(api, ((bindValueFn)api[output ? idxBindOutput : idxBindInput])(binding, name, value));
}

static void releaseValue(const void *const *api, void *value) { if (value) ((releaseValueFn)api[idxReleaseValue])(value); }
static void releaseMemoryInfo(const void *const *api, void *info) { if (info) ((releaseMemoryInfoFn)api[idxReleaseMemoryInfo])(info); }

// cudart is the part of the CUDA runtime (libcudart) that the device I/O uses, from the
// copy the CUDA provider loaded.
typedef struct {
	int (*setDevice)(int device);
	int (*malloc)(void **ptr, size_t size);
	int (*free)(void *ptr);
	int (*mallocHost)(void **ptr, size_t size);
	int (*freeHost)(void *ptr);
	int (*streamCreateWithFlags)(void **stream, unsigned flags);
	int (*streamDestroy)(void *stream);
	int (*memcpyAsync)(void *dst, const void *src, size_t n, int kind, void *stream);
	int (*streamSynchronize)(void *stream);
	const char *(*getErrorString)(int code);
} cudart;

// cudartOpen fills rt from the CUDA runtime already loaded in this process (the CUDA
// provider's), else the first of the usual sonames found. It returns NULL, or an error
// message (static, not to free).
static const char *cudartOpen(cudart *rt) {
	static const char *names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so", NULL};
	void *lib = NULL;
	for (int pass = 0; pass < 2 && !lib; pass++) {
		for (const char **n = names; *n && !lib; n++) lib = dlopen(*n, RTLD_LAZY | (pass == 0 ? RTLD_NOLOAD : 0));
	}
	if (!lib) return "no CUDA runtime (libcudart.so.13, .12 or .11.0) in this process or on the library path";
	// The handle is never closed: the runtime stays loaded for the CUDA provider anyway.
#define SYM(field, name) if (!(*(void **)&rt->field = dlsym(lib, name))) return "the CUDA runtime has no " name;
	SYM(setDevice, "cudaSetDevice")
	SYM(malloc, "cudaMalloc")
	SYM(free, "cudaFree")
	SYM(mallocHost, "cudaMallocHost")
	SYM(freeHost, "cudaFreeHost")
	SYM(streamCreateWithFlags, "cudaStreamCreateWithFlags")
	SYM(streamDestroy, "cudaStreamDestroy")
	SYM(memcpyAsync, "cudaMemcpyAsync")
	SYM(streamSynchronize, "cudaStreamSynchronize")
	SYM(getErrorString, "cudaGetErrorString")
#undef SYM
	return NULL;
}

static int rtSetDevice(cudart *rt, int device) { return rt->setDevice(device); }
static int rtMalloc(cudart *rt, void **p, size_t n) { return rt->malloc(p, n); }
static int rtFree(cudart *rt, void *p) { return p ? rt->free(p) : 0; }
static int rtMallocHost(cudart *rt, void **p, size_t n) { return rt->mallocHost(p, n); }
static int rtFreeHost(cudart *rt, void *p) { return p ? rt->freeHost(p) : 0; }
static int rtStreamCreate(cudart *rt, void **s) { return rt->streamCreateWithFlags(s, 1); } // cudaStreamNonBlocking
static int rtStreamDestroy(cudart *rt, void *s) { return s ? rt->streamDestroy(s) : 0; }
static const char *rtError(cudart *rt, int code) { return rt->getErrorString(code); }

// rtCopy copies n bytes (kind 1: host to device, 2: device to host) on stream and waits
// for the copy: on a stream of its own, not the legacy default one, which would wait for
// and hold up other streams of the process.
static int rtCopy(cudart *rt, void *dst, const void *src, size_t n, int kind, void *stream) {
	int res = rt->memcpyAsync(dst, src, n, kind, stream);
	return res ? res : rt->streamSynchronize(stream);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// deviceIO runs a session on an input and an output tensor in GPU memory at fixed
// addresses (cuda.device_io, and cuda.graph, which needs them: a CUDA graph replays the
// kernels on the addresses it captured). Without it ONNX Runtime copies the bound host
// input into a buffer of its arena at every bind and the output back into the host tensor
// at the end of every run, from pageable memory. With it the worker copies each pair's
// input, from pinned host memory, on a stream of its own, and the output back the same way;
// the session's own work is then kernels only.
//
// The pairs' host buffers are pinned (cudaMallocHost) and belong to the deviceIO; every
// pair runs through the one binding, one run at a time (the Detector's thread).
type deviceIO struct {
	api     *unsafe.Pointer // the OrtApi table
	rt      *C.cudart       // C memory: its function pointers are called from C
	device  int
	stream  unsafe.Pointer
	memInfo unsafe.Pointer // OrtMemoryInfo of device memory
	binding *ort.IoBinding
	in, out deviceTensor
	host    []unsafe.Pointer // pinned host buffers, freed by close
}

// deviceTensor is one tensor of the session in device memory.
type deviceTensor struct {
	name  string
	bytes int
	mem   unsafe.Pointer // cudaMalloc'd
	value unsafe.Pointer // the OrtValue over mem
}

// ONNX element types (ONNXTensorElementDataType) of the tensors a Detector takes.
func elementType(t ort.TensorElementDataType) (C.int, int, error) {
	switch t {
	case ort.TensorElementDataTypeFloat:
		return C.int(t), 4, nil
	case ort.TensorElementDataTypeFloat16:
		return C.int(t), 2, nil
	case ort.TensorElementDataTypeUint8:
		return C.int(t), 1, nil
	}
	return 0, 0, fmt.Errorf("tensor element type %v is not float32, float16 or uint8", t)
}

// newDeviceIO allocates the session's input and output on GPU device and binds them to a
// new binding of session. library is the path ONNX Runtime was loaded from in this process.
// On an error nothing stays allocated.
func newDeviceIO(library string, session *ort.DynamicAdvancedSession, device int, in, out ort.InputOutputInfo) (_ *deviceIO, err error) {
	if library == "" {
		return nil, errors.New("device I/O: the onnxruntime library path is empty")
	}
	cLib := C.CString(library)
	defer C.free(unsafe.Pointer(cLib))
	api := C.ortAPI(cLib)
	if api == nil {
		return nil, fmt.Errorf("device I/O: onnxruntime library %s: no OrtApi of version %d", library, C.ortApiVersion)
	}
	x := &deviceIO{api: api, device: device}
	x.rt = (*C.cudart)(C.calloc(1, C.sizeof_cudart))
	defer func() {
		if err != nil {
			x.close()
		}
	}()
	if msg := C.cudartOpen(x.rt); msg != nil {
		return nil, fmt.Errorf("device I/O: %s", C.GoString(msg))
	}
	if err := x.check(C.rtSetDevice(x.rt, C.int(device)), "cudaSetDevice"); err != nil {
		return nil, err
	}
	if err := x.check(C.rtStreamCreate(x.rt, &x.stream), "cudaStreamCreateWithFlags"); err != nil {
		return nil, err
	}
	if x.binding, err = session.CreateIoBinding(); err != nil {
		return nil, fmt.Errorf("device I/O: io binding: %w", err)
	}
	bp, err := singlePointer(x.binding, "IoBinding")
	if err != nil {
		return nil, err
	}
	for i, io := range []ort.InputOutputInfo{in, out} {
		t := &x.in
		if i == 1 {
			t = &x.out
		}
		if err := x.newTensor(t, io); err != nil {
			return nil, err
		}
		cName := C.CString(io.Name)
		msg := C.bindValue(x.api, C.int(i), bp, cName, t.value)
		C.free(unsafe.Pointer(cName))
		if msg != nil {
			defer C.free(unsafe.Pointer(msg))
			return nil, fmt.Errorf("device I/O: bind %q: %s", io.Name, C.GoString(msg))
		}
	}
	return x, nil
}

// newTensor allocates t on the device for io and makes its OrtValue.
func (x *deviceIO) newTensor(t *deviceTensor, io ort.InputOutputInfo) error {
	typ, size, err := elementType(io.DataType)
	if err != nil {
		return fmt.Errorf("device I/O: %q: %w", io.Name, err)
	}
	t.name, t.bytes = io.Name, int(io.Dimensions.FlattenedSize())*size
	if err := x.check(C.rtMalloc(x.rt, &t.mem, C.size_t(t.bytes)), "cudaMalloc"); err != nil {
		return err
	}
	shape := (*C.int64_t)(C.malloc(C.size_t(len(io.Dimensions)) * 8))
	defer C.free(unsafe.Pointer(shape))
	dims := unsafe.Slice(shape, len(io.Dimensions))
	for i, d := range io.Dimensions {
		dims[i] = C.int64_t(d)
	}
	if msg := C.deviceTensor(x.api, C.int(x.device), &x.memInfo, t.mem, C.size_t(t.bytes), shape, C.size_t(len(dims)), typ, &t.value); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		return fmt.Errorf("device I/O: tensor %q %v on device %d: %s", io.Name, io.Dimensions, x.device, C.GoString(msg))
	}
	return nil
}

// hostBuffers gives pair p host buffers for its input and output in pinned memory (the
// slices prepare fills and decodeOutput reads), in place of ONNX Runtime tensors.
func (x *deviceIO) hostBuffers(p *tensorPair, mio modelIO) error {
	in, err := x.hostBuffer(x.in.bytes)
	if err != nil {
		return err
	}
	out, err := x.hostBuffer(x.out.bytes)
	if err != nil {
		return err
	}
	p.hostIn, p.hostOut = in, out
	switch {
	case mio.inU8:
		p.inU8 = unsafe.Slice((*uint8)(in), x.in.bytes)
	case mio.inF16:
		p.inF16 = unsafe.Slice((*uint16)(in), x.in.bytes/2)
	default:
		p.inF32 = unsafe.Slice((*float32)(in), x.in.bytes/4)
	}
	if mio.outF16 {
		p.outF16 = unsafe.Slice((*uint16)(out), x.out.bytes/2)
	} else {
		p.outF32 = unsafe.Slice((*float32)(out), x.out.bytes/4)
	}
	return nil
}

// hostBuffer returns n bytes of pinned host memory, zeroed, that live until close.
func (x *deviceIO) hostBuffer(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := x.check(C.rtMallocHost(x.rt, &p, C.size_t(n)), "cudaMallocHost"); err != nil {
		return nil, err
	}
	x.host = append(x.host, p)
	clear(unsafe.Slice((*byte)(p), n))
	return p, nil
}

// run copies the input from in (x.in.bytes of host memory) to the device, runs the session
// on the binding and copies the output to out (x.out.bytes). It runs on the Detector's
// thread, which the CUDA provider has made current on the device.
func (x *deviceIO) run(session *ort.DynamicAdvancedSession, in, out unsafe.Pointer) error {
	if err := x.check(C.rtSetDevice(x.rt, C.int(x.device)), "cudaSetDevice"); err != nil {
		return err
	}
	if err := x.check(C.rtCopy(x.rt, x.in.mem, in, C.size_t(x.in.bytes), 1, x.stream), "copy of the input to the device"); err != nil {
		return err
	}
	if err := session.RunWithBinding(x.binding); err != nil {
		return err
	}
	return x.check(C.rtCopy(x.rt, out, x.out.mem, C.size_t(x.out.bytes), 2, x.stream), "copy of the output to the host")
}

// check turns a CUDA runtime result into an error naming what failed.
func (x *deviceIO) check(res C.int, what string) error {
	if res == 0 {
		return nil
	}
	return fmt.Errorf("device I/O: %s: CUDA error %d: %s", what, int(res), C.GoString(C.rtError(x.rt, res)))
}

// close releases the binding (call it before the session's Destroy), the tensors, the
// stream and the pinned host buffers. It is safe on a partly made deviceIO.
func (x *deviceIO) close() error {
	if x == nil || x.rt == nil {
		return nil
	}
	var errs []error
	if x.binding != nil {
		errs = append(errs, x.binding.Destroy())
		x.binding = nil
	}
	for _, t := range []*deviceTensor{&x.in, &x.out} {
		C.releaseValue(x.api, t.value)
		t.value = nil
		if t.mem != nil {
			errs = append(errs, x.check(C.rtFree(x.rt, t.mem), "cudaFree"))
			t.mem = nil
		}
	}
	C.releaseMemoryInfo(x.api, x.memInfo)
	x.memInfo = nil
	for _, p := range x.host {
		errs = append(errs, x.check(C.rtFreeHost(x.rt, p), "cudaFreeHost"))
	}
	x.host = nil
	if x.stream != nil {
		errs = append(errs, x.check(C.rtStreamDestroy(x.rt, x.stream), "cudaStreamDestroy"))
		x.stream = nil
	}
	C.free(unsafe.Pointer(x.rt))
	x.rt = nil
	return errors.Join(errs...)
}
