package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/sinks"
)

// The clips part of the bench (issue 23, item 7): what event clips cost the daemon, the
// memory of a camera's ring against pre_capture x the stream's bitrate, how long after an
// object's end its clip is readable, and the clips' bytes per minute of video.

// clipsResult is clips.json.
type clipsResult struct {
	Command string       `json:"command"`
	Daemon  daemonFlags  `json:"daemon"` // Clips: the setting of the rounds with clips on
	Cameras int          `json:"cameras"`
	WarmupS float64      `json:"warmup_s"`
	WindowS float64      `json:"window_s"`
	Rounds  []clipsRound `json:"rounds"` // off, on, off, on, ...
	// Off and On are the means of the rounds without and with clips; Ratio is On ÷ Off of
	// the daemon's CPU per camera (the aim: under 1.02).
	Off   clipsCost `json:"off"`
	On    clipsCost `json:"on"`
	Ratio float64   `json:"daemon_cpu_on_over_off"`
	// Stream is the sample's video bitrate; PreCaptureS, PostCaptureS and MaxLengthS the
	// clips' settings, as the daemon's config package read the config the bench wrote.
	Stream       streamRate `json:"stream"`
	PreCaptureS  float64    `json:"pre_capture_s"`
	PostCaptureS float64    `json:"post_capture_s"`
	MaxLengthS   float64    `json:"max_length_s"`
	// RingBytes and RingSeconds are the rings' memory and the video they span, mean over the
	// cameras and the samples of the rounds with clips on.
	RingBytes   float64 `json:"ring_bytes"`
	RingSeconds float64 `json:"ring_seconds"`
	RingSamples int     `json:"ring_samples"`
	// AfterEnd: per object, its clip event's receive time less its end event's; AfterVideo:
	// per clip, its first clip event's receive time less the clip's end (a capture time on
	// this host's clock): what the recorder and the store add after the video ends. During:
	// objects whose every clip event came before their end (a clip that reached max_length
	// while they lasted) or that had no end event in the round.
	AfterEnd   dist `json:"after_end"`
	AfterVideo dist `json:"after_video"`
	During     int  `json:"clip_events_before_end"`
	ClipEvents int  `json:"clip_events"`
	// Store is the clips of the rounds with clips on, summed.
	Store    clipTotals `json:"store"`
	BadEvent int        `json:"bad_events"`
	Load     loadAvg    `json:"load"`
	Started  time.Time  `json:"started"`
	Seconds  float64    `json:"seconds"`
}

// clipsRound is one daemon run of the comparison: started, warmed up, measured over a window.
type clipsRound struct {
	Clips bool `json:"clips"`
	clipsCost
	Analysed   float64 `json:"analysed_per_s"` // frames analysed per second, all cameras
	Load1Start float64 `json:"load1_start"`
	Load1End   float64 `json:"load1_end"`
}

// clipsCost is what a round measured: CPU seconds per camera per second (cores) of the
// daemon process and of its workers, and the daemon's resident memory at the window's end.
type clipsCost struct {
	DaemonCPU  float64 `json:"daemon_cpu_per_camera"`
	WorkersCPU float64 `json:"workers_cpu_per_camera"`
	DaemonRSS  float64 `json:"daemon_rss_mib"`
}

// streamRate is the bitrate of a video file's first video stream: its packets' bytes over
// their span (ffprobe), the container's overhead left out.
type streamRate struct {
	File     string  `json:"file"`
	Packets  int     `json:"packets"`
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	BitsPerS float64 `json:"bits_per_s"`
}

// dist summarises durations, in seconds.
type dist struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_s"`
	P90 float64 `json:"p90_s"`
	Max float64 `json:"max_s"`
}

func distOf(xs []float64) dist {
	return dist{N: len(xs), P50: pct(xs, .5), P90: pct(xs, .9), Max: maxOf(xs)}
}

