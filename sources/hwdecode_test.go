package sources

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/samplecam"
)

// cudaRequired makes the tests of DecoderCUDA fail, rather than check the error of a machine
// without one, when this machine cannot decode on an NVIDIA GPU (set it where there is one).
const cudaRequired = "VISIOND_TEST_CUDA"

// haveCUDA reports whether a CUDA decoder opens here; without one, it returns the error,
// unless cudaRequired is set, which fails the test.
func haveCUDA(t testing.TB) (bool, error) {
	t.Helper()
	dec, err := newDecoder(codecH264, DecoderCUDA)
	if err != nil {
		if os.Getenv(cudaRequired) != "" {
			t.Fatalf("%s is set, but: %v", cudaRequired, err)
		}
		return false, err
	}
	dec.close()
	return true, nil
}

// TestCameraDecoderCUDA runs a camera of decoder cuda against a real RTSP server: where the
// GPU's decoder opens, frames arrive letterboxed as on the CPU; where none can be made (no
// GPU, no driver), they arrive all the same from a CPU decoder in its place, the status says
// so and why, and the session tries the GPU again every gpuRetry (issue 39, item 6).
func TestCameraDecoderCUDA(t *testing.T) {
	var logs testutil.LogBuffer
	srv := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"v": testutil.Media(t, sampleFile)}, Logger: logs.Logger()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	frames := make(chan *Frame, 8)
	cam := &Camera{ID: "gpu", URL: srv.URL("v"), Decoder: DecoderCUDA, InputW: 640, InputH: 640, Logger: logs.Logger(),
		OnFrame: func(f *Frame) {
			select {
			case frames <- f:
			default:
				f.Release()
			}
		}}
	have, openErr := haveCUDA(t)
	cam.gpuRetry = time.Second
	cam.Start()
	defer cam.Close()

	want := geom.Letterbox{SrcW: 768, SrcH: 576, DstW: 640, DstH: 640, ScaledW: 640, ScaledH: 480, PadY: 80}
	if !have {
		t.Logf("no CUDA decoder here (%v): checking the fallback to the CPU", openErr)
		testutil.WaitFor(t, time.Minute, "the GPU tried again", func() bool {
			return strings.Contains(logs.String(), "the GPU decoder still cannot be made")
		})
	}
	var lastSeq uint64
	for i := range 8 {
		select {
		case f := <-frames:
			lastSeq = checkFrame(t, i, f, "gpu", want, lastSeq)
			f.Release()
		case <-time.After(time.Minute):
			t.Fatalf("frame %d did not arrive; status %+v\nlogs:\n%s", i, cam.Status(), logs.String())
		}
	}
	st := cam.Status()
	switch {
	case have && (st.Decoder != DecoderCUDA || st.DecoderFallback != "" || st.DecoderFallbacks != 0):
		t.Errorf("status %+v: want decoding on the GPU, no fallback", st)
	case !have && (st.Decoder != DecoderCPU || !strings.Contains(st.DecoderFallback, "decoder cuda") || st.DecoderFallbacks != 1 || st.State != StateOnline):
		t.Errorf("status %+v: want online, decoding on the CPU since one fallback, saying why (decoder cuda ...)", st)
	}
}

// TestDecoderCUDAMatchesCPU decodes the same access units on the GPU and on the CPU: H.264
// decoding is exact, so the letterboxed pictures differ only by the scaler's input layout
// (NV12 from NVDEC, planar 4:2:0 from libavcodec), within rounding. Two streams: the sample
// (one reference frame, no B-frames) and one of 4 reference frames and 3 B-frames, whose
// pictures NVDEC must keep more of: the GPU's surfaces, sized to what the stream needs
// (sized_frames), must not run out.
func TestDecoderCUDAMatchesCPU(t *testing.T) {
	if have, err := haveCUDA(t); !have {
		t.Skipf("no CUDA decoder here: %v", err)
	}
	sized, major := surfacesSized()
	t.Logf("surfaces sized by visiond: %v (libavcodec %d)", sized, major)
	t.Run("sample", func(t *testing.T) {
		aus, _ := sampleAUs(t, 20)
		compareGPUWithCPU(t, aus, 768, 576)
	})
	t.Run("bframes", func(t *testing.T) {
		aus, _ := fileAUs(t, bframesClip(t), 60)
		compareGPUWithCPU(t, aus, 640, 360)
	})
}

