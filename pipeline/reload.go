package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
)

// ReloadResult says what a reload changed.
type ReloadResult struct {
	Added, Removed, Restarted, Updated, Kept []string // camera ids
	Workers                                  bool     // the worker pools were replaced
	// NeedsRestart lists the sections (as named in reloadClasses) whose value in the new
	// file differs from the one in force, which only a restart can change. It compares
	// the file with what runs, so a section stays listed on every reload until the file
	// holds the running value again.
	NeedsRestart []string
}

// reloadClass says what a reload does with a config field.
type reloadClass int

const (
	applyLive   reloadClass = iota + 1 // the file's value is applied and goes into force
	needRestart                        // the value from start stays in force; a file that differs says so in NeedsRestart
)

// reloadClasses classifies every field of config.Config for Reload, by its YAML path: a
// field takes the class of its longest listed prefix, a section, or a sub-field where a
// section is partly live. TestReloadClassesCoverConfig fails on a field that has none, so
// that a new section is never silently taken for applied; one missed all the same is
// treated as needing a restart.
var reloadClasses = map[string]reloadClass{
	"site":            needRestart, // a token of every subject and of the stream's name
	"log_level":       needRestart, // the logger is built by main
	"log_format":      needRestart,
	"state_dir":       needRestart, // the embedded NATS server's store
	"http":            needRestart, // its listener, and its handler (pprof)
	"nats":            needRestart, // the server, the publisher, its stream, the health ticker
	"sample":          needRestart, // the sample camera, served by main
	"workers":         applyLive,   // new pools started and swapped in (a model of another input size is rejected)
	"pipeline":        applyLive,   // the slicer's period and the frames' maximum age
	"camera_defaults": applyLive,   // resolved into the cameras by config
	"cameras":         applyLive,   // compared one by one: a new source restarts; fps, weight and the analytics settings apply live
}

// reloadClassOf returns the class of the field at path (a dotted YAML path) and the entry
// of reloadClasses that gives it; 0 and "" when none does.
func reloadClassOf(path string) (reloadClass, string) {
	for p := path; ; {
		if c, ok := reloadClasses[p]; ok {
			return c, p
		}
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return 0, ""
		}
		p = p[:i]
	}
}

// inForce returns the config in force after a reload of file: running, with the fields
// that apply live taken from file. restart lists, in the order of config.Config, the
// entries of reloadClasses whose fields differ between file and running (a field without
// an entry is named by its own path). Neither running nor file is changed; the result
// shares their slices, which no one changes.
func inForce(running, file *config.Config) (next *config.Config, restart []string) {
	n := *running
	nv, fv := reflect.ValueOf(&n).Elem(), reflect.ValueOf(file).Elem()
	eachConfigField(nv.Type(), "", nil, func(path string, index []int) {
		to, from := nv.FieldByIndex(index), fv.FieldByIndex(index)
		class, name := reloadClassOf(path)
		switch {
		case class == applyLive:
			to.Set(from)
		case reflect.DeepEqual(to.Interface(), from.Interface()):
		case name == "":
			restart = appendNew(restart, path)
		default:
			restart = appendNew(restart, name)
		}
	})
	return &n, restart
}

// eachConfigField calls f with the YAML path and the index of every field of the struct
// type t that holds a value (a struct field is walked into, a list or pointer is one
// value), in the order of their declaration; fields YAML leaves out are left out.
func eachConfigField(t reflect.Type, prefix string, index []int, f func(path string, index []int)) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name) // yaml.v3's default
		}
		path, idx := name, append(slices.Clip(index), i)
		if prefix != "" {
			path = prefix + "." + name
		}
		if sf.Type.Kind() == reflect.Struct {
			eachConfigField(sf.Type, path, idx, f)
			continue
		}
		f(path, idx)
	}
}