// clipTotals are the clips of the rounds with clips on: the recorders' counts
// (/api/cameras), the store's losses (/metrics), and the clips the store lists
// (/api/cameras/<id>/clips) with their bytes and duration.
type clipTotals struct {
	Written   uint64         `json:"written"`
	Failed    uint64         `json:"failed"`
	Lost      uint64         `json:"lost"` // visiond_clips_lost_total, every reason
	Refused   uint64         `json:"refused"`
	Stored    int            `json:"listed"`
	Bytes     int64          `json:"bytes"`
	DurationS float64        `json:"duration_s"`
	Closed    map[string]int `json:"closed"` // listed clips by why they ended
}

// BytesPerMinute is the listed clips' bytes per minute of clip.
func (t clipTotals) BytesPerMinute() float64 { return float64(t.Bytes) / (t.DurationS / 60) }

// clipsCmd runs the daemon on N cameras of the sample in rounds, clips off then on (twice by
// default, so that the difference between the two off rounds shows the noise), each after a
// warm-up long enough to fill the rings, and measures each over a window.
func clipsCmd(args []string) error {
	fs := flag.NewFlagSet("clips", flag.ContinueOnError)
	var f daemonFlags
	f.register(fs)
	out := fs.String("o", "-", "output JSON")
	n := fs.Int("cameras", 4, "cameras")
	rounds := fs.Int("rounds", 2, "pairs of rounds, clips off then on")
	warmup := fs.Duration("warmup", 30*time.Second, "wait after every camera is online (>= pre_capture: the rings are full)")
	window := fs.Duration("window", 120*time.Second, "measurement window of each round")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *n < 1:
		return fmt.Errorf("-cameras %d: want 1 or more", *n)
	case *rounds < 1:
		return fmt.Errorf("-rounds %d: want 1 or more", *rounds)
	case *window < 10*time.Second:
		return fmt.Errorf("-window %v: want 10s or more", *window)
	}
	if f.Clips == "" {
		f.Clips = "{enabled: true}"
	}
	stream, err := probeStream(f.Video)
	if err != nil {
		return err
	}
	res := clipsResult{Command: "bin/visiond-bench " + strings.Join(os.Args[1:], " "), Daemon: f, Cameras: *n, WarmupS: warmup.Seconds(),
		WindowS: window.Seconds(), Stream: stream, Started: time.Now(), Store: clipTotals{Closed: map[string]int{}}}
	var afterEnd, afterVideo, ringBytes, ringSecs []float64
	for i := range 2 * *rounds {
		on := i%2 == 1
		rf := f
		if !on {
			rf.Clips = ""
		}
		if f.Dir != "" {
			rf.Dir = filepath.Join(f.Dir, fmt.Sprintf("round-%d", i))
		}
		rd, err := clipsRoundRun(rf, *n, *warmup, *window)
		if err != nil {
			return fmt.Errorf("round %d (clips %v): %w", i+1, on, err)
		}
		res.Rounds = append(res.Rounds, rd.round)
		if on {
			res.PreCaptureS, res.PostCaptureS, res.MaxLengthS = rd.clips.PreCapture.Seconds(), rd.clips.PostCapture.Seconds(), rd.clips.Length().Seconds()
			a, v, during := rd.log.latencies()
			afterEnd, afterVideo = append(afterEnd, a...), append(afterVideo, v...)
			res.During += during
			res.ClipEvents += rd.log.clipEvents()
			res.BadEvent += rd.log.bad
			ringBytes, ringSecs = append(ringBytes, rd.ringBytes...), append(ringSecs, rd.ringSecs...)
			res.Store.add(rd.store)
		}
		logf("clips: round %d, clips %v: daemon %.2f%% of a core per camera, workers %.2f%%, %.1f frames/s, RSS %.0f MiB, load %.1f",
			i+1, on, 100*rd.round.DaemonCPU, 100*rd.round.WorkersCPU, rd.round.Analysed, rd.round.DaemonRSS, rd.round.Load1End)
	}
	res.Off, res.On = meanCost(res.Rounds, false), meanCost(res.Rounds, true)
	res.Ratio = res.On.DaemonCPU / res.Off.DaemonCPU
	res.RingBytes, res.RingSeconds, res.RingSamples = mean(ringBytes), mean(ringSecs), len(ringBytes)
	res.AfterEnd, res.AfterVideo = distOf(afterEnd), distOf(afterVideo)
	res.Load = readLoad()
	res.Seconds = time.Since(res.Started).Seconds()
	logf("clips: daemon CPU on ÷ off %.3f; ring %.0f KiB (%.1f s) per camera; clip after the object's end p50 %.1f s, after the video's end p50 %.1f s; %.0f KiB per clip-minute",
		res.Ratio, res.RingBytes/1024, res.RingSeconds, res.AfterEnd.P50, res.AfterVideo.P50, res.Store.BytesPerMinute()/1024)
	return writeJSON(*out, res)
}

