package sources

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/internal/videofile"
	"github.com/visiond/visiond/sources/capture"
	"github.com/visiond/visiond/sources/samplecam"
)

// Decode benchmarks. Each sub-benchmark encodes a 3 s clip of the sample (10 fps, keyframe
// every second, no B-frames, as cameras send) at the named size and codec, then measures
// the CPU time of decoding it on one thread, here and in `ffmpeg -threads 1 -f null`.

type benchClip struct {
	name, codec, encoder string
	w, h                 int
}

var benchClips = []benchClip{
	{"H264-720p", codecH264, "libx264", 1280, 720},
	{"H264-1080p", codecH264, "libx264", 1920, 1080},
	{"H265-720p", codecH265, "libx265", 1280, 720},
	{"H265-1080p", codecH265, "libx265", 1920, 1080},
}

func (c benchClip) encode(b *testing.B) (string, []accessUnit) {
	b.Helper()
	args := []string{"-vf", fmt.Sprintf("scale=%d:%d", c.w, c.h), "-c:v", c.encoder, "-preset", "veryfast", "-g", "10"}
	if c.encoder == "libx265" {
		args = append(args, "-x265-params", "log-level=error")
	}
	clip := encodeClip(b, c.name+".ts", args...)
	return clip, clipAUs(b, clip, c.codec)
}

// clipAUs reads the access units of an MPEG-TS clip, with their random-access and
// non-reference flags, and their pts (90 kHz) in at as unix ns.
func clipAUs(b testing.TB, clip, codec string) []accessUnit {
	b.Helper()
	r, err := videofile.Open(clip)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	track := &videoTrack{codec: codec}
	var aus []accessUnit
	for {
		au, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		key := track.isKey(au.NALUs)
		aus = append(aus, accessUnit{data: appendAnnexB(nil, au.NALUs), key: key, nonRef: !key && track.isNonRef(au.NALUs),
			at: time.Unix(0, au.PTS)})
	}
	return aus
}

