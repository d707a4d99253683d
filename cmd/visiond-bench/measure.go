package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type measureResult struct {
	Command        []string    `json:"command,omitempty"` // visiond-bench's own argv
	Daemon         daemonFlags `json:"daemon"`
	Version        *buildInfo  `json:"daemon_version,omitempty"` // the daemon's /api/version
	Started        time.Time   `json:"started,omitzero"`
	Cameras        int         `json:"cameras"`
	WarmupS        float64     `json:"warmup_s"`
	Window         window      `json:"window"`
	CPUSeconds     float64     `json:"cpu_s"`            // daemon and workers, over the window
	CPUPerFrameMS  float64     `json:"cpu_ms_per_frame"` // CPUSeconds per analysed frame
	CoresBusy      float64     `json:"cores_busy"`       // CPUSeconds / window
	DaemonRSSMiB   float64     `json:"daemon_rss_mib"`
	WorkersRSSMiB  float64     `json:"workers_rss_mib"`
	WorkersGPUMiB  float64     `json:"workers_gpu_mib"`
	DaemonGPUMiB   float64     `json:"daemon_gpu_mib"` // the daemon's own (NVDEC decoding), nvidia-smi; 0 without
	WorkerProvider string      `json:"worker_provider"`
	Load           loadAvg     `json:"load"`
	// Decoders counts the cameras by the decoder of their session at the window's end
	// ("cuda", "cpu", and "cpu-fallback" for cuda cameras decoding on the CPU in place of a
	// GPU decoder that did not open); Fallbacks sums their sessions moved to the CPU.
	Decoders  map[string]int `json:"decoders,omitempty"`
	Fallbacks uint64         `json:"decoder_fallbacks"`
}

// measureCmd runs the daemon on N cameras and measures one window: analysed frames per second
// (all cameras and each), latency, CPU time of the daemon and its workers, memory. With
// -fps at the stream's rate (10) and more cameras than the workers take, it is the
// daemon's throughput: the visiond side of the comparison with scripts/bench/peer.py.
func measureCmd(args []string) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	var f daemonFlags
	f.register(fs)
	out := fs.String("o", "-", "output JSON")
	n := fs.Int("cameras", 4, "cameras")
	dur := fs.Duration("duration", 60*time.Second, "measurement window")
	warmup := fs.Duration("warmup", 15*time.Second, "wait after every camera is online")
	if err := fs.Parse(args); err != nil {
		return err
	}
	started := time.Now()
	d, err := startDaemon(f, *n)
	if err != nil {
		return err
	}
	defer d.Stop()
	built := d.version()
	if err := d.warmUp(*warmup); err != nil {
		return err
	}
	ws, err := d.workers()
	if err != nil {
		return err
	}
	cpu := func() float64 {
		t := cpuSeconds(d.cmd.Process.Pid)
		for _, w := range ws {
			t += cpuSeconds(w.PID)
		}
		return t
	}
	c0 := cpu()
	res := measureResult{Command: os.Args, Daemon: f, Version: built, Cameras: *n, WarmupS: warmup.Seconds(), Started: started}
	res.Window = d.measureWindow(*dur)
	res.CPUSeconds = cpu() - c0
	if res.Window.Events > 0 {
		res.CPUPerFrameMS = 1000 * res.CPUSeconds / float64(res.Window.Events)
	}
	res.CoresBusy = res.CPUSeconds / res.Window.Seconds
	res.DaemonRSSMiB = mib(d.daemonRSS())
	if ws2, err := d.workers(); err == nil {
		for i, w := range ws2 {
			if i < len(ws) && w.PID != ws[i].PID {
				return fmt.Errorf("worker %d restarted during the window", i)
			}
			res.WorkersRSSMiB += mib(procRSS(w.PID))
			res.WorkersGPUMiB += mib(w.GPU)
			res.WorkerProvider = w.Provider
		}
	}
	res.DaemonGPUMiB = gpuMemByPID()[d.cmd.Process.Pid]
	res.Load = readLoad()
	if cs, err := d.cameras(); err == nil {
		res.Decoders = map[string]int{}
		for _, c := range cs {
			kind := c.Decoder
			if c.DecoderFallback != "" {
				kind += "-fallback"
			}
			res.Decoders[kind]++
			res.Fallbacks += c.DecoderFallbacks
		}
	}
	logf("measure: %d cameras: %.1f frames/s (%.1f detections/s), Jain %.3f, p50 %.0f p99 %.0f ms, decoded %.2f/s slowest (%.2f mean), %d source drops, decode: %v, %.1f ms CPU per frame, %.2f cores, decoders %v (%d fallbacks)",
		*n, res.Window.EventsPerSec, res.Window.DetsPerSec, res.Window.Jain, res.Window.TotalP50, res.Window.TotalP99, res.Window.DecodedMin, res.Window.DecodedMean,
		res.Window.SourceDrops, res.Window.Decode, res.CPUPerFrameMS, res.CoresBusy, res.Decoders, res.Fallbacks)
	return writeJSON(*out, res)
}

// serveCmd serves the cameras (the sample video on `phases` RTSP servers, a fraction of a
// frame apart), writes their URLs, one a line, and runs until SIGINT or SIGTERM.
func serveCmd(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	video := fs.String("video", "third_party/media/vtest.h264.ts", "the MPEG-TS file to play, looped, in real time")
	phases := fs.Int("phases", 4, "servers (camera i should read URL i mod phases)")
	out := fs.String("o", "-", "where to write the URLs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cams, err := startCameras(*video, *phases)
	if err != nil {
		return err
	}
	defer cams.Close()
	var urls []string
	for i := range *phases {
		urls = append(urls, cams.URL(i))
	}
	text := strings.Join(urls, "\n") + "\n"
	if *out == "-" {
		fmt.Print(text)
	} else if err := writeAtomic(*out, []byte(text)); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// writeAtomic writes a file that another process may be waiting for: whole or not at all.
func writeAtomic(path string, data []byte) error {
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}