// appendNew appends v to list unless it is there already.
func appendNew[T comparable](list []T, v T) []T {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

type reloadRequest struct {
	cfg   *config.Config // the config to put in force
	pools *workerPools   // new pools, started, when the workers section changed
	done  chan reloadReply
}

type reloadReply struct {
	res ReloadResult
	err error
}

// Reload applies a new, validated config, as read from the file, to the running daemon.
// What a reload may change (reloadClasses) goes into force: cameras are compared one by
// one: new ones start, removed (or disabled) ones stop, ones whose source changed restart,
// ones whose fps or weight changed keep their session and take the new schedule, ones whose
// analytics settings (objects, masks, zones, lines, events) changed keep their session and
// take them (camera.setAnalytics), untouched ones are left alone. A config whose analytics
// settings name a class the model does not have (the new model's, when the workers change)
// is rejected, and nothing changes. A changed workers section starts new worker pools first
// and then swaps them in, so the cameras keep running; the old pools finish their jobs and
// stop. The slice and max_frame_age apply at once. The rest (site, nats, state_dir, http,
// sample, logging) keeps its value from start, and where cfg differs from it, NeedsRestart
// says so. Running returns the config in force afterwards; cfg must not be changed after
// the call, as parts of it go into force. The outcome is logged and published on
// <prefix>.<site>.config. One reload runs at a time.
func (d *Daemon) Reload(cfg *config.Config) (ReloadResult, error) {
	res, err := d.reload(cfg)
	d.publishReload(res, err)
	return res, err
}

func (d *Daemon) reload(file *config.Config) (ReloadResult, error) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	running := d.Running()
	model := d.model() // the previous apply, which alone changes it, has ended (reloadMu)
	cfg, restart := inForce(running, file)
	req := reloadRequest{cfg: cfg, done: make(chan reloadReply, 1)}
	if !reflect.DeepEqual(cfg.Workers, running.Workers) {
		np := &workerPools{}
		ctx, cancel := context.WithTimeout(d.ctx, 5*time.Minute)
		err := np.start(ctx, cfg.Workers, d.WorkerCommand, d.WorkerEnv, d.log.With("component", "infer"))
		cancel()
		if err != nil {
			np.close()
			return ReloadResult{}, fmt.Errorf("new workers did not start; the running ones stay: %w", err)
		}
		if m := np.model(); m.InputW != model.InputW || m.InputH != model.InputH {
			np.close()
			return ReloadResult{}, fmt.Errorf("the new model's input is %dx%d, the running one's %dx%d: restart visiond to change it",
				m.InputW, m.InputH, model.InputW, model.InputH)
		}
		req.pools = np
	}
	if req.pools != nil {
		model = req.pools.model()
	}
	if err := checkClasses(file, model); err != nil {
		if req.pools != nil {
			req.pools.close()
		}
		return ReloadResult{}, err
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
	r.res.NeedsRestart = restart
	return r.res, r.err
}

// apply runs on the slicer goroutine, between dispatch rounds, and puts req.cfg in force.
func (d *Daemon) apply(req reloadRequest) reloadReply {
	cfg, old := req.cfg, d.Running()
	model := d.pools.model() // the run goroutine's own: it alone changes d.pools
	var res ReloadResult

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
			cams = append(cams, d.startCamera(cc, cfg.Pipeline.Slice, model))
			res.Added = append(res.Added, cc.ID)
		case sameSource(c.cfg, cc):
			// The same session: a new schedule, new analytics settings, or neither.
			rescheduled := c.cfg.FPS != cc.FPS || c.cfg.Weight != cc.Weight || old.Pipeline.Slice != cfg.Pipeline.Slice
			if rescheduled {
				c.reschedule(cc, cfg.Pipeline.Slice)
			}
			cams = append(cams, c)
			if c.setAnalytics(cc) || rescheduled {
				res.Updated = append(res.Updated, cc.ID)
			} else {
				res.Kept = append(res.Kept, cc.ID)
			}
		default:
			stop = append(stop, c)
			cams = append(cams, d.startCamera(cc, cfg.Pipeline.Slice, model))
			res.Restarted = append(res.Restarted, cc.ID)
		}
	}
	for _, c := range d.cams {
		if _, gone := byID[c.cfg.ID]; gone {
			stop = append(stop, c)
			res.Removed = append(res.Removed, c.cfg.ID)
		}
	}

	d.cams, d.slicer.cams = cams, cams
	var retired *workerPools
	if req.pools != nil {
		retired, d.pools, d.slicer.jobs = d.pools, req.pools, req.pools
		res.Workers = true
	}
	d.mu.Unlock()
	d.running.Store(cfg) // the run goroutine reads the slice and max_frame_age from here from its next round

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

