package pipeline

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sources"
)

// TestDaemonMetrics scrapes /metrics of the real daemon (two sample cameras, one unreachable
// camera, one CPU worker process) and checks the key series, their labels and values, the
// latency histograms, then /readyz; then it removes a camera by a reload and checks that
// its series are gone.
func TestDaemonMetrics(t *testing.T) {
	d, _ := startDaemon(t)
	base := "http://" + d.HTTPAddr().String()

	// Wait for a scrape that shows frames analysed, the unreachable camera offline and a
	// worker memory sample (taken every 5 s).
	var m metrics
	testutil.WaitFor(t, 2*time.Minute, "metrics with frames analysed, camera down offline, worker memory sampled", func() bool {
		m = scrape(t, base+"/metrics")
		return m.get(`visiond_camera_frames_analysed_total{camera="east"}`) > 0 &&
			m.get(`visiond_camera_state{camera="down",state="offline"}`) == 1 &&
			m.get(`visiond_worker_resident_memory_bytes{provider="cpu",worker="0"}`) > 0
	})

	for _, cam := range []string{"east", "west", "down"} {
		for _, reason := range []string{"superseded", "stale", "source", "worker_lost", "timeout", "rejected", "shutdown"} {
			m.mustHave(t, fmt.Sprintf(`visiond_camera_frames_dropped_total{camera=%q,reason=%q}`, cam, reason))
		}
		for _, name := range []string{"frames_decoded_total", "detections_total", "reconnects_total", "resyncs_total",
			"fps_achieved", "frame_age_mean_seconds", "frame_age_max_seconds", "inference_mean_seconds", "latency_mean_seconds",
			"decoder_fallbacks_total", "decoder_fallback", "live_viewers", "live_bytes_total"} {
			m.mustHave(t, fmt.Sprintf(`visiond_camera_%s{camera=%q}`, name, cam))
		}
		// Exactly one state is current.
		sum := 0.0
		for _, st := range sources.States() {
			sum += m.mustHave(t, fmt.Sprintf(`visiond_camera_state{camera=%q,state=%q}`, cam, st))
		}
		if sum != 1 {
			t.Errorf("camera %s: the state series sum to %v, want 1", cam, sum)
		}
	}
	if v := m.get(`visiond_camera_state{camera="east",state="online"}`); v != 1 {
		t.Errorf(`east: state="online" is %v, want 1`, v)
	}
	for _, st := range []string{"online", "connecting"} {
		if v := m.get(fmt.Sprintf(`visiond_camera_state{camera="down",state=%q}`, st)); v != 0 {
			t.Errorf("down: state=%q is %v, want 0", st, v)
		}
	}
	if v := m.get(`visiond_camera_frames_analysed_total{camera="down"}`); v != 0 {
		t.Errorf("down: %v frames analysed, want 0", v)
	}
	if dec, an := m.get(`visiond_camera_frames_decoded_total{camera="east"}`),
		m.get(`visiond_camera_frames_analysed_total{camera="east"}`); dec < an {
		t.Errorf("east: %v frames decoded < %v analysed", dec, an)
	}
	// The decoding by step (the CPU's decoder: no gate to wait for, nothing to copy).
	if calls := m.mustHave(t, `visiond_camera_decode_calls_total{camera="east"}`); calls < m.get(`visiond_camera_frames_decoded_total{camera="east"}`) {
		t.Errorf("east: %v decode calls, fewer than its frames decoded", calls)
	}
	busy := m.mustHave(t, `visiond_camera_decode_seconds_total{camera="east",step="busy"}`)
	for _, step := range []string{"wait", "copy", "scale"} {
		if v := m.mustHave(t, fmt.Sprintf(`visiond_camera_decode_seconds_total{camera="east",step=%q}`, step)); v < 0 || v > busy || (step == "wait" && v != 0) {
			t.Errorf("east: decode %s %v s, busy %v s", step, v, busy)
		}
	}
	if busy <= 0 {
		t.Errorf("east: decode busy %v s, want some", busy)
	}
	if v := m.get(`visiond_camera_fps_target{camera="west"}`); v != 3 {
		t.Errorf("west: fps target %v, want 3", v)
	}
	// Latencies are in seconds (in milliseconds they would be hundreds or more), positive and
	// within what the daemon allows a frame, however slow the machine: a model run ends within
	// job_timeout (or the job is lost, which the test rules out below), and a frame waits at
	// most max_frame_age for its job (plus the time to hand it out and publish its event).
	maxInfer, maxTotal := d.Config.Workers.JobTimeout.Seconds(), (d.Config.Workers.JobTimeout + d.Config.Pipeline.MaxFrameAge + time.Second).Seconds()
	if v := m.get(`visiond_camera_inference_mean_seconds{camera="east"}`); !(v > 0 && v <= maxInfer) {
		t.Errorf("east: inference_mean_seconds = %v, want in (0, %v] seconds", v, maxInfer)
	}
	if v := m.get(`visiond_camera_latency_mean_seconds{camera="east"}`); !(v > 0 && v < maxTotal) {
		t.Errorf("east: latency_mean_seconds = %v, want in (0, %v) seconds", v, maxTotal)
	}
	for _, reason := range []string{"worker_lost", "timeout", "rejected"} {
		if v := m.get(fmt.Sprintf(`visiond_camera_frames_dropped_total{camera="east",reason=%q}`, reason)); v != 0 {
			t.Errorf("east: %v frames dropped for %s, want 0", v, reason)
		}
	}

	w := `{provider="cpu",worker="0"}`
	if v := m.mustHave(t, "visiond_worker_jobs_total"+w); v < m.get(`visiond_camera_frames_analysed_total{camera="east"}`) {
		t.Errorf("worker jobs %v, want at least east's frames analysed", v)
	}
	for _, name := range []string{"jobs_lost_total", "restarts_total", "recycles_total"} {
		if v := m.mustHave(t, "visiond_worker_"+name+w); v != 0 {
			t.Errorf("worker %s = %v, want 0", name, v)
		}
	}
	if v := m.mustHave(t, "visiond_worker_jobs_in_flight"+w); v < 0 || v > 2 {
		t.Errorf("worker jobs in flight %v, want 0..2 (slots)", v)
	}
	if v := m.get("visiond_worker_resident_memory_bytes" + w); v < 1<<20 {
		t.Errorf("worker RSS %v bytes, want at least 1 MiB", v)
	}
	if v := m.mustHave(t, "visiond_worker_gpu_memory_bytes"+w); v != 0 {
		t.Errorf("cpu worker GPU memory %v, want 0", v)
	}

	// Published counts acknowledgements; an event of an analysed frame may still await its own.
	if v := m.mustHave(t, "visiond_events_published_total") + m.mustHave(t, "visiond_events_publish_pending"); v < m.get(`visiond_camera_frames_analysed_total{camera="east"}`) {
		t.Errorf("events published or pending %v, want at least east's detection events", v)
	}
	if v := m.mustHave(t, "visiond_events_publish_dropped_total") + m.mustHave(t, "visiond_events_publish_retried_total"); v != 0 {
		t.Errorf("events dropped or retried: %v, want 0 with the embedded server", v)
	}
	if v := m.mustHave(t, "visiond_events_publish_failed_total"); v != 0 {
		t.Errorf("events failed %v, want 0", v)
	}
	m.mustHave(t, "visiond_config_reload_failures_total")
	// Memory by owner: the owners add up to the resident memory, the Go runtime and the
	// libraries hold some, and the frames' buffers hold at most three frames a camera.
	var owned float64
	for _, owner := range []string{"go", "nats_store_caches", "frame_buffers", "snapshot_buffers", "clip_rings", "c_heap", "gpu_driver", "code", "shared"} {
		v := m.mustHave(t, fmt.Sprintf(`visiond_memory_bytes{owner=%q}`, owner))
		if v < 0 || (owner == "go" || owner == "code") && v < 1<<20 {
			t.Errorf("memory of %s: %v bytes", owner, v)
		}
		owned += v
	}
	if rss := m.get("process_resident_memory_bytes"); owned < 0.8*rss || owned > 1.2*rss {
		t.Errorf("memory by owner adds up to %.0f MiB, the resident memory is %.0f MiB", owned/(1<<20), rss/(1<<20))
	}
	if v := m.get(`visiond_memory_bytes{owner="frame_buffers"}`); v > 3*3*float64(sources.FrameBytes(640, 640)) {
		t.Errorf("frame buffers of three cameras: %.1f MiB, want at most three frames a camera", v/(1<<20))
	}
	// The budget (memory_limit_mib: 4096): the Go runtime is left what the rest does not hold,
	// less a tenth of it.
	if v := m.mustHave(t, "visiond_memory_budget_bytes"); v != 4096<<20 {
		t.Errorf("memory budget %.0f MiB, want 4096", v/(1<<20))
	}
	if v := m.mustHave(t, "visiond_memory_go_limit_bytes"); v < goLimitFloor || v > 4096<<20-4096<<20/10 {
		t.Errorf("Go memory limit %.0f MiB, want at most 90%% of the budget", v/(1<<20))
	}
	m.mustHave(t, "visiond_memory_over_budget_samples_total")
	// The Go and process collectors.
	if m.get("go_goroutines") <= 0 || m.get("process_resident_memory_bytes") <= 0 {
		t.Errorf("go_goroutines %v, process_resident_memory_bytes %v: want both > 0",
			m.get("go_goroutines"), m.get("process_resident_memory_bytes"))
	}

	// Latency histograms: for every camera and stage, as many observations as frames analysed
	// in the same scrape, cumulative buckets that never decrease, up to 5 s and +Inf.
	hists := m.histograms(t, "visiond_stage_latency_seconds")
	for _, cam := range []string{"east", "west", "down"} {
		analysed := m.get(fmt.Sprintf(`visiond_camera_frames_analysed_total{camera=%q}`, cam))
		for _, stage := range []string{"queue", "pre", "infer", "post", "total"} {
			h, ok := hists[[2]string{cam, stage}]
			if !ok {
				t.Errorf("no histogram visiond_stage_latency_seconds{camera=%q,stage=%q}", cam, stage)
				continue
			}
			if h.count != analysed {
				t.Errorf("%s %s: histogram count %v, frames analysed %v: want equal", cam, stage, h.count, analysed)
			}
			if len(h.bounds) != 16 || h.bounds[0] != 0.0005 || h.bounds[14] != 5 || !math.IsInf(h.bounds[15], 1) {
				t.Errorf("%s %s: buckets %v, want 0.0005 .. 5 and +Inf", cam, stage, h.bounds)
			}
			for i := 1; i < len(h.bounds); i++ {
				if h.bounds[i] <= h.bounds[i-1] || h.cumulative[i] < h.cumulative[i-1] {
					t.Errorf("%s %s: bucket le=%v has %v after le=%v with %v: not monotone",
						cam, stage, h.bounds[i], h.cumulative[i], h.bounds[i-1], h.cumulative[i-1])
				}
			}
			if n := len(h.cumulative); n == 0 || h.cumulative[n-1] != h.count {
				t.Errorf("%s %s: +Inf bucket %v, count %v: want equal", cam, stage, h.cumulative, h.count)
			}
			if h.sum < 0 || h.count == 0 && h.sum != 0 {
				t.Errorf("%s %s: sum %v for %v observations", cam, stage, h.sum, h.count)
			}
		}
	}
	east := func(stage string) histogram { return hists[[2]string{"east", stage}] }
	if tot := east("total"); tot.count == 0 || !(tot.sum/tot.count > 0 && tot.sum/tot.count < maxTotal) {
		t.Errorf("east: total latency %v s over %v frames, want a mean in (0, %v) s", tot.sum, tot.count, maxTotal)
	}
	// Each frame's total (decoded to published) spans its model run and its time in the queue.
	if tot, inf, q := east("total").sum, east("infer").sum, east("queue").sum; !(tot >= inf+q && inf > 0) {
		t.Errorf("east: latency sums total %v, infer %v, queue %v: want total >= infer + queue, infer > 0", tot, inf, q)
	}
	if c := hists[[2]string{"down", "total"}].count; c != 0 {
		t.Errorf("down: %v latency observations, want none", c)
	}

	// Ready: started, with cameras online.
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ready\n" {
		t.Fatalf("/readyz: %d %q, want 200 \"ready\"", resp.StatusCode, body)
	}

	// A removed camera's series go with it, histograms included.
	next := *d.Config
	next.Cameras = slices.DeleteFunc(slices.Clone(d.Config.Cameras), func(c config.Camera) bool { return c.ID == "west" })
	if _, err := d.Reload(&next); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, base+"/metrics")
	for series := range m {
		if strings.Contains(series, `camera="west"`) {
			t.Errorf("after west was removed, /metrics still has %s", series)
		}
	}
	if _, ok := m[`visiond_stage_latency_seconds_count{camera="east",stage="total"}`]; !ok {
		t.Errorf("after west was removed, east's histograms are gone too")
	}
}

