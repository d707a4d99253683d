// Package pipeline is visiond's core: it starts every stage from a config and connects them.
// Camera sources fill one-slot mailboxes (the newest frame wins); a time-slicer wakes every
// slice, whenever a worker frees up and whenever a frame arrives for a camera that is due,
// and hands batch=1 jobs for the cameras that are due (each at its own fps) to idle
// inference workers, fairly, starting each round where the last one stopped; each result
// becomes a detection event on NATS.
package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/clips"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/pool"
	"github.com/visiond/visiond/internal/limits"
	"github.com/visiond/visiond/internal/redact"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/homeassistant"
	"github.com/visiond/visiond/sources"
)

// summaryEvery is how often per-camera counters are summarized in the log.
const summaryEvery = 10 * time.Second

// Daemon runs visiond: Start builds and starts every stage, Close stops them in order.
type Daemon struct {
	// Config is the config to start with. The daemon never changes it: Running returns the
	// config in force, which a reload changes.
	Config *config.Config
	// ConfigPath is the file Config was loaded from: the daemon watches it, and reloads it
	// when it has changed and on ReloadNow. "" (the embedded config, or one built in code):
	// nothing to watch or reload.
	ConfigPath string
	// Reloading and Reloaded, when set, are called before and after each reload of
	// ConfigPath, applied or rejected (systemd's RELOADING=1 and READY=1).
	Reloading func()
	Reloaded  func(ReloadResult, error)
	Logger    *slog.Logger
	// WorkerCommand is the argv that starts an inference worker process; nil means this
	// executable's "worker" subcommand. WorkerEnv is added to the worker's environment.
	WorkerCommand []string
	WorkerEnv     []string

	log            *slog.Logger
	natsServer     *sinks.Server
	pub            *sinks.Publisher
	state          *sinks.State             // with JetStream: the analytics' key-value bucket
	snapshots      *sinks.Snapshots         // with JetStream: the tracked objects' evidence
	clips          *sinks.Clips             // with JetStream: the clip store (clipsapi.go reads it)
	ha             *homeassistant.Discovery // with nats.mqtt.discovery: the cameras announced to Home Assistant
	clipDir        string                   // where the cameras' recorders write clips (clips.go)
	pools          *workerPools
	slicer         *slicer  // dispatches the cameras' frames to the pools; its result stage publishes the results
	results        *results // the slicer's result stage: the run goroutine ends cameras' objects through it
	stage          *stage   // the result stage's goroutines: the pools hand each job's end over to them
	httpSrv        *http.Server
	httpAddr       net.Addr
	cams           []*camera
	decoderGate    *sources.DecoderGate  // every camera's GPU decoder opens through it
	frames         *sources.FrameBuffers // every camera's frame buffers
	snapBufs       *sources.FrameBuffers // every camera's frames kept for snapshots and evidence (copies, in their frames' formats)
	natsCaches     natsCachesFigure      // the NATS server's block buffers, read once a collection (Memory)
	scalers        *sources.Scalers      // every camera's scalers: letterbox at decode, conversion to RGB24 at dispatch
	budget         *memoryBudget         // the memory budget of the daemon and its workers (budget.go)
	reloads        chan reloadRequest
	mu             sync.RWMutex   // guards cams and pools for readers outside the run goroutine, which alone changes them
	retiring       sync.WaitGroup // pools replaced by a reload, closing
	reloadFailures atomic.Uint64
	lastReload     atomic.Int64 // unix ns of the start or the last reload applied
	lastReloadOK   atomic.Bool  // whether the last reload (or the start) was applied
	leaf           leafLink     // the embedded server's link to the hub, when it has one
	heartbeat      atomic.Int64 // unix ns of the slicer's last round
	started        time.Time
	lastHealth     time.Time               // run goroutine
	healthPrev     map[string]healthCounts // run goroutine
	flushTimeout   time.Duration           // how long Close waits for events to be acknowledged
	stateLock      *os.File                // the state directory's lock file (statelock.go); nil when unused

	// running is the config in force: Config, with what reloads applied. It is the one
	// place the daemon reads its settings from once started (no copies in fields), so a
	// reload is seen whole, by every goroutine, at once.
	running   atomic.Pointer[config.Config]
	reloadMu  sync.Mutex  // one reload at a time
	editMu    sync.Mutex  // one save of the editor's at a time (edit.go)
	reloadNow chan string // to the config goroutine: reload ConfigPath, for this trigger

	wake       chan struct{}
	ctx        context.Context // ends with Close
	cancel     context.CancelFunc
	done       chan struct{}
	configDone chan struct{}  // the config goroutine's; nil when it was not started
	wg         sync.WaitGroup // the HTTP server's goroutine
	closed     sync.Once
}

