package pipeline

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/visiond/visiond/analytics"
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

// reloadClasses classifies every leaf field of config.Config for Reload, by its YAML path,
// in which a list's element is "[]" ("cameras[].url", "workers.pools[].count"). A leaf is
// applied live only when it is listed here itself: applyLive is never given to a section,
// so a field added under a live section is not taken for applied until someone lists it
// (TestReloadLiveLeavesListed then wants a test of it in liveLeafShows). needRestart may be given
// to a section, for every leaf under it. TestReloadClassesCoverConfig fails on a leaf that
// has no class; one missed all the same is treated as needing a restart.
var reloadClasses = map[string]reloadClass{
	"site":             needRestart, // a token of every subject and of the stream's name
	"log_level":        needRestart, // the logger is built by main
	"log_format":       needRestart,
	"state_dir":        needRestart, // the embedded NATS server's store
	"memory_limit_mib": needRestart, // the budget is resolved at start, with the cgroup's limit
	"http":             needRestart, // its listener, and its handler (pprof)
	"nats":             needRestart, // the server, the publisher, its stream, the health ticker
	"sample":           needRestart, // the sample camera, served by main
	"clip_store":       needRestart, // the clip store's bucket and spool, started with the publisher

	// workers: a change of any leaf starts new pools, built from the whole section
	// (Workers.PoolConfig), and swaps them in; a model of another input size is rejected.
	"workers.model":                                 applyLive,
	"workers.labels":                                applyLive,
	"workers.library":                               applyLive,
	"workers.confidence":                            applyLive,
	"workers.iou":                                   applyLive,
	"workers.job_timeout":                           applyLive,
	"workers.memory_limit_mib":                      applyLive,
	"workers.gpu_memory_limit_mib":                  applyLive,
	"workers.gpu_memory_command":                    applyLive,
	"workers.pools[].count":                         applyLive,
	"workers.pools[].provider":                      applyLive,
	"workers.pools[].device":                        applyLive,
	"workers.pools[].sessions":                      applyLive,
	"workers.pools[].threads":                       applyLive,
	"workers.pools[].spin":                          applyLive,
	"workers.pools[].fallback":                      applyLive,
	"workers.pools[].cuda.gpu_mem_limit_mib":        applyLive,
	"workers.pools[].cuda.arena_extend_strategy":    applyLive,
	"workers.pools[].cuda.cudnn_conv_algo_search":   applyLive,
	"workers.pools[].cuda.cudnn_conv_max_workspace": applyLive,
	"workers.pools[].cuda.device_io":                applyLive,
	"workers.pools[].cuda.graph":                    applyLive,
	"workers.pools[].tensorrt.fp16":                 applyLive,
	"workers.pools[].tensorrt.int8":                 applyLive,
	"workers.pools[].tensorrt.engine_cache":         applyLive,
	"workers.pools[].tensorrt.workspace_mib":        applyLive,

	"pipeline.slice":         applyLive, // the slicer's period; every camera takes the schedule of it
	"pipeline.max_frame_age": applyLive, // the slicer drops older frames from its next round

	// camera_defaults: config resolves them into every camera that does not set the key,
	// where they apply as the camera's own (below); nothing reads them from the section.
	"camera_defaults.fps":                         applyLive,
	"camera_defaults.enabled":                     applyLive,
	"camera_defaults.transport":                   applyLive,
	"camera_defaults.decode":                      applyLive,
	"camera_defaults.decoder":                     applyLive,
	"camera_defaults.stall_timeout":               applyLive,
	"camera_defaults.weight":                      applyLive,
	"camera_defaults.objects.track":               applyLive,
	"camera_defaults.objects.filters[].class":     applyLive,
	"camera_defaults.objects.filters[].min_score": applyLive,
	"camera_defaults.objects.filters[].min_area":  applyLive,
	"camera_defaults.objects.filters[].max_area":  applyLive,
	"camera_defaults.objects.anchor":              applyLive,
	"camera_defaults.objects.update_interval":     applyLive,
	"camera_defaults.objects.class_groups":        applyLive,
	"camera_defaults.events.detections":           applyLive,
	"camera_defaults.clips.enabled":               applyLive,
	"camera_defaults.clips.pre_capture":           applyLive,
	"camera_defaults.clips.post_capture":          applyLive,
	"camera_defaults.clips.max_length":            applyLive,
	"camera_defaults.clips.classes":               applyLive,
	"camera_defaults.clips.zones":                 needRestart, // always empty: zones are a camera's own (config refuses any here)

	// cameras are matched by id: a new id starts a camera and the old one stops, and so do
	// enabled true and false.
	"cameras[].id":      applyLive,
	"cameras[].enabled": applyLive,
	// The source: a change restarts the camera (sameSource) on a source built from it.
	"cameras[].kind":          applyLive,
	"cameras[].url":           applyLive,
	"cameras[].username":      applyLive,
	"cameras[].password":      applyLive,
	"cameras[].password_file": applyLive, // read into password by config
	"cameras[].pipeline":      applyLive,
	"cameras[].file":          applyLive,
	"cameras[].transport":     applyLive,
	"cameras[].decode":        applyLive,
	"cameras[].decoder":       applyLive,
	"cameras[].stall_timeout": applyLive,
	// The schedule: the camera keeps its session and takes the new one (reschedule).
	"cameras[].fps":    applyLive,
	"cameras[].weight": applyLive,
	// The analytics settings: the camera keeps its session and takes them
	// (camera.setAnalytics), which its scene applies before its next result.
	"cameras[].objects.track":               applyLive,
	"cameras[].objects.filters[].class":     applyLive,
	"cameras[].objects.filters[].min_score": applyLive,
	"cameras[].objects.filters[].min_area":  applyLive,
	"cameras[].objects.filters[].max_area":  applyLive,
	// objects.anchor: the masks' test point, the object events' paths and the stationary
	// test (analytics.Motion.SetAnchor) take it at once.
	"cameras[].objects.anchor":          applyLive,
	"cameras[].objects.update_interval": applyLive,
	"cameras[].objects.class_groups":    applyLive, // the tracker takes them, its tracks go on
	"cameras[].masks":                   applyLive,
	"cameras[].zones[].id":              applyLive,
	"cameras[].zones[].polygon":         applyLive,
	"cameras[].zones[].classes":         applyLive,
	"cameras[].zones[].min_seconds":     applyLive,
	"cameras[].zones[].loiter_seconds":  applyLive,
	"cameras[].zones[].anchor":          applyLive,
	"cameras[].lines[].id":              applyLive,
	"cameras[].lines[].points":          applyLive,
	"cameras[].lines[].classes":         applyLive,
	"cameras[].lines[].band":            applyLive,
	"cameras[].lines[].anchor":          applyLive,
	"cameras[].events.detections":       applyLive,
	// clips: the camera keeps its session (and its ring of video) and takes them with its
	// analytics settings.
	"cameras[].clips.enabled":      applyLive,
	"cameras[].clips.pre_capture":  applyLive,
	"cameras[].clips.post_capture": applyLive,
	"cameras[].clips.max_length":   applyLive,
	"cameras[].clips.classes":      applyLive,
	"cameras[].clips.zones":        applyLive,
}

