// Package pipeline is visiond's core: it starts every stage from a config and connects them.
// Camera sources fill one-slot mailboxes (the newest frame wins); a time-slicer wakes every
// slice, whenever a worker frees up and whenever a frame arrives for a camera that is due,
// and hands batch=1 jobs for the cameras that are due (each at its own fps) to idle
// inference workers, fairly, starting each round where the last one stopped; each result
// becomes a detection event on NATS.
package pipeline

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/pool"
	"github.com/visiond/visiond/sinks"
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
	instance       string
	natsServer     *sinks.Server
	pub            *sinks.Publisher
	pools          *workerPools
	jobs           dispatcher                        // the pools; a stand-in in the slicer's unit tests
	publish        func(*sinks.DetectionEvent) error // the publisher; a stand-in in unit tests
	httpSrv        *http.Server
	httpAddr       net.Addr
	model          infer.ModelInfo
	cams           []*camera
	site           string        // fixed at Start: a new site needs a restart
	slice          time.Duration // the slicer's period (run goroutine)
	maxAge         time.Duration // pipeline.max_frame_age (run goroutine)
	reloads        chan reloadRequest
	mu             sync.RWMutex   // guards cams and pools for readers outside the run goroutine, which alone changes them
	retiring       sync.WaitGroup // pools replaced by a reload, closing
	reloadFailures atomic.Uint64
	heartbeat      atomic.Int64   // unix ns of the slicer's last round
	inflight       sync.WaitGroup // jobs dispatched and not finished
	vtime          float64        // virtual time of the fair queue: start of the last job dispatched
	ready          []candidate    // reused by dispatch
	started        time.Time
	healthEvery    time.Duration           // nats.health_interval
	lastHealth     time.Time               // run goroutine
	healthPrev     map[string]healthCounts // run goroutine
	flushTimeout   time.Duration           // how long Close waits for events to be acknowledged

	running   atomic.Pointer[config.Config] // the config in force: Config, with what reloads applied
	reloadMu  sync.Mutex                    // one reload at a time
	reloadNow chan string                   // to the config goroutine: reload ConfigPath, for this trigger

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
	d.instance = newInstanceID()
	d.started = time.Now()
	d.wake = make(chan struct{}, 1)
	d.done = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	d.ctx, d.cancel = ctx, cancel
	defer func() {
		if err != nil {
			close(d.done) // run never started
			d.Close()
		}
	}()

	if err := d.startNATS(cfg); err != nil {
		return err
	}

	d.site = cfg.Site
	d.slice, d.maxAge = cfg.Pipeline.Slice, cfg.Pipeline.MaxFrameAge
	d.reloads = make(chan reloadRequest)
	d.pools = &workerPools{}
	if err := d.pools.start(ctx, cfg.Workers, d.WorkerCommand, d.WorkerEnv, d.log.With("component", "infer")); err != nil {
		return err
	}
	d.model = d.pools.model()
	d.jobs = d.pools
	d.publish = d.pub.PublishDetections

	for _, cc := range cfg.Cameras {
		if cc.Enabled {
			d.cams = append(d.cams, d.startCamera(cc, cfg.Pipeline.Slice))
		}
	}

	if cfg.HTTP.Listen != "" {
		if err := d.startHTTP(cfg.HTTP); err != nil {
			return err
		}
	}

	d.heartbeat.Store(time.Now().UnixNano()) // healthy from the start: the first round comes within a slice
	go d.run(ctx)
	if d.ConfigPath != "" {
		d.startConfig(ctx)
	}
	d.log.Info("visiond running", "site", cfg.Site, "cameras", len(d.cams), "workers", len(d.pools.workers()),
		"model", filepath.Base(d.model.Path), "provider", d.model.Provider, "nats", config.Redact(d.NATSURL()))
	return nil
}

// startCamera starts a camera's source and returns the camera, ready for the slicer.
func (d *Daemon) startCamera(cc config.Camera, slice time.Duration) *camera {
	c := newCamera(cc, slice, d.wakeUp)
	c.src = cc.Source()
	c.src.InputW, c.src.InputH = d.model.InputW, d.model.InputH
	c.src.OnFrame, c.src.OnStatus = c.onFrame, d.publishStatus
	c.src.Logger = d.log // the camera adds its id and redacted URL
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
		d.drain(d.drainTimeout())
		d.retiring.Wait()
		if d.pools != nil {
			d.pools.close()
		}
		for _, c := range d.cams {
			c.box.Close()
		}
		if d.pub != nil {
			d.pub.Close(d.flushTimeout)
		}
		if d.natsServer != nil {
			d.natsServer.Close()
		}
	})
}

