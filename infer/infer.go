// Package infer is what the two sides of visiond's inference process boundary share: the
// daemon, which hands letterboxed frames to worker processes (package infer/pool), and the
// workers, which run a YOLO-family detector on them in ONNX Runtime (package infer/worker,
// `visiond worker`). It holds the wire protocol between them (protocol.go: frames, messages,
// file descriptors, the worker's flags), the detector's options (options.go), the job and
// result types the daemon's pipeline uses, and the errors a job can end with; also the
// rules that read a detector model (layout.go: the output layouts; names.go: the class
// names metadata), which the workers and `visiond model` (infer/model) share.
//
// It imports no cgo, no ONNX Runtime and no OpenCV, so each side imports only what it runs:
// the daemon never links the runtime that might crash it, and a worker never links the pool.
package infer

import (
	"errors"
	"fmt"
	"time"

	"github.com/visiond/visiond/infer/appearance"
	"github.com/visiond/visiond/internal/geom"
)

// Errors reported in Result.Err and by the protocol decoder. Match them with errors.Is;
// the wrapped message names the worker, the job or the offending value.
var (
	// ErrWorkerLost: the worker exited or broke the protocol while the job was in flight.
	ErrWorkerLost = errors.New("infer: worker lost")
	// ErrJobTimeout: the job ran past the pool's job timeout (pool.Config.JobTimeout); the
	// worker was killed.
	ErrJobTimeout = errors.New("infer: job timed out")
	// ErrJobRejected: the worker refused the job (bad slot, letterbox or frame size) or
	// the session failed on it; the worker keeps serving.
	ErrJobRejected = errors.New("infer: job rejected")
	// ErrPoolClosed: the pool was closed while the job was queued or in flight.
	ErrPoolClosed = errors.New("infer: pool closed")

	// ErrFrameTooLarge: a protocol frame announced more than MaxFrameSize bytes.
	ErrFrameTooLarge = errors.New("infer: protocol frame too large")
	// ErrFrameTruncated: the stream ended inside a frame.
	ErrFrameTruncated = errors.New("infer: protocol frame truncated")
	// ErrBadMessage: a frame held malformed JSON, an unknown type or missing fields.
	ErrBadMessage = errors.New("infer: bad protocol message")
)

// Detection is one object found in a frame. Box is in source-frame pixels.
type Detection struct {
	ClassID int      `json:"class_id"`
	Label   string   `json:"label"`
	Score   float32  `json:"score"`
	Box     geom.Box `json:"box"`
	// Appearance is the colour descriptor of the box's pixels (package infer/appearance),
	// which the worker computes on the letterboxed frame for every detection it returns;
	// the zero Descriptor (none) is left out of the wire. For the tracker, not for events.
	Appearance appearance.Descriptor `json:"appearance,omitzero"`
}

// ModelInfo describes the model a worker (or a worker.Detector) has loaded.
type ModelInfo struct {
	Path           string   // model file
	InputW, InputH int      // input size in pixels (the letterbox canvas)
	Classes        []string // class names by class id
	Provider       string   // the execution provider it runs on: a Provider, or "cpu (fallback: <why>)"
}

// Timings are the stages of one detection, measured inside the worker.
type Timings struct {
	Pre  time.Duration // HWC uint8 -> the input tensor: CHW float32 or float16, or a copy for a uint8 input
	Run  time.Duration // session run
	Post time.Duration // decode, NMS, mapping to source pixels
}

// Job identifies a frame handed to the pool.
type Job struct {
	Camera    string
	Seq       uint64
	Captured  time.Time
	Letterbox geom.Letterbox
}

// Input is a job's picture, which the pool writes into the worker's memory as it dispatches
// the job (a sources.Frame, converting a frame held in YUV; RGB, copying).
type Input interface {
	// WriteRGB writes the model's input into dst, which is exactly InputW*InputH*3 bytes:
	// RGB24, HWC, letterboxed as the job's Letterbox says. An error refuses the job.
	WriteRGB(dst []byte) error
}

// RGB is an Input already in the model's layout: RGB24, HWC, of the model's input size.
type RGB []byte

// WriteRGB copies the picture into dst, which must be its size.
func (p RGB) WriteRGB(dst []byte) error {
	if len(p) != len(dst) {
		return fmt.Errorf("frame has %d bytes, the model's RGB24 input needs %d", len(p), len(dst))
	}
	copy(dst, p)
	return nil
}

// Result is the outcome of one job. Err is nil on success; otherwise it matches
// ErrWorkerLost, ErrJobTimeout, ErrJobRejected or ErrPoolClosed.
type Result struct {
	Job            Job
	Detections     []Detection // in source pixels
	Worker, PID    int
	Pre, Run, Post time.Duration // measured in the worker
	Total          time.Duration // dispatch to result, as seen by the daemon
	Err            error
}

// WorkerState is the state of one worker slot of the pool.
type WorkerState string

// Worker states.
const (
	WorkerStarting   WorkerState = "starting"
	WorkerIdle       WorkerState = "idle"
	WorkerBusy       WorkerState = "busy"
	WorkerRestarting WorkerState = "restarting"
	WorkerStopped    WorkerState = "stopped"
)

// WorkerStatus is a snapshot of one worker slot.
type WorkerStatus struct {
	Index    int         `json:"index"`
	PID      int         `json:"pid"` // 0 while no process runs
	State    WorkerState `json:"state"`
	Provider string      `json:"provider"`  // the provider its process runs on, e.g. "cuda" or "cpu (fallback: ...)"
	InFlight int         `json:"in_flight"` // jobs sent to its process and not answered yet (at most Sessions*Slots)
	Jobs     uint64      `json:"jobs"`      // jobs answered (successfully or rejected)
	Lost     uint64      `json:"lost"`      // jobs lost to a crash, a protocol break or a timeout
	Restarts uint64      `json:"restarts"`  // processes started after the first
	Recycles uint64      `json:"recycles"`  // processes stopped between jobs for being over a memory limit
	RSSBytes int64       `json:"rss_bytes"` // resident memory of its process at the last sample; 0 before one
	GPUBytes int64       `json:"gpu_bytes"` // GPU memory of its process at the last sample; 0 without a GPU memory command
}
