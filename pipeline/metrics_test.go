package pipeline

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDaemonMetrics scrapes /metrics of the real daemon (two sample cameras, one unreachable
// camera, one CPU worker process) and checks the key series, their labels and values, then
// /readyz.
func TestDaemonMetrics(t *testing.T) {
	d, _ := startDaemon(t)
	base := "http://" + d.HTTPAddr().String()

	// Wait for a scrape that shows frames analysed, the unreachable camera offline and a
	// worker memory sample (taken every 5 s).
	var m metrics
	waitUntil(t, 90*time.Second, "metrics with frames analysed, camera down offline, worker memory sampled", func() bool {
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
			"fps_achieved", "frame_age_mean_seconds", "frame_age_max_seconds", "inference_mean_seconds", "latency_mean_seconds"} {
			m.mustHave(t, fmt.Sprintf(`visiond_camera_%s{camera=%q}`, name, cam))
		}
		// Exactly one state is current.
		sum := 0.0
		for _, st := range cameraStates {
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
	if v := m.get(`visiond_camera_fps_target{camera="west"}`); v != 3 {
		t.Errorf("west: fps target %v, want 3", v)
	}
	// Latencies are in seconds: positive, and well under the 2 s max_frame_age.
	for _, name := range []string{"inference_mean_seconds", "latency_mean_seconds"} {
		if v := m.get(fmt.Sprintf(`visiond_camera_%s{camera="east"}`, name)); !(v > 0 && v < 2) {
			t.Errorf("east: %s = %v, want in (0, 2) seconds", name, v)
		}
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

	if v := m.mustHave(t, "visiond_events_published_total"); v < m.get(`visiond_camera_frames_analysed_total{camera="east"}`) {
		t.Errorf("events published %v, want at least east's detection events", v)
	}
	if v := m.mustHave(t, "visiond_events_publish_failed_total"); v != 0 {
		t.Errorf("events failed %v, want 0", v)
	}
	m.mustHave(t, "visiond_config_reload_failures_total")
	// The Go and process collectors.
	if m.get("go_goroutines") <= 0 || m.get("process_resident_memory_bytes") <= 0 {
		t.Errorf("go_goroutines %v, process_resident_memory_bytes %v: want both > 0",
			m.get("go_goroutines"), m.get("process_resident_memory_bytes"))
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
