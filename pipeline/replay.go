package pipeline

// Replay: a recording analysed as the daemon would analyse it live, frame by frame on the
// video's own timestamps and as fast as the workers go, so that zones and lines can be tuned
// on it and accuracy tests do not depend on the machine's speed.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/sources"
)

// ReplayOptions say what Replay analyses and how.
type ReplayOptions struct {
	Config *config.Config // loaded and validated: the model, the workers, the analytics defaults
	Camera string         // id of the camera in Config whose zones, lines, filters and fps are used; "" = the only camera
	File   string         // the video to analyse (any file the daemon's file cameras play, e.g. .ts, .avi, .mp4)
	FPS    float64        // frames analysed per second of video; 0 = the camera's fps (a camera without fps: every frame)
	Start  time.Time      // captured_at of the video's first frame; zero = time.Now() when Replay starts
	Log    *slog.Logger   // nil = discard

	// WorkerCommand is the argv that starts an inference worker process; nil means this
	// executable's "worker" subcommand (as Daemon.WorkerCommand). WorkerEnv is added to the
	// worker's environment.
	WorkerCommand []string
	WorkerEnv     []string

	// OnResult, if set, is called with each analysed frame's result from the worker, in
	// frame order, before the result stage takes it: the detections as the model gave them,
	// before the camera's filters (a benchmark records them to run the scene again at other
	// rates). It runs on Replay's goroutine and must not keep the result's slices.
	OnResult func(infer.Result)
}

// ReplayStats is what a replay did.
type ReplayStats struct {
	Frames   int           // frames decoded
	Analysed int           // frames analysed (sent through the model and the scene)
	Video    time.Duration // the video's length by its timestamps
	Elapsed  time.Duration // wall time taken
}

// replayAttempts is how many times a frame is sent to a worker before the replay fails: a
// worker that dies or times out is replaced by its pool, and the frame goes again, so that
// every chosen frame is analysed.
const replayAttempts = 3

// Replay analyses the video frame by frame on its own timestamps, as fast as the workers go,
// every chosen frame analysed (none skipped for being late), through the same result stage as
// the daemon (scene, evidence off, events), and hands every event to sink. Frame i's
// captured_at is opt.Start + its pts. At the end of the video every live object ends (its end
// events and zone exits are published) before Replay returns.
//
// Frames are chosen at the camera's fps by the rule the daemon's slicer applies to a live
// camera (a frame is taken once the camera is due, less its slack; the next is due one
// interval after this one was, or one interval after now when it fell behind), with the
// video's time for the wall clock. Two differences: the daemon takes the newest frame in the
// mailbox when a worker frees up, so a busy daemon may take a later frame than the first one
// due, while a replay is never late and always takes the first one due; and the slack, the
// daemon's min(slice/2, interval/4) for its ticker's jitter, is at most half a frame of the
// video, so that the frame taken is the one nearest its due time, never a whole frame early
// (at 2 fps on a 10 fps video with a 200 ms slice the daemon's 100 ms would take frame 0.4 s
// for 0.5 s, and 21 frames of a 10 s video): a video of length L gives ceil(L x fps).
func Replay(ctx context.Context, opt ReplayOptions, sink EventSink) (ReplayStats, error) {
	began := time.Now()
	stats := ReplayStats{}
	if opt.Config == nil {
		return stats, errors.New("no config")
	}
	if sink == nil {
		return stats, errors.New("no event sink")
	}
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cc, err := replayCamera(opt.Config, opt.Camera)
	if err != nil {
		return stats, err
	}
	if opt.FPS < 0 || opt.FPS != opt.FPS {
		return stats, fmt.Errorf("fps %v: want 0 (the camera's) or more", opt.FPS)
	}
	video, err := sources.OpenVideoFile(opt.File)
	if err != nil {
		return stats, err
	}
	defer video.Close()

	every := false // every frame analysed: the camera has no fps and none was asked
	switch {
	case opt.FPS > 0:
		cc.FPS = opt.FPS
	case cc.FPS > 0:
	default:
		every = true
		cc.FPS = 1 / video.FrameDuration().Seconds() // the tracker's frame interval
	}
	start := opt.Start
	if start.IsZero() {
		start = began
	}

	pools := &workerPools{}
	defer pools.close()
	if err := pools.start(ctx, opt.Config.Workers, opt.WorkerCommand, opt.WorkerEnv, log.With("component", "infer")); err != nil {
		return stats, err
	}
	if err := checkClasses(opt.Config, pools.model()); err != nil {
		return stats, err
	}
	model := pools.model()
	c := newCamera(cc, opt.Config.Pipeline.Slice, func() {})
	r := &replay{
		c:        c,
		rs:       &results{pub: sink, ids: &countedIDs{}, log: log},
		pools:    pools,
		video:    video,
		inW:      model.InputW,
		inH:      model.InputH,
		start:    start,
		log:      log.With("camera", c.cfg.ID, "file", opt.File),
		choose:   decimator{interval: c.sched.interval, slack: min(c.sched.slack, video.FrameDuration()/2), every: every},
		results:  make(chan infer.Result, replayWindow(pools)),
		onResult: opt.OnResult,
	}
	r.log.Info("replaying", "fps", cc.FPS, "every_frame", every, "workers", len(pools.workers()))
	err = r.run(ctx)
	stats = ReplayStats{Frames: r.decoded, Analysed: r.analysed, Video: r.length, Elapsed: time.Since(began)}
	if err != nil {
		return stats, err
	}
	r.rs.endCamera(c, analytics.WhyVideoEnd) // every object still followed ends where the video does
	stats.Elapsed = time.Since(began)
	r.log.Info("replayed", "frames", stats.Frames, "analysed", stats.Analysed, "video", stats.Video, "elapsed", stats.Elapsed)
	return stats, nil
}

