package worker

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// ortMu guards ONNX Runtime's process-wide environment, which the library keeps in its
// own package state: it is initialized once per process and never torn down by a Detector.
var ortMu sync.Mutex

func initORT(library string) error {
	ortMu.Lock()
	defer ortMu.Unlock()
	if ort.IsInitialized() {
		return nil
	}
	if library == "" {
		return errors.New("onnxruntime library path is empty (-library)")
	}
	if _, err := os.Stat(library); err != nil {
		return fmt.Errorf("onnxruntime library: %w", err)
	}
	ort.SetSharedLibraryPath(library)
	if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
		// A library older than the binding's C API still says its version (not through
		// ort.GetVersion: the binding has unloaded the library and kept a pointer into it).
		if v, _, _ := RuntimeInfo(library); olderORT(v) {
			return fmt.Errorf("ONNX Runtime %s found at %s; this build needs %d.%d or newer: point workers.library at a newer libonnxruntime.so",
				v, library, minORTMajor, minORTMinor)
		}
		return fmt.Errorf("load onnxruntime library %s: %w", library, err)
	}
	return nil
}

// The oldest ONNX Runtime the binding loads: onnxruntime_go v1.27.0 asks for C API version
// 24, which ONNX Runtime 1.24 brought.
const minORTMajor, minORTMinor = 1, 24

// olderORT reports whether version (ONNX Runtime's "1.23.2") is older than the binding
// loads; false for what does not read as a version.
func olderORT(version string) bool {
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major < minORTMajor || major == minORTMajor && minor < minORTMinor
}

// Detector is one ONNX Runtime session of a YOLO-family detector (output layouts in
// layout.go) with its input and output tensors and all per-frame buffers allocated once.
//
// It holds pipelineDepth pairs of input and output tensors, each pair bound to the one
// session through its own IoBinding, so that a worker can fill the input of one pair and
// decode the output of another while the session runs on a third (worker.go). Detect
// uses pair 0. The Detector is not safe for concurrent use, except the staged methods
// under the discipline of the worker: prepare (one goroutine), run and shrinkArenas
// (another) and decodeOutput (a third), each on a pair no other stage holds.
type Detector struct {
	opts    infer.DetectorOptions
	info    infer.ModelInfo
	io      modelIO
	session *ort.DynamicAdvancedSession
	pairs   [pipelineDepth]tensorPair
	outConv []float32 // a float16 output converted to float32 for the decoder; nil for a float32 output
	f16LUT  []float32 // f16Table, for a float16 output
	dec     decoder
	binder  *inputBinder // binds inputs before each run; nil: through onnxruntime_go
	dev     *deviceIO    // the session's input and output in GPU memory (cuda.device_io); nil: host tensors
	thread  *sessionThread
	load    loadTimings
	// noAppearance leaves the detections without appearance descriptors: for the
	// benchmarks that measure what the descriptors cost (cpu_bench_test.go).
	noAppearance bool
}

// sessionThread makes every run of a Detector's session, its warm-up and arena shrinkage
// included, on one OS thread of its own. ONNX Runtime's CUDA provider keeps per-thread
// state for each thread that runs a session (cuDNN and cuBLAS handles and workspaces,
// measured at 72-74 MiB on an H200: docs/gpu-memory.md), and a goroutine moves between
// threads: a session run from goroutines grew by one such step each time the Go scheduler
// ran it on a thread it had not run on before, for minutes. On its own thread it holds one.
// The thread ends with the Detector (Close), and ONNX Runtime's state of it with the thread.
type sessionThread struct {
	calls chan sessionCall
	reply chan error
	done  chan struct{}
	tid   int // the OS thread of the last call, written before its reply
}

// sessionCall is a run of the session on a tensor pair, or an arena shrinkage run with
// the spec of memory.enable_memory_arena_shrinkage when shrink is not "".
type sessionCall struct {
	pair   int
	shrink string
}

func newSessionThread(d *Detector) *sessionThread {
	t := &sessionThread{calls: make(chan sessionCall), reply: make(chan error), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		defer close(t.done)
		for c := range t.calls {
			t.tid = unix.Gettid()
			if c.shrink != "" {
				t.reply <- d.shrinkArenasHere(c.pair, c.shrink)
			} else {
				t.reply <- d.runHere(c.pair)
			}
		}
	}()
	return t
}

// call makes c on the thread and returns its error. One call at a time (Detector).
func (t *sessionThread) call(c sessionCall) error {
	t.calls <- c
	return <-t.reply
}

