package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/limits"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// The budget comes from memory_limit_mib, the cgroup's limit when that is lower or when
// memory_limit_mib is 0, or nowhere.
func TestMemoryBudgetResolved(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	cg := limits.Memory{Limit: 2 << 30, File: "/sys/fs/cgroup/visiond.service/memory.max"}
	for _, tc := range []struct {
		name       string
		configMiB  int
		cg         limits.Memory
		cgErr      error
		limit      int64
		from, warn string
	}{
		{name: "none", limit: 0, from: ""},
		{name: "the cgroup's", cg: cg, limit: 2 << 30, from: cg.File},
		{name: "memory_limit_mib below the cgroup's", configMiB: 1024, cg: cg, limit: 1 << 30, from: "memory_limit_mib"},
		{name: "memory_limit_mib alone", configMiB: 3000, limit: 3000 << 20, from: "memory_limit_mib"},
		{name: "memory_limit_mib above the cgroup's", configMiB: 4096, cg: cg, limit: 2 << 30, from: cg.File, warn: "above the cgroup's memory limit"},
		{name: "the cgroup unreadable", configMiB: 512, cgErr: errors.New("bad memory.max"), limit: 512 << 20, from: "memory_limit_mib", warn: "bad memory.max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log testutil.LogBuffer
			b := newMemoryBudget(tc.configMiB, tc.cg, tc.cgErr, log.Logger())
			if b.limit != tc.limit || b.source != tc.from {
				t.Errorf("budget %d from %q, want %d from %q", b.limit, b.source, tc.limit, tc.from)
			}
			warns := testutil.Warnings(log.String())
			if tc.warn == "" && len(warns) > 0 || tc.warn != "" && (len(warns) != 1 || !strings.Contains(warns[0], tc.warn)) {
				t.Errorf("warnings %q, want %q", warns, tc.warn)
			}
		})
	}
}

// observe gives the Go runtime what the budget leaves it, counts each sample over the budget,
// and logs at most once a minute; with GOMEMLIMIT in the environment it leaves the Go limit
// alone and still counts.
func TestMemoryBudgetObserve(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	var log testutil.LogBuffer
	b := newMemoryBudget(1000, limits.Memory{}, nil, log.Logger())
	var set []int64
	b.setGoLimit = func(v int64) int64 { set = append(set, v); return 0 }
	const mib = 1 << 20
	sample := func(goMiB, restMiB, workerMiB int64) MemoryStatus {
		return MemoryStatus{ResidentBytes: (goMiB + restMiB) * mib, GoBytes: goMiB * mib,
			Workers: []WorkerMemory{{ResidentBytes: workerMiB / 2 * mib}, {ResidentBytes: workerMiB / 2 * mib}}}
	}
	now := time.Now()
	if b.observe(sample(100, 200, 300), now) {
		t.Fatal("600 MiB of 1000 reported over the budget")
	}
	// 1000 less a tenth, less the 500 MiB outside the Go runtime.
	if len(set) != 1 || set[0] != 400*mib || b.goLimit.Load() != 400*mib {
		t.Fatalf("Go limits set %v (last %d), want 400 MiB", set, b.goLimit.Load())
	}
	// The workers grow past the budget: the Go runtime is held at the floor, the sample
	// counted and logged once, with where the memory is.
	for i := range 3 {
		if !b.observe(sample(100, 300, 700), now.Add(time.Duration(i)*10*time.Second)) {
			t.Fatal("1100 MiB of 1000 not reported over the budget")
		}
	}
	if got := set[len(set)-1]; got != goLimitFloor {
		t.Errorf("Go limit %d MiB with 1000 MiB outside it, want the floor %d", got/mib, goLimitFloor/mib)
	}
	warns := testutil.Warnings(log.String())
	if b.over.Load() != 3 || len(warns) != 1 || !strings.Contains(warns[0], "workers_mib=700") || !strings.Contains(warns[0], "budget_mib=1000") {
		t.Errorf("%d samples over, warnings %q: want 3 and one warning naming the workers' 700 MiB", b.over.Load(), warns)
	}
	b.observe(sample(100, 300, 700), now.Add(overLogEvery))
	if n := len(testutil.Warnings(log.String())); n != 2 {
		t.Errorf("%d warnings a minute on, want 2", n)
	}

	t.Setenv("GOMEMLIMIT", "300MiB")
	env := newMemoryBudget(1000, limits.Memory{}, nil, log.Logger())
	env.setGoLimit = func(v int64) int64 { t.Errorf("Go limit set to %d with GOMEMLIMIT in the environment", v); return 0 }
	if !env.observe(sample(100, 300, 700), now) || env.over.Load() != 1 {
		t.Errorf("with GOMEMLIMIT set: over %d, want the sample counted", env.over.Load())
	}
}

