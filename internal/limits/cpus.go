package limits

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// CPUs is what this process may use of the machine's CPUs.
type CPUs struct {
	// Affinity is the number of CPUs in the process's affinity mask.
	Affinity int
	// Quota is the cgroup CPU bandwidth quota in CPUs (quota ÷ period; 1.5 is one and a
	// half CPUs' worth of time per period), the lowest along the cgroup path; 0 when no
	// cgroup sets one.
	Quota float64
	// QuotaFile is the file Quota was read from; "" when there is no quota.
	QuotaFile string
}

// N is the number of whole CPUs the process may keep busy: Affinity, or Quota rounded up
// when that is lower (a quota of 1.5 CPUs lets two threads run, each part of the time);
// at least 1.
func (u CPUs) N() int {
	n := u.Affinity
	if u.Quota > 0 {
		if q := int(math.Ceil(u.Quota)); q < n || n <= 0 {
			n = q
		}
	}
	return max(n, 1)
}

// String describes u for logs and errors: "2 CPUs (affinity 4, cgroup quota 1.50 from /sys/fs/cgroup/a/cpu.max)".
func (u CPUs) String() string {
	s := fmt.Sprintf("%d CPUs (affinity %d", u.N(), u.Affinity)
	if u.Quota > 0 {
		s += fmt.Sprintf(", cgroup quota %.2f from %s", u.Quota, u.QuotaFile)
	}
	return s + ")"
}

// ReadCPUs returns the CPUs this process may use. proc is the proc file system's mount point
// ("" is DefaultProc); its self/cgroup and self/mountinfo locate the process's cgroup.
// A cgroup file that is missing means no limit at that level; one that cannot be parsed is
// an error naming the file and its content (CPUs then holds the affinity alone).
func ReadCPUs(proc string) (CPUs, error) {
	if proc == "" {
		proc = DefaultProc
	}
	u := CPUs{Affinity: affinity()}
	q, file, err := tightest(proc, "cpu", dirQuota)
	if err != nil {
		return u, err
	}
	u.Quota, u.QuotaFile = q, file
	return u, nil
}

// affinity counts the CPUs of the calling thread's affinity mask (the process's, unless a
// thread changed its own), falling back to runtime.NumCPU.
func affinity() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() == 0 {
		return runtime.NumCPU()
	}
	return set.Count()
}

// dirQuota reads one cgroup directory's quota in CPUs (0: none, or no such file).
func dirQuota(dir string, v1 bool) (float64, string, error) {
	if v1 {
		quotaFile := filepath.Join(dir, "cpu.cfs_quota_us")
		quota, ok, err := readInt(quotaFile)
		if err != nil || !ok || quota == -1 {
			return 0, "", err
		}
		if quota <= 0 {
			return 0, "", fmt.Errorf("%s: quota %d: want -1 (none) or a positive number of microseconds", quotaFile, quota)
		}
		periodFile := filepath.Join(dir, "cpu.cfs_period_us")
		period, ok, err := readInt(periodFile)
		if err != nil {
			return 0, "", err
		}
		if !ok || period <= 0 {
			return 0, "", fmt.Errorf("%s: want a positive period in microseconds beside the quota in %s", periodFile, quotaFile)
		}
		return float64(quota) / float64(period), quotaFile, nil
	}
	file := filepath.Join(dir, "cpu.max")
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	q, err := ParseCPUMax(string(data))
	if err != nil {
		return 0, "", fmt.Errorf("%s: %w", file, err)
	}
	return q, file, nil
}

// ParseCPUMax parses a cgroup v2 cpu.max file, "QUOTA PERIOD" in microseconds or "max
// PERIOD", and returns the quota in CPUs (0 for max).
func ParseCPUMax(s string) (float64, error) {
	f := strings.Fields(s)
	bad := func() (float64, error) {
		v := strings.TrimSpace(s)
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return 0, fmt.Errorf("cannot parse %q: want \"max PERIOD\" or \"QUOTA PERIOD\" (positive microseconds)", v)
	}
	if len(f) < 1 || len(f) > 2 {
		return bad()
	}
	period := int64(100000) // the kernel's default, when only the quota is given
	if len(f) == 2 {
		p, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || p <= 0 {
			return bad()
		}
		period = p
	}
	if f[0] == "max" {
		return 0, nil
	}
	q, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || q <= 0 {
		return bad()
	}
	return float64(q) / float64(period), nil
}