// replayCamera returns the camera of cfg with that id, or the only one when id is "" (the
// only enabled one when there are several cameras).
func replayCamera(cfg *config.Config, id string) (config.Camera, error) {
	var ids, enabled []string
	var last config.Camera
	for _, cc := range cfg.Cameras {
		if id != "" && cc.ID == id {
			return cc, nil
		}
		ids = append(ids, cc.ID)
		if cc.Enabled {
			enabled = append(enabled, cc.ID)
			last = cc
		}
	}
	switch {
	case len(ids) == 0:
		return config.Camera{}, errors.New("the config has no camera, whose zones, lines and fps to use")
	case id != "":
		return config.Camera{}, fmt.Errorf("no camera %q in the config (its cameras: %s)", id, strings.Join(ids, ", "))
	case len(ids) == 1:
		return cfg.Cameras[0], nil
	case len(enabled) == 1:
		return last, nil
	}
	return config.Camera{}, fmt.Errorf("the config has %d cameras (%s): name the one whose zones and lines to use", len(ids), strings.Join(ids, ", "))
}

// replayWindow is how many jobs a replay keeps in flight: two per worker (each takes up to
// two, to keep its device busy), so that several workers share a replay.
func replayWindow(p *workerPools) int { return max(2, 2*len(p.workers())) }

// decimator chooses a camera's frames at its fps on the video's time, as the slicer does on
// the wall clock (slicer.dispatch).
type decimator struct {
	interval, slack time.Duration
	every           bool          // take every frame
	next            time.Duration // when the next frame is due
	started         bool
}

// take reports whether the frame at `at` of the video is analysed.
func (d *decimator) take(at time.Duration) bool {
	if d.every {
		return true
	}
	if d.started && d.next-at > d.slack {
		return false
	}
	// Keep to the schedule, but never burst to catch up after a gap.
	next := d.next + d.interval
	if !d.started || next < at {
		next = at + d.interval
	}
	d.next, d.started = next, true
	return true
}

// replay is one Replay under way; its fields are run's goroutine's.
type replay struct {
	c        *camera
	rs       *results
	pools    *workerPools
	video    *sources.VideoFile
	inW, inH int
	start    time.Time
	log      *slog.Logger
	choose   decimator
	results  chan infer.Result // the workers' results; holds every job in flight
	onResult func(infer.Result)

	queue    []*replayJob // jobs in frame order, from the oldest not finished
	free     [][]byte     // pixel buffers
	decoded  int
	analysed int
	length   time.Duration // the video's length so far: the latest frame's time plus its duration
}

// replayJob is a chosen frame: its job, its pixels until its result, and its result.
type replayJob struct {
	job      infer.Job
	pix      []byte
	run      jobRun
	attempts int
	res      *infer.Result
	sent     bool
}

// retryEvery is how often a frame that no worker could take (all of them restarting) is
// offered again.
const retryEvery = 50 * time.Millisecond