func (t *clipTotals) add(o clipTotals) {
	t.Written += o.Written
	t.Failed += o.Failed
	t.Lost += o.Lost
	t.Refused += o.Refused
	t.Stored += o.Stored
	t.Bytes += o.Bytes
	t.DurationS += o.DurationS
	for k, v := range o.Closed {
		t.Closed[k] += v
	}
}

func meanCost(rs []clipsRound, clips bool) clipsCost {
	var c clipsCost
	k := 0
	for _, r := range rs {
		if r.Clips == clips {
			c.DaemonCPU += r.DaemonCPU
			c.WorkersCPU += r.WorkersCPU
			c.DaemonRSS += r.DaemonRSS
			k++
		}
	}
	if k > 0 {
		c.DaemonCPU, c.WorkersCPU, c.DaemonRSS = c.DaemonCPU/float64(k), c.WorkersCPU/float64(k), c.DaemonRSS/float64(k)
	}
	return c
}

// roundRun is what one round measured, with the raw figures of a round with clips on.
type roundRun struct {
	round               clipsRound
	log                 *objectLog
	ringBytes, ringSecs []float64 // per sample, mean over the cameras
	store               clipTotals
	clips               config.Clips // the clips settings in force (rounds with clips on)
}

// clipsRoundRun starts the daemon with f (clips on when f.Clips is set), warms it up and
// measures the window: the daemon's and the workers' CPU time, and, with clips on, the rings
// (sampled through the window) and the clips (at its end, before the daemon stops).
func clipsRoundRun(f daemonFlags, n int, warmup, window time.Duration) (*roundRun, error) {
	rr := &roundRun{round: clipsRound{Clips: f.Clips != "", Load1Start: readLoad().One}, log: newObjectLog()}
	d, err := startDaemon(f, n)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	if _, err := d.nc.Subscribe("visiond."+site+".*.objects", rr.log.handle); err != nil {
		return nil, err
	}
	if rr.round.Clips {
		cfg, err := config.Load(d.cfgPath)
		if err != nil {
			return nil, err
		}
		rr.clips = cfg.Cameras[0].Clips
		if !rr.clips.Enabled {
			return nil, fmt.Errorf("-clips %s: clips not enabled in the config written", f.Clips)
		}
		if warmup < rr.clips.PreCapture {
			return nil, fmt.Errorf("-warmup %v: want at least the clips' pre_capture (%v), so that the rings are full", warmup, rr.clips.PreCapture)
		}
	}
	if err := d.warmUp(warmup); err != nil {
		return nil, err
	}
	ws, err := d.workers()
	if err != nil {
		return nil, err
	}
	pid := d.cmd.Process.Pid
	workersCPU := func() float64 {
		t := 0.0
		for _, w := range ws {
			t += cpuSeconds(w.PID)
		}
		return t
	}
	from, d0, w0 := time.Now(), cpuSeconds(pid), workersCPU()
	const samples = 6
	for i := range samples {
		time.Sleep(window / samples)
		if err := d.alive(); err != nil {
			return nil, err
		}
		if rr.round.Clips && i > 0 { // the first sample's rings may still be filling after a reconnect
			b, s, err := d.rings()
			if err != nil {
				return nil, err
			}
			rr.ringBytes, rr.ringSecs = append(rr.ringBytes, b), append(rr.ringSecs, s)
		}
	}
	to, d1, w1 := time.Now(), cpuSeconds(pid), workersCPU()
	secs := to.Sub(from).Seconds()
	rr.round.DaemonCPU = (d1 - d0) / secs / float64(n)
	rr.round.WorkersCPU = (w1 - w0) / secs / float64(n)
	rr.round.DaemonRSS = mib(d.daemonRSS())
	rr.round.Analysed = summarise(d.events.between(from, to), secs, d.cams).EventsPerSec
	rr.round.Load1End = readLoad().One
	if ws2, err := d.workers(); err == nil {
		for i, w := range ws2 {
			if i < len(ws) && w.PID != ws[i].PID {
				return nil, fmt.Errorf("worker %d restarted during the window: its CPU time is lost", i)
			}
		}
	}
	if rr.round.Clips {
		if rr.store, err = d.clipTotals(); err != nil {
			return nil, err
		}
	}
	return rr, nil
}