// TestMemoryBudgetExceeded: a daemon given less memory than it and its worker hold counts
// the samples over the budget, logs where the memory is, holds its Go runtime to the least
// it gives it, and goes on analysing; closed, it puts back the Go limit it found.
func TestMemoryBudgetExceeded(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	cfg, err := config.Parse([]byte("memory_limit_mib: 256\n" + lifeConfig(t, sampleCameras(t, 1))))
	if err != nil {
		t.Fatal(err)
	}
	cfg.StateDir = t.TempDir()
	var log testutil.LogBuffer
	d := &Daemon{Config: cfg, Logger: log.Logger(), WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", log.String())
		}
	}()
	var m MemoryStatus
	testutil.WaitFor(t, 2*time.Minute, "a sample over the budget, with the worker's memory in it", func() bool {
		m = d.Memory()
		return m.OverBudgetSamples > 0 && len(m.Workers) == 1 && m.Workers[0].ResidentBytes > 0
	})
	if m.BudgetBytes != 256<<20 || m.BudgetFrom != "memory_limit_mib" || m.TotalBytes() <= m.BudgetBytes {
		t.Errorf("budget %d from %q with %d MiB held: want 256 MiB from memory_limit_mib, exceeded", m.BudgetBytes, m.BudgetFrom, m.TotalBytes()>>20)
	}
	if m.GoLimitBytes < goLimitFloor || m.GoLimitBytes > 256<<20-256<<20/10 || debug.SetMemoryLimit(-1) != m.GoLimitBytes {
		t.Errorf("Go limit %d MiB (the runtime's %d MiB), want what the budget leaves it, at least %d MiB",
			m.GoLimitBytes>>20, debug.SetMemoryLimit(-1)>>20, goLimitFloor>>20)
	}
	warns := testutil.Warnings(log.String())
	if len(warns) == 0 || !strings.Contains(warns[0], "more memory than the budget") || !strings.Contains(warns[0], "budget_mib=256") {
		t.Errorf("warnings %q, want one saying the budget is exceeded", warns)
	}
	analysed := d.Cameras()[0].Analysed
	testutil.WaitFor(t, time.Minute, "frames analysed past the budget", func() bool { return d.Cameras()[0].Analysed > analysed })
	d.Close()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("Go limit %d after Close, want %d as before the start", got, before)
	}
}