// checkClasses checks the class names of cfg's analytics settings against the classes of
// model, the one the workers loaded.
func checkClasses(cfg *config.Config, model infer.ModelInfo) error {
	if err := cfg.CheckClasses(model.Classes); err != nil {
		return fmt.Errorf("the analytics settings name classes that model %s does not have (its %d classes: %s):\n%w",
			modelName(model), len(model.Classes), strings.Join(model.Classes, ", "), err)
	}
	return nil
}

// sameSource reports whether two configs of a camera open the same stream the same way, so
// a change between them needs no new session: they differ at most in fps, weight and
// analytics settings.
func sameSource(a, b config.Camera) bool {
	a.FPS, a.Weight = b.FPS, b.Weight
	return reflect.DeepEqual(withoutAnalytics(a), withoutAnalytics(b))
}

// reschedule takes a new fps and weight (and slice) for a camera whose source is unchanged.
// Only those fields change: the pool's goroutines read the camera's id meanwhile.
func (c *camera) reschedule(cc config.Camera, slice time.Duration) {
	n := newCamera(cc, slice, c.wake)
	c.cfg.FPS, c.cfg.Weight, c.interval, c.slack = n.cfg.FPS, n.cfg.Weight, n.interval, n.slack
}

// startConfig starts the config goroutine, which watches ConfigPath and reloads it when it
// has changed and on ReloadNow. Config was loaded before the watch began: a file that no
// longer holds it (edited while the daemon started) is reloaded at once.
func (d *Daemon) startConfig(ctx context.Context) {
	d.reloadNow = make(chan string, 1)
	w := &config.Watcher{Path: d.ConfigPath, Logger: d.log.With("component", "config")}
	var changed <-chan struct{}
	if err := w.Start(); err != nil {
		d.log.Warn("config file not watched; SIGHUP still reloads it", "error", err)
		w = nil
	} else {
		changed = w.Changed()
	}
	if cfg, err := config.Load(d.ConfigPath); err != nil || !reflect.DeepEqual(cfg, d.Config) {
		d.reloadNow <- "file changed during start"
	}
	d.configDone = make(chan struct{})
	go d.runConfig(ctx, w, changed)
}

// runConfig is the config goroutine: it reloads ConfigPath when the watcher says it has
// changed (and settled) and on ReloadNow, one reload after the other, until ctx ends.
func (d *Daemon) runConfig(ctx context.Context, w *config.Watcher, changed <-chan struct{}) {
	defer close(d.configDone)
	if w != nil {
		defer w.Close()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			d.reloadFile("file changed")
		case trigger := <-d.reloadNow:
			d.reloadFile(trigger)
		}
	}
}

// ReloadNow asks for a reload of ConfigPath (for SIGHUP; trigger is logged). It returns at
// once: the reload runs on the daemon's config goroutine, and a request made while another
// waits there joins it. Call it after Start.
func (d *Daemon) ReloadNow(trigger string) {
	if d.ConfigPath == "" {
		d.log.Warn("nothing to reload: running on the embedded config", "trigger", trigger)
		return
	}
	select {
	case d.reloadNow <- trigger:
	default: // one waits already; it reads the file as it is by then
	}
}

// reloadFile loads ConfigPath and reloads it, between the Reloading and Reloaded hooks. A
// file that cannot be loaded (invalid, empty, without its cameras) is rejected, and the
// config in force stays.
func (d *Daemon) reloadFile(trigger string) {
	d.log.Info("reloading config", "trigger", trigger, "config", d.ConfigPath)
	if d.Reloading != nil {
		d.Reloading()
	}
	var res ReloadResult
	cfg, err := config.Load(d.ConfigPath)
	if err != nil {
		d.Rejected(err) // logged, counted and published
	} else {
		res, err = d.Reload(cfg) // its outcome is logged and published by Reload
	}
	if d.Reloaded != nil {
		d.Reloaded(res, err)
	}
}

// Rejected records a config that could not be loaded (a parse or validation error found
// before Reload): it is logged, counted and published like a rejected reload.
func (d *Daemon) Rejected(err error) { d.publishReload(ReloadResult{}, err) }

// ReloadFailures is the number of reloads rejected so far.
func (d *Daemon) ReloadFailures() uint64 { return d.reloadFailures.Load() }