// clipCamStatus is the part of /api/cameras about clips.
type clipCamStatus struct {
	ID    string `json:"id"`
	Clips *struct {
		Written     uint64  `json:"written"`
		Failed      uint64  `json:"failed"`
		Bytes       uint64  `json:"bytes"`
		RingBytes   int     `json:"ring_bytes"`
		RingSeconds float64 `json:"ring_seconds"`
	} `json:"clips"`
}

func (d *daemon) clipCameras() ([]clipCamStatus, error) {
	var cs []clipCamStatus
	if err := d.getJSON("/api/cameras", &cs); err != nil {
		return nil, err
	}
	for _, c := range cs {
		if c.Clips == nil {
			return nil, fmt.Errorf("/api/cameras: camera %s has no clips status: are its clips on?", c.ID)
		}
	}
	return cs, nil
}

// rings is the mean over the cameras of visiond_camera_clip_ring_bytes (/metrics) and of
// the video their rings span (/api/cameras clips.ring_seconds).
func (d *daemon) rings() (bytes, secs float64, err error) {
	series, err := d.metricSeries("visiond_camera_clip_ring_bytes")
	if err != nil {
		return 0, 0, err
	}
	if len(series) != len(d.cams) {
		return 0, 0, fmt.Errorf("/metrics: visiond_camera_clip_ring_bytes for %d cameras, want %d", len(series), len(d.cams))
	}
	var bs, ss []float64
	for _, v := range series {
		bs = append(bs, v)
	}
	cs, err := d.clipCameras()
	if err != nil {
		return 0, 0, err
	}
	for _, c := range cs {
		ss = append(ss, c.Clips.RingSeconds)
	}
	return mean(bs), mean(ss), nil
}

// clipTotals reads the clips of the daemon's cameras: the recorders' counts, the store's
// losses and the clips it lists.
func (d *daemon) clipTotals() (clipTotals, error) {
	t := clipTotals{Closed: map[string]int{}}
	cs, err := d.clipCameras()
	if err != nil {
		return t, err
	}
	for _, c := range cs {
		t.Written += c.Clips.Written
		t.Failed += c.Clips.Failed
		var list []sinks.ClipInfo
		if err := d.getJSON("/api/cameras/"+c.ID+"/clips?limit=200", &list); err != nil {
			return t, err
		}
		for _, ci := range list {
			t.Stored++
			t.Bytes += ci.Bytes
			t.DurationS += ci.DurationS
			t.Closed[ci.Closed]++
		}
	}
	lost, err := d.metricSeries("visiond_clips_lost_total")
	if err != nil {
		return t, err
	}
	for labels, v := range lost {
		t.Lost += uint64(v)
		if strings.Contains(labels, `reason="refused"`) {
			t.Refused += uint64(v)
		}
	}
	return t, nil
}

