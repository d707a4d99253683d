package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
)

// A running daemon takes a new config: cameras added, restarted (new URL), rescheduled (new
// fps, same session), removed, and new worker pools swapped in; the untouched camera keeps
// its RTSP session throughout.
func TestDaemonReload(t *testing.T) {
	d, rtsp := startDaemon(t)
	nc, err := nats.Connect(d.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe("visiond.test.config", events); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 2*time.Minute, "east and west analysed", func() bool {
		n := 0
		for _, c := range d.Cameras() {
			if c.Analysed > 0 {
				n++
			}
		}
		return n >= 2
	})
	east := d.camera("east").src
	oldPIDs := pids(d)

	next := *d.Config
	next.Cameras = nil
	for _, c := range d.Config.Cameras {
		switch c.ID {
		case "west":
			c.FPS = 2 // same stream: keeps its session
		case "down":
			c.URL = rtsp.URL("west") // its server comes up: a new session
		}
		next.Cameras = append(next.Cameras, c)
	}
	north := next.Cameras[0]
	north.ID = "north"
	next.Cameras = append(next.Cameras, north)
	next.Workers.Pools = []config.WorkerPool{{Count: 1, Provider: "cpu", Threads: 2}}
	// The same network under another name: events name the model the new workers run.
	renamed := filepath.Join(t.TempDir(), "renamed.onnx")
	if err := os.Symlink(d.Config.Workers.Model, renamed); err != nil {
		t.Fatal(err)
	}
	next.Workers.Model = renamed
	northEvents := make(chan *nats.Msg, 64)
	if _, err := nc.ChanSubscribe("visiond.test.north.detections", northEvents); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	res, err := d.Reload(&next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"north"}) || !slices.Equal(res.Restarted, []string{"down"}) ||
		!slices.Equal(res.Updated, []string{"west"}) || !slices.Equal(res.Kept, []string{"east"}) || !res.Workers {
		t.Fatalf("reload result %+v", res)
	}
	ev := nextConfigEvent(t, events)
	if ev.Result != "applied" || !slices.Equal(ev.Added, []string{"north"}) || !ev.WorkersReplaced {
		t.Fatalf("config event %+v", ev)
	}
	if got := d.camera("east").src; got != east {
		t.Fatal("east was restarted by a reload that did not change it")
	}
	testutil.WaitFor(t, 2*time.Minute, "north and the restarted camera analysed, on the new worker", func() bool {
		st := map[string]CameraStatus{}
		for _, c := range d.Cameras() {
			st[c.ID] = c
		}
		return st["north"].Analysed > 0 && st["down"].Analysed > 0 && !slices.Equal(pids(d), oldPIDs)
	})
	if st := east.Status(); st.Reconnects != 0 {
		t.Fatalf("east reconnected %d times during the reload", st.Reconnects)
	}
	// Cameras started and added open their GPU decoders through the daemon's one gate.
	for _, id := range []string{"east", "north", "down"} {
		if g := d.camera(id).src.DecoderGate; g == nil || g != d.decoderGate {
			t.Fatalf("camera %s: decoder gate %p, want the daemon's %p", id, g, d.decoderGate)
		}
	}
	select {
	case m := <-northEvents: // north started after the swap: every job of it ran on the new workers
		var ev sinks.DetectionEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Model != "renamed" {
			t.Fatalf("north's event names model %q, want the new workers' %q", ev.Model, "renamed")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no detection event of north")
	}
	for _, c := range d.Cameras() {
		if c.ID == "west" && c.FPS != 2 {
			t.Fatalf("west fps %v after reload, want 2", c.FPS)
		}
	}

	// Removing a camera stops it; a config that cannot be loaded is rejected and counted.
	next2 := next
	next2.Cameras = next.Cameras[:len(next.Cameras)-1]
	if res, err := d.Reload(&next2); err != nil || !slices.Equal(res.Removed, []string{"north"}) {
		t.Fatalf("second reload: %+v, %v", res, err)
	}
	nextConfigEvent(t, events)
	if d.camera("north") != nil {
		t.Fatal("north still there after its removal")
	}
	d.Rejected(errors.New("visiond.yaml: line 3: cameras[0].url: missing"))
	if ev := nextConfigEvent(t, events); ev.Result != "rejected" || ev.Error == "" || d.ReloadFailures() != 1 {
		t.Fatalf("rejected config: event %+v, failures %d", ev, d.ReloadFailures())
	}
	if len(d.Cameras()) != 3 {
		t.Fatalf("cameras after a rejected reload: %d, want the 3 in force", len(d.Cameras()))
	}
}

