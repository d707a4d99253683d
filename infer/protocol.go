package infer

// Worker protocol, version 3.
//
// Version 3 added a detection's "appearance" (below); version 2 results out of job order
// (Result order).
//
// The daemon starts a worker as `visiond worker -detector {...} -slots K -slot-bytes S
// -sessions N` (WorkerFlags) with three extra files:
//
//	fd 3  a memfd of K*S bytes: K frame slots of S bytes each. A frame is RGB24 HWC uint8
//	      of exactly the model's input size (already letterboxed by the daemon), at the start
//	      of its slot.
//	fd 4  daemon -> worker: job messages
//	fd 5  worker -> daemon: hello, then one result per job
//
// stderr is the worker's log; the daemon forwards it line by line.
//
// Sessions. A worker runs N ONNX Runtime sessions of the model (-sessions, default 1) in one
// process, one runtime environment and, on a GPU, one CUDA context: N jobs run at once, each
// on a session of its own. Each session holds its own input and output tensors (a few
// jobs' worth, see Pipelining); the frame slots are the worker's, not a session's: a job may
// name any slot and runs on whichever session is free first (the one with the fewest jobs).
//
// Pipelining. The daemon may send up to K jobs, each on a different slot, before it reads
// a result. The daemon writes a slot only when no job on it is waiting for its answer: after
// the result of the last job that named the slot has been read. The worker may read a job's
// frame at any time until it writes that job's result, and never after. A worker reads the
// next jobs while it runs one (infer/worker: each session fills the next input, and decodes
// the previous output, while it runs), so a daemon that keeps K >= 2N jobs in flight keeps
// every session busy. With K = 1 and N = 1 this is the one-job-at-a-time exchange of the
// first daemons.
//
// Result order. With one session the worker answers its jobs strictly in the order they were
// sent. With N > 1 sessions results go out in the order the jobs finish, which need not be
// the order they were sent (version 2; version 1 had one session and job order only): each
// result names its job by id, and the daemon matches it to the job in flight with that id.
// A result whose id names no job in flight (never sent, or answered already) is a protocol
// error: the daemon kills the worker and counts every job it held as lost. Results are not
// held back for the jobs sent before them: a session that finishes first answers first, so
// no job waits for a slower one (a head-of-line wait, which in-order answers would cost;
// the daemon's pipeline keeps at most one job per camera in flight, so a camera's results
// still come in its frames' order).
//
// Every message is one frame: a 4-byte little-endian length n (1 <= n <= MaxFrameSize)
// followed by n bytes of JSON, an object with a "type" and the one field named by it:
//
//	{"type":"hello","hello":{"pid":123,"model":"/m/yolov8n.onnx","input_w":640,"input_h":640,
//	  "classes":["person",...],"provider":"cpu"}}
//	    first message of a worker; "error" instead of the model fields when it could not
//	    start (bad model, library, provider): the daemon reports it and the worker exits.
//	{"type":"job","job":{"id":7,"slot":0,"camera":"gate","seq":42,
//	  "letterbox":{"src_w":1920,"src_h":1080,"dst_w":640,"dst_h":640,"scaled_w":640,"scaled_h":360,"pad_x":0,"pad_y":140},
//	  "shrink_arenas":true}}
//	    "shrink_arenas" (optional, default false): before this job, and before the next
//	    job of each of its other sessions, the worker runs the session once with the run
//	    option memory.enable_memory_arena_shrinkage ("cpu:0", plus "gpu:<device>" on cuda
//	    and tensorrt), which hands the arenas' unused memory back. The daemon sets it on the next job of each worker after Pool.ShrinkArenas
//	    (camera set or resolution changed), never per frame. A failed shrink is logged
//	    and does not fail the job.
//	{"type":"result","result":{"id":7,"detections":[{"class_id":0,"label":"person","score":0.9,
//	  "box":{"x":1,"y":2,"w":3,"h":4},"appearance":"<128 base64 characters>"}],
//	  "pre_us":600,"run_us":41000,"post_us":300,"session":1}}
//	    or "error":"..." when the job was bad (slot out of range, letterbox not matching
//	    the model input) or the run failed; the worker keeps serving. "session" (optional,
//	    default 0) is the index of the session that ran the job, in [0,N). A detection's
//	    "box" is in source pixels. Its "appearance" (version 3; optional, absent: none) is
//	    the appearance descriptor of the box (package infer/appearance: colour histograms
//	    of the box's inner part in 3 horizontal stripes, appearance.Size = 96 bytes) as
//	    standard base64 with padding, exactly 128 characters; the worker computes it on the
//	    job's letterboxed frame, from the box mapped back onto it, for every detection it
//	    sends. Any other length, or characters that are not base64, make the message
//	    malformed ("appearance: ..."). "post_us" includes the descriptors.
//
// Unknown fields and unknown types are errors. A framing error (oversized or truncated
// frame) or a malformed message ends the stream: the worker exits with that error, and
// the daemon kills and restarts a worker that sent one. End of stream at a frame boundary
// (io.EOF) is the orderly way to stop a worker.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// MaxFrameSize is the largest JSON payload of one protocol frame.
const MaxFrameSize = 1 << 20