// histogram is one histogram of a scrape.
type histogram struct {
	bounds, cumulative []float64 // by bucket, sorted by upper bound (le)
	count, sum         float64
}

// histograms returns the histograms of family name with labels camera and stage, keyed by
// the two.
func (m metrics) histograms(t *testing.T, name string) map[[2]string]histogram {
	t.Helper()
	re := regexp.MustCompile(`^` + name + `_(bucket|count|sum)\{camera="([^"]*)",(?:le="([^"]*)",)?stage="([^"]*)"(?:,le="([^"]*)")?\}$`)
	type bucket struct{ le, n float64 }
	buckets := map[[2]string][]bucket{}
	out := map[[2]string]histogram{}
	for series, v := range m {
		sm := re.FindStringSubmatch(series)
		if sm == nil {
			if strings.HasPrefix(series, name) {
				t.Errorf("unexpected series %s", series)
			}
			continue
		}
		key := [2]string{sm[2], sm[4]}
		h := out[key]
		switch sm[1] {
		case "count":
			h.count = v
		case "sum":
			h.sum = v
		case "bucket":
			le, err := strconv.ParseFloat(sm[3]+sm[5], 64)
			if err != nil {
				t.Fatalf("%s: le: %v", series, err)
			}
			buckets[key] = append(buckets[key], bucket{le, v})
		}
		out[key] = h
	}
	for key, bs := range buckets {
		slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
		h := out[key]
		for _, b := range bs {
			h.bounds = append(h.bounds, b.le)
			h.cumulative = append(h.cumulative, b.n)
		}
		out[key] = h
	}
	return out
}