// The GPU driver's owner sums the Rss of the mappings of NVIDIA's and a Jetson's device files
// in smaps, and nothing else; a process that maps none, or files that cannot be read or are
// not what smaps looks like, give 0, never an error.
func TestDriverResident(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const smaps = `00400000-00c00000 r-xp 00000000 fd:01 1234 /usr/local/bin/visiond
Rss:                8192 kB
Pss:                8192 kB
200000000-200400000 rw-s 00000000 00:06 712 /dev/nvidiactl
Size:               4096 kB
Rss:                4096 kB
Pss:                4096 kB
7f0000000000-7f0000100000 rw-p 00000000 00:00 0
Rss:                1024 kB
7f0000100000-7f0000200000 rw-s 00000000 00:06 713 /dev/nvidia0
Rss:                 512 kB
7f0000200000-7f0000300000 rw-s 00000000 00:06 714 /dev/nvmap
Rss:                 256 kB
Rss:            not-a-number kB
7f0000300000-7f0000400000 rw-s 00000000 00:06 715 /dev/nvhost-ctrl-gpu
Rss:                 128 kB
7f0000400000-7f0000500000 rw-p 00000000 00:06 716 /dev/zero
Rss:                  64 kB
VmFlags: rd wr sh mr mw me ms sd
`
	maps := write("maps", "200000000-200400000 rw-s 00000000 00:06 712 /dev/nvidiactl\n")
	if got, want := driverResident(maps, write("smaps", smaps)), int64(4096+512+256+128)<<10; got != want {
		t.Errorf("driver's mappings: %d bytes, want %d", got, want)
	}
	noGPU := write("maps-cpu", "00400000-00c00000 r-xp 00000000 fd:01 1234 /usr/local/bin/visiond\n")
	if got := driverResident(noGPU, write("smaps-ignored", smaps)); got != 0 {
		t.Errorf("a process that maps no driver's device: %d bytes, want 0 (smaps not read)", got)
	}
	for name, paths := range map[string][2]string{
		"no maps":  {filepath.Join(dir, "missing"), filepath.Join(dir, "smaps")},
		"no smaps": {maps, filepath.Join(dir, "missing")},
		"garbage":  {maps, write("garbage", "\x00\xff not smaps\n:\n\n")},
	} {
		if got := driverResident(paths[0], paths[1]); got != 0 {
			t.Errorf("%s: %d bytes, want 0", name, got)
		}
	}
	// This process: whatever it maps, the figure is at most its resident memory.
	_, file, _ := procMemory("/proc/self/status")
	if got := driverResident("/proc/self/maps", "/proc/self/smaps"); got < 0 || got > file {
		t.Errorf("this process: %d bytes of the driver's, of %d file-backed", got, file)
	}
}

// TestNATSStoreCaches: the owner nats_store_caches follows the block buffers of a real
// nats-server's file store: megabytes while a stream is being written, back to what it was
// once the server is gone and the collector has run.
func TestNATSStoreCaches(t *testing.T) {
	settle := func() int64 { // sync.Pool keeps what it holds through one collection
		runtime.GC()
		runtime.GC()
		return natsBlockBuffers()
	}
	before := settle()
	hub, err := natstest.NewHub(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	js := natstest.ConnectJS(t, hub.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CACHES", Subjects: []string{"caches.>"}, MaxBytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 1024)
	const written = 6 << 20
	for range written / len(msg) {
		if _, err := js.Publish(ctx, "caches.x", msg); err != nil {
			t.Fatal(err)
		}
	}
	during := settle()
	if during-before < written/2 {
		t.Fatalf("nats_store_caches: %d bytes before, %d after writing %d bytes to a stream of 8 MB blocks; want the block's cache counted", before, during, written)
	}

	// Memory's figure reads the profile again only once a collection has ended.
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but the test's
	var fig natsCachesFigure
	runtime.GC()
	first := fig.get()
	if want := natsBlockBuffers(); first != want || fig.get() != first || fig.reads != 1 {
		t.Fatalf("the figure read %d bytes and then %d in %d reads of the profile; want %d in one", first, fig.get(), fig.reads, want)
	}
	for range 1 << 20 / len(msg) { // a block written further
		if _, err := js.Publish(ctx, "caches.x", msg); err != nil {
			t.Fatal(err)
		}
	}
	if got := fig.get(); got != first || fig.reads != 1 {
		t.Fatalf("without a collection: %d bytes in %d reads; want %d in one", got, fig.reads, first)
	}
	runtime.GC()
	if got, want := fig.get(), natsBlockBuffers(); got != want || fig.reads != 2 {
		t.Fatalf("after a collection: %d bytes in %d reads; want %d in two", got, fig.reads, want)
	}

	hub.Close()
	if after := settle(); after > before+1<<20 {
		t.Fatalf("nats_store_caches: %d bytes before, %d while writing, %d after the server's shutdown; want back to %d", before, during, after, before)
	}
	t.Logf("nats_store_caches: %d KiB before, %d KiB while writing %d KiB, back to %d KiB", before>>10, during>>10, written>>10, settle()>>10)
}