// File descriptors a worker inherits from the daemon.
const (
	FDSlots   = 3 // the memfd of the frame slots
	FDJobs    = 4 // daemon -> worker: jobs
	FDResults = 5 // worker -> daemon: hello, results
)

// DefaultSlotBytes is the size of one frame slot: room for a 1280x1280 RGB24 input.
const DefaultSlotBytes = 1280 * 1280 * 3

// Message types, the "type" of a Message.
const (
	MsgHello  = "hello"
	MsgJob    = "job"
	MsgResult = "result"
)

// Message is one protocol frame: Type and the one field it names.
type Message struct {
	Type   string     `json:"type"`
	Hello  *HelloMsg  `json:"hello,omitempty"`
	Job    *JobMsg    `json:"job,omitempty"`
	Result *ResultMsg `json:"result,omitempty"`
}

// HelloMsg is a worker's first message: the model it loaded, or why it could not start.
type HelloMsg struct {
	PID      int      `json:"pid"`
	Model    string   `json:"model,omitempty"`
	InputW   int      `json:"input_w,omitempty"`
	InputH   int      `json:"input_h,omitempty"`
	Classes  []string `json:"classes,omitempty"`
	Provider string   `json:"provider,omitempty"`
	Error    string   `json:"error,omitempty"`
}

// JobMsg asks a worker to run the model on the frame in slot Slot.
type JobMsg struct {
	ID        uint64         `json:"id"`
	Slot      int            `json:"slot"`
	Camera    string         `json:"camera"`
	Seq       uint64         `json:"seq"`
	Letterbox geom.Letterbox `json:"letterbox"`
	// ShrinkArenas asks for one session run with arena shrinkage before this job.
	ShrinkArenas bool `json:"shrink_arenas,omitempty"`
}

// ResultMsg answers the job ID: its detections in source pixels and the worker's
// timings, or Error.
type ResultMsg struct {
	ID         uint64      `json:"id"`
	Detections []Detection `json:"detections,omitempty"`
	PreUS      int64       `json:"pre_us"`
	RunUS      int64       `json:"run_us"`
	PostUS     int64       `json:"post_us"`
	Session    int         `json:"session,omitempty"` // the session that ran it, in [0,sessions)
	Error      string      `json:"error,omitempty"`
}

// Timings returns the stages the worker measured.
func (r *ResultMsg) Timings() Timings {
	us := func(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
	return Timings{Pre: us(r.PreUS), Run: us(r.RunUS), Post: us(r.PostUS)}
}

// ReadMessage reads one frame from r, using buf for the payload when it is large enough.
// It returns io.EOF only for a stream that ended at a frame boundary.
func ReadMessage(r io.Reader, buf []byte) (Message, []byte, error) {
	var hdr [4]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return Message{}, buf, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Message{}, buf, fmt.Errorf("%w: stream ended after %d of 4 length bytes", ErrFrameTruncated, n)
		}
		return Message{}, buf, err
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size == 0 {
		return Message{}, buf, fmt.Errorf("%w: empty frame", ErrBadMessage)
	}
	if size > MaxFrameSize {
		return Message{}, buf, fmt.Errorf("%w: length %d exceeds %d", ErrFrameTooLarge, size, MaxFrameSize)
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size, max(int(size), 4096))
	}
	buf = buf[:size]
	if n, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return Message{}, buf, fmt.Errorf("%w: stream ended after %d of %d payload bytes", ErrFrameTruncated, n, size)
		}
		return Message{}, buf, err
	}
	m, err := decodeMessage(buf)
	return m, buf, err
}