// Start starts every stage: NATS (embedded or external), the worker pool (waiting until each
// worker has loaded the model), the cameras, the slicer, the HTTP endpoint and, with a
// ConfigPath, the config goroutine that watches it. On error, whatever was started is
// stopped again.
func (d *Daemon) Start() (err error) {
	cfg := d.Config
	d.running.Store(cfg)
	d.log = d.Logger
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.started = time.Now()
	d.lastReload.Store(d.started.UnixNano())
	d.lastReloadOK.Store(true)
	d.leaf.since.Store(d.started.UnixNano())
	d.wake = make(chan struct{}, 1)
	d.done = make(chan struct{})
	d.decoderGate = sources.NewDecoderGate(sources.DefaultDecoderOpens, sources.DefaultDecoderCalls)
	ctx, cancel := context.WithCancel(context.Background())
	d.ctx, d.cancel = ctx, cancel
	defer func() {
		if err != nil {
			close(d.done) // run never started
			d.Close()
		}
	}()

	if err := d.lockState(cfg); err != nil {
		return err
	}
	if err := d.startNATS(cfg); err != nil {
		return err
	}

	d.reloads = make(chan reloadRequest)
	d.pools = &workerPools{}
	if err := d.pools.start(ctx, cfg.Workers, d.WorkerCommand, d.WorkerEnv, d.log.With("component", "infer")); err != nil {
		return err
	}
	model := d.pools.model()
	if err := checkClasses(cfg, model); err != nil {
		return err
	}
	// The model's input never changes without a restart (reload refuses it): every camera's
	// frames, and the frames kept for snapshots, are of its size.
	d.frames = sources.NewFrameBuffers(model.InputW, model.InputH)
	d.snapBufs = sources.NewFrameBuffers(model.InputW, model.InputH)
	d.scalers = &sources.Scalers{}
	cgMem, cgErr := limits.ReadMemory(limits.DefaultProc)
	d.budget = newMemoryBudget(cfg.MemoryLimitMiB, cgMem, cgErr, d.log.With("component", "memory"))

	for _, cc := range cfg.Cameras {
		if cc.Enabled {
			d.cams = append(d.cams, d.startCamera(cc, cfg.Pipeline.Slice, model))
		}
	}
	rs := &results{pub: d.pub, log: d.log, clipDir: d.clipDir, budget: d.budget}
	if d.state != nil { // a nil pointer in the interface would not be nil
		rs.state, rs.snapshots = d.state, d.snapshots
		if d.stateLock != nil { // the embedded server's store: its reservations need a floor on the disk (idfloor.go)
			rs.ids = &floorIDs{store: d.state, dir: filepath.Join(filepath.Dir(d.stateLock.Name()), idFloorDir)}
		}
	}
	if d.clips != nil {
		rs.clips = d.clips
	}
	d.results = rs
	d.slicer = &slicer{
		jobs:    d.pools,
		results: rs,
		resized: func() { d.pools.shrinkArenas() }, // the pools in force (run goroutine), not those at start
		wake:    d.wakeUp,
		log:     d.log,
		cams:    d.cams,
	}
	// As many goroutines as the workers at start run sessions: results of as many cameras
	// are finished side by side as the workers answer at once.
	d.stage = newStage(d.pools.sessions(), d.slicer.end)
	d.slicer.handOver = d.stage.put

	if cfg.HTTP.Listen != "" {
		if err := d.startHTTP(cfg.HTTP); err != nil {
			return err
		}
	}

	// Logged before the run and config goroutines start: a reload may change cams, pools and
	// model from then on.
	d.log.Info("visiond running", "site", cfg.Site, "cameras", len(d.cams), "workers", len(d.pools.workers()),
		"model", filepath.Base(model.Path), "provider", model.Provider, "nats", redact.URL(d.NATSURL()),
		"memory_budget", d.budget.describe())
	d.logWarnings(cfg)
	d.applyBudget(time.Now())                // the Go limit from the start, not from the first summary
	d.heartbeat.Store(time.Now().UnixNano()) // healthy from the start: the first round comes within a slice
	go d.run(ctx)
	if d.ConfigPath != "" {
		d.startConfig(ctx)
	}
	return nil
}