// reloadClassOf returns the class of the leaf at path (a YAML path, as in reloadClasses)
// and the entry of reloadClasses that gives it: the leaf's own, else the nearest section
// above it listed as needRestart; 0 and "" when neither. A section listed as applyLive
// gives nothing.
func reloadClassOf(path string) (reloadClass, string) {
	if c, ok := reloadClasses[path]; ok {
		return c, path
	}
	for p := path; ; {
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return 0, ""
		}
		p = p[:i]
		if reloadClasses[p] == needRestart {
			return needRestart, p
		}
	}
}

// inForce returns the config in force after a reload of file: running, with the fields
// that apply live taken from file. It takes or keeps each value of config.Config whole: a
// leaf, or a list of structs (cameras, workers.pools), which is taken when all the leaves of
// its elements apply live and kept otherwise. restart lists, in the order of config.Config, the
// entries of reloadClasses that give the values kept that differ between file and running
// (a value without one, or a list whose leaves have different entries, is named by its own
// path). Neither running nor file is changed; the result shares their slices, which no one
// changes.
func inForce(running, file *config.Config) (next *config.Config, restart []string) {
	type value struct {
		path  string
		index []int
		class reloadClass
		name  string // the entry that gives class
	}
	var values []value
	eachConfigField(reflect.TypeFor[config.Config](), "", nil, false, func(path string, index []int) {
		class, name := reloadClassOf(path)
		if n := len(values) - 1; n >= 0 && slices.Equal(values[n].index, index) { // a list's next leaf
			if v := &values[n]; v.class != class {
				v.class, v.name = needRestart, "" // mixed: kept, named by its path
			} else if v.name != name {
				v.name = ""
			}
			return
		}
		path, _, _ = strings.Cut(path, "[]")
		values = append(values, value{path, index, class, name})
	})
	n := *running
	nv, fv := reflect.ValueOf(&n).Elem(), reflect.ValueOf(file).Elem()
	for _, v := range values {
		to, from := nv.FieldByIndex(v.index), fv.FieldByIndex(v.index)
		switch {
		case v.class == applyLive:
			to.Set(from)
		case reflect.DeepEqual(to.Interface(), from.Interface()):
		case v.name == "":
			restart = appendNew(restart, v.path)
		default:
			restart = appendNew(restart, v.name)
		}
	}
	return &n, restart
}

