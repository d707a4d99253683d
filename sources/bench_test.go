package sources

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources/capture"
	"github.com/visiond/visiond/sources/internal/tsfile"
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
	r, err := tsfile.Open(clip)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var aus []accessUnit
	for {
		au, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		key := (&videoTrack{codec: c.codec}).isKey(au.NALUs)
		aus = append(aus, accessUnit{data: appendAnnexB(nil, au.NALUs), key: key})
	}
	return clip, aus
}

// threadCPU is the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// decodeCPU decodes the access units (key ones only if keyOnly) n times over and returns
// the CPU time and the number of frames decoded.
func decodeCPU(b *testing.B, codec string, aus []accessUnit, n int, keyOnly bool) (time.Duration, int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dec, err := newDecoder(codec)
	if err != nil {
		b.Fatal(err)
	}
	defer dec.close()
	frames := 0
	count := func(int, int) { frames++ }
	start := threadCPU()
	for i := 0; i < n; i++ {
		for _, au := range aus {
			if keyOnly && !au.key {
				continue
			}
			if err := dec.decode(au.data, count); err != nil {
				b.Fatal(err)
			}
		}
	}
	return threadCPU() - start, frames
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
