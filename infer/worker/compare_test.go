package worker

import (
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gocv.io/x/gocv"
	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/infer/model"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
)

// videoFrames reads n frames of third_party/media/vtest.avi (pedestrians), one every step,
// letterboxed to size x size RGB24 with LetterboxImage.
func videoFrames(tb testing.TB, n, step, size int) [][]byte {
	tb.Helper()
	path := testutil.Media(tb, "vtest.avi")
	vc, err := gocv.VideoCaptureFile(path)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	defer vc.Close()
	img := gocv.NewMat()
	defer img.Close()
	var frames [][]byte
	for i := 0; len(frames) < n; i++ {
		if !vc.Read(&img) || img.Empty() {
			tb.Fatalf("%s: only %d frames", path, i)
		}
		if i%step != 0 {
			continue
		}
		pix := make([]byte, size*size*3)
		if _, err := LetterboxImage(img, size, size, pix); err != nil {
			tb.Fatal(err)
		}
		frames = append(frames, pix)
	}
	return frames
}

// TestCompareSameModel compares the model with itself: the same detections, so mAP 1.
func TestCompareSameModel(t *testing.T) {
	a := infertest.ThirdParty(t)
	frames := videoFrames(t, 3, 20, 640)
	opts := infer.DetectorOptions{Model: a.Model, Library: a.Library}
	ag, err := Compare(opts, opts, frames)
	if err != nil {
		t.Fatal(err)
	}
	if ag.MAP50 != 1 || ag.Frames != 3 || ag.RefPerFrame <= 0 || ag.CandPerFrame <= 0 || !(ag.SpeedRatio > 0) {
		t.Fatalf("agreement %+v", ag)
	}
	if s := ag.String(); !strings.Contains(s, "mAP@0.5 1.0000") || !strings.Contains(s, "on 3 frames") {
		t.Errorf("String() = %q", s)
	}
}

// TestCompareMissedDetections compares the model with itself at a higher confidence
// threshold, between the reference's median scores: the candidate keeps exactly the
// reference's detections scoring above it (NMS only ever suppresses a box under a better
// one), so it makes no false positive and its AP per class is the share of the
// reference's boxes it keeps.
func TestCompareMissedDetections(t *testing.T) {
	a := infertest.ThirdParty(t)
	frames := videoFrames(t, 3, 20, 640)
	ref := infer.DetectorOptions{Model: a.Model, Library: a.Library, Threads: 1}

	// What the reference finds, counted by hand.
	d, err := NewDetector(ref)
	if err != nil {
		t.Fatal(err)
	}
	var all []infer.Detection
	for _, f := range frames {
		dets, _, err := d.Detect(f, geom.NewLetterbox(640, 640, 640, 640), nil)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, dets...)
	}
	d.Close()
	scores := make([]float64, len(all))
	for i, x := range all {
		scores[i] = float64(x.Score)
	}
	slices.Sort(scores)
	if len(scores) < 4 || scores[len(scores)/2-1] == scores[len(scores)/2] {
		t.Fatalf("scores %v: the test needs two distinct middle ones", scores)
	}
	cand := ref
	cand.Confidence = (scores[len(scores)/2-1] + scores[len(scores)/2]) / 2
	total, kept := map[int]int{}, map[int]int{}
	for _, x := range all {
		total[x.ClassID]++
		if float64(x.Score) >= cand.Confidence {
			kept[x.ClassID]++
		}
	}
	var want float64
	for c, n := range total {
		want += float64(kept[c]) / float64(n)
	}
	want /= float64(len(total))

	ag, err := Compare(ref, cand, frames)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(ag.MAP50-want) > 1e-9 {
		t.Fatalf("MAP50 %v, want %v (reference boxes per class %v, kept %v)", ag.MAP50, want, total, kept)
	}
}

func TestCompareBadInput(t *testing.T) {
	a := infertest.ThirdParty(t)
	opts := infer.DetectorOptions{Model: a.Model, Library: a.Library}
	missing := opts
	missing.Model = t.TempDir() + "/missing.onnx"
	frame := make([]byte, 640*640*3)
	for _, tc := range []struct {
		name      string
		ref, cand infer.DetectorOptions
		frames    [][]byte
		want      string
	}{
		{"no frames", opts, opts, nil, "compare: no frames"},
		{"short frame", opts, opts, [][]byte{frame, frame[:10]}, "frame 1 has 10 bytes, 640x640 RGB24 needs 1228800"},
		{"missing reference", missing, opts, [][]byte{frame}, "reference: model: "},
		{"missing candidate", opts, missing, [][]byte{frame}, "candidate: model: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compare(tc.ref, tc.cand, tc.frames)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
			var ce *CandidateError
			if errors.As(err, &ce) != strings.HasPrefix(tc.name, "missing candidate") {
				t.Errorf("CandidateError %v for %q", errors.As(err, &ce), tc.name)
			}
		})
	}
}

// convertedFP16 writes yolov8n.onnx converted by model.ConvertFP16 to a temporary file.
func convertedFP16(tb testing.TB, a infertest.Assets) string {
	tb.Helper()
	return convertFP16File(tb, a.Model)
}