func pids(d *Daemon) []int {
	var out []int
	for _, w := range d.Workers() {
		out = append(out, w.PID)
	}
	return out
}

func nextConfigEvent(t *testing.T, msgs chan *nats.Msg) sinks.ConfigEvent {
	t.Helper()
	ev, ok := configEventWithin(t, msgs, time.Minute) // a reload that starts new workers, on a loaded machine
	if !ok {
		t.Fatal("no config event in a minute")
	}
	return ev
}

// Every leaf of config.Config, at any depth and in the elements of its lists, has a class:
// its own entry in reloadClasses, or needRestart from a section above it. Every entry names
// a leaf or a section, applyLive a leaf only (so that a field added under a live section
// fails here until it is classified), and no entry repeats its section's class. The leaves
// of a list share one class: inForce takes or keeps a list whole. eachConfigField, which
// inForce walks, walks every leaf.
func TestReloadClassesCoverConfig(t *testing.T) {
	leaves, sections := map[string]bool{}, map[string]bool{}
	section := func(t reflect.Type) bool { // a struct with fields to walk into
		return t.Kind() == reflect.Struct && slices.ContainsFunc(reflect.VisibleFields(t), func(f reflect.StructField) bool { return f.IsExported() })
	}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name) // yaml.v3's default
			}
			path, ft := strings.TrimPrefix(prefix+"."+name, "."), f.Type
			if (ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array) && section(ft.Elem()) {
				sections[path], sections[path+"[]"] = true, true
				walk(ft.Elem(), path+"[]")
				continue
			}
			if section(ft) {
				sections[path] = true
				walk(ft, path)
				continue
			}
			leaves[path] = true
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	if len(leaves) < 100 {
		t.Fatalf("walked %d leaves of config.Config: the walk is broken", len(leaves))
	}
	var walked []string
	eachConfigField(reflect.TypeFor[config.Config](), "", nil, false, func(path string, _ []int) { walked = append(walked, path) })
	if want := slices.Sorted(maps.Keys(leaves)); !slices.Equal(slices.Sorted(slices.Values(walked)), want) {
		t.Errorf("eachConfigField walks %q,\nwant the leaves %q", walked, want)
	}
	lists := map[string]reloadClass{}
	for _, path := range slices.Sorted(maps.Keys(leaves)) {
		class, _ := reloadClassOf(path)
		if class != applyLive && class != needRestart {
			t.Errorf("config field %s is neither applied by a reload nor listed as needing a restart: classify it in reloadClasses", path)
		}
		if list, _, ok := strings.Cut(path, "[]"); ok {
			if c, seen := lists[list]; seen && c != class {
				t.Errorf("reloadClasses: the leaves of %s have different classes (%s: %d, another %d): inForce takes or keeps a list whole", list, path, class, c)
			}
			lists[list] = class
		}
	}
	for path, class := range reloadClasses {
		switch {
		case class == applyLive && !leaves[path]:
			t.Errorf("reloadClasses gives applyLive to %s, which is no leaf of config.Config: list a live section's leaves one by one", path)
		case !leaves[path] && !sections[path]:
			t.Errorf("reloadClasses names %s, which is no field of config.Config", path)
		}
		if i := strings.LastIndexAny(path, ".["); i > 0 {
			if parent, _ := reloadClassOf(path[:i]); class == needRestart && parent == needRestart {
				t.Errorf("reloadClasses: %s has the class of its section already", path)
			}
		}
	}
}