// close ends the thread once its call in progress, if any, has returned.
func (t *sessionThread) close() {
	if t != nil {
		close(t.calls)
		<-t.done
	}
}

// pipelineDepth is the number of input/output tensor pairs of a Detector: one being run,
// one being filled with the next frame or decoded after the previous run.
const pipelineDepth = 2

// tensorPair is one input and one output tensor of the session, on buffers that live as
// long as the Detector, and the IoBinding that runs the session on them.
type tensorPair struct {
	input   ort.Value
	output  ort.Value
	binding *ort.IoBinding
	inF32   []float32 // the float32 input tensor's data; nil for a float16 input
	inF16   []uint16  // the float16 input tensor's data; nil for a float32 input
	inU8    []uint8   // the uint8 input tensor's data (uint8input.go); nil for a float input
	outF32  []float32 // the float32 output tensor's data; nil for a float16 output
	outF16  []uint16  // the float16 output tensor's data; nil for a float32 output
	// hostIn and hostOut are the pinned buffers of the slices above with device I/O
	// (deviceIO), which then runs the session; input, output and binding are nil.
	hostIn, hostOut unsafe.Pointer
}

// NewDetector loads the model and creates its session. Errors name the file, the
// library or the provider that failed.
func NewDetector(opts infer.DetectorOptions) (*Detector, error) {
	opts.SetDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(opts.Model); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	t0 := time.Now()
	if err := initORT(opts.Library); err != nil {
		return nil, err
	}
	t1 := time.Now()
	ins, outs, err := inspectModel(opts.Model)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", opts.Model, err)
	}
	mio, err := checkIO(ins, outs)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", opts.Model, err)
	}
	t2 := time.Now()
	d := &Detector{opts: opts, io: mio}
	d.info = infer.ModelInfo{
		Path:     opts.Model,
		InputW:   mio.inW,
		InputH:   mio.inH,
		Provider: string(opts.Provider),
	}
	if err := d.newSession(mio.in, mio.out); err != nil {
		d.Close()
		return nil, err
	}
	d.info.Classes, err = classNames(opts, mio.classes, d.session.GetModelMetadata)
	if err != nil {
		d.Close()
		return nil, err
	}
	d.dec = newDecoder(mio.layout, mio.classes, mio.anchors, float32(opts.Confidence), opts.IoU, opts.MaxDet)
	d.load = loadTimings{ORT: t1.Sub(t0), Inspect: t2.Sub(t1), Session: time.Since(t2)}
	return d, nil
}

// loadTimings are the stages of opening a Detector, logged by a worker at its start.
type loadTimings struct {
	ORT     time.Duration // loading the ONNX Runtime library and its environment (once per process)
	Inspect time.Duration // reading the model's inputs and outputs
	Session time.Duration // creating the session, its tensors and bindings; reading the class names
	WarmUp  time.Duration // the warm-up run (openDetector)
}

// inspectModel returns the model's inputs and outputs. ONNX Runtime reads them from a
// session only, so it creates a temporary one, without graph optimizations and with one
// thread: loading the graph is all it needs, at a fraction of a full session's cost.
func inspectModel(path string) (ins, outs []ort.InputOutputInfo, err error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, nil, fmt.Errorf("session options: %w", err)
	}
	defer so.Destroy()
	if err := so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return nil, nil, fmt.Errorf("session options: %w", err)
	}
	if err := so.SetIntraOpNumThreads(1); err != nil {
		return nil, nil, fmt.Errorf("session options: %w", err)
	}
	if err := so.SetInterOpNumThreads(1); err != nil {
		return nil, nil, fmt.Errorf("session options: %w", err)
	}
	return ort.GetInputOutputInfoWithOptions(path, so)
}

// sessionOptions returns the options of the detector's session: threads, spinning and
// the provider (appendProvider). ONNX Runtime's thread pools spin by default: an idle
// thread polls for work for a while before it sleeps, which saves a little latency and
// burns CPU that the decoders and the other workers need; spinning is off unless o.Spin.
func sessionOptions(o infer.DetectorOptions) (*ort.SessionOptions, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("session options: %w", err)
	}
	if err := setThreads(so, o); err != nil {
		so.Destroy()
		return nil, err
	}
	if err := appendProvider(so, o); err != nil {
		so.Destroy()
		return nil, err
	}
	return so, nil
}