// startCamera starts a camera's source, scaling its frames to the input of model, and
// returns the camera, ready for the slicer.
func (d *Daemon) startCamera(cc config.Camera, slice time.Duration, model infer.ModelInfo) *camera {
	c := newCamera(cc, slice, d.wakeUp)
	c.log = d.log
	c.src = cc.Source()
	c.src.InputW, c.src.InputH = model.InputW, model.InputH
	c.src.DecoderGate = d.decoderGate
	c.src.Buffers = d.frames
	c.src.Scalers = d.scalers
	c.snap.bufs = d.snapBufs
	c.src.OnFrame, c.src.OnPacket = c.onFrame, c.onPacket
	c.src.OnStatus = func(ch sources.StatusChange) {
		d.publishStatus(ch)
		if ch.State != sources.StateOnline && ch.Previous == sources.StateOnline {
			c.streamEnded()
		}
	}
	c.src.Logger = d.log // the camera adds its id and redacted URL
	if d.clips != nil && clipsKind(cc.Kind) && c.analytics().Clips.Enabled {
		// The ring from the stream's first packet: an object seen in the camera's first
		// seconds gets its clip from the stream's first keyframe (the recorder starts with
		// the camera's first result, and takes this ring).
		c.ring.Store(clips.NewRing(ringKeep(c.analytics().Clips, c.stage.interval, 0), ringMaxBytes))
	}
	c.src.Start()
	return c
}

// Close stops intake, then the workers (each in-flight job ends with a result or an error),
// flushes the publisher and stops the servers. Safe to call twice.
func (d *Daemon) Close() {
	d.closed.Do(func() {
		if d.cancel != nil {
			d.cancel()
			<-d.done
		}
		if d.configDone != nil {
			<-d.configDone // a reload under way has ended: it sees the daemon stopped
		}
		if d.httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = d.httpSrv.Shutdown(ctx)
			cancel()
			d.wg.Wait()
		}
		for _, c := range d.cams {
			c.src.Close()
		}
		// No new jobs now; let those in flight finish and publish, within a bound.
		if d.slicer != nil {
			d.slicer.drain(d.drainTimeout())
		}
		d.retiring.Wait()
		if d.pools != nil {
			d.pools.close()
		}
		// Every job's end has been handed over: the stage runs those queued, and stops.
		if d.stage != nil {
			d.stage.stop()
		}
		// No result comes any more: every object ends, its zones' occupancy with it, and
		// the reservations of ids end, before the state and the publisher flush.
		if d.results != nil {
			for _, c := range d.cams {
				d.results.retire(c, analytics.WhyShutdown, false)
			}
			d.results.close()
		}
		for _, c := range d.cams {
			c.box.Close()
			c.snap.close()
		}
		if d.frames != nil {
			d.frames.Close()
			d.snapBufs.Close()
			d.scalers.Close()
		}
		if d.ha != nil { // offline: the cameras' entities become unavailable
			d.ha.Close()
		}
		if d.snapshots != nil {
			d.snapshots.Close(d.flushTimeout)
		}
		if d.clips != nil {
			d.clips.Close(d.flushTimeout)
		}
		if d.state != nil {
			d.state.Close(d.flushTimeout)
		}
		if d.pub != nil {
			d.pub.Close(d.flushTimeout)
		}
		if d.natsServer != nil {
			d.natsServer.Close()
		}
		if d.budget != nil {
			d.budget.close()
		}
		d.unlockState() // the store is closed: another daemon may open it now
	})
}

// Healthy reports whether the slicer went round within the last few seconds (it ticks every
// slice): the systemd watchdog is fed only while it does.
func (d *Daemon) Healthy() bool {
	return time.Since(time.Unix(0, d.heartbeat.Load())) < max(5*time.Second, 10*d.Running().Pipeline.Slice)
}

