package worker

import (
	"math"
	"slices"
	"strings"
	"testing"

	"gocv.io/x/gocv"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
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
		})
	}
}