func setThreads(so *ort.SessionOptions, o infer.DetectorOptions) error {
	if o.Threads > 0 {
		if err := so.SetIntraOpNumThreads(o.Threads); err != nil {
			return fmt.Errorf("threads %d: %w", o.Threads, err)
		}
		if err := so.SetInterOpNumThreads(1); err != nil {
			return fmt.Errorf("inter-op threads: %w", err)
		}
	}
	spin := "0"
	if o.Spin {
		spin = "1"
	}
	for _, k := range []string{"session.intra_op.allow_spinning", "session.inter_op.allow_spinning"} {
		if err := so.AddSessionConfigEntry(k, spin); err != nil {
			return fmt.Errorf("session options: %s: %w", k, err)
		}
	}
	return nil
}

func (d *Detector) newSession(in, out ort.InputOutputInfo) error {
	so, err := sessionOptions(d.opts)
	if err != nil {
		return err
	}
	defer so.Destroy()
	if d.io.outF16 {
		d.outConv = make([]float32, out.Dimensions.FlattenedSize())
		d.f16LUT = f16Table()
	}
	if d.opts.CUDA.DeviceIO {
		return d.newDeviceSession(so, in, out)
	}
	for i := range d.pairs {
		if err := d.pairs[i].newTensors(d.io, in, out); err != nil {
			return err
		}
	}
	// One session for every pair: a second session would double the model's memory (on a
	// GPU, its weights and arena). The pairs take turns through their IoBindings.
	d.session, err = ort.NewDynamicAdvancedSession(d.opts.Model, []string{in.Name}, []string{out.Name}, so)
	if err != nil {
		return fmt.Errorf("model %s: create session (provider %s): %w", d.opts.Model, d.opts.Provider, err)
	}
	for i := range d.pairs {
		p := &d.pairs[i]
		if p.binding, err = d.session.CreateIoBinding(); err != nil {
			return fmt.Errorf("model %s: io binding %d: %w", d.opts.Model, i, err)
		}
		if err := p.binding.BindInput(in.Name, p.input); err != nil {
			return fmt.Errorf("model %s: bind input %q of pair %d: %w", d.opts.Model, in.Name, i, err)
		}
		if err := p.binding.BindOutput(out.Name, p.output); err != nil {
			return fmt.Errorf("model %s: bind output %q of pair %d: %w", d.opts.Model, out.Name, i, err)
		}
	}
	if d.binder, err = newInputBinder(d.opts.Library, in.Name, &d.pairs); err != nil {
		return fmt.Errorf("model %s: %w", d.opts.Model, err)
	}
	d.thread = newSessionThread(d)
	return nil
}

// newDeviceSession creates the session with its input and output in GPU memory (deviceIO)
// and the pairs' host buffers pinned.
func (d *Detector) newDeviceSession(so *ort.SessionOptions, in, out ort.InputOutputInfo) error {
	var err error
	d.session, err = ort.NewDynamicAdvancedSession(d.opts.Model, []string{in.Name}, []string{out.Name}, so)
	if err != nil {
		return fmt.Errorf("model %s: create session (provider %s): %w", d.opts.Model, d.opts.Provider, err)
	}
	if d.dev, err = newDeviceIO(d.opts.Library, d.session, d.opts.Device, in, out); err != nil {
		return fmt.Errorf("model %s: %w", d.opts.Model, err)
	}
	for i := range d.pairs {
		if err := d.dev.hostBuffers(&d.pairs[i], d.io); err != nil {
			return fmt.Errorf("model %s: pair %d: %w", d.opts.Model, i, err)
		}
	}
	d.thread = newSessionThread(d)
	return nil
}

// newTensors creates the pair's input and output tensors on buffers that live as long as
// the Detector: ort.Tensor[float32] for float32, ort.CustomDataTensor over a []uint16 for
// float16 (which the decoder converts into Detector.outConv, once per frame).
func (p *tensorPair) newTensors(mio modelIO, in, out ort.InputOutputInfo) error {
	if mio.inU8 {
		if err := p.newUint8Input(in); err != nil {
			return err
		}
	} else if mio.inF16 {
		p.inF16 = make([]uint16, in.Dimensions.FlattenedSize())
		t, err := ort.NewCustomDataTensor(in.Dimensions, halfBytes(p.inF16), ort.TensorElementDataTypeFloat16)
		if err != nil {
			return fmt.Errorf("input tensor %v float16: %w", in.Dimensions, err)
		}
		p.input = t
	} else {
		t, err := ort.NewEmptyTensor[float32](in.Dimensions)
		if err != nil {
			return fmt.Errorf("input tensor %v: %w", in.Dimensions, err)
		}
		p.input, p.inF32 = t, t.GetData()
	}
	if mio.outF16 {
		p.outF16 = make([]uint16, out.Dimensions.FlattenedSize())
		t, err := ort.NewCustomDataTensor(out.Dimensions, halfBytes(p.outF16), ort.TensorElementDataTypeFloat16)
		if err != nil {
			return fmt.Errorf("output tensor %v float16: %w", out.Dimensions, err)
		}
		p.output = t
	} else {
		t, err := ort.NewEmptyTensor[float32](out.Dimensions)
		if err != nil {
			return fmt.Errorf("output tensor %v: %w", out.Dimensions, err)
		}
		p.output, p.outF32 = t, t.GetData()
	}
	return nil
}

