package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/sinks"
)

// ReloadResult says what a reload changed.
type ReloadResult struct {
	Added, Removed, Restarted, Updated, Kept []string // camera ids
	Workers                                  bool     // the worker pools were replaced
	NeedsRestart                             []string // changed settings that apply only at the next start
}

type reloadRequest struct {
	cfg   *config.Config
	pools *workerPools // new pools, started, when the workers section changed
	done  chan reloadReply
}

type reloadReply struct {
	res ReloadResult
	err error
}

// Reload applies a new, validated config to the running daemon. Cameras are compared one
// by one: new ones start, removed (or disabled) ones stop, ones whose source changed
// restart, ones whose fps or weight changed keep their session and take the new schedule,
// untouched ones are left alone. A changed workers section starts new worker pools first
// and then swaps them in, so the cameras keep running; the old pools finish their jobs and
// stop. The slice and max_frame_age apply at once; site, nats, http, sample and logging
// apply at the next start (listed in NeedsRestart). The outcome is logged and published on
// <prefix>.<site>.config.
func (d *Daemon) Reload(cfg *config.Config) (ReloadResult, error) {
	res, err := d.reload(cfg)
	d.publishReload(res, err)
	return res, err
}

func (d *Daemon) reload(cfg *config.Config) (ReloadResult, error) {
	req := reloadRequest{cfg: cfg, done: make(chan reloadReply, 1)}
	if !reflect.DeepEqual(cfg.Workers, d.Config.Workers) {
		np := &workerPools{}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := np.start(ctx, cfg.Workers, d.WorkerCommand, d.WorkerEnv, d.log.With("component", "infer"))
		cancel()
		if err != nil {
			np.close()
			return ReloadResult{}, fmt.Errorf("new workers did not start; the running ones stay: %w", err)
		}
		if m := np.model(); m.InputW != d.model.InputW || m.InputH != d.model.InputH {
			np.close()
			return ReloadResult{}, fmt.Errorf("the new model's input is %dx%d, the running one's %dx%d: restart visiond to change it",
				m.InputW, m.InputH, d.model.InputW, d.model.InputH)
		}
		req.pools = np
	}
	select {
	case d.reloads <- req:
	case <-d.done:
		if req.pools != nil {
			req.pools.close()
		}
		return ReloadResult{}, errors.New("daemon stopped")
	}
	r := <-req.done
	return r.res, r.err
}

// apply runs on the slicer goroutine, between dispatch rounds.
func (d *Daemon) apply(req reloadRequest) reloadReply {
	cfg, old := req.cfg, d.Config
	var res ReloadResult
	for _, f := range []struct {
		name    string
		changed bool
	}{
		{"site", cfg.Site != old.Site},
		{"nats", cfg.NATS != old.NATS},
		{"state_dir", cfg.StateDir != old.StateDir},
		{"http", cfg.HTTP != old.HTTP},
		{"sample", cfg.Sample != old.Sample},
		{"log_level", cfg.LogLevel != old.LogLevel},
		{"log_format", cfg.LogFormat != old.LogFormat},
	} {
		if f.changed {
			res.NeedsRestart = append(res.NeedsRestart, f.name)
		}
	}

	d.mu.Lock() // readers of cams see the old set or the new one, and no camera mid-change
	byID := map[string]*camera{}
	for _, c := range d.cams {
		byID[c.cfg.ID] = c
	}
	var cams, stop []*camera
	for _, cc := range cfg.Cameras {
		if !cc.Enabled {
			continue
		}
		c, ok := byID[cc.ID]
		delete(byID, cc.ID)
		switch {
		case !ok:
			cams = append(cams, d.startCamera(cc, cfg.Pipeline.Slice))
			res.Added = append(res.Added, cc.ID)
		case c.cfg == cc && d.slice == cfg.Pipeline.Slice:
			cams = append(cams, c)
			res.Kept = append(res.Kept, cc.ID)
		case sameSource(c.cfg, cc):
			c.reschedule(cc, cfg.Pipeline.Slice)
			cams = append(cams, c)
			res.Updated = append(res.Updated, cc.ID)
		default:
			stop = append(stop, c)
			cams = append(cams, d.startCamera(cc, cfg.Pipeline.Slice))
			res.Restarted = append(res.Restarted, cc.ID)
		}
	}
	for _, c := range d.cams {
		if _, gone := byID[c.cfg.ID]; gone {
			stop = append(stop, c)
			res.Removed = append(res.Removed, c.cfg.ID)
		}
	}

	d.cams = cams
	var retired *workerPools
	if req.pools != nil {
		retired, d.pools, d.jobs = d.pools, req.pools, req.pools
		res.Workers = true
	}
	d.mu.Unlock()
	d.Config = cfg
	d.slice, d.maxAge = cfg.Pipeline.Slice, cfg.Pipeline.MaxFrameAge

	for _, c := range stop {
		c.src.Close()
		c.box.Close()
	}
	if retired != nil {
		d.retiring.Add(1)
		go func() { // its in-flight jobs end, then it stops
			defer d.retiring.Done()
			retired.close()
		}()
	}
	if len(res.Added)+len(res.Removed)+len(res.Restarted) > 0 && req.pools == nil {
		d.pools.shrinkArenas() // the camera set changed: buffers sized for it may go
	}
	return reloadReply{res: res}
}

// sameSource reports whether two configs of a camera open the same stream the same way, so
// a change between them needs no new session.
func sameSource(a, b config.Camera) bool {
	a.FPS, a.Weight = b.FPS, b.Weight
	return a == b
}

// reschedule takes a new fps and weight (and slice) for a camera whose source is unchanged.
// Only those fields change: the pool's goroutines read the camera's id meanwhile.
func (c *camera) reschedule(cc config.Camera, slice time.Duration) {
	n := newCamera(cc, slice, c.wake)
	c.cfg.FPS, c.cfg.Weight, c.interval, c.slack = n.cfg.FPS, n.cfg.Weight, n.interval, n.slack
}

func (d *Daemon) publishReload(res ReloadResult, err error) {
	ev := &sinks.ConfigEvent{Version: sinks.Version, Site: d.site, Result: "applied", At: time.Now().UTC(),
		Added: res.Added, Removed: res.Removed, Restarted: res.Restarted, Updated: res.Updated,
		WorkersReplaced: res.Workers, NeedsRestart: res.NeedsRestart}
	if err != nil {
		ev.Result, ev.Error = "rejected", err.Error()
		d.reloadFailures.Add(1)
		d.log.Error("config reload rejected; the running config stays", "error", err)
	} else {
		d.log.Info("config reloaded", "added", res.Added, "removed", res.Removed, "restarted", res.Restarted,
			"updated", res.Updated, "kept", len(res.Kept), "workers_replaced", res.Workers, "needs_restart", res.NeedsRestart)
	}
	if perr := d.pub.PublishConfig(ev); perr != nil {
		d.log.Warn("config event not published", "error", perr)
	}
}

// Rejected records a config that could not be loaded (a parse or validation error found
// before Reload): it is logged, counted and published like a rejected reload.
func (d *Daemon) Rejected(err error) { d.publishReload(ReloadResult{}, err) }

// ReloadFailures is the number of reloads rejected so far.
func (d *Daemon) ReloadFailures() uint64 { return d.reloadFailures.Load() }