// eachConfigField calls f with the YAML path of every leaf field of the struct type t, in
// the order of their declaration, and the index in t of the field that holds the leaf's
// value: the leaf itself, or the list it is in. A struct is walked into, and so is the
// element of a list of structs, whose leaves' paths say "[]" ("cameras[].url"); any other
// field is a leaf (a scalar, a list of scalars, a pointer); fields YAML leaves out are left
// out. inList says that t is the element of the list at index.
func eachConfigField(t reflect.Type, prefix string, index []int, inList bool, f func(path string, index []int)) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if !sf.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name) // yaml.v3's default
		}
		path, idx := name, index
		if prefix != "" {
			path = prefix + "." + name
		}
		if !inList {
			idx = append(slices.Clip(index), i)
		}
		switch ft := sf.Type; {
		case walkable(ft):
			eachConfigField(ft, path, idx, inList, f)
		case (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && walkable(ft.Elem()):
			eachConfigField(ft.Elem(), path+"[]", idx, true, f)
		default:
			f(path, idx)
		}
	}
}

// walkable reports whether eachConfigField walks into t: a struct with exported fields (one
// without, such as time.Time, is a leaf).
func walkable(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			return true
		}
	}
	return false
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
// one: new ones start, removed (or disabled) ones stop, ones whose source changed restart
// (the objects of a camera stopped or restarted end, with the reason: results.retire),
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

// apply runs on the run goroutine, between the slicer's rounds, and puts req.cfg in force.
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
	why := map[*camera]analytics.Why{} // why each camera stopped: its objects' end
	disabled := map[string]bool{}
	for _, cc := range cfg.Cameras {
		if !cc.Enabled {
			disabled[cc.ID] = true
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
			why[c] = analytics.WhySourceChanged
			// Its objects end before its successor can see any (and write the same keys).
			d.results.retire(c, analytics.WhySourceChanged, false)
			cams = append(cams, d.startCamera(cc, cfg.Pipeline.Slice, model))
			res.Restarted = append(res.Restarted, cc.ID)
		}
	}
	for _, c := range d.cams {
		if _, gone := byID[c.cfg.ID]; gone {
			stop = append(stop, c)
			why[c] = analytics.WhyCameraRemoved
			if disabled[c.cfg.ID] {
				why[c] = analytics.WhyCameraDisabled
			}
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
	if d.ha != nil {
		d.ha.SetCameras(haCameras(cfg)) // cameras, zones and lines added are announced, those gone removed
	}

	for _, c := range stop {
		c.src.Close()
		c.box.Close()
		c.snap.close()
		// Its objects end now (a job in flight is published without analysis; a restarted
		// camera's ended above). A camera removed from the file leaves no key in the state
		// bucket; a disabled one keeps its line counts and ids for when it is enabled again.
		if why[c] != analytics.WhySourceChanged {
			d.results.retire(c, why[c], why[c] == analytics.WhyCameraRemoved)
		}
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
// It runs on the run goroutine under d.mu, so the slicer and readers of Cameras see the old
// schedule or the new one. The result stage never reads the schedule: it gets the interval
// of each job with the job (jobRun).
func (c *camera) reschedule(cc config.Camera, slice time.Duration) {
	n := newSchedule(cc.FPS, slice)
	c.cfg.FPS, c.cfg.Weight, c.sched.interval, c.sched.slack = cc.FPS, cc.Weight, n.interval, n.slack
	if !(c.cfg.Weight > 0) { // a Config built in Go without one (newCamera)
		c.cfg.Weight = 1
	}
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