// bframesClip is an H.264 clip with 4 reference frames and 3 B-frames: the file named by
// VISIOND_TEST_BFRAMES (for a machine without ffmpeg), else made by ffmpeg from vtest.avi.
func bframesClip(t *testing.T) string {
	if p := os.Getenv("VISIOND_TEST_BFRAMES"); p != "" {
		return p
	}
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("no ffmpeg here to make the clip, and VISIOND_TEST_BFRAMES is not set")
	}
	return encodeClip(t, "bframes.ts", "-t", "6", "-vf", "scale=640:360", "-c:v", "libx264", "-preset", "fast",
		"-bf", "3", "-x264-params", "ref=4:bframes=3:keyint=30")
}

// compareGPUWithCPU decodes aus (w x h) on both and compares the letterboxed pictures.
func compareGPUWithCPU(t *testing.T, aus []accessUnit, w, h int) {
	lb := geom.NewLetterbox(w, h, 640, 640)
	pictures := func(hw Decoder) [][]byte {
		dec, err := newDecoder(codecH264, hw)
		if err != nil {
			t.Fatal(err)
		}
		defer dec.close()
		if hw == DecoderCUDA && !dec.ownStream() {
			t.Error("the GPU's decoder has no CUDA stream of its own")
		}
		var out [][]byte
		for i, au := range aus {
			if err := dec.decode(au.data, int64(i), func(w, h int, _ int64) {
				pix := make([]byte, 640*640*3)
				fillPad(pix)
				if err := scaleRGB(dec, pix, lb); err != nil {
					t.Fatalf("%s: %v", hw, err)
				}
				if hw == DecoderCUDA && !dec.pinnedHost() {
					t.Fatal("the GPU's frame was not copied into page-locked host memory")
				}
				out = append(out, pix)
			}); err != nil {
				t.Fatalf("%s: access unit %d: %v", hw, i, err)
			}
		}
		return out
	}
	gpu, cpu := pictures(DecoderCUDA), pictures(DecoderCPU)
	// NVDEC may hold a frame or two back until more units come (its own delay).
	if len(gpu) < len(cpu)-3 || len(gpu) == 0 {
		t.Fatalf("%d frames from the GPU, %d from the CPU", len(gpu), len(cpu))
	}
	for i := range gpu {
		checkLetterboxed(t, gpu[i], lb)
		var sum float64
		for k := range gpu[i] {
			sum += math.Abs(float64(gpu[i][k]) - float64(cpu[i][k]))
		}
		if mean := sum / float64(len(gpu[i])); mean > 2 {
			t.Fatalf("frame %d: GPU and CPU pictures differ by %.2f per byte on average", i, mean)
		}
	}
	t.Logf("%d frames alike", len(gpu))
}