// encodeBClip encodes a 3 s clip of the sample like encodeClip, at fps frames per second and
// the given size, with up to bframes B-frames in a row (0: none) and a keyframe every second.
func encodeBClip(tb testing.TB, name, encoder string, w, h, fps, bframes int) string {
	tb.Helper()
	ffmpeg := testutil.LookPath(tb, "ffmpeg")
	out := filepath.Join(tb.TempDir(), name)
	args := []string{"-v", "error", "-i", testutil.Media(tb, "vtest.avi"), "-t", "3",
		"-vf", fmt.Sprintf("fps=%d,scale=%d:%d", fps, w, h), "-c:v", encoder, "-preset", "veryfast",
		"-g", strconv.Itoa(fps), "-bf", strconv.Itoa(bframes), "-pix_fmt", "yuv420p"}
	if encoder == "libx265" {
		args = append(args, "-x265-params", fmt.Sprintf("log-level=error:bframes=%d", bframes))
	}
	args = append(args, "-f", "mpegts", out)
	if b, err := exec.Command(ffmpeg, args...).CombinedOutput(); err != nil {
		tb.Fatalf("ffmpeg %v: %v\n%s", args, err, b)
	}
	return out
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// processCPU is the CPU time this process has used, on every thread (a GPU driver's too).
func processCPU(tb testing.TB) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// decodeCPU decodes the access units (key ones only if keyOnly) n times over and returns
// the CPU time and the number of frames decoded.
func decodeCPU(b *testing.B, codec string, aus []accessUnit, n int, keyOnly bool) (time.Duration, int) {
	cpu, frames, _ := cameraCPU(b, codec, aus, n, keyOnly, false, 0)
	return cpu, frames
}

// cameraCPU decodes the access units n times over as a camera does (key ones only if
// keyOnly; non-reference ones not decoded if skipNonRef) and returns the CPU time, the
// frames decoded and the frames scaled. With a non-zero analysed interval (in the clip's
// pts units, at) it also scales into a 640x640 letterbox the first frame at or after each
// interval, as many as the camera's analysed fps takes. It fails on a frame out of display
// order.
func cameraCPU(b *testing.B, codec string, aus []accessUnit, n int, keyOnly, skipNonRef bool, interval int64) (time.Duration, int, int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dec, err := newDecoder(codec, DecoderCPU)
	if err != nil {
		b.Fatal(err)
	}
	defer dec.close()
	pix := make([]byte, 640*640*3)
	frames, scaled := 0, 0
	var span, last, due int64 = 0, -1, 0
	for _, au := range aus {
		span = max(span, au.at.UnixNano()+1)
	}
	onFrame := func(w, h int, pts int64) {
		frames++
		if pts <= last {
			b.Fatalf("frame pts %d after %d: out of display order", pts, last)
		}
		last = pts
		if interval > 0 && pts >= due {
			if err := scaleRGB(dec, pix, geom.NewLetterbox(w, h, 640, 640)); err != nil {
				b.Fatal(err)
			}
			scaled++
			for due <= pts {
				due += interval
			}
		}
	}
	start := threadCPU()
	for i := 0; i < n; i++ {
		loop := int64(i) * span // pts keep growing across loops
		for _, au := range aus {
			if keyOnly && !au.key {
				continue
			}
			dec.skipNonRef(skipNonRef && au.nonRef)
			if err := dec.decode(au.data, loop+au.at.UnixNano(), onFrame); err != nil {
				b.Fatal(err)
			}
		}
	}
	return threadCPU() - start, frames, scaled
}

// ffmpegCPU returns the CPU time of `ffmpeg -threads 1 -i clip -f null -` decoding the clip
// loops times, minus that of decoding one frame (start-up and probing), and the frames.
func ffmpegCPU(b *testing.B, clip string, loops, frames int) time.Duration {
	run := func(extra ...string) time.Duration {
		args := append([]string{"-v", "error", "-threads", "1", "-stream_loop", strconv.Itoa(loops - 1), "-i", clip}, extra...)
		args = append(args, "-f", "null", "-")
		cmd := exec.Command("ffmpeg", args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("ffmpeg: %v\n%s", err, out)
		}
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	all, one := run(), run("-frames:v", "1")
	return (all - one) * time.Duration(frames) / time.Duration(frames-1)
}

// BenchmarkDecodeVsFFmpeg reports visiond's decode CPU per frame, ffmpeg's on the same
// clip, and their ratio (goal <= 1.1). b.N is the number of times the clip is decoded.
func BenchmarkDecodeVsFFmpeg(b *testing.B) {
	for _, c := range benchClips {
		b.Run(c.name, func(b *testing.B) {
			clip, aus := c.encode(b)
			b.ResetTimer()
			ours, frames := decodeCPU(b, c.codec, aus, b.N, false)
			b.StopTimer()
			theirs := ffmpegCPU(b, clip, b.N, frames)
			b.ReportMetric(float64(ours.Microseconds())/1000/float64(frames), "ms-cpu/frame")
			b.ReportMetric(float64(theirs.Microseconds())/1000/float64(frames), "ffmpeg-ms-cpu/frame")
			b.ReportMetric(float64(ours)/float64(theirs), "ratio")
		})
	}
}

// BenchmarkKeyframesOnly reports decode CPU per second of video with decode: all and with
// decode: keyframes (1 keyframe per second, as in the clips), and the saving.
func BenchmarkKeyframesOnly(b *testing.B) {
	for _, c := range benchClips {
		b.Run(c.name, func(b *testing.B) {
			_, aus := c.encode(b)
			b.ResetTimer()
			all, _ := decodeCPU(b, c.codec, aus, b.N, false)
			key, _ := decodeCPU(b, c.codec, aus, b.N, true)
			seconds := float64(b.N*len(aus)) / 10 // 10 fps
			b.ReportMetric(float64(all.Microseconds())/1000/seconds, "ms-cpu/s-all")
			b.ReportMetric(float64(key.Microseconds())/1000/seconds, "ms-cpu/s-keyframes")
			b.ReportMetric(100*(1-float64(key)/float64(all)), "%saved")
		})
	}
}

// BenchmarkSkipNonRef reports the decode CPU of one camera analysed at 5 fps (every frame
// decoded, the analysed ones scaled into the letterbox) with and without the non-reference
// frames decoded (Camera.NeedFrom: skip_frame AVDISCARD_NONREF), per second of video, on
// 15 fps clips of the sample with B-frames and without; and the share of frames skipped.
// b.N is the number of times the 3 s clip is decoded.
func BenchmarkSkipNonRef(b *testing.B) {
	for _, c := range []struct {
		name, codec, encoder string
		w, h, bframes        int
	}{
		{"H264-576p-noB", codecH264, "libx264", 768, 576, 0},
		{"H264-576p-2B", codecH264, "libx264", 768, 576, 2},
		{"H264-1080p-noB", codecH264, "libx264", 1920, 1080, 0},
		{"H264-1080p-2B", codecH264, "libx264", 1920, 1080, 2},
		{"H265-576p-noB", codecH265, "libx265", 768, 576, 0},
		{"H265-576p-3B", codecH265, "libx265", 768, 576, 3},
	} {
		b.Run(c.name, func(b *testing.B) {
			const fps, analysed = 15, 5
			aus := clipAUs(b, encodeBClip(b, c.name+".ts", c.encoder, c.w, c.h, fps, c.bframes), c.codec)
			interval := int64(90000 / analysed)
			b.ResetTimer()
			// Interleaved, so that both see the same load on a shared machine.
			var all, skip time.Duration
			var framesAll, scaledAll, framesSkip, scaledSkip int
			for range b.N {
				cpu, f, s := cameraCPU(b, c.codec, aus, 1, false, false, interval)
				all, framesAll, scaledAll = all+cpu, framesAll+f, scaledAll+s
				cpu, f, s = cameraCPU(b, c.codec, aus, 1, false, true, interval)
				skip, framesSkip, scaledSkip = skip+cpu, framesSkip+f, scaledSkip+s
			}
			b.StopTimer()
			nonRef := 0
			for _, au := range aus {
				if au.nonRef {
					nonRef++
				}
			}
			// The decoder keeps up to a few frames for reordering; the clip's last ones stay there.
			const held = 4
			if want := b.N * len(aus); framesAll > want || framesAll < want-held*b.N {
				b.Fatalf("decoding everything: %d frames from %d access units", framesAll, want)
			}
			if want := b.N * (len(aus) - nonRef); framesSkip > want || framesSkip < want-held*b.N {
				b.Fatalf("skipping %d non-reference units of %d: %d frames decoded, want %d", nonRef*b.N, b.N*len(aus), framesSkip, want)
			}
			seconds := float64(b.N*len(aus)) / fps
			b.ReportMetric(float64(all.Microseconds())/1000/seconds, "ms-cpu/s-all")
			b.ReportMetric(float64(skip.Microseconds())/1000/seconds, "ms-cpu/s-skip")
			b.ReportMetric(100*(1-float64(skip)/float64(all)), "%saved")
			b.ReportMetric(100*float64(nonRef)/float64(len(aus)), "%nonref")
			b.ReportMetric(float64(scaledSkip)/seconds, "analysed-fps-skip")
			b.ReportMetric(float64(scaledAll)/seconds, "analysed-fps-all")
		})
	}
}

// BenchmarkCameraMemory reports the resident memory each camera adds: a fresh process (this
// test binary, see TestMain) reads a 720p H.264 stream from the sample camera with 0 and
// then with 8 cameras until each has delivered 20 frames, and reports its RSS.
// It measures once whatever b.N is.
func BenchmarkCameraMemory(b *testing.B) {
	const n = 8
	clip, _ := benchClips[0].encode(b)
	var logs testutil.LogBuffer
	srv := &samplecam.Server{Listen: "127.0.0.1:0", Streams: map[string]string{"cam": clip}, Logger: logs.Logger()}
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	probe := func(cams int) int64 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %s", memProbeEnv, cams, srv.URL("cam")))
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("memory probe with %d cameras: %v\n%s", cams, err, out)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			b.Fatalf("memory probe printed %q", out)
		}
		return v
	}
	// One measurement whatever b.N: it is of memory, not of time.
	base, full := probe(0), probe(n)
	b.ReportMetric(float64(full-base)/n/(1<<20), "MiB-rss/camera")
}