// run decodes the video, dispatches its chosen frames and finishes their results in frame
// order, until the video ends and every job has finished.
func (r *replay) run(ctx context.Context) error {
	window := cap(r.results)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	eof := false
	for {
		// Decode until the window is full of chosen frames.
		for !eof && len(r.queue) < window {
			j, err := r.nextFrame()
			if errors.Is(err, io.EOF) {
				eof = true
				break
			}
			if err != nil {
				return err
			}
			if j != nil {
				r.queue = append(r.queue, j)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if eof && len(r.queue) == 0 {
			return nil
		}
		waiting := r.dispatch()
		if waiting {
			retry.Reset(retryEvery)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case res := <-r.results:
			if err := r.take(res); err != nil {
				return err
			}
		case <-retry.C:
		}
		retry.Stop()
	}
}

// nextFrame decodes the next frame, and returns its job when it is chosen (nil when not).
func (r *replay) nextFrame() (*replayJob, error) {
	at, err := r.video.Next()
	if err != nil {
		return nil, err
	}
	r.decoded++
	r.length = at + r.video.FrameDuration()
	if !r.choose.take(at) {
		return nil, nil
	}
	pix := r.buffer()
	lb, err := r.video.Draw(pix, r.inW, r.inH)
	if err != nil {
		return nil, err
	}
	j := &replayJob{
		job: infer.Job{Camera: r.c.cfg.ID, Seq: uint64(r.decoded), Captured: r.start.Add(at), Letterbox: lb},
		pix: pix,
		run: jobRun{received: time.Now(), model: r.pools.modelName(), interval: r.c.sched.interval},
	}
	return j, nil
}

// buffer returns a free pixel buffer of the model's input size.
func (r *replay) buffer() []byte {
	if n := len(r.free); n > 0 {
		b := r.free[n-1]
		r.free = r.free[:n-1]
		return b
	}
	return make([]byte, r.inW*r.inH*3)
}

// dispatch sends the queued frames not yet sent to the workers, in frame order, until one
// is refused; it reports whether a frame waits with nothing in flight to wake the loop.
func (r *replay) dispatch() (waiting bool) {
	inflight := 0
	for _, j := range r.queue {
		if j.sent {
			inflight++
			continue
		}
		if j.res != nil {
			continue
		}
		j.run.dispatched = time.Now()
		if !r.pools.TryDispatch(j.job, infer.RGB(j.pix), func(res infer.Result) { r.results <- res }) {
			return inflight == 0
		}
		j.sent = true
		j.attempts++
		inflight++
	}
	return false
}

// take takes a job's result: a failed job goes again (up to replayAttempts), and the
// results at the head of the queue go to the result stage, in frame order.
func (r *replay) take(res infer.Result) error {
	var j *replayJob
	for _, q := range r.queue {
		if q.sent && q.job.Seq == res.Job.Seq {
			j = q
			break
		}
	}
	if j == nil {
		return fmt.Errorf("a result for frame %d, which is not in flight", res.Job.Seq)
	}
	j.sent = false
	if res.Err != nil {
		if errors.Is(res.Err, infer.ErrPoolClosed) || j.attempts >= replayAttempts {
			return fmt.Errorf("frame %d (%v of the video): %w", j.job.Seq, j.job.Captured.Sub(r.start), res.Err)
		}
		r.log.Warn("frame not analysed; sending it again", "seq", j.job.Seq, "attempt", j.attempts, "err", res.Err)
		return nil
	}
	j.res = &res
	r.free = append(r.free, j.pix)
	j.pix = nil
	for len(r.queue) > 0 && r.queue[0].res != nil {
		q := r.queue[0]
		r.queue[0] = nil
		r.queue = r.queue[1:]
		if r.onResult != nil {
			r.onResult(*q.res)
		}
		r.rs.finish(r.c, q.run, *q.res)
		r.analysed++
	}
	return nil
}

// countedIDs gives a replay's scene its blocks of track ids from a counter in memory: its
// objects are numbered from 1, the same each time, apart from any daemon's.
type countedIDs struct {
	mu   sync.Mutex
	next uint64
}

func (c *countedIDs) ReserveTrackIDs(_ context.Context, _ string, atLeast, n uint64) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := max(c.next, atLeast, 1)
	c.next = first + n
	return first, nil
}