// metricSeries returns every series of the metric name on /metrics, by its labels as written
// (`camera="cam000"`; "" for none).
func (d *daemon) metricSeries(name string) (map[string]float64, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + d.httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	return parseSeries(string(data), name)
}

// parseSeries returns the series of the metric name in a Prometheus text exposition, by
// their labels; an error names a line whose value does not parse.
func parseSeries(text, name string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, l := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(l, name)
		if !ok || rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue // another metric whose name begins with this one, or a comment
		}
		if rest == "" {
			return nil, fmt.Errorf("metric line %q: no value", l)
		}
		labels := ""
		if rest[0] == '{' {
			i := strings.LastIndexByte(rest, '}')
			if i < 0 {
				return nil, fmt.Errorf("metric line %q: no closing brace", l)
			}
			labels, rest = rest[1:i], rest[i+1:]
		}
		v, err := strconv.ParseFloat(strings.Fields(rest + " x")[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metric line %q: %w", l, err)
		}
		out[labels] = v
	}
	return out, nil
}

// probeStream measures the bitrate of file's first video stream from its packets (ffprobe).
func probeStream(file string) (streamRate, error) {
	s := streamRate{File: file}
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time,size", "-of", "csv=p=0", file).Output()
	if err != nil {
		return s, fmt.Errorf("ffprobe %s: %w", file, err)
	}
	return parseProbe(s, string(out))
}

// parseProbe reads ffprobe's "pts_time,size" lines. The span is from the first packet's
// time to the last's, plus one packet's mean spacing (the last one's duration).
func parseProbe(s streamRate, text string) (streamRate, error) {
	var pts []float64
	for _, l := range strings.Fields(text) {
		f := strings.Split(l, ",") // a keyframe's line ends in a comma (ffprobe's empty side data)
		if len(f) < 2 {
			return s, fmt.Errorf("ffprobe %s: line %q: want pts_time,size", s.File, l)
		}
		pt, err1 := strconv.ParseFloat(f[0], 64)
		n, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return s, fmt.Errorf("ffprobe %s: line %q: want pts_time,size", s.File, l)
		}
		pts = append(pts, pt)
		s.Bytes += n
	}
	if len(pts) < 2 {
		return s, fmt.Errorf("ffprobe %s: %d video packets, want 2 or more", s.File, len(pts))
	}
	sort.Float64s(pts)
	span := pts[len(pts)-1] - pts[0]
	if span <= 0 {
		return s, fmt.Errorf("ffprobe %s: the video packets span %g s", s.File, span)
	}
	s.Packets = len(pts)
	s.Seconds = span * float64(len(pts)) / float64(len(pts)-1)
	s.BitsPerS = 8 * float64(s.Bytes) / s.Seconds
	return s, nil
}

// objKey is an object: its camera and track id.
type objKey struct {
	cam   string
	track uint64
}

// clipSeen is a clip event: the object, its clip and when it was received.
type clipSeen struct {
	obj objKey
	ref sinks.ClipRef
	at  time.Time
}

// objectLog keeps, of the object events received, each object's end and every clip event.
type objectLog struct {
	mu    sync.Mutex
	ends  map[objKey]time.Time
	clips []clipSeen
	bad   int // events that did not parse, or clip events without a clip
	now   func() time.Time
}

func newObjectLog() *objectLog { return &objectLog{ends: map[objKey]time.Time{}, now: time.Now} }

func (l *objectLog) handle(m *nats.Msg) { l.add(m.Data) }

func (l *objectLog) add(data []byte) {
	at := l.now()
	var o sinks.ObjectEvent
	err := json.Unmarshal(data, &o)
	l.mu.Lock()
	defer l.mu.Unlock()
	k := objKey{o.Camera, o.TrackID}
	switch {
	case err != nil || o.Camera == "":
		l.bad++
	case o.Type == sinks.ObjectEnd:
		l.ends[k] = at
	case o.Type == sinks.ObjectClip && o.Clip == nil:
		l.bad++
	case o.Type == sinks.ObjectClip:
		l.clips = append(l.clips, clipSeen{obj: k, ref: *o.Clip, at: at})
	}
}