// convertFP16File writes the model at path converted by model.ConvertFP16 to a temporary
// file.
func convertFP16File(tb testing.TB, path string) string {
	tb.Helper()
	m, err := model.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := model.ConvertFP16(m); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), "fp16-"+filepath.Base(path))
	if err := model.Save(m, out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestFP16Conversion: the model converted by model.ConvertFP16 loads in the Detector with
// float32 input and output, finds messi5.jpg's person and ball, and agrees with the fp32
// model on the pedestrians of vtest.avi (mAP@0.5 at least 0.99).
func TestFP16Conversion(t *testing.T) {
	a := infertest.ThirdParty(t)
	f16 := convertedFP16(t, a)
	d, err := NewDetector(infer.DetectorOptions{Model: f16, Library: a.Library, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d.io.inF16 || d.io.outF16 || len(d.Model().Classes) != 80 {
		t.Errorf("converted model: float16 input %v, output %v, %d classes", d.io.inF16, d.io.outF16, len(d.Model().Classes))
	}
	pix, lb, w, h := messiFrame(t, a)
	dets, _, err := d.Detect(pix, lb, nil)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	infertest.CheckMessi(t, dets, w, h)

	frames := videoFrames(t, 6, 15, 640)
	ag, err := Compare(infer.DetectorOptions{Model: a.Model, Library: a.Library}, infer.DetectorOptions{Model: f16, Library: a.Library}, frames)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fp16 against fp32: %s", ag)
	if ag.MAP50 < 0.99 {
		t.Errorf("mAP@0.5 %v, want at least 0.99", ag.MAP50)
	}

	// The other layouts (testmodels_test.go: yolov8n's graph with a YOLOv5 or an
	// end-to-end head: Transpose, Slice, Concat, ReduceMax, ArgMax, Cast, TopK, Gather).
	for name, path := range map[string]string{"yolov5 layout": yolov5Model(t, a), "end-to-end layout": e2eModel(t, a)} {
		ag, err := Compare(infer.DetectorOptions{Model: path, Library: a.Library}, infer.DetectorOptions{Model: convertFP16File(t, path), Library: a.Library}, frames[:3])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: fp16 against fp32: %s", name, ag)
		if ag.MAP50 < 0.99 {
			t.Errorf("%s: mAP@0.5 %v, want at least 0.99", name, ag.MAP50)
		}
	}
}

// BenchmarkDetectConverted: one Detect per frame of vtest.avi on one thread, the fp32
// model against its model.ConvertFP16 conversion, each also with the uint8 prelude
// (model.AddUint8Prelude), on ONNX Runtime's CPU provider. pre-ms/op is the input
// preparation in Go (infer.Timings.Pre); cpu-ms/op the CPU time of the process (user and system) per
// frame, which other work on a shared machine inflates less than the wall time.
func BenchmarkDetectConverted(b *testing.B) {
	a := infertest.ThirdParty(b)
	frames := videoFrames(b, 4, 15, 640)
	lb := geom.NewLetterbox(640, 640, 640, 640)
	f16 := convertedFP16(b, a)
	for _, bc := range []struct{ name, model string }{
		{"fp32", a.Model}, {"fp16", f16}, {"fp32-uint8", withPrelude(b, a.Model)}, {"fp16-uint8", withPrelude(b, f16)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			d, err := NewDetector(infer.DetectorOptions{Model: bc.model, Library: a.Library, Threads: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			dets := make([]infer.Detection, 0, 300)
			if dets, _, err = d.Detect(frames[0], lb, dets); err != nil { // warm-up
				b.Fatal(err)
			}
			i := 0
			var pre time.Duration
			cpu0 := compareCPUTime(b)
			for b.Loop() {
				var tm infer.Timings
				if dets, tm, err = d.Detect(frames[i%len(frames)], lb, dets); err != nil {
					b.Fatal(err)
				}
				pre += tm.Pre
				i++
			}
			b.ReportMetric(float64(pre)/float64(time.Millisecond)/float64(b.N), "pre-ms/op")
			b.ReportMetric(float64(compareCPUTime(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

// withPrelude writes the model at path with model.AddUint8Prelude to a temporary file.
func withPrelude(tb testing.TB, path string) string {
	tb.Helper()
	m, err := model.Load(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := model.AddUint8Prelude(m); err != nil {
		tb.Fatal(err)
	}
	out := filepath.Join(tb.TempDir(), "prelude-"+filepath.Base(path))
	if err := model.Save(m, out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestUint8Prelude: a model with the uint8 prelude takes the frame as it is (the worker
// copies it) and finds what the original finds, on messi5.jpg and on vtest.avi; with the
// fp16 conversion too.
func TestUint8Prelude(t *testing.T) {
	a := infertest.ThirdParty(t)
	ref, _, w, h := detectModel(t, a, a.Model)
	pre := withPrelude(t, a.Model)
	dets, info, _, _ := detectModel(t, a, pre)
	if info.InputW != 640 || info.InputH != 640 || len(info.Classes) != 80 {
		t.Fatalf("model info %+v", info)
	}
	infertest.CheckMessi(t, dets, w, h)
	infertest.SameDetections(t, dets, ref, 0.5, 0.002)

	frames := videoFrames(t, 4, 15, 640)
	opts := infer.DetectorOptions{Model: a.Model, Library: a.Library}
	for _, cand := range []string{pre, withPrelude(t, convertedFP16(t, a))} {
		ag, err := Compare(opts, infer.DetectorOptions{Model: cand, Library: a.Library}, frames)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s against fp32: %s", filepath.Base(cand), ag)
		if ag.MAP50 < 0.99 {
			t.Errorf("%s: mAP@0.5 %v, want at least 0.99", cand, ag.MAP50)
		}
	}
}

// compareCPUTime is the CPU time (user and system) this process has used.
func compareCPUTime(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