func decodeMessage(b []byte) (Message, error) {
	var m Message
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, fmt.Errorf("%w: malformed JSON: %v", ErrBadMessage, err)
	}
	if dec.More() {
		return m, fmt.Errorf("%w: trailing data after the JSON object", ErrBadMessage)
	}
	var present int
	for _, p := range []bool{m.Hello != nil, m.Job != nil, m.Result != nil} {
		if p {
			present++
		}
	}
	var ok bool
	switch m.Type {
	case MsgHello:
		ok = m.Hello != nil
	case MsgJob:
		ok = m.Job != nil
	case MsgResult:
		ok = m.Result != nil
	default:
		return m, fmt.Errorf("%w: unknown message type %q", ErrBadMessage, m.Type)
	}
	if !ok || present != 1 {
		return m, fmt.Errorf("%w: message of type %q must carry exactly its %q field", ErrBadMessage, m.Type, m.Type)
	}
	return m, nil
}

// WriteMessage encodes m as one frame and writes it with a single Write call.
func WriteMessage(w io.Writer, m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s message: %w", m.Type, err)
	}
	if len(b) > MaxFrameSize {
		return fmt.Errorf("%w: %s message of %d bytes exceeds %d", ErrFrameTooLarge, m.Type, len(b), MaxFrameSize)
	}
	frame := make([]byte, 4+len(b))
	binary.LittleEndian.PutUint32(frame, uint32(len(b)))
	copy(frame[4:], b)
	_, err = w.Write(frame)
	return err
}

// CheckJob validates a job against the worker's slots and model input.
func CheckJob(j *JobMsg, slots, inputW, inputH int) error {
	if j.Slot < 0 || j.Slot >= slots {
		return fmt.Errorf("job %d: slot %d out of range [0,%d)", j.ID, j.Slot, slots)
	}
	if err := j.Letterbox.Check(inputW, inputH); err != nil {
		return fmt.Errorf("job %d: %w", j.ID, err)
	}
	return nil
}

// MaxSessions is the most sessions a worker runs (WorkerFlags.Sessions).
const MaxSessions = 64

// WorkerFlags are the command-line flags of a worker process, what the daemon tells it
// besides its three files: Args writes them, ParseWorkerFlags reads them.
type WorkerFlags struct {
	Detector  DetectorOptions // -detector, as JSON
	Slots     int             // -slots: frame slots in the memfd on fd 3; default 1
	SlotBytes int             // -slot-bytes: bytes per slot; default DefaultSlotBytes
	Sessions  int             // -sessions: sessions running jobs at once, 1..MaxSessions; default 1
}

// Args returns the flags as arguments for a worker's command line.
func (f WorkerFlags) Args() []string {
	opts, err := json.Marshal(f.Detector)
	if err != nil {
		panic(err) // plain fields: cannot fail
	}
	return []string{"-detector", string(opts), "-slots", strconv.Itoa(f.Slots), "-slot-bytes", strconv.Itoa(f.SlotBytes),
		"-sessions", strconv.Itoa(f.Sessions)}
}

// ParseWorkerFlags parses a worker's arguments (Args), sets the detector's defaults and
// validates it all.
func ParseWorkerFlags(args []string) (WorkerFlags, error) {
	var f WorkerFlags
	var detector string
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&detector, "detector", "", "detector options as JSON (infer.DetectorOptions)")
	fs.IntVar(&f.Slots, "slots", 1, "frame slots in the memfd on fd 3")
	fs.IntVar(&f.SlotBytes, "slot-bytes", DefaultSlotBytes, "bytes per frame slot")
	fs.IntVar(&f.Sessions, "sessions", 1, "ONNX Runtime sessions running jobs at once")
	if err := fs.Parse(args); err != nil {
		return f, fmt.Errorf("worker flags: %w", err)
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("worker flags: unexpected argument %q", fs.Arg(0))
	}
	dec := json.NewDecoder(strings.NewReader(detector))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f.Detector); err != nil {
		return f, fmt.Errorf("worker flags: -detector: %w", err)
	}
	f.Detector.SetDefaults()
	switch {
	case f.Slots < 1:
		return f, fmt.Errorf("worker flags: -slots %d must be >= 1", f.Slots)
	case f.SlotBytes < 1:
		return f, fmt.Errorf("worker flags: -slot-bytes %d must be >= 1", f.SlotBytes)
	case f.Sessions < 1 || f.Sessions > MaxSessions:
		return f, fmt.Errorf("worker flags: -sessions %d must be in 1..%d", f.Sessions, MaxSessions)
	}
	if err := f.Detector.Validate(); err != nil {
		return f, fmt.Errorf("worker flags: -detector: %w", err)
	}
	return f, nil
}
