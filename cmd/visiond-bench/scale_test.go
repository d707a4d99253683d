package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/sources"
)

// passUpTo is a step that passes with at most capacity cameras.
func passUpTo(capacity int, tried *[]int) func(n int) (scaleStep, error) {
	return func(n int) (scaleStep, error) {
		*tried = append(*tried, n)
		return scaleStep{Cameras: n, Pass: n <= capacity}, nil
	}
}

func TestSearch(t *testing.T) {
	cases := []struct {
		name     string
		o        searchOpts
		capacity int
		lo, hi   int
		maxSteps int
	}{
		{"doubling from one", searchOpts{Start: 1, Max: 512, Grow: 2, Resolution: 1}, 37, 37, 38, 12},
		{"near the answer", searchOpts{Start: 32, Max: 512, Grow: 1.25, Resolution: 1}, 37, 37, 38, 6},
		{"start above", searchOpts{Start: 64, Max: 512, Grow: 2, Resolution: 1}, 37, 37, 38, 8},
		{"coarse", searchOpts{Start: 140, Max: 512, Grow: 1.25, Resolution: 4}, 151, 0, 0, 5},
		{"none passes", searchOpts{Start: 4, Max: 512, Grow: 2, Resolution: 1}, 0, 0, 1, 4},
		{"the most allowed passes", searchOpts{Start: 4, Max: 20, Grow: 2, Resolution: 1}, 100, 20, 0, 4},
		{"grow by less than one camera still grows", searchOpts{Start: 1, Max: 512, Grow: 1.01, Resolution: 1}, 3, 3, 4, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tried []int
			steps, lo, hi, cut, err := search(c.o, passUpTo(c.capacity, &tried))
			if err != nil || cut {
				t.Fatal(err, cut)
			}
			if c.name == "coarse" { // within the resolution
				if lo > c.capacity || lo < c.capacity-c.o.Resolution || hi <= c.capacity || hi-lo > c.o.Resolution {
					t.Errorf("lo %d hi %d for capacity %d, resolution %d (tried %v)", lo, hi, c.capacity, c.o.Resolution, tried)
				}
			} else if lo != c.lo || hi != c.hi {
				t.Errorf("lo %d hi %d, want %d %d (tried %v)", lo, hi, c.lo, c.hi, tried)
			}
			if len(steps) != len(tried) || len(steps) > c.maxSteps {
				t.Errorf("%d steps (tried %v), want at most %d", len(steps), tried, c.maxSteps)
			}
			for _, n := range tried {
				if n < 1 || n > c.o.Max {
					t.Errorf("tried %d cameras, outside 1..%d", n, c.o.Max)
				}
			}
		})
	}
}

// TestSearchBudget: a search with a budget runs no step that the longest step so far says
// would end past it, keeps what it found, and says it was cut; one without comes within
// its resolution.
func TestSearchBudget(t *testing.T) {
	slow := func(tried *[]int) func(n int) (scaleStep, error) {
		pass := passUpTo(37, tried)
		return func(n int) (scaleStep, error) {
			time.Sleep(40 * time.Millisecond)
			return pass(n)
		}
	}
	o := searchOpts{Start: 1, Max: 512, Grow: 2, Resolution: 1, Budget: 0.2}
	var tried []int
	steps, lo, hi, cut, err := search(o, slow(&tried))
	if err != nil {
		t.Fatal(err)
	}
	// A full search takes 12 steps (TestSearch); 0.2 s holds at most 4 of 40 ms.
	if !cut || len(steps) == 0 || len(steps) > 4 || len(steps) != len(tried) {
		t.Fatalf("cut %v after %d steps (tried %v), want cut within 4", cut, len(steps), tried)
	}
	if want := tried[len(tried)-1]; lo != want || hi != 0 { // doubling from one: every step so far passed
		t.Errorf("lo %d hi %d after %v, want %d 0", lo, hi, tried, want)
	}
	o.Budget = 60
	tried = nil
	if _, lo, hi, cut, err = search(o, slow(&tried)); err != nil || cut || lo != 37 || hi != 38 {
		t.Errorf("with a minute's budget: lo %d hi %d cut %v err %v (tried %v), want 37 38 false", lo, hi, cut, err, tried)
	}
}

func TestSearchOptsCheck(t *testing.T) {
	good := searchOpts{Start: 1, Max: 10, Grow: 2, Resolution: 1}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    searchOpts
		flag string
	}{
		{searchOpts{Start: 0, Max: 10, Grow: 2, Resolution: 1}, "-start"},
		{searchOpts{Start: 20, Max: 10, Grow: 2, Resolution: 1}, "-max"},
		{searchOpts{Start: 1, Max: 10, Grow: 1, Resolution: 1}, "-grow"},
		{searchOpts{Start: 1, Max: 10, Grow: 2, Resolution: 0}, "-resolution"},
	} {
		if err := c.o.check(); err == nil || !strings.Contains(err.Error(), c.flag) {
			t.Errorf("%+v: %v, want an error naming %s", c.o, err, c.flag)
		}
	}
}

func TestCameraList(t *testing.T) {
	var l cameraList
	for v, want := range map[string]string{"1,8": "1,8", "1 32": "1,32", "": "", " 4 , 2 ": "4,2"} {
		if err := l.Set(v); err != nil || l.String() != want {
			t.Errorf("%q: %v %q, want %q", v, err, l.String(), want)
		}
	}
	for _, bad := range []string{"0", "1,x", "-3"} {
		if err := l.Set(bad); err == nil || !strings.Contains(err.Error(), "camera counts") {
			t.Errorf("%q: %v, want an error", bad, err)
		}
	}
	var tried []int
	curve, err := curveSteps(cameraList{1, 32}, passUpTo(10, &tried))
	if err != nil || len(curve) != 2 || !curve[0].Pass || curve[1].Pass {
		t.Errorf("curve %+v %v", curve, err)
	}
}