// For every leaf, including those of a list's element, a file that changes only that leaf
// either puts it in force (applied live, nothing to restart) or keeps the running value and
// names its section in NeedsRestart, as reloadClasses says; never neither. The running
// config is left as it was.
func TestInForceFollowsClasses(t *testing.T) {
	const yaml = "workers: {pools: [{count: 1}]}\ncamera_defaults: {objects: {filters: [{class: car, min_score: 0.5}]}}\ncameras:\n" +
		"  - {id: a, url: rtsp://h/1, objects: {filters: [{class: person}]}, zones: [{id: z, polygon: [[0, 0], [1, 0], [1, 1]]}], lines: [{id: l, points: [[0, 0], [1, 1]]}]}\n"
	running, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	eachConfigField(reflect.TypeFor[config.Config](), "", nil, false, func(path string, _ []int) {
		n++
		file := *running
		changeValue(t, path, leafOf(t, reflect.ValueOf(&file).Elem(), path, true))
		next, restart := inForce(running, &file)
		got := leafOf(t, reflect.ValueOf(next).Elem(), path, false).Interface()
		want := leafOf(t, reflect.ValueOf(running).Elem(), path, false).Interface()
		class, section := reloadClassOf(path)
		if class == 0 {
			t.Errorf("%s: not in reloadClasses (changed, it is reported as %q)", path, restart)
			return
		}
		if class == applyLive {
			want = leafOf(t, reflect.ValueOf(&file).Elem(), path, false).Interface()
			section = ""
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s changed in the file: in force %v, want %v (class %d)", path, got, want, class)
		}
		if section == "" && len(restart) != 0 || section != "" && !slices.Equal(restart, []string{section}) {
			t.Errorf("%s changed in the file: needs restart %q, want %q", path, restart, section)
		}
		file2 := *next // what runs, written back as the file: nothing to report, nothing changes
		if again, restart := inForce(next, &file2); len(restart) != 0 || !reflect.DeepEqual(again, next) {
			t.Errorf("%s: the running config as the file: needs restart %q", path, restart)
		}
	})
	if n < 100 {
		t.Fatalf("changed %d leaves of config.Config: the walk is broken", n)
	}
	if fresh, _ := config.Parse([]byte(yaml)); !reflect.DeepEqual(running, fresh) {
		t.Fatal("changing the copies changed the running config")
	}
}

// changeValue sets v, a field of a copy, to a value different from the one it has, without
// changing what the copy shares with its original.
func changeValue(t *testing.T, path string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float() + 1)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), v.Len()+1, v.Len()+1)
		reflect.Copy(s, v)
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if !v.IsNil() {
			p.Elem().Set(v.Elem())
		}
		changeValue(t, path, p.Elem())
		v.Set(p)
	default:
		t.Fatalf("%s: cannot change a %s: teach changeValue", path, v.Type())
	}
}

// The sequence of issue 12: a section that needs a restart stays reported until the file
// holds the running value again, and other reloads do not forget it.
func TestInForceComparesFileWithRunning(t *testing.T) {
	start, err := config.Parse([]byte("http: {listen: '127.0.0.1:8080'}\ncameras:\n  - {id: a, url: rtsp://h/1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(from *config.Config, f func(*config.Config)) *config.Config {
		c := *from
		c.Cameras = slices.Clone(from.Cameras)
		f(&c)
		return &c
	}
	newListen := edit(start, func(c *config.Config) { c.HTTP.Listen = "127.0.0.1:9090" })
	running, restart := inForce(start, newListen)
	if !slices.Equal(restart, []string{"http"}) || running.HTTP != start.HTTP {
		t.Fatalf("http.listen changed: needs restart %q, in force %+v", restart, running.HTTP)
	}
	newFPS := edit(newListen, func(c *config.Config) { c.Cameras[0].FPS = 2 })
	running, restart = inForce(running, newFPS)
	if !slices.Equal(restart, []string{"http"}) || running.HTTP != start.HTTP || running.Cameras[0].FPS != 2 {
		t.Fatalf("then a camera's fps: needs restart %q, in force %+v %+v", restart, running.HTTP, running.Cameras)
	}
	restored := edit(newFPS, func(c *config.Config) { c.HTTP = start.HTTP })
	running, restart = inForce(running, restored)
	if len(restart) != 0 || running.Cameras[0].FPS != 2 {
		t.Fatalf("then http restored: needs restart %q, cameras %+v", restart, running.Cameras)
	}
	if _, restart := inForce(running, edit(start, func(c *config.Config) { c.Site = "b"; c.NATS.Listen = ":1"; c.StateDir = "/x" })); !slices.Equal(restart, []string{"site", "state_dir", "nats"}) {
		t.Fatalf("site, nats and state_dir changed: needs restart %q", restart)
	}
}

// fileDaemon is a daemon started from a file it watches, and the config events it publishes.
type fileDaemon struct {
	*Daemon
	path                string
	events              chan *nats.Msg
	reloading, reloaded atomic.Int32 // the hooks' calls
	results             chan error   // from the Reloaded hook
}

// startFileDaemon writes body (with a fresh state_dir and NATS port prepended) to a file,
// loads it and starts a daemon on it that watches it, with workers that are this test binary.
// beforeStart, if any, runs between the load and the start.
func startFileDaemon(t *testing.T, body string, beforeStart ...func(path string)) *fileDaemon {
	t.Helper()
	path := testutil.TempFile(t, "visiond.yaml", fmt.Sprintf("state_dir: %q\nnats: {listen: \"127.0.0.1:0\"}\n%s", t.TempDir(), body))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	fd := &fileDaemon{path: path, events: make(chan *nats.Msg, 16), results: make(chan error, 16)}
	fd.Daemon = &Daemon{Config: cfg, ConfigPath: path, Logger: testutil.Logger(t),
		WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv},
		Reloading: func() { fd.reloading.Add(1) },
		Reloaded: func(_ ReloadResult, err error) {
			fd.reloaded.Add(1)
			select {
			case fd.results <- err:
			default:
			}
		}}
	for _, f := range beforeStart {
		f(path)
	}
	if err := fd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fd.Close)
	nc, err := nats.Connect(fd.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if _, err := nc.ChanSubscribe("visiond."+cfg.Site+".config", fd.events); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return fd
}