// classNames returns the class names: from the labels file when o.Labels is set, else
// from the model's "names" metadata (Ultralytics exports; metadata reads the model's),
// else "class0", "class1", ... (logged). n is the class count the output layout says, 0
// when it does not (end-to-end): then any count is taken, and without names the list is
// empty and the decoder names class ids as it meets them.
func classNames(o infer.DetectorOptions, n int, metadata func() (*ort.ModelMetadata, error)) ([]string, error) {
	if o.Labels != "" {
		names, err := readLabels(o.Labels)
		if err != nil {
			return nil, err
		}
		if n > 0 && len(names) != n {
			return nil, fmt.Errorf("labels %s: %d names, model %s has %d classes", o.Labels, len(names), o.Model, n)
		}
		return names, nil
	}
	names, ok, err := metadataNames(o.Model, metadata)
	if err != nil {
		return nil, err
	}
	if ok {
		if n > 0 && len(names) != n {
			return nil, fmt.Errorf("model %s: metadata names %d classes, output has %d", o.Model, len(names), n)
		}
		return names, nil
	}
	slog.Warn("model has no class names (metadata \"names\") and no labels file: naming classes class0, class1, ...",
		"model", o.Model, "classes", n)
	names = make([]string, n)
	for i := range names {
		names[i] = "class" + strconv.Itoa(i)
	}
	return names, nil
}

// readLabels reads a class names file: one name per line, class 0 first. Surrounding
// spaces and a final newline are ignored; an empty line within the names is an error.
func readLabels(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("labels: %w", err)
	}
	return infer.ParseLabels(path, b)
}

// metadataNames reads Ultralytics' "names" metadata of the model at path (from
// metadata, which reads it); ok is false when the model has none.
func metadataNames(path string, metadata func() (*ort.ModelMetadata, error)) (names []string, ok bool, err error) {
	md, err := metadata()
	if err != nil {
		return nil, false, fmt.Errorf("model %s: metadata: %w", path, err)
	}
	defer md.Destroy()
	s, ok, err := md.LookupCustomMetadataMap("names")
	if err != nil {
		return nil, false, fmt.Errorf("model %s: metadata: %w", path, err)
	}
	if !ok {
		return nil, false, nil
	}
	names, err = infer.ParseNames(s)
	if err != nil {
		return nil, false, fmt.Errorf("model %s: %w", path, err)
	}
	return names, true, nil
}

// Model describes the loaded model.
func (d *Detector) Model() infer.ModelInfo { return d.info }

// Detect runs the model on one letterboxed RGB24 frame (HWC uint8, exactly InputW x
// InputH x 3 bytes) and appends its detections, in source pixels mapped through lb, to
// dst[:0]. It allocates nothing when dst has room. It uses tensor pair 0: do not call it
// while a worker pipeline (worker.go) uses the Detector.
func (d *Detector) Detect(pixRGB []byte, lb geom.Letterbox, dst []infer.Detection) ([]infer.Detection, infer.Timings, error) {
	var tm infer.Timings
	if err := d.checkFrame(len(pixRGB), lb); err != nil {
		return dst[:0], tm, err
	}
	t0 := time.Now()
	d.prepare(0, pixRGB)
	t1 := time.Now()
	if err := d.run(0); err != nil {
		return dst[:0], tm, err
	}
	t2 := time.Now()
	dst = d.decodeOutput(0, lb, pixRGB, dst[:0])
	t3 := time.Now()
	tm = infer.Timings{Pre: t1.Sub(t0), Run: t2.Sub(t1), Post: t3.Sub(t2)}
	return dst, tm, nil
}