// TestPoolSettings: the settings left unset are not written, so the daemon's defaults apply
// (the config the bench writes loads, with the daemon's default count and threads).
func TestPoolSettings(t *testing.T) {
	var f daemonFlags
	fs := flagSet(&f)
	if err := fs.Parse([]string{"-provider", "cpu"}); err != nil {
		t.Fatal(err)
	}
	if got := f.pool(); got != "provider: cpu, device: 0" {
		t.Errorf("default pool %q, want provider and device only", got)
	}
	def := loadPool(t, f)
	if err := fs.Parse([]string{"-workers", "3", "-threads", "0", "-sessions", "4"}); err != nil {
		t.Fatal(err)
	}
	if got := f.pool(); got != "provider: cpu, device: 0, count: 3, threads: 0, sessions: 4" {
		t.Errorf("pool %q", got)
	}
	if err := fs.Parse([]string{"-sessions", "0", "-workers", "auto", "-threads", "2"}); err != nil {
		t.Fatal(err)
	}
	if got := f.pool(); got != "provider: cpu, device: 0, threads: 2" {
		t.Errorf("pool %q", got)
	}
	p := loadPool(t, f)
	if p.Count != def.Count || p.Threads != 2 || def.Threads != 1 {
		t.Errorf("loaded pools: default %+v, with threads 2 %+v", def, p)
	}
	if def.Count < 1 || int(def.Count) > runtime.NumCPU() {
		t.Errorf("the daemon's default count %d on %d CPUs", def.Count, runtime.NumCPU())
	}
	for _, bad := range []string{"-1", "many", ""} {
		if err := fs.Parse([]string{"-workers", bad}); err == nil || !strings.Contains(err.Error(), "-workers") {
			t.Errorf("-workers %q: %v, want an error naming the flag", bad, err)
		}
	}
	if d := setting(unset).describe(16); d != "default (16)" {
		t.Errorf("describe %q", d)
	}
}

// loadPool writes the daemon's config as the bench does and loads it with the daemon's
// config package.
func loadPool(t *testing.T, f daemonFlags) config.WorkerPool {
	t.Helper()
	pool, _ := writeAndLoad(t, f)
	return pool
}

// writeAndLoad writes the daemon's config as the bench does, for one camera, and loads it
// with the daemon's config package: its one pool, and the whole config.
func writeAndLoad(t *testing.T, f daemonFlags) (config.WorkerPool, *config.Config) {
	t.Helper()
	dir := t.TempDir()
	lib := filepath.Join(dir, "libonnxruntime.so.1")
	model := filepath.Join(dir, "model.onnx")
	for _, p := range []string{lib, model} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.Library, f.Model, f.FPS = lib, model, 5
	d := &daemon{f: f, dir: dir, cfgPath: filepath.Join(dir, "visiond.yaml"), httpAddr: "127.0.0.1:1", natsAddr: "127.0.0.1:2",
		servers: &cameraServers{urls: []string{"rtsp://127.0.0.1:3/cam"}}}
	if err := d.writeConfig([]string{"cam000"}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(d.cfgPath)
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatalf("the config the bench writes does not load: %v\n%s", err, data)
	}
	if len(cfg.Workers.Pools) != 1 || len(cfg.Cameras) != 1 {
		t.Fatalf("pools %+v, cameras %+v", cfg.Workers.Pools, cfg.Cameras)
	}
	return cfg.Workers.Pools[0], cfg
}

// TestBenchDecoder checks that -decoder reaches the cameras of the config the bench writes.
func TestBenchDecoder(t *testing.T) {
	for _, dec := range []string{"", "cpu", "cuda"} {
		f := daemonFlags{Provider: "cpu", Workers: unset, Threads: unset, Sessions: unset, Decoder: dec}
		_, cfg := writeAndLoad(t, f)
		want := sources.Decoder(dec)
		if dec == "" {
			want = sources.DefaultDecoder
		}
		if got := cfg.Cameras[0].Decoder; got != want {
			t.Errorf("-decoder %q: camera decoder %q, want %q", dec, got, want)
		}
	}
}

func TestParseGPUApps(t *testing.T) {
	m := parseGPUApps("1234, 806\n1234, 10\n99, [N/A]\n\n77, 1466\n")
	if len(m) != 2 || m[1234] != 816 || m[77] != 1466 {
		t.Errorf("%v", m)
	}
}

func flagSet(f *daemonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	return fs
}

// TestNotOnline: a step whose cameras do not all come online says what the rest are doing.
func TestNotOnline(t *testing.T) {
	cs := []camStatus{
		{ID: "a", State: "online"},
		{ID: "b", State: "connecting", Error: "dial tcp: connection refused"},
		{ID: "c", State: "connecting", Error: "dial tcp: connection refused"},
		{ID: "d", State: "starting"},
		{ID: "e", State: "connecting", Error: "decoder: no NVDEC session"},
	}
	got := notOnline(cs)
	want := `; not online: 3 "connecting", 1 "starting"; their last errors: 2 "dial tcp: connection refused", 1 "decoder: no NVDEC session"`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := notOnline(cs[:1]); got != "" {
		t.Errorf("all online: got %q, want nothing", got)
	}
}

func TestOpenFiles(t *testing.T) {
	got := openFiles(os.Getpid())
	if !strings.HasPrefix(got, "; ") || !strings.Contains(got, " open files of a limit of ") || strings.Contains(got, "limit of ?") {
		t.Errorf("openFiles(self) = %q", got)
	}
	if got := openFiles(-1); got != "" {
		t.Errorf("openFiles(-1) = %q, want nothing", got)
	}
}
