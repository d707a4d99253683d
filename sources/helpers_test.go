package sources

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/internal/videofile"
)

const sampleFile = "vtest.h264.ts" // 768x576, H.264, 10 fps, GOP 10

// sampleAUs returns the first n access units of the sample file, in Annex-B form, with
// their random-access flags.
func sampleAUs(t testing.TB, n int) ([]accessUnit, [][]byte) {
	t.Helper()
	return fileAUs(t, testutil.Media(t, sampleFile), n)
}

// fileAUs is sampleAUs for the H.264 file at path.
func fileAUs(t testing.TB, path string, n int) ([]accessUnit, [][]byte) {
	t.Helper()
	r, err := videofile.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var aus []accessUnit
	var nalus [][]byte
	for len(aus) < n {
		au, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(aus) == 0 {
			nalus = au.NALUs
		}
		aus = append(aus, accessUnit{data: appendAnnexB(nil, au.NALUs), key: h264.IsRandomAccess(au.NALUs), at: time.Now()})
	}
	if len(aus) < n || !aus[0].key {
		t.Fatalf("%s: got %d access units, first random-access %v", path, len(aus), aus[0].key)
	}
	return aus, nalus
}

// checkFrame asserts what every frame of a camera must satisfy: its camera, the expected
// letterbox, a sequence number after the previous one (returned for the next call), a
// buffer of the model input's size and a real letterboxed picture.
func checkFrame(t *testing.T, i int, f *Frame, camera string, want geom.Letterbox, lastSeq uint64) uint64 {
	t.Helper()
	if f.Camera != camera || f.Letterbox != want {
		t.Fatalf("frame %d: camera %q letterbox %+v, want %q %+v", i, f.Camera, f.Letterbox, camera, want)
	}
	if f.Seq <= lastSeq {
		t.Fatalf("frame %d: Seq %d after %d", i, f.Seq, lastSeq)
	}
	checkLetterboxed(t, rgbOf(t, f), f.Letterbox)
	return f.Seq
}

// rgbOf returns the frame as the model takes it (WriteRGB), in a buffer of its own.
func rgbOf(t testing.TB, f *Frame) []byte {
	t.Helper()
	lb := f.Letterbox
	pix := make([]byte, lb.DstW*lb.DstH*3)
	if err := f.WriteRGB(pix); err != nil {
		t.Fatal(err)
	}
	return pix
}

// scaleRGB draws the decoder's current frame into dst, an RGB24 input letterboxed as lb
// (the padding left as it is), as a camera's frame goes: drawn in the format it is held in,
// then converted as WriteRGB does.
func scaleRGB(d *decoder, dst []byte, lb geom.Letterbox) error {
	if len(dst) != lb.DstW*lb.DstH*3 {
		return fmt.Errorf("buffer of %d bytes for a %dx%d input", len(dst), lb.DstW, lb.DstH)
	}
	pf, err := d.pixFormat(lb)
	if err != nil || pf == PixRGB24 {
		if err == nil {
			err = d.draw(dst, lb, pf)
		}
		return err
	}
	held := make([]byte, newYUVLayout(lb.ScaledW, lb.ScaledH).size+bufferSlack)
	if err := d.draw(held, lb, pf); err != nil {
		return err
	}
	return d.scalers.convertRGB(held, pf, dst, lb)
}