// metrics are the samples of a scrape in the text format, keyed by name and labels as the
// registry writes them (labels sorted by name).
type metrics map[string]float64

// get returns a sample's value, or NaN when it is missing.
func (m metrics) get(series string) float64 {
	if v, ok := m[series]; ok {
		return v
	}
	return math.NaN()
}

func (m metrics) mustHave(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := m[series]
	if !ok {
		t.Errorf("/metrics has no series %s", series)
	}
	return v
}

func scrape(t *testing.T, url string) metrics {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %s, Content-Type %q", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("GET %s: bad sample line %q", url, line)
		}
		m[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDecoderFallbackShown: a camera of decoder cuda on a machine whose GPU decoder cannot be
// made (this one, without a GPU) is analysed all the same, decoding on the CPU, and its
// status and metrics say so and why. Skipped where the GPU decoder opens.
func TestDecoderFallbackShown(t *testing.T) {
	cams := strings.Replace(sampleCameras(t, 1), "- {id: cam0,", "- {id: cam0, decoder: cuda,", 1)
	d := startTestDaemon(t, strings.Replace(lifeConfig(t, cams), `http: {listen: ""}`, `http: {listen: "127.0.0.1:0"}`, 1))
	var st CameraStatus
	testutil.WaitFor(t, 2*time.Minute, "cam0 analysed", func() bool {
		st = d.Cameras()[0]
		return st.Analysed > 0
	})
	if st.Decoder == sources.DecoderCUDA {
		t.Skip("the GPU decoder opens here: nothing falls back")
	}
	if st.Decoder != sources.DecoderCPU || !strings.Contains(st.DecoderFallback, "decoder cuda") || st.DecoderFallbacks != 1 {
		t.Fatalf("cam0: decoder %q, fallback %q, %d fallbacks: want cpu, saying why the GPU's did not open, once",
			st.Decoder, st.DecoderFallback, st.DecoderFallbacks)
	}
	m := scrape(t, "http://"+d.HTTPAddr().String()+"/metrics")
	if v := m.get(`visiond_camera_decoder_fallback{camera="cam0"}`); v != 1 {
		t.Errorf("visiond_camera_decoder_fallback %v, want 1", v)
	}
	if v := m.get(`visiond_camera_decoder_fallbacks_total{camera="cam0"}`); v != 1 {
		t.Errorf("visiond_camera_decoder_fallbacks_total %v, want 1", v)
	}
}