// save writes the file as an editor does: a temporary file renamed over it.
func (fd *fileDaemon) save(t *testing.T, body string) {
	t.Helper()
	tmp := fd.path + ".tmp"
	testutil.WriteFile(t, tmp, body)
	if err := os.Rename(tmp, fd.path); err != nil {
		t.Fatal(err)
	}
}

// noConfigEvent fails when a config event comes within d.
func (fd *fileDaemon) noConfigEvent(t *testing.T, d time.Duration, after string) {
	t.Helper()
	select {
	case m := <-fd.events:
		t.Fatalf("a config event %s after %s", m.Data, after)
	case <-time.After(d):
	}
}

// online waits until every camera is online and has been analysed, and returns their sources.
func (fd *fileDaemon) online(t *testing.T, ids ...string) map[string]any {
	t.Helper()
	testutil.WaitFor(t, 2*time.Minute, fmt.Sprintf("cameras %v online and analysed", ids), func() bool {
		for _, id := range ids {
			if c := fd.camera(id); c == nil || c.status().State != "online" || c.status().Analysed == 0 {
				return false
			}
		}
		return true
	})
	srcs := map[string]any{}
	for _, id := range ids {
		srcs[id] = fd.camera(id).src
	}
	return srcs
}

// untouched fails unless the cameras still run on the same sessions, never reconnected.
func (fd *fileDaemon) untouched(t *testing.T, srcs map[string]any) {
	t.Helper()
	if len(fd.Cameras()) != len(srcs) {
		t.Fatalf("%d cameras, want the %d in force", len(fd.Cameras()), len(srcs))
	}
	for id, src := range srcs {
		c := fd.camera(id)
		if c == nil || any(c.src) != src {
			t.Fatalf("camera %s was removed or restarted", id)
		}
		if st := c.src.Status(); st.Reconnects != 0 {
			t.Fatalf("camera %s reconnected %d times", id, st.Reconnects)
		}
	}
}