// prepare converts a checked frame (checkFrame) into the input tensor of pair p.
func (d *Detector) prepare(p int, pixRGB []byte) {
	t := &d.pairs[p]
	if t.inU8 != nil {
		copy(t.inU8, pixRGB) // the model converts it (uint8input.go)
	} else if t.inF16 != nil {
		preprocessF16(t.inF16, pixRGB, d.info.InputW*d.info.InputH)
	} else {
		preprocess(t.inF32, pixRGB, d.info.InputW*d.info.InputH)
	}
}

// run runs the session on pair p, on the Detector's thread (sessionThread): its input
// tensor in, its output tensor out.
func (d *Detector) run(p int) error { return d.thread.call(sessionCall{pair: p}) }

// runHere runs the session on pair p on the calling thread.
//
// The input is bound again before every run: ONNX Runtime copies a bound input to the
// device of the provider (cuda, tensorrt) when it is bound, not when the session runs, so
// a binding made once would run every frame on the first one's copy. On the CPU, binding
// copies nothing. It allocates no Go memory (inputBinder), unless the Detector was opened
// without a library path.
func (d *Detector) runHere(p int) error {
	t := &d.pairs[p]
	if d.dev != nil {
		if err := d.dev.run(d.session, t.hostIn, t.hostOut); err != nil {
			return fmt.Errorf("session run: %w", err)
		}
		return nil
	}
	var err error
	if d.binder != nil {
		err = d.binder.bind(p)
	} else {
		err = t.binding.BindInput(d.io.in.Name, t.input)
	}
	if err != nil {
		return fmt.Errorf("session run: bind input %q: %w", d.io.in.Name, err)
	}
	if err := d.session.RunWithBinding(t.binding); err != nil {
		return fmt.Errorf("session run: %w", err)
	}
	return nil
}

// decodeOutput decodes the output tensor of pair p, which a finished run filled, into
// detections appended to dst, each with the appearance descriptor of its box on pixRGB, the
// frame of the run (describe); without descriptors when pixRGB is nil.
func (d *Detector) decodeOutput(p int, lb geom.Letterbox, pixRGB []byte, dst []infer.Detection) []infer.Detection {
	t := &d.pairs[p]
	out := t.outF32
	if t.outF16 != nil {
		f16Decode(d.outConv, t.outF16, d.f16LUT)
		out = d.outConv
	}
	n := len(dst)
	dst = d.dec.decode(out, lb, d.info.Classes, dst)
	if pixRGB != nil && !d.noAppearance {
		describe(dst[n:], pixRGB, lb)
	}
	return dst
}

func (d *Detector) checkFrame(n int, lb geom.Letterbox) error {
	if want := d.info.InputW * d.info.InputH * 3; n != want {
		return fmt.Errorf("frame has %d bytes, model input %dx%d RGB24 needs %d", n, d.info.InputW, d.info.InputH, want)
	}
	return lb.Check(d.info.InputW, d.info.InputH)
}

// Close releases the bindings, the session and the tensors. The process-wide ORT
// environment stays.
func (d *Detector) Close() error {
	var errs []error
	d.thread.close()
	d.thread = nil
	d.binder.close()
	errs = append(errs, d.dev.close()) // its binding before the session
	for i := range d.pairs {
		if p := &d.pairs[i]; p.binding != nil {
			errs = append(errs, p.binding.Destroy())
			p.binding = nil
		}
	}
	if d.session != nil {
		errs = append(errs, d.session.Destroy())
		d.session = nil
	}
	for i := range d.pairs {
		p := &d.pairs[i]
		if p.input != nil {
			errs = append(errs, p.input.Destroy())
			p.input = nil
		}
		if p.output != nil {
			errs = append(errs, p.output.Destroy())
			p.output = nil
		}
	}
	return errors.Join(errs...)
}

// preprocess converts n pixels of RGB24 HWC uint8 into planar CHW float32 in 0..1.
func preprocess(dst []float32, pix []byte, n int) {
	r, g, b := dst[:n], dst[n:2*n], dst[2*n:3*n]
	pix = pix[:3*n]
	var lut [256]float32
	for i := range lut {
		lut[i] = float32(i) / 255
	}
	for i := range r {
		p := pix[3*i:]
		r[i], g[i], b[i] = lut[p[0]], lut[p[1]], lut[p[2]]
	}
}

// candidate is one anchor whose best class passed the confidence threshold, with its box
// on the input canvas as corners.
type candidate struct {
	x1, y1, x2, y2 float32
	score          float32
	class          int
}