func (l *objectLog) clipEvents() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clips)
}

// latencies returns, per object with a clip event after its end, the last such event's
// receive time less the end's (seconds); per clip, its first event's receive time less the
// clip's end; and the count of objects with clip events but none after an end.
func (l *objectLog) latencies() (afterEnd, afterVideo []float64, during int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last := map[objKey]time.Time{}
	seen := map[objKey]bool{}
	first := map[string]bool{}
	for _, c := range l.clips {
		seen[c.obj] = true
		if end, ok := l.ends[c.obj]; ok && !c.at.Before(end) && c.at.After(last[c.obj]) {
			last[c.obj] = c.at
		}
		if !first[c.ref.Name] {
			first[c.ref.Name] = true
			afterVideo = append(afterVideo, c.at.Sub(c.ref.End).Seconds())
		}
	}
	keys := make([]objKey, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].cam < keys[j].cam || keys[i].cam == keys[j].cam && keys[i].track < keys[j].track
	})
	for _, k := range keys {
		if at, ok := last[k]; ok {
			afterEnd = append(afterEnd, at.Sub(l.ends[k]).Seconds())
		} else {
			during++
		}
	}
	return afterEnd, afterVideo, during
}

// clipsAim is the aim for the daemon's CPU with clips on: under 2% more than off.
const clipsAim = 1.02

// readClips reads clips.json of a run; nil when there is none (or it has no rounds).
func readClips(ru *run) *clipsResult {
	var c clipsResult
	if readJSON(filepath.Join(ru.dir, "clips.json"), &c) != nil || len(c.Rounds) == 0 {
		return nil
	}
	return &c
}

// clipsSummary is the summary's row of clips.json.
func (r *report) clipsSummary(local *run) []string {
	c := readClips(local)
	if c == nil {
		return []string{"clips: daemon CPU per camera, clips on ÷ off", local.name(), r.notRun(local, "clips")}
	}
	return []string{fmt.Sprintf("clips: daemon CPU per camera, clips on ÷ off (%d cameras at %g fps)", c.Cameras, c.Daemon.FPS), local.name(),
		fmt.Sprintf("**%s** (aim < %g: %s); ring %s KiB per camera (pre_capture × bitrate %s KiB); clip readable %s s after its object's end (median); %s MiB per clip-minute",
			f3(c.Ratio), clipsAim, met(c.Ratio < clipsAim), f0(c.RingBytes/1024), f0(c.PreCaptureS*c.Stream.BitsPerS/8/1024), f1(c.AfterEnd.P50), f2(c.Store.BytesPerMinute()/(1<<20)))}
}

