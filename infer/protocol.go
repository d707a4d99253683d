package infer

// Worker protocol, version 1.
//
// The daemon starts a worker as `visiond worker -model ... -slots K -slot-bytes S ...`
// with three extra files:
//
//	fd 3  a memfd of K*S bytes: K frame slots of S bytes each. A frame is RGB24 HWC uint8
//	      of exactly the model's input size (already letterboxed by the daemon), at the start
//	      of its slot.
//	fd 4  daemon -> worker: job messages
//	fd 5  worker -> daemon: hello, then one result per job, in job order
//
// stderr is the worker's log; the daemon forwards it line by line.
//
// Pipelining. The daemon may send up to K jobs, each on a different slot, before it reads
// a result; the worker answers them strictly in the order they were sent. The daemon
// writes a slot only when no job on it is waiting for its answer: after the result of the
// last job that named the slot has been read. The worker may read a job's frame at any
// time until it writes that job's result, and never after. A worker reads the next jobs
// while it runs one (worker.go: it fills the next input, and decodes the previous output,
// while the session runs), so a daemon that keeps K >= 2 jobs in flight keeps the device
// busy. With K = 1 this is the one-job-at-a-time exchange of earlier daemons: the
// messages are the same, a worker serves either kind of daemon.
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
//	    "shrink_arenas" (optional, default false): before this job the worker runs its
//	    session once with the run option memory.enable_memory_arena_shrinkage ("cpu:0",
//	    plus "gpu:<device>" on cuda and tensorrt), which hands the arenas' unused memory
//	    back. The daemon sets it on the next job of each worker after Pool.ShrinkArenas
//	    (camera set or resolution changed), never per frame. A failed shrink is logged
//	    and does not fail the job.
//	{"type":"result","result":{"id":7,"detections":[{"class_id":0,"label":"person","score":0.9,
//	  "box":{"x":1,"y":2,"w":3,"h":4}}],"pre_us":600,"run_us":41000,"post_us":300}}
//	    or "error":"..." when the job was bad (slot out of range, letterbox not matching
//	    the model input) or the run failed; the worker keeps serving.
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
	"fmt"
	"io"

	"github.com/visiond/visiond/internal/geom"
)

// MaxFrameSize is the largest JSON payload of one protocol frame.
const MaxFrameSize = 1 << 20

const (
	msgHello  = "hello"
	msgJob    = "job"
	msgResult = "result"
)

type message struct {
	Type   string     `json:"type"`
	Hello  *helloMsg  `json:"hello,omitempty"`
	Job    *jobMsg    `json:"job,omitempty"`
	Result *resultMsg `json:"result,omitempty"`
}

type helloMsg struct {
	PID      int      `json:"pid"`
	Model    string   `json:"model,omitempty"`
	InputW   int      `json:"input_w,omitempty"`
	InputH   int      `json:"input_h,omitempty"`
	Classes  []string `json:"classes,omitempty"`
	Provider string   `json:"provider,omitempty"`
	Error    string   `json:"error,omitempty"`
}

type jobMsg struct {
	ID        uint64         `json:"id"`
	Slot      int            `json:"slot"`
	Camera    string         `json:"camera"`
	Seq       uint64         `json:"seq"`
	Letterbox geom.Letterbox `json:"letterbox"`
	// ShrinkArenas asks for one session run with arena shrinkage before this job.
	ShrinkArenas bool `json:"shrink_arenas,omitempty"`
}

type resultMsg struct {
	ID         uint64      `json:"id"`
	Detections []Detection `json:"detections,omitempty"`
	PreUS      int64       `json:"pre_us"`
	RunUS      int64       `json:"run_us"`
	PostUS     int64       `json:"post_us"`
	Error      string      `json:"error,omitempty"`
}

// readMessage reads one frame from r, using buf for the payload when it is large enough.
// It returns io.EOF only for a stream that ended at a frame boundary.
func readMessage(r io.Reader, buf []byte) (message, []byte, error) {
	var hdr [4]byte
	if n, err := io.ReadFull(r, hdr[:]); err != nil {
		if err == io.EOF {
			return message{}, buf, io.EOF
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return message{}, buf, fmt.Errorf("%w: stream ended after %d of 4 length bytes", ErrFrameTruncated, n)
		}
		return message{}, buf, err
	}
	size := binary.LittleEndian.Uint32(hdr[:])
	if size == 0 {
		return message{}, buf, fmt.Errorf("%w: empty frame", ErrBadMessage)
	}
	if size > MaxFrameSize {
		return message{}, buf, fmt.Errorf("%w: length %d exceeds %d", ErrFrameTooLarge, size, MaxFrameSize)
	}
	if cap(buf) < int(size) {
		buf = make([]byte, size, max(int(size), 4096))
	}
	buf = buf[:size]
	if n, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return message{}, buf, fmt.Errorf("%w: stream ended after %d of %d payload bytes", ErrFrameTruncated, n, size)
		}
		return message{}, buf, err
	}
	m, err := decodeMessage(buf)
	return m, buf, err
}

func decodeMessage(b []byte) (message, error) {
	var m message
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
	case msgHello:
		ok = m.Hello != nil
	case msgJob:
		ok = m.Job != nil
	case msgResult:
		ok = m.Result != nil
	default:
		return m, fmt.Errorf("%w: unknown message type %q", ErrBadMessage, m.Type)
	}
	if !ok || present != 1 {
		return m, fmt.Errorf("%w: message of type %q must carry exactly its %q field", ErrBadMessage, m.Type, m.Type)
	}
	return m, nil
}

// writeMessage encodes m as one frame and writes it with a single Write call.
func writeMessage(w io.Writer, m message) error {
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

// checkJob validates a job against the worker's slots and model input.
func checkJob(j *jobMsg, slots, inputW, inputH int) error {
	if j.Slot < 0 || j.Slot >= slots {
		return fmt.Errorf("job %d: slot %d out of range [0,%d)", j.ID, j.Slot, slots)
	}
	if err := j.Letterbox.Check(inputW, inputH); err != nil {
		return fmt.Errorf("job %d: %w", j.ID, err)
	}
	return nil
}
