package pipeline

import (
	"os"
	"path/filepath"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// startNATS starts the embedded NATS server (unless nats.url names external servers) and the
// publisher. With JetStream the embedded server keeps its store in the state directory.
func (d *Daemon) startNATS(cfg *config.Config) error {
	n := cfg.NATS
	d.pub = cfg.NATSPublisher()
	d.pub.Logger = d.log.With("component", "nats") // it makes the instance id of this run
	if n.URL == "" {
		srv, err := cfg.NATSServer()
		if err != nil {
			return err
		}
		srv.Logger = d.log.With("component", "nats-server")
		if err := srv.Start(); err != nil {
			return err
		}
		d.natsServer = srv
		d.pub.Server = srv
	}
	if err := d.pub.Start(); err != nil {
		d.pub = nil
		return err
	}
	if d.pub.JetStream {
		// The analytics' state: zone occupancy, line counts, the next track id per camera.
		d.state = &sinks.State{Publisher: d.pub, Logger: d.log.With("component", "state")}
		if err := d.state.Start(); err != nil {
			d.state = nil
			return err
		}
		// Each tracked object's evidence: a JPEG of its best frame.
		d.snapshots = &sinks.Snapshots{Publisher: d.pub, Logger: d.log.With("component", "snapshots")}
		if err := d.snapshots.Start(); err != nil {
			d.snapshots = nil
			return err
		}
		// The cameras' clips, started whether or not a camera makes them now, since a reload
		// may turn clips on. Its bucket reserves clip_store.max_bytes_mib of the server's
		// store: where that fails and no camera makes clips, the daemon runs without it
		// (the clips API answers 503) rather than not at all.
		if err := d.startClips(cfg); err != nil {
			if cfg.ClipsEnabled() {
				return err
			}
			d.log.Warn("no clip store: a camera given clips by a reload makes none until a restart", "error", err)
		}
	}
	d.flushTimeout = 5 * time.Second
	if cfg.NATS.MQTT.Discovery && d.natsServer != nil {
		if err := d.startDiscovery(cfg); err != nil {
			return err
		}
	}
	return nil
}

// startClips starts the clip store (d.clips) of cfg's clip_store.
func (d *Daemon) startClips(cfg *config.Config) error {
	dir, err := cfg.ClipDir()
	if err != nil {
		return err
	}
	log := d.log.With("component", "clips")
	c := &sinks.Clips{Publisher: d.pub, MaxBytes: int64(cfg.ClipStore.MaxBytesMiB) << 20, MaxAge: cfg.ClipStore.MaxAge,
		Dir: dir, Logger: log, OnStored: func(info sinks.ClipInfo, evs []sinks.ObjectEvent) { clipStored(d.pub, log, info, evs) }}
	if err := c.Start(); err != nil {
		return err
	}
	// Clips being recorded when the daemon last stopped (a crash, a kill) were never handed
	// to the store and have no info: they go.
	rec := filepath.Join(dir, "recording")
	if err := os.RemoveAll(rec); err != nil {
		log.Warn("clips left by an earlier run not removed", "dir", rec, "error", err)
	}
	d.clips, d.clipDir = c, rec
	return nil
}

// publishStatus publishes a camera's change of state; it runs on the camera's goroutines.
func (d *Daemon) publishStatus(ch sources.StatusChange) {
	ev := sinks.NewStatusEvent(ch.Camera, string(ch.State), string(ch.Previous), ch.Reason, ch.At, ch.Gap)
	if err := d.pub.PublishStatus(ev); err != nil {
		d.log.Warn("status event not published", "camera", ch.Camera, "state", ch.State, "error", err)
	}
}

// publishReload publishes the outcome of a reload (applied, with what changed, or rejected,
// with why), and logs and counts it.
func (d *Daemon) publishReload(res ReloadResult, err error) {
	ev := sinks.NewConfigEvent(time.Now(), sinks.ConfigChanges{Added: res.Added, Removed: res.Removed,
		Restarted: res.Restarted, Updated: res.Updated, WorkersReplaced: res.Workers, NeedsRestart: res.NeedsRestart}, err)
	if err != nil {
		d.reloadFailures.Add(1)
		d.lastReloadOK.Store(false)
		d.log.Error("config reload rejected; the running config stays", "error", err)
	} else {
		d.lastReload.Store(time.Now().UnixNano())
		d.lastReloadOK.Store(true)
		d.log.Info("config reloaded", "added", res.Added, "removed", res.Removed, "restarted", res.Restarted,
			"updated", res.Updated, "kept", len(res.Kept), "workers_replaced", res.Workers, "needs_restart", res.NeedsRestart)
		d.logWarnings(d.Running())
	}
	if perr := d.pub.PublishConfig(ev); perr != nil {
		d.log.Warn("config event not published", "error", perr)
	}
}

// healthCounts are a camera's totals at the last health event.
type healthCounts struct{ decoded, analysed, dropped uint64 }

// publishHealth publishes the health event: per camera, what was decoded, analysed and
// dropped since the last one. It runs on the run goroutine.
func (d *Daemon) publishHealth(now time.Time) {
	interval := now.Sub(d.lastHealth)
	if d.lastHealth.IsZero() {
		interval = now.Sub(d.started)
	}
	var cams []sinks.CameraHealth
	prev := d.healthPrev
	d.healthPrev = make(map[string]healthCounts, len(prev))
	for _, c := range d.Cameras() {
		cur := healthCounts{decoded: c.Decoded, analysed: c.Analysed, dropped: c.Drops.lost()}
		p := prev[c.ID] // zero for a camera added since
		if cur.decoded < p.decoded || cur.analysed < p.analysed || cur.dropped < p.dropped {
			p = healthCounts{} // restarted by a reload: its counters began again
		}
		d.healthPrev[c.ID] = cur
		cams = append(cams, sinks.CameraHealth{Camera: c.ID, State: string(c.State), FPS: c.FPS,
			Decoded: cur.decoded - p.decoded, Analysed: cur.analysed - p.analysed, Dropped: cur.dropped - p.dropped})
	}
	workers := 0
	for _, w := range d.Workers() {
		if w.State == infer.WorkerIdle || w.State == infer.WorkerBusy {
			workers++
		}
	}
	d.lastHealth = now
	ev := sinks.NewHealthEvent(now, interval, now.Sub(d.started), cams, workers)
	if err := d.pub.PublishHealth(ev); err != nil {
		d.log.Warn("health event not published", "error", err)
	}
}

// lost is the number of frames dropped for a reason other than a newer frame taking their
// place (which is how a camera's fps below its stream's skips frames): too old, dropped by the
// source, or a job that failed.
func (dr Drops) lost() uint64 {
	return dr.Stale + dr.Source + dr.WorkerLost + dr.Timeout + dr.Rejected + dr.Shutdown
}

// StreamName is the JetStream stream that holds the site's events ("" without JetStream).
func (d *Daemon) StreamName() string {
	cfg := d.Running()
	if cfg == nil || !cfg.NATS.JetStream {
		return ""
	}
	return cfg.NATS.StreamName(cfg.Site)
}