// drainTimeout bounds how long Close waits for jobs in flight: a job's own deadline.
func (d *Daemon) drainTimeout() time.Duration {
	cfg := d.Running()
	if cfg == nil || cfg.Workers.JobTimeout <= 0 {
		return pool.DefaultJobTimeout
	}
	return cfg.Workers.JobTimeout
}

// Running returns the config in force: Config with what reloads have applied, where the
// sections that need a restart keep their values from start (so it may differ from the
// file). Config before Start. It is never changed: a reload puts a new one in force.
func (d *Daemon) Running() *config.Config {
	if cfg := d.running.Load(); cfg != nil {
		return cfg
	}
	return d.Config
}

// NATSURL is the URL of the NATS server the daemon publishes to.
func (d *Daemon) NATSURL() string {
	if d.natsServer != nil {
		return d.natsServer.ClientURL()
	}
	return d.Running().NATS.URL
}

// HTTPAddr is the address the HTTP endpoint listens on, or nil when it is disabled.
func (d *Daemon) HTTPAddr() net.Addr { return d.httpAddr }

// logWarnings logs what cfg, valid, will likely not do as meant (config.Config.Warnings): at
// start and after each reload applied.
func (d *Daemon) logWarnings(cfg *config.Config) {
	for _, w := range cfg.Warnings() {
		d.log.Warn("config: " + w)
	}
}

// model describes the model that the workers in force loaded.
func (d *Daemon) model() infer.ModelInfo {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.pools.model()
}

// Workers reports the inference workers.
func (d *Daemon) Workers() []infer.WorkerStatus {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.pools.workers()
}

func (d *Daemon) run(ctx context.Context) {
	defer close(d.done)
	tick := time.NewTicker(d.Running().Pipeline.Slice)
	defer tick.Stop()
	summary := time.NewTicker(summaryEvery)
	defer summary.Stop()
	var healthC <-chan time.Time
	if every := d.Running().NATS.HealthInterval; every > 0 && d.pub != nil {
		health := time.NewTicker(every)
		defer health.Stop()
		healthC = health.C
	}
	var leafC <-chan time.Time
	if d.hasLeaf() {
		leaf := time.NewTicker(leafCheckEvery)
		defer leaf.Stop()
		leafC = leaf.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-summary.C:
			d.logSummary()
			d.frames.Trim() // the buffers put back last lie free too long when the cameras stop
			d.snapBufs.Trim()
			d.scalers.Trim()
			d.applyBudget(now)
			continue
		case now := <-healthC:
			d.publishHealth(now)
			continue
		case now := <-leafC:
			d.leaf.observe(d.natsServer.LeafConnected(), now, d.log.With("component", "nats-server"))
			continue
		case req := <-d.reloads:
			req.done <- d.apply(req)
			tick.Reset(d.Running().Pipeline.Slice)
		case <-tick.C:
		case <-d.wake:
		}
		now := time.Now()
		d.heartbeat.Store(now.UnixNano())
		d.slicer.dispatch(now, d.Running().Pipeline.MaxFrameAge)
		d.results.sweep(now, d.cams) // the objects of cameras that give no frames end
	}
}

func (d *Daemon) wakeUp() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *Daemon) logSummary() {
	for _, c := range d.cams {
		st := c.src.Status()
		s := c.summarize(st)
		_, ageMax := c.frameAge.get(true)
		args := []any{"camera", c.cfg.ID, "state", st.State, "analysed", s.analysed, "objects", s.objects,
			"superseded", s.superseded, "stale", s.stale, "lost", s.lost,
			"frame_age_max_ms", ms(ageMax)}
		if s.lastErr != "" {
			args = append(args, "last_error", s.lastErr)
		}
		if st.LastError != "" {
			args = append(args, "source_error", st.LastError)
		}
		d.log.Info(fmt.Sprintf("last %s", summaryEvery), args...)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// modelName is the model's name in events: its file name without the extension.
func modelName(m infer.ModelInfo) string {
	return strings.TrimSuffix(filepath.Base(m.Path), filepath.Ext(m.Path))
}
