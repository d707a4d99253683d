package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer/pool"
	"github.com/visiond/visiond/sources"
)

// checkLoad is `visiond check -load`: it starts one worker process of each pool of cfg, as
// the daemon would (model, library, provider and its options), reports what each loaded
// (input size, classes, the provider it runs on, a fallback included) and stops them. A
// worker that cannot start (a model ONNX Runtime cannot load, a provider not available)
// fails the check with its error, and so does a class named by the analytics settings
// (zones, lines, objects) that the loaded model does not have.
func checkLoad(cfg *config.Config, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for i, pc := range cfg.Workers.Pools {
		opts := cfg.Workers.PoolConfig(i)
		opts.Count = 1
		opts.GPUMemoryCommand = []string{} // no memory sampling for a check
		opts.Logger = log.With("pool", i)
		p := pool.New(opts)
		start := time.Now()
		err := p.Start(context.Background())
		if err != nil {
			p.Close()
			return fmt.Errorf("workers.pools[%d] (%s): %w", i, pc.Provider, err)
		}
		m := p.Model()
		p.Close()
		fmt.Fprintf(stdout, "workers.pools[%d] (%s): loaded %s in %.1f s: input %dx%d, provider %s, %d classes: %s\n",
			i, pc.Provider, m.Path, time.Since(start).Seconds(), m.InputW, m.InputH, m.Provider, len(m.Classes), strings.Join(m.Classes, ", "))
		if err := cfg.CheckClasses(m.Classes); err != nil { // the analytics settings' class names
			return fmt.Errorf("workers.pools[%d] (%s): the analytics settings name classes the model does not have:\n%w", i, pc.Provider, err)
		}
	}
	return nil
}

// DefaultProbe is how long `check -load` watches each camera's stream by default (-probe).
const DefaultProbe = 30 * time.Second

// cameraProbe is what check -load saw of one camera's stream.
type cameraProbe struct {
	keys    []time.Time // capture times of the first session's keyframes
	end     time.Time   // when the probe ended
	reached bool        // the camera came online
	reason  string      // why its first session failed, when it did
}

// checkCameras is check -load's look at the cameras: every enabled camera of kind rtsp or
// file is opened at once, each for up to window, until two
// keyframes of its stream came (its keyframe interval) or its first attempt failed. It
// reports each camera's keyframe interval, and says where it is longer than the camera's
// clips' pre_capture (config.Clips.KeyframeWarning); a camera not reached is reported, not an
// error: a check may run where the cameras are not.
func checkCameras(cfg *config.Config, stdout io.Writer, window time.Duration) {
	var cams []config.Camera
	for _, cc := range cfg.Cameras {
		if cc.Enabled && (cc.Kind == sources.KindRTSP || cc.Kind == sources.KindFile) {
			cams = append(cams, cc)
		}
	}
	probes := make([]cameraProbe, len(cams))
	var wg sync.WaitGroup
	for i, cc := range cams {
		wg.Go(func() { probes[i] = probeCamera(cc, window) })
	}
	wg.Wait()
	for i, cc := range cams {
		p := probes[i]
		name := "cameras[" + cc.ID + "]"
		switch {
		case len(p.keys) >= 2:
			gop := p.keys[1].Sub(p.keys[0])
			fmt.Fprintf(stdout, "%s: keyframe interval %.1f s\n", name, gop.Seconds())
			if w := cc.Clips.KeyframeWarning(gop); w != "" {
				fmt.Fprintf(stdout, "%s: warning: %s\n", name, w)
			}
		case len(p.keys) == 1:
			least := p.end.Sub(p.keys[0]) // no second keyframe came since the first
			fmt.Fprintf(stdout, "%s: one keyframe in %.0f s: keyframe interval more than %.1f s\n", name, window.Seconds(), least.Seconds())
			if w := cc.Clips.KeyframeWarning(least); w != "" {
				fmt.Fprintf(stdout, "%s: warning: %s\n", name, w)
			}
		case p.reached:
			fmt.Fprintf(stdout, "%s: online, but no keyframe in %.0f s\n", name, window.Seconds())
		default:
			fmt.Fprintf(stdout, "%s: not reached within %.0f s: %s\n", name, window.Seconds(), cmp.Or(p.reason, "no answer"))
		}
	}
}

// probeCamera watches camera cc's stream for up to window (probeCamera's rules: checkCameras).
func probeCamera(cc config.Camera, window time.Duration) cameraProbe {
	var mu sync.Mutex
	var p cameraProbe
	var session uint64
	done := make(chan struct{})
	end := sync.OnceFunc(func() { close(done) })
	src := cc.Source()
	src.StallTimeout = window + time.Second // a long keyframe interval is what is measured, not a stall
	src.Logger = slog.New(slog.DiscardHandler)
	src.OnPacket = func(pk *sources.Packet) {
		if !pk.Key {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if session == 0 {
			session = pk.Session
		}
		if pk.Session == session && len(p.keys) < 2 {
			p.keys = append(p.keys, pk.At)
			if len(p.keys) == 2 {
				end()
			}
		}
	}
	src.OnStatus = func(ch sources.StatusChange) {
		mu.Lock()
		defer mu.Unlock()
		switch ch.State {
		case sources.StateOnline:
			p.reached = true
		case sources.StateOffline, sources.StateUnauthorized:
			if p.reason == "" {
				p.reason = ch.Reason
			}
			if !p.reached {
				end() // one attempt: a check does not wait out the camera's retries
			}
		}
	}
	src.Start()
	select {
	case <-done:
	case <-time.After(window):
	}
	mu.Lock()
	p.end = time.Now()
	mu.Unlock()
	src.Close()
	mu.Lock()
	defer mu.Unlock()
	return p
}