// clipsSection reports clips.json of the local run.
func (r *report) clipsSection(local *run) {
	r.p("## Event clips: CPU, memory, delay and size")
	r.p("")
	c := readClips(local)
	if c == nil {
		r.p("`visiond-bench clips` (cmd/visiond-bench/clips.go; `make bench PARTS=clips`). Not run here: %s.", r.notRun(local, "clips"))
		r.p("")
		return
	}
	r.p("`visiond-bench clips` (cmd/visiond-bench/clips.go) runs the daemon (`visiond run` on the bench's config, workers %s, threads %s, %s) on %d cameras of the sample",
		c.Daemon.Workers.describe(0), c.Daemon.Threads.describe(0), c.Daemon.Provider, c.Cameras)
	r.p("(`%s`: H.264, served over RTSP on loopback, looped in real time), each analysed at %g fps, in rounds: clips off (no `clips` in the config),", c.Stream.File, c.Daemon.FPS)
	settings := fmt.Sprintf("pre_capture %g s, post_capture %g s, max_length %g s", c.PreCaptureS, c.PostCaptureS, c.MaxLengthS)
	if c.MaxLengthS == 0 { // a result from before the bench read them back: -clips left them to the daemon
		settings = fmt.Sprintf("pre_capture %g s, post_capture and max_length the daemon's defaults, 5 s and 2 m", c.PreCaptureS)
	}
	r.p("then on (`camera_defaults: {clips: %s}`: %s), %d times over. Each round is a", c.Daemon.Clips, settings, len(c.Rounds)/2)
	r.p("fresh daemon, %s s after every camera is online (the rings full), then a window of %s s. CPU: the daemon process's user + system time", f0(c.WarmupS), f0(c.WindowS))
	r.p("(/proc/<pid>/stat) over the window, per camera per second, in percent of a core; the workers' the same, apart (their inference does not change")
	r.p("with clips); the daemon's RSS at the window's end; the host's 1-minute load average at the round's start and end (the box is shared).")
	r.p("Taken %s on the %s, in %s; command: `%s`.", c.Started.UTC().Format("2006-01-02 15:04 UTC"), local.name(), dur(c.Seconds), c.Command)
	r.p("")
	var rows [][]string
	for i, x := range c.Rounds {
		on := "off"
		if x.Clips {
			on = "on"
		}
		rows = append(rows, []string{fmt.Sprint(i + 1), on, f2(100 * x.DaemonCPU), f2(100 * x.WorkersCPU), f1(x.Analysed), f0(x.DaemonRSS), f1(x.Load1Start) + " → " + f1(x.Load1End)})
	}
	r.table([]string{"round", "clips", "daemon CPU per camera (% of a core)", "workers CPU per camera (%)", "frames analysed/s (all cameras)", "daemon RSS (MiB)", "load average"}, rows)
	if local.env != nil {
		high := 0.0
		for _, x := range c.Rounds {
			high = max(high, x.Load1Start, x.Load1End)
		}
		if high > float64(local.env.CPUs)/2 {
			r.p("The box was shared with other work during these rounds (load average up to %s on %d CPUs): the rounds alternate, so that both sides", f1(high), local.env.CPUs)
			r.p("ran under the same kind of load, and the off rounds' spread below is the noise that load adds.")
			r.p("")
		}
	}
	var offs []float64
	var pairs []string // each on round against the off round just before it
	for i, x := range c.Rounds {
		if !x.Clips {
			offs = append(offs, x.DaemonCPU)
		} else if i > 0 && !c.Rounds[i-1].Clips {
			pairs = append(pairs, fmt.Sprintf("%+.1f%%", 100*(x.DaemonCPU/c.Rounds[i-1].DaemonCPU-1)))
		}
	}
	noise := ""
	if len(offs) > 1 {
		noise = fmt.Sprintf(" The off rounds alone differ by %s%% (their spread ÷ their mean): the noise of the figure;", f1(100*(maxOf(offs)-minOf(offs))/mean(offs)))
	}
	if len(pairs) > 0 {
		noise += fmt.Sprintf(" each on round against the off round before it: %s.", strings.Join(pairs, ", "))
	}
	r.p("Daemon CPU per camera, clips on ÷ off (mean of the on rounds ÷ mean of the off rounds): **%s** (%s%% ÷ %s%% of a core; the issue's aim: under %g: %s).%s",
		f3(c.Ratio), f2(100*c.On.DaemonCPU), f2(100*c.Off.DaemonCPU), clipsAim, met(c.Ratio < clipsAim), noise)
	r.p("Workers: %s%% against %s%% per camera. Daemon RSS: %s against %s MiB.", f2(100*c.On.WorkersCPU), f2(100*c.Off.WorkersCPU), f0(c.On.DaemonRSS), f0(c.Off.DaemonRSS))
	r.p("")
	bps := c.Stream.BitsPerS / 8
	r.p("Memory: a camera's ring (`visiond_camera_clip_ring_bytes` on /metrics, mean over the cameras and %d samples through the on rounds' windows) holds", c.RingSamples)
	r.p("**%s KiB**, spanning %s s of video (/api/cameras `clips.ring_seconds`). The stream's bitrate: %s kbit/s (ffprobe's video packets of the file,",
		f0(c.RingBytes/1024), f1(c.RingSeconds), f0(c.Stream.BitsPerS/1000))
	r.p("%d packets, %s MiB over %s s, the container left out), so pre_capture × bitrate = %s KiB: the ring holds %s× that, and %s× the video it",
		c.Stream.Packets, f1(float64(c.Stream.Bytes)/(1<<20)), f1(c.Stream.Seconds), f0(c.PreCaptureS*bps/1024), f2(c.RingBytes/(c.PreCaptureS*bps)), f2(c.RingBytes/(c.RingSeconds*bps)))
	r.p("spans (its buffers' and spares' overhead). The ring keeps pre_capture, a track's confirmation (4 analysed frames) and 2 s more, from the")
	r.p("keyframe at or before that (pipeline/clips.go `ringKeep`): hence its span past pre_capture.")
	r.p("")
	r.p("Delay: every object event of the on rounds (`visiond.%s.*.objects`, received by the bench on the daemon's NATS server); a `clip` event says the clip is", site)
	r.p("stored and readable. Per object, its last clip event after its `end` event, less the end's receive time; per clip, its first clip event's receive")
	r.p("time less the clip's `end` (a capture time on the sample camera's clock, this host's): what the recorder and the store add after the video ends.")
	r.p("")
	dr := func(what string, d dist) []string {
		return []string{what, fmt.Sprint(d.N), f1(d.P50), f1(d.P90), f1(d.Max)}
	}
	r.table([]string{"from", "n", "median (s)", "p90 (s)", "max (s)"}, [][]string{
		dr("the object's `end` event to its clip event", c.AfterEnd), dr("the clip's end (capture time) to its first clip event", c.AfterVideo)})
	r.p("%d clip events in all; %d objects had theirs only before their end (a clip that reached max_length while they lasted) or no end in the round.", c.ClipEvents, c.During)
	r.p("A clip closes post_capture after the last of its objects ends, so the first row includes the rest of the burst of activity the object was in.")
	if n := c.Store.Closed[sinks.ClipClosedMaxLength]; n > 0 && n == c.Store.Stored {
		r.p("Every clip here closed at max_length: the sample's scene is never empty for post_capture, so an object's clip is readable when the")
		r.p("max_length clip it ended in closes, up to max_length after it; the second row is what the recorder and the store take.")
	}
	r.p("")
	s := c.Store
	var closed []string
	for _, k := range sortedKeys(s.Closed) {
		closed = append(closed, fmt.Sprintf("%s %d", k, s.Closed[k]))
	}
	r.p("Size: the clips the store lists (/api/cameras/<id>/clips) at the end of the on rounds: %d clips, %s MiB, %s min of video: **%s MiB per clip-minute**",
		s.Stored, f1(float64(s.Bytes)/(1<<20)), f1(s.DurationS/60), f2(s.BytesPerMinute()/(1<<20)))
	r.p("(the stream's bitrate gives %s MiB a minute); closed: %s. Written by the recorders %d, failed %d; lost by the store %d (%d refused: the store full).",
		f2(60*bps/(1<<20)), or(strings.Join(closed, ", "), "none"), s.Written, s.Failed, s.Lost, s.Refused)
	r.p("")
	r.p("Memory over time with clips on: a 30-minute soak, its command, plot and a heap profile's reading, is in")
	r.p("[docs/bench/clips-soak-2026-12-02](docs/bench/clips-soak-2026-12-02/README.md): the daemon's memory was not flat (220 → 445 MiB, a peak of")
	r.p("799 MiB); in a heap profile of a like run most of the heap was nats-server's block buffers for the object stores.")
	r.p("")
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs[1:] {
		m = min(m, x)
	}
	return m
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
