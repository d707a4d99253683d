package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/internal/geom"
)

// Agreement is how a candidate model (a conversion: fp16, int8) compares with its reference
// (the float32 model it was made from) on the same frames.
type Agreement struct {
	// MAP50 is model.MAP50 of the candidate's detections against the reference's.
	MAP50 float64
	// Frames is the number of frames both models ran on.
	Frames int
	// RefPerFrame and CandPerFrame are the mean time of one Detector.Detect per frame
	// (input conversion, session run, decoding and NMS), after one warm-up run.
	RefPerFrame, CandPerFrame time.Duration
	// SpeedRatio is RefPerFrame / CandPerFrame: above 1 the candidate is faster.
	SpeedRatio float64
}

// String renders the agreement as `visiond model` prints it.
func (a Agreement) String() string {
	return fmt.Sprintf("mAP@0.5 %.4f against the reference on %d frames; %.1f ms per frame against %.1f ms: speed ratio %.2fx",
		a.MAP50, a.Frames, ms(a.CandPerFrame), ms(a.RefPerFrame), a.SpeedRatio)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// CandidateError is Compare's error when the reference ran and the candidate failed (to
// load, or on a frame): the candidate is at fault, not the options they share.
type CandidateError struct{ Err error }

func (e *CandidateError) Error() string { return e.Err.Error() }
func (e *CandidateError) Unwrap() error { return e.Err }

// Compare runs the reference and the candidate model on the same frames through the
// Detector the workers use, one model after the other (never both at once, so that neither
// slows the other), and scores the candidate's detections against the reference's
// (model.MAP50). Each frame is a letterboxed RGB24 HWC frame of the models' input size
// (LetterboxImage, or the daemon's sources); detections are compared on that canvas.
//
// Options with Threads 0 run on one thread, so that the speed ratio is that of one
// saturated worker of the CPU pool's default shape; set Threads to compare otherwise. Both
// models must take the same input size. An error after the reference ran is a
// *CandidateError.
func Compare(ref, cand infer.DetectorOptions, frames [][]byte) (Agreement, error) {
	if len(frames) == 0 {
		return Agreement{}, errors.New("compare: no frames")
	}
	refDets, refTime, w, h, err := detectAll("reference", ref, frames, 0, 0)
	if err != nil {
		return Agreement{}, err
	}
	candDets, candTime, _, _, err := detectAll("candidate", cand, frames, w, h)
	if err != nil {
		return Agreement{}, &CandidateError{Err: err}
	}
	a := Agreement{
		MAP50:        model.MAP50(refDets, candDets),
		Frames:       len(frames),
		RefPerFrame:  refTime / time.Duration(len(frames)),
		CandPerFrame: candTime / time.Duration(len(frames)),
	}
	if a.CandPerFrame > 0 {
		a.SpeedRatio = float64(a.RefPerFrame) / float64(a.CandPerFrame)
	}
	return a, nil
}

// detectAll opens a Detector with opts, checks that its input is wantW x wantH (unless
// those are 0), runs it once to warm up, then on every frame, and returns the detections
// per frame, the time all frames took and the input size.
func detectAll(role string, opts infer.DetectorOptions, frames [][]byte, wantW, wantH int) (dets [][]infer.Detection, total time.Duration, w, h int, err error) {
	if opts.Threads == 0 {
		opts.Threads = 1
	}
	d, err := NewDetector(opts)
	if err != nil {
		return nil, 0, 0, 0, fmt.Errorf("compare: %s: %w", role, err)
	}
	defer d.Close()
	m := d.Model()
	w, h = m.InputW, m.InputH
	if wantW != 0 && (w != wantW || h != wantH) {
		return nil, 0, 0, 0, fmt.Errorf("compare: candidate %s takes %dx%d input, the reference %dx%d", opts.Model, w, h, wantW, wantH)
	}
	// Detections on the canvas itself: the frame is its own source.
	lb := geom.NewLetterbox(w, h, w, h)
	for i, f := range frames {
		if len(f) != w*h*3 {
			return nil, 0, 0, 0, fmt.Errorf("compare: frame %d has %d bytes, %dx%d RGB24 needs %d", i, len(f), w, h, w*h*3)
		}
	}
	buf := make([]infer.Detection, 0, infer.DefaultMaxDet)
	if _, _, err := d.Detect(frames[0], lb, buf); err != nil {
		return nil, 0, 0, 0, fmt.Errorf("compare: %s %s: warm-up: %w", role, opts.Model, err)
	}
	dets = make([][]infer.Detection, len(frames))
	for i, f := range frames {
		t0 := time.Now()
		got, _, err := d.Detect(f, lb, buf)
		total += time.Since(t0)
		if err != nil {
			return nil, 0, 0, 0, fmt.Errorf("compare: %s %s: frame %d: %w", role, opts.Model, i, err)
		}
		dets[i] = append([]infer.Detection(nil), got...)
	}
	return dets, total, w, h, nil
}