// Healthy reports whether the slicer went round within the last few seconds (it ticks every
// slice): the systemd watchdog is fed only while it does.
func (d *Daemon) Healthy() bool {
	return time.Since(time.Unix(0, d.heartbeat.Load())) < max(5*time.Second, 10*d.slice)
}

// drain waits until no job is in flight, or until timeout. (After a timeout the waiting
// goroutine ends when the pools are closed, which ends every job.)
func (d *Daemon) drain(timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		d.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		d.log.Warn("stopping with jobs still in flight; they end as lost", "waited", timeout)
	}
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

// Workers reports the inference workers.
func (d *Daemon) Workers() []infer.WorkerStatus {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.pools.workers()
}

func (d *Daemon) run(ctx context.Context) {
	defer close(d.done)
	tick := time.NewTicker(d.slice)
	defer tick.Stop()
	summary := time.NewTicker(summaryEvery)
	defer summary.Stop()
	var healthC <-chan time.Time
	if d.healthEvery > 0 && d.pub != nil {
		health := time.NewTicker(d.healthEvery)
		defer health.Stop()
		healthC = health.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-summary.C:
			d.logSummary()
			continue
		case now := <-healthC:
			d.publishHealth(now)
			continue
		case req := <-d.reloads:
			req.done <- d.apply(req)
			tick.Reset(d.slice)
		case <-tick.C:
		case <-d.wake:
		}
		now := time.Now()
		d.heartbeat.Store(now.UnixNano())
		d.dispatch(now)
	}
}

// dispatch hands one job to an idle worker for each camera that is due and has a fresh
// frame, until no worker is idle. The order is start-time fair queuing: each camera has a
// virtual pass that a job advances by 1/weight, and the cameras with the smallest pass go
// first, so under overload each camera gets a share of the workers in proportion to its
// weight (up to its fps) and none starves; a camera that was idle or offline starts at the
// current virtual time instead of catching up in a burst.
func (d *Daemon) dispatch(now time.Time) {
	ready := d.ready[:0]
	for _, c := range d.cams {
		if c.busy.Load() || c.nextDue.Sub(now) > c.slack {
			continue
		}
		f := c.box.Take()
		if f == nil {
			continue
		}
		if now.Sub(f.Received) > d.maxAge {
			f.Release()
			c.stale.Add(1)
			continue
		}
		ready = append(ready, candidate{c, f, max(c.pass, d.vtime)})
	}
	slices.SortStableFunc(ready, func(a, b candidate) int { return cmp.Compare(a.start, b.start) })
	for i, r := range ready {
		c, f := r.cam, r.frame
		job := infer.Job{Camera: c.cfg.ID, Seq: f.Seq, Captured: f.Captured, Letterbox: f.Letterbox}
		c.busy.Store(true)
		received := f.Received
		// The round's now may precede a frame that arrived during the round: take the
		// dispatch time per job, so that a frame's queue time is never negative.
		dispatched := time.Now()
		d.inflight.Add(1)
		c.snap.offer(f.Pix, f.Letterbox, f.Seq, now)
		if !d.jobs.TryDispatch(job, f.Pix, func(res infer.Result) { d.finish(c, res, received, dispatched) }) {
			d.inflight.Done()
			c.busy.Store(false)
			for _, r := range ready[i:] { // no worker idle: the frames wait for the next round
				r.cam.box.Restore(r.frame)
			}
			break
		}
		g := [2]int{f.Letterbox.SrcW, f.Letterbox.SrcH}
		f.Release() // TryDispatch copied the pixels into the worker's slot
		if g != c.geometry {
			if c.geometry != [2]int{} {
				// Buffers sized for the old resolution may sit in the workers' arenas.
				d.log.Info("camera resolution changed; shrinking worker memory arenas", "camera", c.cfg.ID,
					"from", fmt.Sprintf("%dx%d", c.geometry[0], c.geometry[1]), "to", fmt.Sprintf("%dx%d", g[0], g[1]))
				d.pools.shrinkArenas()
			}
			c.geometry = g
		}
		c.pass = r.start + 1/c.cfg.Weight
		d.vtime = r.start
		c.frameAge.observe(dispatched.Sub(received))
		// Keep to the camera's schedule, but never burst to catch up after a gap.
		next := c.nextDue.Add(c.interval)
		if next.Before(now) {
			next = now.Add(c.interval)
		}
		c.schedule(next)
	}
	clear(ready) // drop the frame pointers; keep the capacity
	d.ready = ready[:0]
}

