package limits

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const v1MemMount = "35 31 0:32 / {sys}/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"

func TestReadMemory(t *testing.T) {
	cases := []struct {
		name, cgroup, mountinfo string
		files                   map[string]string
		limit                   int64
		file                    string // under sys; "" for none
	}{
		{
			name: "v2 MemoryMax on the service", cgroup: "0::/system.slice/visiond.service\n", mountinfo: otherMounts + v2Mount,
			files: map[string]string{"fs/cgroup/system.slice/visiond.service/memory.max": "4294967296\n", "fs/cgroup/system.slice/visiond.service/memory.high": "max\n"},
			limit: 4 << 30, file: "fs/cgroup/system.slice/visiond.service/memory.max",
		},
		{
			name: "v2 memory.high below memory.max", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/memory.max": "4294967296\n", "fs/cgroup/a/memory.high": "3221225472\n"},
			limit: 3 << 30, file: "fs/cgroup/a/memory.high",
		},
		{
			name: "v2 tighter limit on a slice", cgroup: "0::/box.slice/visiond.service\n", mountinfo: v2Mount,
			files: map[string]string{
				"fs/cgroup/box.slice/visiond.service/memory.max": "max\n",
				"fs/cgroup/box.slice/memory.max":                 "1073741824\n",
				"fs/cgroup/memory.max":                           "max\n",
			},
			limit: 1 << 30, file: "fs/cgroup/box.slice/memory.max",
		},
		{
			name: "v2 no limit anywhere", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/memory.max": "max\n", "fs/cgroup/a/memory.high": "max\n"},
		},
		{
			name: "v2 without the memory controller", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/cgroup.procs": "1\n"},
		},
		{
			name: "v1 limit on the container", cgroup: "4:memory:/docker/x\n1:cpu:/\n0::/\n", mountinfo: otherMounts + v1MemMount + v1CPUMount,
			files: map[string]string{
				"fs/cgroup/memory/docker/x/memory.limit_in_bytes": "536870912\n",
				"fs/cgroup/memory/memory.limit_in_bytes":          "9223372036854771712\n",
			},
			limit: 512 << 20, file: "fs/cgroup/memory/docker/x/memory.limit_in_bytes",
		},
		{
			name: "v1 unlimited", cgroup: "4:memory:/a\n", mountinfo: v1MemMount,
			files: map[string]string{"fs/cgroup/memory/a/memory.limit_in_bytes": "9223372036854771712\n"},
		},
		{name: "no cgroups at all", mountinfo: otherMounts},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proc, sys := fixture(t, tc.cgroup, tc.mountinfo, tc.files)
			m, err := ReadMemory(proc)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.file != "" {
				want = filepath.Join(sys, tc.file)
			}
			if m.Limit != tc.limit || m.File != want {
				t.Fatalf("limit %d from %q, want %d from %q", m.Limit, m.File, tc.limit, want)
			}
		})
	}
	if s := (Memory{Limit: 2 << 30, File: "/x/memory.max"}).String(); s != "2048 MiB from /x/memory.max" {
		t.Errorf("String() = %q", s)
	}
}

func TestReadMemoryBadFiles(t *testing.T) {
	cases := []struct {
		name, cgroup, mountinfo string
		files                   map[string]string
		want                    []string
	}{
		{
			name: "garbage memory.max", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/memory.max": "4G\n"}, want: []string{"fs/cgroup/a/memory.max", `"4G"`, "number of bytes"},
		},
		{
			name: "negative memory.high", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/memory.high": "-1\n"}, want: []string{"memory.high", `"-1"`},
		},
		{
			name: "garbage v1 limit", cgroup: "4:memory:/\n", mountinfo: v1MemMount,
			files: map[string]string{"fs/cgroup/memory/memory.limit_in_bytes": "lots\n"}, want: []string{"memory.limit_in_bytes", `"lots"`, "whole number"},
		},
		{
			name: "zero v1 limit", cgroup: "4:memory:/\n", mountinfo: v1MemMount,
			files: map[string]string{"fs/cgroup/memory/memory.limit_in_bytes": "0\n"}, want: []string{"memory.limit_in_bytes", "limit 0"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proc, _ := fixture(t, tc.cgroup, tc.mountinfo, tc.files)
			m, err := ReadMemory(proc)
			if err == nil {
				t.Fatalf("no error; got %v", m)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if m.Limit != 0 {
				t.Errorf("on error ReadMemory returned %+v, want no limit", m)
			}
		})
	}
}

// A process in a real cgroup with a memory limit reads it. It needs a writable cgroup file
// system with the memory controller (root), and is skipped with the reason where there is none.
func TestRealCgroupMemory(t *testing.T) {
	cg, ok, err := findCgroup(DefaultProc, "memory")
	if err != nil || !ok {
		t.Skipf("no memory cgroup found for this process (%v)", err)
	}
	dir := filepath.Join(cg.dir, fmt.Sprintf("visiond-limits-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup to test with: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the test cgroup: %v", err)
		}
	})
	const limit = 768 << 20
	file := filepath.Join(dir, "memory.max")
	if cg.v1 {
		file = filepath.Join(dir, "memory.limit_in_bytes")
	}
	if err := os.WriteFile(file, fmt.Appendf(nil, "%d", limit), 0); err != nil {
		t.Skipf("cannot set the test cgroup's limit (%s): %v", file, err)
	}
	got := probe(t, "sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir)
	if got["memory"] != float64(limit) || got["memory_file"] != file {
		t.Fatalf("in a cgroup with a limit of %d bytes: %v, want that limit from %s", limit, got, file)
	}
}

func TestParseMemoryMax(t *testing.T) {
	good := map[string]int64{"max": 0, "max\n": 0, "1073741824\n": 1 << 30, "0": 0}
	for in, want := range good {
		if got, err := ParseMemoryMax(in); err != nil || got != want {
			t.Errorf("ParseMemoryMax(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1G", "-5", "1.5", "max max"} {
		if got, err := ParseMemoryMax(in); err == nil {
			t.Errorf("ParseMemoryMax(%q) = %v, no error", in, got)
		}
	}
}
