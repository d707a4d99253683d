package limits

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/internal/testutil"
)

// probeEnv makes the test binary print ReadCPUs' and ReadMemory's results as JSON and exit:
// the child that the taskset and cgroup tests start.
const probeEnv = "VISIOND_LIMITS_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) != "" {
		u, err := ReadCPUs("")
		m, merr := ReadMemory("")
		if err = errors.Join(err, merr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"affinity": u.Affinity, "quota": u.Quota, "file": u.QuotaFile, "n": u.N(),
			"memory": m.Limit, "memory_file": m.File})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fixture lays out a proc and a cgroup file system under a temp dir: cgroup is the text of
// proc/self/cgroup, mountinfo that of proc/self/mountinfo with {sys} standing for the temp
// dir's sys folder, files maps paths under sys to their content. It returns proc.
func fixture(t *testing.T, cgroup, mountinfo string, files map[string]string) (proc, sys string) {
	t.Helper()
	root := t.TempDir()
	proc, sys = filepath.Join(root, "proc"), filepath.Join(root, "sys")
	write := func(path, body string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		testutil.WriteFile(t, path, body)
	}
	if cgroup != "" {
		write(filepath.Join(proc, "self", "cgroup"), cgroup)
	}
	if mountinfo != "" {
		write(filepath.Join(proc, "self", "mountinfo"), strings.ReplaceAll(mountinfo, "{sys}", sys))
	}
	for name, body := range files {
		write(filepath.Join(sys, name), body)
	}
	return proc, sys
}

const (
	v2Mount     = "30 23 0:26 / {sys}/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	v1CPUMount  = "32 31 0:29 / {sys}/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
	v1SetMount  = "34 31 0:31 / {sys}/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
	otherMounts = "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n25 22 0:5 / /proc rw - proc proc rw\n"
)

func TestReadQuota(t *testing.T) {
	cases := []struct {
		name, cgroup, mountinfo string
		files                   map[string]string
		quota                   float64
		file                    string // under sys; "" for none
	}{
		{
			name: "v2 quota on the process's cgroup", cgroup: "0::/system.slice/visiond.service\n",
			mountinfo: otherMounts + v2Mount,
			files:     map[string]string{"fs/cgroup/system.slice/visiond.service/cpu.max": "150000 100000\n"},
			quota:     1.5, file: "fs/cgroup/system.slice/visiond.service/cpu.max",
		},
		{
			name: "v2 tighter quota on a parent (a slice)", cgroup: "0::/box.slice/visiond.service\n",
			mountinfo: v2Mount,
			files: map[string]string{
				"fs/cgroup/box.slice/visiond.service/cpu.max": "max 100000\n",
				"fs/cgroup/box.slice/cpu.max":                 "300000 100000\n",
				"fs/cgroup/cpu.max":                           "max 100000\n",
			},
			quota: 3, file: "fs/cgroup/box.slice/cpu.max",
		},
		{
			name: "v2 quota only given, default period", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/cpu.max": "50000"}, quota: 0.5, file: "fs/cgroup/a/cpu.max",
		},
		{
			name: "v2 no limit anywhere", cgroup: "0::/a/b\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/b/cpu.max": "max 100000\n", "fs/cgroup/a/cpu.max": "max 100000\n"},
		},
		{
			name: "v2 without the cpu controller (no cpu.max)", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/cgroup.procs": "1\n"},
		},
		{
			name: "v2 container given a subtree (mount root below the hierarchy's)", cgroup: "0::/kubepods/pod1/c1\n",
			mountinfo: "30 23 0:26 /kubepods/pod1 {sys}/fs/cgroup rw - cgroup2 cgroup2 rw\n",
			files:     map[string]string{"fs/cgroup/c1/cpu.max": "250000 100000\n", "fs/cgroup/cpu.max": "400000 100000\n"},
			quota:     2.5, file: "fs/cgroup/c1/cpu.max",
		},
		{
			name: "v1 cfs quota", cgroup: "12:pids:/docker/x\n4:cpu,cpuacct:/docker/x\n3:cpuset:/docker/x\n0::/\n",
			mountinfo: otherMounts + v1SetMount + v1CPUMount + v2Mount,
			files: map[string]string{
				"fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_quota_us":  "200000\n",
				"fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n",
				"fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":           "-1\n",
				"fs/cgroup/cpu,cpuacct/cpu.cfs_period_us":          "100000\n",
				"fs/cgroup/cpu.max":                                "50000 100000\n", // v2 without cpu: not read
			},
			quota: 2, file: "fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_quota_us",
		},
		{
			name: "v1 no quota (-1)", cgroup: "4:cpu,cpuacct:/\n", mountinfo: v1CPUMount,
			files: map[string]string{"fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
		},
		{
			name: "v1 cpuset is not the cpu controller", cgroup: "3:cpuset:/a\n", mountinfo: v1SetMount,
			files: map[string]string{"fs/cgroup/cpuset/a/cpu.cfs_quota_us": "50000\n", "fs/cgroup/cpuset/a/cpu.cfs_period_us": "100000\n"},
		},
		{name: "no cgroups at all", mountinfo: otherMounts},
		{name: "cgroup listed but not mounted", cgroup: "0::/a\n", mountinfo: otherMounts},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proc, sys := fixture(t, tc.cgroup, tc.mountinfo, tc.files)
			u, err := ReadCPUs(proc)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.file != "" {
				want = filepath.Join(sys, tc.file)
			}
			if u.Quota != tc.quota || u.QuotaFile != want {
				t.Fatalf("quota %v from %q, want %v from %q", u.Quota, u.QuotaFile, tc.quota, want)
			}
			if u.Affinity < 1 {
				t.Fatalf("affinity %d", u.Affinity)
			}
		})
	}
}