// decoder turns an output of one of the layouts (layout.go) into detections, with buffers
// reused across frames.
type decoder struct {
	layout           layout
	classes, anchors int // C (0 for end-to-end) and N
	conf             float32
	iou              float64
	maxDet           int
	best             []float32 // best class score per anchor (YOLOv8 layout)
	bestC            []int32   // its class
	cands            []candidate
	removed          []bool
	genNames         []string // "class<id>" for end-to-end class ids without names
}

func newDecoder(l layout, classes, anchors int, conf float32, iou float64, maxDet int) decoder {
	d := decoder{
		layout: l, classes: classes, anchors: anchors, conf: conf, iou: iou, maxDet: maxDet,
		cands: make([]candidate, 0, min(anchors, 1024)),
	}
	if l == layoutV8 {
		d.best = make([]float32, anchors)
		d.bestC = make([]int32, anchors)
	}
	return d
}

// candidates keeps, per anchor, the best class if its score reaches conf.
func (d *decoder) candidates(out []float32) []candidate {
	n := d.anchors
	best, bestC := d.best[:n], d.bestC[:n]
	copy(best, out[4*n:5*n])
	clear(bestC)
	for c := 1; c < d.classes; c++ {
		row := out[(4+c)*n : (5+c)*n]
		for i, s := range row {
			if s > best[i] {
				best[i] = s
				bestC[i] = int32(c)
			}
		}
	}
	cands := d.cands[:0]
	cx, cy, w, h := out[:n], out[n:2*n], out[2*n:3*n], out[3*n:4*n]
	for i, s := range best {
		if s < d.conf {
			continue
		}
		cands = append(cands, candidate{
			x1: cx[i] - w[i]/2, y1: cy[i] - h[i]/2,
			x2: cx[i] + w[i]/2, y2: cy[i] + h[i]/2,
			score: s, class: int(bestC[i]),
		})
	}
	d.cands = cands
	return cands
}

// nms sorts cands by score and keeps, class by class, each box that does not overlap a
// kept better box of its class by an IoU above the threshold. It returns the kept ones, at
// most maxDet, best first.
func (d *decoder) nms(cands []candidate) []candidate {
	slices.SortFunc(cands, func(a, b candidate) int { return cmp.Compare(b.score, a.score) })
	if cap(d.removed) < len(cands) {
		d.removed = make([]bool, len(cands))
	}
	removed := d.removed[:len(cands)]
	clear(removed)
	kept := cands[:0]
	for i := range cands {
		if removed[i] {
			continue
		}
		a := cands[i]
		for j := i + 1; j < len(cands); j++ {
			if !removed[j] && cands[j].class == a.class && iou(a, cands[j]) > d.iou {
				removed[j] = true
			}
		}
		kept = append(kept, a) // i >= len(kept): never overwrites an unread candidate
		if len(kept) == d.maxDet {
			break
		}
	}
	return kept
}

func iou(a, b candidate) float64 {
	iw := min(a.x2, b.x2) - max(a.x1, b.x1)
	ih := min(a.y2, b.y2) - max(a.y1, b.y1)
	if iw <= 0 || ih <= 0 {
		return 0
	}
	inter := float64(iw) * float64(ih)
	ua := float64(a.x2-a.x1)*float64(a.y2-a.y1) + float64(b.x2-b.x1)*float64(b.y2-b.y1) - inter
	if ua <= 0 {
		return 0
	}
	return inter / ua
}

// decode finds the candidates of the layout, runs NMS where the layout needs it (not on
// end-to-end outputs) and appends the kept boxes, mapped to source pixels, to dst.
func (d *decoder) decode(out []float32, lb geom.Letterbox, names []string, dst []infer.Detection) []infer.Detection {
	var kept []candidate
	switch d.layout {
	case layoutV5:
		kept = d.nms(d.candidatesV5(out))
	case layoutE2E:
		kept = d.candidatesE2E(out, names)
	default:
		kept = d.nms(d.candidates(out))
	}
	for _, c := range kept {
		b := lb.ToSource(geom.Box{X: float64(c.x1), Y: float64(c.y1), W: float64(c.x2 - c.x1), H: float64(c.y2 - c.y1)})
		if b.W <= 0 || b.H <= 0 {
			continue // entirely in the padding
		}
		dst = append(dst, infer.Detection{ClassID: c.class, Label: d.label(names, c.class), Score: c.score, Box: b})
	}
	return dst
}