// BenchmarkNVDECOpen measures what a camera's decoder on the GPU costs to keep and to open.
// Memory: for libavcodec's own surfaces, then for visiond's sized ones (with frames copied to
// page-locked host memory on a stream of the decoder's own, as cameras do; then to pageable
// memory; then on the default stream), it opens decoders in steps up to
// VISIOND_BENCH_DECODERS (40), each decoding the sample's first GOP and letterboxing its
// frames (so that its NVDEC decoder and host copy exist), and reads this process's GPU memory
// (nvidia-smi), resident host memory and the part of it in the driver's mappings
// (/proc/self/smaps) after each step; the MiB per added decoder is over the steps after the
// first, so the CUDA context counts once. Opening: VISIOND_BENCH_OPENS (32) decoders opened by 1, 4
// and 16 goroutines at once, each open timed from newDecoder to its first frame (what a
// DecoderGate slot covers). It skips where no CUDA decoder opens.
func BenchmarkNVDECOpen(b *testing.B) {
	if have, err := haveCUDA(b); !have {
		b.Skipf("no CUDA decoder here: %v", err)
	}
	most, opens := 40, 32
	testutil.EnvInts(b, map[string]*int{"VISIOND_BENCH_DECODERS": &most, "VISIOND_BENCH_OPENS": &opens})
	aus, _ := sampleAUs(b, 10)
	lb := geom.NewLetterbox(768, 576, 640, 640)
	open := func(opts decoderOpts) (*decoder, error) {
		pix := make([]byte, 640*640*3) // an open's own: the opens below run at once
		dec, err := newDecoderWith(codecH264, DecoderCUDA, opts)
		if err != nil {
			return nil, err
		}
		frames := 0
		var scaleErr error
		for i, au := range aus {
			if err := dec.decode(au.data, int64(i), func(int, int, int64) {
				frames++
				if scaleErr == nil {
					scaleErr = scaleRGB(dec, pix, lb) // as a camera does: its host copy exists
				}
			}); err != nil || scaleErr != nil {
				dec.close()
				return nil, fmt.Errorf("access unit %d: %w", i, cmp.Or(err, scaleErr))
			}
		}
		if frames == 0 {
			dec.close()
			return nil, errors.New("no frame")
		}
		return dec, nil
	}
	sized, major := surfacesSized()
	b.Logf("surfaces sized by visiond: %v (libavcodec %d)", sized, major)
	modes := []struct {
		name string
		opts decoderOpts
	}{
		{"libavcodec", decoderOpts{libavSurfaces: true}},
		{"sized", decoderOpts{}},
		{"sized-pageable", decoderOpts{pageable: true}},
		{"sized-default-stream", decoderOpts{defaultStream: true}},
	}
	if only := os.Getenv("VISIOND_BENCH_NVDEC_MODE"); only != "" { // one mode a process: none reuses another's freed memory
		modes = slices.DeleteFunc(modes, func(m struct {
			name string
			opts decoderOpts
		}) bool {
			return m.name != only
		})
	}
	for range b.N {
		for _, mode := range modes {
			name := mode.name
			var decs []*decoder
			var first, last [3]float64 // GPU, host RSS, the driver's mappings
			for _, n := range []int{1, 10, most} {
				for len(decs) < n {
					dec, err := open(mode.opts)
					if err != nil {
						b.Fatalf("%s: decoder %d: %v", name, len(decs)+1, err)
					}
					decs = append(decs, dec)
				}
				gpu, err := testutil.OwnGPUMiB()
				if err != nil {
					b.Fatal(err)
				}
				rss, driver, err := testutil.OwnHostMiB()
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("%s: %d decoders, GPU %.0f MiB, host RSS %.0f MiB of which the driver's mappings %.0f", name, n, gpu, rss, driver)
				if n == 1 {
					first = [3]float64{gpu, rss, driver}
				}
				last = [3]float64{gpu, rss, driver}
			}
			per := func(i int) float64 { return (last[i] - first[i]) / float64(most-1) }
			b.ReportMetric(per(0), "MiB/decoder-"+name)
			b.ReportMetric(per(1), "host-MiB/decoder-"+name)
			b.ReportMetric(per(2), "driver-MiB/decoder-"+name)
			for _, d := range decs {
				d.close()
			}
		}
		for _, par := range []int{1, 4, 16} {
			var mu sync.Mutex
			var total, worst time.Duration
			var wg sync.WaitGroup
			next := make(chan struct{}, opens)
			for range opens {
				next <- struct{}{}
			}
			close(next)
			for range par {
				wg.Go(func() {
					for range next {
						t0 := time.Now()
						dec, err := open(decoderOpts{})
						d := time.Since(t0)
						if err != nil {
							b.Error(err)
							return
						}
						dec.close()
						mu.Lock()
						total += d
						worst = max(worst, d)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(total.Milliseconds())/float64(opens), fmt.Sprintf("ms/open-%d-at-once", par))
			b.ReportMetric(float64(worst.Milliseconds()), fmt.Sprintf("ms-worst-open-%d-at-once", par))
		}
	}
}

// BenchmarkDecodeCUDA measures a frame decoded on the GPU (NVDEC), copied to the host and
// letterboxed into 640x640, per frame, with the CPU time it takes (the point of decoding
// there); the CPU's decode and letterbox are BenchmarkDecode and BenchmarkScaleLetterbox.
// It skips where no CUDA decoder opens.
func BenchmarkDecodeCUDA(b *testing.B) {
	if have, err := haveCUDA(b); !have {
		b.Skipf("no CUDA decoder here: %v", err)
	}
	aus, _ := sampleAUs(b, 100) // ten whole GOPs: looping restarts at an IDR
	dec, err := newDecoder(codecH264, DecoderCUDA)
	if err != nil {
		b.Fatal(err)
	}
	defer dec.close()
	lb := geom.NewLetterbox(768, 576, 640, 640)
	pix := make([]byte, 640*640*3)
	fillPad(pix)
	frames := 0
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := dec.decode(aus[i%len(aus)].data, int64(i), func(int, int, int64) {
			if err := scaleRGB(dec, pix, lb); err != nil {
				b.Fatal(err)
			}
			frames++
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if frames == 0 {
		b.Fatal("no frame")
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/1000/float64(frames), "ms-cpu/frame")
}

// BenchmarkNVDECDecode measures how many frames the GPU's decoder gives many cameras at once:
// N decoders on N goroutines, each decoding the sample (10 fps, every frame a reference)
// in a loop as fast as it can, and letterboxing every other frame (copy to the host, then
// the scaler), as a camera analysed at half its stream's rate does; for N of 1, 50, 150 and
// 250 with every decoder free to call at once, then 250 with at most 16 and 48 decode calls
// under way at once; VISIOND_BENCH_SECONDS (5) each. It does so for each of the decoders'
// setups in VISIOND_BENCH_MODES ("pinned pageable default"): pinned, as the daemon's (work on
// a stream of the decoder's own, frames copied into page-locked host memory); pageable (the
// stream, but pageable memory); default (the context's default stream and pageable memory,
// as before either). It reports the frames decoded per second in all and the p99 of one
// decode call (with a bound, the wait for it included). It skips where no CUDA decoder opens.
func BenchmarkNVDECDecode(b *testing.B) {
	if have, err := haveCUDA(b); !have {
		b.Skipf("no CUDA decoder here: %v", err)
	}
	seconds := 5
	testutil.EnvInts(b, map[string]*int{"VISIOND_BENCH_SECONDS": &seconds})
	modes := map[string]decoderOpts{"pinned": {}, "pageable": {pageable: true}, "default": {defaultStream: true}}
	names := "pinned pageable default"
	if v := os.Getenv("VISIOND_BENCH_MODES"); v != "" {
		names = v
	}
	for _, name := range strings.Fields(names) {
		opts, ok := modes[name]
		if !ok {
			b.Fatalf("VISIOND_BENCH_MODES: %q is none of pinned, pageable, default", name)
		}
		b.Run(name, func(b *testing.B) { benchNVDECDecode(b, opts, seconds) })
	}
}

func benchNVDECDecode(b *testing.B, opts decoderOpts, seconds int) {
	aus, _ := sampleAUs(b, 100)
	lb := geom.NewLetterbox(768, 576, 640, 640)
	runs := []struct{ n, atOnce int }{{1, 0}, {50, 0}, {150, 0}, {250, 0}, {250, 16}, {250, 48}}
	decs := make([]*decoder, 250)
	for i := range decs {
		dec, err := newDecoderWith(codecH264, DecoderCUDA, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer dec.close()
		decs[i] = dec
	}
	for range b.N {
		for _, run := range runs {
			var slots chan struct{}
			if run.atOnce > 0 {
				slots = make(chan struct{}, run.atOnce)
			}
			var mu sync.Mutex
			var frames int
			var calls []float64
			var wg sync.WaitGroup
			stop := time.Now().Add(time.Duration(seconds) * time.Second)
			t0 := time.Now()
			for _, dec := range decs[:run.n] {
				wg.Go(func() {
					pix := make([]byte, 640*640*3)
					fillPad(pix)
					n, own := 0, make([]float64, 0, 1024)
					for i := 0; time.Now().Before(stop); i++ {
						c0 := time.Now()
						if slots != nil {
							slots <- struct{}{}
						}
						err := dec.decode(aus[i%len(aus)].data, int64(i), func(int, int, int64) {
							if n++; n%2 == 0 {
								if err := scaleRGB(dec, pix, lb); err != nil {
									b.Error(err)
								}
							}
						})
						if slots != nil {
							<-slots
						}
						own = append(own, float64(time.Since(c0).Microseconds())/1000)
						if err != nil {
							b.Error(err)
							return
						}
					}
					mu.Lock()
					frames += n
					calls = append(calls, own...)
					mu.Unlock()
				})
			}
			wg.Wait()
			secs := time.Since(t0).Seconds()
			slices.Sort(calls)
			p99 := 0.0
			if len(calls) > 0 {
				p99 = calls[len(calls)*99/100]
			}
			name := fmt.Sprintf("%d-decoders", run.n)
			if run.atOnce > 0 {
				name += fmt.Sprintf("-%d-at-once", run.atOnce)
			}
			b.Logf("%s: %.0f frames/s in all, %.1f each; a decode call p99 %.2f ms", name, float64(frames)/secs, float64(frames)/secs/float64(run.n), p99)
			b.ReportMetric(float64(frames)/secs, "frames/s-"+name)
			b.ReportMetric(p99, "ms-p99-call-"+name)
		}
	}
}
