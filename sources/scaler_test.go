package sources

import (
	"bytes"
	"sync"
	"testing"

	"github.com/visiond/visiond/internal/geom"
)

// TestScalersShared: decoders that share a Scalers letterbox a frame exactly as a decoder
// with its own Scalers does, reuse one scaler a step (drawing the frame in YUV, converting it
// to RGB24) for frames scaled one at a time, make one a step per frame scaled at once, and
// one a step per geometry; Trim frees those not taken since the last Trim; after Close a
// scaler put back is freed.
func TestScalersShared(t *testing.T) {
	aus, _ := sampleAUs(t, 10)
	p := &Scalers{}
	newDec := func(shared bool) *decoder {
		t.Helper()
		d, err := newDecoder(codecH264, DecoderCPU)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.close)
		if shared {
			d.scalers = p
		}
		return d
	}
	// scaleAll decodes the units with d, letterboxing every frame into a w x h input, and
	// returns the last picture.
	scaleAll := func(d *decoder, w, h int) []byte {
		t.Helper()
		pix := make([]byte, w*h*3)
		fillPad(pix)
		for i, au := range aus {
			if err := d.decode(au.data, int64(i), func(fw, fh int, _ int64) {
				if err := scaleRGB(d, pix, geom.NewLetterbox(fw, fh, w, h)); err != nil {
					t.Fatal(err)
				}
			}); err != nil {
				t.Fatal(err)
			}
		}
		return pix
	}
	want := scaleAll(newDec(false), 640, 640)
	if got := scaleAll(newDec(true), 640, 640); !bytes.Equal(got, want) {
		t.Fatal("a shared scaler letterboxed the frames differently from a decoder's own")
	}
	if st := p.Stats(); st.Made != 2 || st.Idle != 2 || st.Held != 0 {
		t.Fatalf("after one decoder's %d frames: %+v, want two scalers made (draw, convert), idle", len(aus), st)
	}
	scaleAll(newDec(true), 640, 640)
	if st := p.Stats(); st.Made != 2 {
		t.Fatalf("a second decoder, one frame at a time: %+v, want the first scalers reused", st)
	}
	scaleAll(newDec(true), 320, 320)
	if st := p.Stats(); st.Made != 4 || st.Idle != 4 {
		t.Fatalf("another geometry: %+v, want two more scalers", st)
	}

	// Frames scaled at once take a scaler each, and never more than there are.
	var wg sync.WaitGroup
	for range 4 {
		d := newDec(true)
		wg.Go(func() { scaleAll(d, 640, 640) })
	}
	wg.Wait()
	if st := p.Stats(); st.Made > 4+2*3 || st.Idle != int(st.Made) || st.Held != 0 {
		t.Fatalf("four decoders at once: %+v, want at most three more scalers a step, all idle", st)
	}

	p.Trim() // every idle one was taken since it was made: kept
	if st := p.Stats(); st.Idle != int(st.Made) {
		t.Fatalf("first Trim: %+v, want every scaler kept", st)
	}
	scaleAll(newDec(true), 320, 320)
	p.Trim() // only the 320x320 ones were taken since
	if st := p.Stats(); st.Idle != 2 {
		t.Fatalf("second Trim: %+v, want the two taken since the first kept", st)
	}
	p.Close()
	scaleAll(newDec(true), 640, 640)
	if st := p.Stats(); st.Idle != 0 || st.Held != 0 {
		t.Fatalf("after Close: %+v, want none kept", st)
	}
}
