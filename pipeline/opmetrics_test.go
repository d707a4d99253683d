package pipeline

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/internal/version"
	"github.com/visiond/visiond/sinks/natstest"
)

// The metrics an operator watches, read from /metrics of the real daemon (embedded server, a
// leaf link to a real hub through a proxy that can cut it, its config file watched): the
// build; the link to the hub up, then down when cut, each with the time of the change; the
// stream's messages, bytes, limit and fullness; the time of the last reload applied and the
// reloads rejected. And GET /api/version.
func TestOperatorMetrics(t *testing.T) {
	hub := natstest.StartHub(t, t.TempDir())
	link := natstest.StartProxy(t, strings.TrimPrefix(hub.LeafURL, "nats-leaf://"))
	body := fmt.Sprintf(`site: ops
state_dir: %q
http: {listen: "127.0.0.1:0"}
nats:
  listen: "127.0.0.1:0"
  health_interval: 1s
  stream: {max_bytes_mib: 1}
  leaf: {url: "nats-leaf://%s"}
workers: {model: %q, library: %q, pools: [{count: 1}]}
cameras: []
`, t.TempDir(), link.Addr, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"))
	path := testutil.TempFile(t, "visiond.yaml", body)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	beforeStart := time.Now()
	d := &Daemon{Config: cfg, ConfigPath: path, Logger: testutil.Logger(t),
		WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	base := "http://" + d.HTTPAddr().String()
	stream := fmt.Sprintf("{stream=%q}", d.StreamName())

	var m metrics
	testutil.WaitFor(t, 2*time.Minute, "the hub link up and events in the stream (read every 10 s)", func() bool {
		m = scrape(t, base+"/metrics")
		return m.get("visiond_leaf_link_up") == 1 && m.get("visiond_stream_messages"+stream) > 0
	})
	in := version.Get()
	if v := m.mustHave(t, fmt.Sprintf(`visiond_build_info{go=%q,revision=%q,version=%q}`, runtime.Version(), in.Revision, in.Version)); v != 1 {
		t.Errorf("visiond_build_info is %v, want 1", v)
	}
	startedAt := m.mustHave(t, "visiond_config_last_reload_success_timestamp_seconds")
	if startedAt < unixSeconds(beforeStart) || startedAt > unixSeconds(time.Now()) {
		t.Errorf("last reload success %v: not the start (after %v, before now)", startedAt, unixSeconds(beforeStart))
	}
	if v := m.mustHave(t, "visiond_config_last_reload_successful"); v != 1 {
		t.Errorf("visiond_config_last_reload_successful %v at start, want 1", v)
	}
	upSince := m.mustHave(t, "visiond_leaf_link_last_change_timestamp_seconds")
	if upSince < startedAt || upSince > unixSeconds(time.Now()) {
		t.Errorf("link up since %v: not between the start %v and now", upSince, startedAt)
	}
	msgs, bytes := m.get("visiond_stream_messages"+stream), m.mustHave(t, "visiond_stream_bytes"+stream)
	if limit := m.mustHave(t, "visiond_stream_max_bytes"+stream); limit != 1<<20 {
		t.Errorf("stream limit %v, want 1 MiB (max_bytes_mib: 1)", limit)
	}
	full := m.mustHave(t, "visiond_stream_fullness_ratio"+stream)
	if bytes < msgs || full != bytes/(1<<20) {
		t.Errorf("stream: %v messages, %v bytes, fullness %v; want bytes >= messages and fullness = bytes / 1 MiB", msgs, bytes, full)
	}

	// The link cut: down, with the time of the change.
	link.Cut()
	cutAt := time.Now()
	testutil.WaitFor(t, time.Minute, "the hub link down", func() bool {
		m = scrape(t, base+"/metrics")
		return m.get("visiond_leaf_link_up") == 0
	})
	if downSince := m.get("visiond_leaf_link_last_change_timestamp_seconds"); downSince <= upSince || downSince < unixSeconds(cutAt)-1 {
		t.Errorf("link down since %v: want after it came up (%v) and after the cut (%v, checked every second)", downSince, upSince, unixSeconds(cutAt))
	}
	link.Restore()

	// A rejected reload: counted, the last success stays; then one applied.
	save := func(body string) {
		tmp := path + ".tmp"
		testutil.WriteFile(t, tmp, body)
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	save(body + "bogus_key: 1\n")
	testutil.WaitFor(t, time.Minute, "the invalid config rejected", func() bool {
		m = scrape(t, base+"/metrics")
		return m.get("visiond_config_reload_failures_total") == 1
	})
	if v := m.get("visiond_config_last_reload_successful"); v != 0 {
		t.Errorf("visiond_config_last_reload_successful %v after a rejected reload, want 0", v)
	}
	if v := m.get("visiond_config_last_reload_success_timestamp_seconds"); v != startedAt {
		t.Errorf("last reload success %v after a rejected reload, want the start %v still", v, startedAt)
	}
	beforeApply := time.Now()
	save(strings.Replace(body, "health_interval: 1s", "health_interval: 1s\n  # edited", 1) + "pipeline: {slice: 150ms}\n")
	testutil.WaitFor(t, time.Minute, "the valid config applied", func() bool {
		m = scrape(t, base+"/metrics")
		return m.get("visiond_config_last_reload_successful") == 1
	})
	if v := m.get("visiond_config_last_reload_success_timestamp_seconds"); v < unixSeconds(beforeApply) {
		t.Errorf("last reload success %v, want the reload's time (after %v)", v, unixSeconds(beforeApply))
	}
	if v := m.get("visiond_config_reload_failures_total"); v != 1 {
		t.Errorf("reload failures %v after an applied reload, want 1 still", v)
	}

	resp, err := http.Get(base + "/api/version")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got version.Info
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/version: %s, %v", resp.Status, err)
	}
	if got != in || got.Go != runtime.Version() {
		t.Errorf("/api/version %+v, want %+v", got, in)
	}
}
