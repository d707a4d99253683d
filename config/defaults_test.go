package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/limits"
)

func TestPoolDefaults(t *testing.T) {
	for _, c := range []struct {
		provider            infer.Provider
		cpus, count, thread int
	}{
		{"cpu", 1, 1, 1},
		{"cpu", 2, 2, 1},
		{"cpu", 6, 6, 1},
		{"cpu", 8, 8, 1},
		{"cpu", 16, 16, 1}, // no cap of 8: the 16-CPU GPU machine gets 16 (20 cameras sustained)
		{"cpu", 19, 19, 1},
		{"cpu", 20, 19, 1}, // one CPU in 20 left to decoding
		{"cpu", 40, 38, 1},
		{"cpu", 64, 61, 1},
		{"cpu", 200, 64, 1}, // the most a pool may have
		{"cuda", 16, 1, 0},
		{"tensorrt", 16, 1, 0},
	} {
		count, threads := poolDefaults(c.provider, c.cpus)
		if count != c.count || threads != c.thread {
			t.Errorf("poolDefaults(%s, %d) = %d, %d; want %d, %d", c.provider, c.cpus, count, threads, c.count, c.thread)
		}
	}
	if p := defaultPool(6); p != (WorkerPool{Count: 6, Provider: "cpu", Threads: 1}) {
		t.Errorf("defaultPool(6) = %+v", p)
	}
}

// fixedCPUs is a host whose process may use u.
func fixedCPUs(u limits.CPUs, err error) host {
	return host{cpus: func() (limits.CPUs, error) { return u, err }}
}

// cgroupHost is a host whose proc and cgroup file system are a fixture: a cgroup v2
// hierarchy whose process cgroup has the given cpu.max.
func cgroupHost(t *testing.T, cpuMax string) host {
	t.Helper()
	root := t.TempDir()
	proc, sys := filepath.Join(root, "proc"), filepath.Join(root, "sys")
	for path, body := range map[string]string{
		filepath.Join(proc, "self", "cgroup"):            "0::/visiond.service\n",
		filepath.Join(proc, "self", "mountinfo"):         "30 23 0:26 / " + sys + " rw - cgroup2 cgroup2 rw\n",
		filepath.Join(sys, "visiond.service", "cpu.max"): cpuMax,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return host{cpus: func() (limits.CPUs, error) { return limits.ReadCPUs(proc) }}
}

// count auto, or count left out, takes the provider's default from the CPUs this process
// may use; an explicit number stays.
func TestCountAuto(t *testing.T) {
	doc := `workers:
  pools:
    - count: auto
    - {}
    - {count: "auto", provider: cuda}
    - {count: 3}
`
	for _, tc := range []struct {
		name string
		h    host
		want [4]WorkerCount
	}{
		{"16 CPUs", fixedCPUs(limits.CPUs{Affinity: 16}, nil), [4]WorkerCount{16, 16, 1, 3}},
		{"40 CPUs", fixedCPUs(limits.CPUs{Affinity: 40}, nil), [4]WorkerCount{38, 38, 1, 3}},
		{"quota of 4 CPUs on 16", fixedCPUs(limits.CPUs{Affinity: 16, Quota: 4}, nil), [4]WorkerCount{4, 4, 1, 3}},
		{"cgroup fixture, cpu.max half a CPU", cgroupHost(t, "50000 100000\n"), [4]WorkerCount{1, 1, 1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseOn([]byte(doc), false, tc.h)
			if err != nil {
				t.Fatal(err)
			}
			var got [4]WorkerCount
			for i, p := range cfg.Workers.Pools {
				got[i] = p.Count
			}
			if got != tc.want {
				t.Fatalf("counts %v, want %v", got, tc.want)
			}
			if pc := cfg.Workers.PoolConfig(0); pc.Count != int(tc.want[0]) {
				t.Fatalf("PoolConfig(0).Count = %d, want %d", pc.Count, tc.want[0])
			}
		})
	}
}

// When the cgroup files cannot be read, a cpu pool left to its default count is an error
// that says why and what to do; a pool with a number, or a cuda pool, is not.
func TestCountAutoUnreadableCPUs(t *testing.T) {
	h := cgroupHost(t, "lots\n")
	for _, doc := range []string{"workers:\n  pools:\n    - count: auto\n", "workers:\n  pools:\n    - {threads: 1}\n", "cameras: []\n"} {
		_, err := parseOn([]byte(doc), false, h)
		var cerr *Error
		if !errors.As(err, &cerr) || len(cerr.Problems) != 1 {
			t.Fatalf("%q: err %v, want one problem", doc, err)
		}
		p := cerr.Problems[0]
		if p.Field != "workers.pools[0].count" || !strings.Contains(p.Msg, "cpu.max") ||
			!strings.Contains(p.Msg, `"lots"`) || !strings.Contains(p.Msg, "give count as a number") {
			t.Errorf("%q: problem %v", doc, p)
		}
	}
	for _, doc := range []string{"workers:\n  pools:\n    - count: 2\n", "workers:\n  pools:\n    - {provider: cuda}\n"} {
		if _, err := parseOn([]byte(doc), false, h); err != nil {
			t.Errorf("%q: %v", doc, err)
		}
	}
}