// memProbeEnv makes the test binary a memory probe: "N URL" starts N cameras on URL, waits
// until each has delivered 20 frames, prints VmRSS in bytes and exits.
const memProbeEnv = "VISIOND_SOURCES_MEMPROBE"

func TestMain(m *testing.M) {
	capture.RunIfChild() // returns unless this process is a camera's capture process
	if v := os.Getenv(memProbeEnv); v != "" {
		os.Exit(memProbe(v))
	}
	os.Exit(m.Run())
}

func memProbe(arg string) int {
	var n int
	var url string
	if _, err := fmt.Sscan(arg, &n, &url); err != nil {
		fmt.Fprintln(os.Stderr, "memprobe:", err)
		return 2
	}
	cams := make([]*Camera, n)
	for i := range cams {
		cams[i] = &Camera{ID: fmt.Sprint("cam", i), URL: url, Logger: (&testutil.LogBuffer{}).Logger()}
		cams[i].Start()
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range cams {
		for c.Status().Delivered < 20 {
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "memprobe: no frames:", c.Status())
				return 1
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	runtime.GC()
	fmt.Println(vmRSS())
	for _, c := range cams {
		c.Close()
	}
	return 0
}

// vmRSS returns the process's resident set size in bytes, or -1.
func vmRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return -1
}