// Issue 12, item 1, through the file: http.listen changed is reported as needing a restart
// on that reload and every later one (a camera's fps changed meanwhile is applied) while the
// server keeps its address, and restoring it reports nothing; SIGHUP's ReloadNow reloads.
func TestReloadNeedsRestartUntilFileMatches(t *testing.T) {
	cams := sampleCameras(t, 2)
	base := fmt.Sprintf("site: test\nhttp: {listen: \"127.0.0.1:0\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams)
	fd := startFileDaemon(t, base)
	body := testutil.ReadFile(t, fd.path)
	addr := fd.HTTPAddr().String()
	newListen := strings.Replace(body, `http: {listen: "127.0.0.1:0"}`, `http: {listen: "127.0.0.1:1"}`, 1)
	slower := strings.Replace(newListen, "- {id: cam1,", "- {id: cam1, fps: 2,", 1)

	fd.save(t, newListen)
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || !slices.Equal(ev.NeedsRestart, []string{"http"}) {
		t.Fatalf("http.listen changed: %+v, want applied, needs_restart [http]", ev)
	}
	fd.save(t, slower)
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || !slices.Equal(ev.Updated, []string{"cam1"}) || !slices.Equal(ev.NeedsRestart, []string{"http"}) {
		t.Fatalf("then cam1's fps changed: %+v, want cam1 updated, needs_restart [http] still", ev)
	}
	if got := fd.Running(); got.HTTP.Listen != "127.0.0.1:0" || got.Cameras[1].FPS != 2 || fd.HTTPAddr().String() != addr {
		t.Fatalf("in force: http %+v (serving on %s, was %s), cameras %+v", got.HTTP, fd.HTTPAddr(), addr, got.Cameras)
	}
	if code, _, _ := request(t, "GET", "http://"+addr+"/healthz"); code != 200 {
		t.Fatalf("the endpoint in force answers %d", code)
	}
	fd.save(t, strings.Replace(slower, `http: {listen: "127.0.0.1:1"}`, `http: {listen: "127.0.0.1:0"}`, 1))
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || len(ev.NeedsRestart) != 0 || len(ev.Updated)+len(ev.Added)+len(ev.Removed)+len(ev.Restarted) != 0 {
		t.Fatalf("then http restored: %+v, want applied, nothing changed, nothing to restart", ev)
	}
	fd.ReloadNow("SIGHUP")
	if ev := nextConfigEvent(t, fd.events); ev.Result != "applied" || len(ev.NeedsRestart) != 0 {
		t.Fatalf("SIGHUP: %+v", ev)
	}
	// Reloaded is called after the event is published: wait for its 4th call.
	testutil.WaitFor(t, time.Minute, "the Reloaded hook's 4th call", func() bool { return fd.reloaded.Load() >= 4 })
	if a, b := fd.reloading.Load(), fd.reloaded.Load(); a != 4 || b != 4 {
		t.Fatalf("hooks called %d and %d times around 4 reloads", a, b)
	}
}

// watchDebounce is config.Watcher's default debounce, the daemon's.
const watchDebounce = 300 * time.Millisecond

// Issue 12, item 2: an editor that truncates the file and writes it again within 150 ms
// causes one reload, of the complete file; no camera stops. (A machine that holds the test
// up for longer than the watcher's debounce between the truncation and the write has made
// two edits: the empty file's reload is rejected, and the complete file is applied.)
func TestReloadTruncateThenWrite(t *testing.T) {
	cams := sampleCameras(t, 2)
	fd := startFileDaemon(t, fmt.Sprintf("site: test\nhttp: {listen: \"\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams))
	srcs := fd.online(t, "cam0", "cam1")
	body := strings.Replace(testutil.ReadFile(t, fd.path), "- {id: cam1,", "- {id: cam1, fps: 2,", 1)

	start := time.Now()
	if err := os.Truncate(fd.path, 0); err != nil { // `: > visiond.yaml`
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // then `cp good.yaml visiond.yaml`
	testutil.WriteFile(t, fd.path, body)
	if took := time.Since(start); took > watchDebounce {
		// Two edits: each reload rejects the empty file or applies the complete one (once
		// with cam1 updated, then with nothing to change), until none comes for 3 s.
		updated := 0
		for ev, ok := nextConfigEvent(t, fd.events), true; ok; ev, ok = configEventWithin(t, fd.events, 3*time.Second) {
			switch {
			case ev.Result == "rejected" && strings.Contains(ev.Error, "empty file"):
			case ev.Result == "applied" && len(ev.Removed)+len(ev.Restarted)+len(ev.Added) == 0 &&
				(len(ev.Updated) == 0 || slices.Equal(ev.Updated, []string{"cam1"})):
				updated += len(ev.Updated)
			default:
				t.Fatalf("config event %+v, want the empty file rejected or the complete file applied", ev)
			}
		}
		if updated != 1 || fd.Running().Cameras[1].FPS != 2 {
			t.Fatalf("cam1 updated %d times, at %v fps in force: want once, to 2", updated, fd.Running().Cameras[1].FPS)
		}
		fd.untouched(t, srcs)
		return
	}
	ev := nextConfigEvent(t, fd.events)
	if ev.Result != "applied" || !slices.Equal(ev.Updated, []string{"cam1"}) || len(ev.Removed)+len(ev.Restarted)+len(ev.Added) != 0 {
		t.Fatalf("config event %+v, want the complete file applied: cam1 updated, nothing removed", ev)
	}
	fd.noConfigEvent(t, 2*time.Second, "the one reload")
	fd.untouched(t, srcs)
}

// configEventWithin returns the next config event, if one comes within d.
func configEventWithin(t *testing.T, msgs chan *nats.Msg, d time.Duration) (sinks.ConfigEvent, bool) {
	t.Helper()
	select {
	case m := <-msgs:
		var ev sinks.ConfigEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		return ev, true
	case <-time.After(d):
		return sinks.ConfigEvent{}, false
	}
}

// Issue 12, item 2: an empty file left for seconds, then the same file without its
// cameras (cut short), is rejected each time; the good file written back is applied, and the
// cameras ran untouched throughout.
func TestReloadEmptyFileLeftThenGood(t *testing.T) {
	cams := sampleCameras(t, 2)
	fd := startFileDaemon(t, fmt.Sprintf("site: test\nhttp: {listen: \"\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams))
	srcs := fd.online(t, "cam0", "cam1")
	good := testutil.ReadFile(t, fd.path)

	testutil.WriteFile(t, fd.path, "")
	if ev := nextConfigEvent(t, fd.events); ev.Result != "rejected" || !strings.Contains(ev.Error, "empty file") {
		t.Fatalf("empty file: config event %+v, want rejected as empty", ev)
	}
	fd.noConfigEvent(t, 3*time.Second, "the empty file's rejection")
	fd.untouched(t, srcs)

	fd.save(t, "# visiond\n\n") // only a comment: as empty
	if ev := nextConfigEvent(t, fd.events); ev.Result != "rejected" || !strings.Contains(ev.Error, "empty file") {
		t.Fatalf("a file of comments: config event %+v, want rejected as empty", ev)
	}
	fd.save(t, good[:strings.Index(good, "cameras:")]) // cut short before its cameras
	if ev := nextConfigEvent(t, fd.events); ev.Result != "rejected" || !strings.Contains(ev.Error, "cameras: no list of cameras") {
		t.Fatalf("a file without cameras: config event %+v, want rejected", ev)
	}

	fd.save(t, good)
	ev := nextConfigEvent(t, fd.events)
	if ev.Result != "applied" || len(ev.Removed)+len(ev.Restarted)+len(ev.Added)+len(ev.Updated) != 0 || len(ev.NeedsRestart) != 0 {
		t.Fatalf("the good file back: config event %+v, want applied with nothing changed", ev)
	}
	fd.untouched(t, srcs)
	if n := fd.ReloadFailures(); n != 3 {
		t.Fatalf("%d reloads rejected, want 3", n)
	}
}

// A file edited after it was loaded and before the daemon watched it is reloaded once the
// daemon runs: the edit is not lost.
func TestReloadFileEditedDuringStart(t *testing.T) {
	cams := sampleCameras(t, 2)
	fd := startFileDaemon(t, fmt.Sprintf("site: test\nhttp: {listen: \"\"}\nworkers: {model: %q, library: %q, pools: [{count: 1}]}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams), func(path string) {
		edited := strings.Replace(testutil.ReadFile(t, path), "- {id: cam1,", "- {id: cam1, fps: 2,", 1)
		testutil.WriteFile(t, path, edited)
	})
	select {
	case err := <-fd.results:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("no reload of the file edited during start")
	}
	if c := fd.Running().Cameras; c[1].ID != "cam1" || c[1].FPS != 2 || fd.Config.Cameras[1].FPS == 2 {
		t.Fatalf("in force: %+v; want cam1 at 2 fps", c)
	}
	select {
	case err := <-fd.results:
		t.Fatalf("a second reload (%v) of an unchanged file", err)
	case <-time.After(time.Second):
	}
}