func TestReadBadFiles(t *testing.T) {
	cases := []struct {
		name, cgroup, mountinfo string
		files                   map[string]string
		want                    []string // in the error
	}{
		{
			name: "garbage cpu.max", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/cpu.max": "lots of cpus\n"},
			want:  []string{"fs/cgroup/a/cpu.max", `"lots of cpus"`, "QUOTA PERIOD"},
		},
		{
			name: "zero quota in cpu.max", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/cpu.max": "0 100000\n"}, want: []string{"cpu.max", `"0 100000"`},
		},
		{
			name: "zero period in cpu.max", cgroup: "0::/a\n", mountinfo: v2Mount,
			files: map[string]string{"fs/cgroup/a/cpu.max": "max 0\n"}, want: []string{"cpu.max", `"max 0"`},
		},
		{
			name: "garbage cfs quota", cgroup: "4:cpu,cpuacct:/\n", mountinfo: v1CPUMount,
			files: map[string]string{"fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "many\n", "fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
			want:  []string{"cpu.cfs_quota_us", `"many"`, "whole number"},
		},
		{
			name: "zero cfs period", cgroup: "4:cpu,cpuacct:/\n", mountinfo: v1CPUMount,
			files: map[string]string{"fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "50000\n", "fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "0\n"},
			want:  []string{"cpu.cfs_period_us", "positive period"},
		},
		{
			name: "negative cfs quota other than -1", cgroup: "4:cpu,cpuacct:/\n", mountinfo: v1CPUMount,
			files: map[string]string{"fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-5\n", "fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
			want:  []string{"cpu.cfs_quota_us", "quota -5"},
		},
		{
			name: "bad proc/self/cgroup line", cgroup: "0::/a\nnonsense\n", mountinfo: v2Mount,
			want: []string{"self/cgroup line 2", `"nonsense"`},
		},
		{
			name: "bad mountinfo line", cgroup: "0::/a\n", mountinfo: "22 1 8:1 / / rw\n",
			want: []string{"self/mountinfo line 1", "not a mountinfo line"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proc, _ := fixture(t, tc.cgroup, tc.mountinfo, tc.files)
			u, err := ReadCPUs(proc)
			if err == nil {
				t.Fatalf("no error; got %v", u)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if u.Affinity < 1 || u.Quota != 0 {
				t.Errorf("on error Read returned %+v, want the affinity alone", u)
			}
		})
	}
}

func TestCPUsN(t *testing.T) {
	cases := []struct {
		u    CPUs
		want int
	}{
		{CPUs{Affinity: 16}, 16},
		{CPUs{Affinity: 16, Quota: 4}, 4},
		{CPUs{Affinity: 16, Quota: 1.5}, 2},
		{CPUs{Affinity: 16, Quota: 0.2}, 1},
		{CPUs{Affinity: 2, Quota: 8}, 2},
		{CPUs{Affinity: 0}, 1},
	}
	for _, tc := range cases {
		if got := tc.u.N(); got != tc.want {
			t.Errorf("%+v.N() = %d, want %d", tc.u, got, tc.want)
		}
	}
	if s := (CPUs{Affinity: 4, Quota: 1.5, QuotaFile: "/x/cpu.max"}).String(); s != "2 CPUs (affinity 4, cgroup quota 1.50 from /x/cpu.max)" {
		t.Errorf("String() = %q", s)
	}
}

func TestParseCPUMax(t *testing.T) {
	good := map[string]float64{"max 100000": 0, "max": 0, "100000 100000": 1, "25000 50000\n": 0.5, "800000 100000": 8}
	for in, want := range good {
		if got, err := ParseCPUMax(in); err != nil || got != want {
			t.Errorf("ParseCPUMax(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "   ", "max max", "-1 100000", "1.5 100000", "100000 100000 1", "0x10 100", "100 -100"} {
		if got, err := ParseCPUMax(in); err == nil {
			t.Errorf("ParseCPUMax(%q) = %v, no error", in, got)
		}
	}
}

// probe runs this test binary as a child that prints what it reads, through the command
// line given (the probe binary is appended).
func probe(t *testing.T, argv ...string) map[string]any {
	t.Helper()
	argv = append(argv, os.Args[0], "-test.run=^$")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), probeEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%v: %v\n%s", argv, err, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("probe printed %q: %v", out, err)
	}
	return got
}

// A process confined by taskset to one CPU may use one.
func TestAffinityTaskset(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("taskset not installed (util-linux)")
	}
	// One CPU of those this process may run on (not always CPU 0 in a container).
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	cpu := -1
	for i := 0; i < len(set)*64 && cpu < 0; i++ {
		if set.IsSet(i) {
			cpu = i
		}
	}
	got := probe(t, taskset, "-c", strconv.Itoa(cpu))
	if got["affinity"] != 1.0 || got["n"] != 1.0 {
		t.Fatalf("under taskset -c %d: %v, want affinity 1 and 1 CPU", cpu, got)
	}
	if self, _ := ReadCPUs(""); self.Affinity > 1 {
		all := probe(t)
		if all["affinity"] != float64(self.Affinity) {
			t.Fatalf("without taskset: %v, want affinity %d", all, self.Affinity)
		}
	}
}

// A process in a real cgroup with a CPU quota of half a CPU may use one. It needs a
// writable cgroup file system (root, cgroup v1's cpu controller or v2 with cpu enabled
// for the subtree), and is skipped with the reason where there is none.
func TestRealCgroupQuota(t *testing.T) {
	cg, ok, err := findCgroup(DefaultProc, "cpu")
	if err != nil || !ok {
		t.Skipf("no CPU cgroup found for this process (%v)", err)
	}
	dir := filepath.Join(cg.dir, fmt.Sprintf("visiond-cpus-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot create a cgroup to test with: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the test cgroup: %v", err)
		}
	})
	file, quota := filepath.Join(dir, "cpu.max"), "50000 100000"
	if cg.v1 {
		file, quota = filepath.Join(dir, "cpu.cfs_quota_us"), "50000"
		if err := os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), []byte("100000"), 0); err != nil {
			t.Skipf("cannot set the test cgroup's period: %v", err)
		}
	}
	if err := os.WriteFile(file, []byte(quota), 0); err != nil {
		t.Skipf("cannot set the test cgroup's quota (%s): %v", file, err)
	}
	// The shell moves itself into the cgroup, then becomes the probe.
	got := probe(t, "sh", "-c", `echo $$ > "$0/cgroup.procs" && exec "$@"`, dir)
	if got["quota"] != 0.5 || got["n"] != 1.0 || got["file"] != file {
		t.Fatalf("in a cgroup with quota %q: %v, want quota 0.5 from %s and 1 CPU", quota, got, file)
	}
}