// candidate is a camera ready for a job in this dispatch round.
type candidate struct {
	cam   *camera
	frame *sources.Frame
	start float64 // virtual start time of its job
}

// finish runs on the pool's goroutine when a job ends.
// Latencies are measured on this host's clock from when the frame was decoded (received);
// captured_at is the camera's own capture time.
func (d *Daemon) finish(c *camera, r infer.Result, received, dispatched time.Time) {
	defer d.inflight.Done()
	defer d.wakeUp()
	defer c.busy.Store(false)
	if r.Err != nil {
		switch {
		case errors.Is(r.Err, infer.ErrPoolClosed): // cut off by shutdown after the drain timed out
			c.shutdown.Add(1)
		case errors.Is(r.Err, infer.ErrJobTimeout):
			c.timeouts.Add(1)
		case errors.Is(r.Err, infer.ErrJobRejected):
			c.rejected.Add(1)
		default:
			c.lost.Add(1)
		}
		c.noteError(r.Err)
		return
	}
	published := time.Now()
	ev := &sinks.DetectionEvent{
		Version:     sinks.Version,
		ID:          sinks.EventID(d.instance, c.cfg.ID, r.Job.Seq),
		Site:        d.site,
		Camera:      c.cfg.ID,
		CapturedAt:  r.Job.Captured.UTC(),
		PublishedAt: published.UTC(),
		Frame:       sinks.FrameInfo{Seq: r.Job.Seq, Width: r.Job.Letterbox.SrcW, Height: r.Job.Letterbox.SrcH},
		Model:       strings.TrimSuffix(filepath.Base(d.model.Path), filepath.Ext(d.model.Path)),
		Detections:  make([]sinks.Detection, 0, len(r.Detections)),
		LatencyMS: sinks.Latency{
			Queue: ms(dispatched.Sub(received)),
			Pre:   ms(r.Pre),
			Infer: ms(r.Run),
			Post:  ms(r.Post),
			Total: ms(published.Sub(received)),
		},
	}
	w, h := float64(r.Job.Letterbox.SrcW), float64(r.Job.Letterbox.SrcH)
	for _, det := range r.Detections {
		b := det.Box
		ev.Detections = append(ev.Detections, sinks.Detection{
			Label:   det.Label,
			ClassID: det.ClassID,
			Score:   det.Score,
			Box:     sinks.Box{X: b.X, Y: b.Y, W: b.W, H: b.H},
			BoxNorm: sinks.Box{X: b.X / w, Y: b.Y / h, W: b.W / w, H: b.H / h},
		})
	}
	c.countResult(ev)
	c.snap.result(r.Job.Seq, r.Detections)
	c.inferAge.observe(r.Run)
	c.total.observe(published.Sub(received))
	c.fps.tick(published)
	if err := d.publish(ev); err != nil {
		c.noteError(err)
	}
}

// dispatcher hands a job to an idle worker; *pool.Pool is the real one.
type dispatcher interface {
	TryDispatch(job infer.Job, pix []byte, done func(infer.Result)) bool
}

// publishStatus publishes a camera's change of state; it runs on the camera's goroutines.
func (d *Daemon) publishStatus(ch sources.StatusChange) {
	ev := &sinks.StatusEvent{Version: sinks.Version, Site: d.site, Camera: ch.Camera, State: string(ch.State),
		Previous: string(ch.Previous), Reason: ch.Reason, At: ch.At.UTC(), GapMS: ms(ch.Gap)}
	if err := d.pub.PublishStatus(ev); err != nil {
		d.log.Warn("status event not published", "camera", ch.Camera, "state", ch.State, "error", err)
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

func newInstanceID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}
