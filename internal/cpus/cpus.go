// Package cpus tells how many CPUs this process may use: the CPUs of its affinity mask
// (sched_getaffinity, which also reflects a cpuset cgroup and taskset), capped by the CPU
// bandwidth quota of its cgroup (v2 cpu.max, v1 cpu.cfs_quota_us over cpu.cfs_period_us),
// the tightest of its own cgroup and those above it (a systemd slice or a container's
// parent may set the limit).
//
// runtime.NumCPU counts only the affinity mask, and the Go runtime's own cgroup-aware
// GOMAXPROCS can be overridden by the GOMAXPROCS environment variable and reads only the
// process's own cgroup; configuration defaults (config's worker count) need the CPUs the
// box really gives this process, whatever the Go scheduler was told.
package cpus

import (
	"bufio"
	"bytes"
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

// DefaultProc is where the proc file system is mounted.
const DefaultProc = "/proc"

// Usable is what this process may use of the machine's CPUs.
type Usable struct {
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
func (u Usable) N() int {
	n := u.Affinity
	if u.Quota > 0 {
		if q := int(math.Ceil(u.Quota)); q < n || n <= 0 {
			n = q
		}
	}
	return max(n, 1)
}

// String describes u for logs and errors: "2 CPUs (affinity 4, cgroup quota 1.50 from /sys/fs/cgroup/a/cpu.max)".
func (u Usable) String() string {
	s := fmt.Sprintf("%d CPUs (affinity %d", u.N(), u.Affinity)
	if u.Quota > 0 {
		s += fmt.Sprintf(", cgroup quota %.2f from %s", u.Quota, u.QuotaFile)
	}
	return s + ")"
}

// Read returns the CPUs this process may use. proc is the proc file system's mount point
// ("" is DefaultProc); its self/cgroup and self/mountinfo locate the process's cgroup.
// A cgroup file that is missing means no limit at that level; one that cannot be parsed is
// an error naming the file and its content (Usable then holds the affinity alone).
func Read(proc string) (Usable, error) {
	if proc == "" {
		proc = DefaultProc
	}
	u := Usable{Affinity: affinity()}
	q, file, err := readQuota(proc)
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

// cgroupDir is one cgroup directory of the process and how to read its limit.
type cgroupDir struct {
	dir   string // the process's cgroup directory
	mount string // the hierarchy's mount point: the walk up stops there
	v1    bool
}

// readQuota finds the process's CPU cgroup and returns the lowest quota along the path
// from it up to its hierarchy's mount point (0 for none) and the file it came from.
func readQuota(proc string) (float64, string, error) {
	cg, ok, err := findCgroup(proc)
	if err != nil || !ok {
		return 0, "", err
	}
	var best float64
	var bestFile string
	for dir := cg.dir; ; dir = filepath.Dir(dir) {
		q, file, err := dirQuota(dir, cg.v1)
		if err != nil {
			return 0, "", err
		}
		if q > 0 && (best == 0 || q < best) {
			best, bestFile = q, file
		}
		if dir == cg.mount || len(dir) <= len(cg.mount) || dir == filepath.Dir(dir) {
			break
		}
	}
	return best, bestFile, nil
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

// readInt reads a file holding one integer; ok is false when the file does not exist.
func readInt(file string) (int64, bool, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		s := strings.TrimSpace(string(data))
		if len(s) > 40 {
			s = s[:40] + "..."
		}
		return 0, false, fmt.Errorf("%s: cannot parse %q: want a whole number", file, s)
	}
	return v, true, nil
}

// findCgroup locates the process's CPU cgroup directory from proc/self/cgroup and
// proc/self/mountinfo: a v1 hierarchy with the cpu controller if one is mounted, else the
// v2 hierarchy. ok is false when neither is found (no cgroups: no quota).
func findCgroup(proc string) (cgroupDir, bool, error) {
	cgFile := filepath.Join(proc, "self", "cgroup")
	data, err := os.ReadFile(cgFile)
	if errors.Is(err, fs.ErrNotExist) {
		return cgroupDir{}, false, nil
	}
	if err != nil {
		return cgroupDir{}, false, err
	}
	var v1Path, v2Path string
	var haveV1, haveV2 bool
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return cgroupDir{}, false, fmt.Errorf("%s line %d: %q is not \"ID:CONTROLLERS:/PATH\"", cgFile, i+1, line)
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2Path, haveV2 = parts[2], true
		case hasController(parts[1], "cpu"):
			v1Path, haveV1 = parts[2], true
		}
	}
	if !haveV1 && !haveV2 {
		return cgroupDir{}, false, nil
	}
	miFile := filepath.Join(proc, "self", "mountinfo")
	f, err := os.Open(miFile)
	if errors.Is(err, fs.ErrNotExist) {
		return cgroupDir{}, false, nil
	}
	if err != nil {
		return cgroupDir{}, false, err
	}
	defer f.Close()
	var v2 cgroupDir
	var v2Found bool
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		m, err := parseMountinfo(sc.Bytes())
		if err != nil {
			return cgroupDir{}, false, fmt.Errorf("%s line %d: %w", miFile, n, err)
		}
		switch {
		case haveV1 && m.fsType == "cgroup" && hasController(m.superOpts, "cpu"):
			return cgroupDir{dir: join(m, v1Path), mount: m.mountPoint, v1: true}, true, nil
		case haveV2 && m.fsType == "cgroup2" && !v2Found:
			v2, v2Found = cgroupDir{dir: join(m, v2Path), mount: m.mountPoint}, true
		}
	}
	if err := sc.Err(); err != nil {
		return cgroupDir{}, false, fmt.Errorf("%s: %w", miFile, err)
	}
	return v2, v2Found, nil
}

// join places a cgroup path (as proc/self/cgroup gives it) under the mount m, whose root
// may itself be a cgroup below the hierarchy's root (a container given its own subtree).
// A path outside the mount's root (another cgroup namespace) is the mount point itself.
func join(m mount, cgPath string) string {
	rel := cgPath
	if m.root != "/" {
		r, ok := strings.CutPrefix(cgPath, m.root)
		if !ok || r != "" && !strings.HasPrefix(r, "/") {
			return m.mountPoint
		}
		rel = r
	}
	if strings.Contains(rel, "/..") {
		return m.mountPoint
	}
	return filepath.Join(m.mountPoint, rel)
}

// hasController reports whether the comma-separated list names c.
func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// mount is the part of a mountinfo line this package needs.
type mount struct {
	root, mountPoint, fsType, superOpts string
}

// parseMountinfo parses one line of proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT
// OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS", with octal escapes in paths.
func parseMountinfo(line []byte) (mount, error) {
	f := strings.Fields(string(line))
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || sep+2 >= len(f) { // fstype and source follow the separator
		return mount{}, fmt.Errorf("%q is not a mountinfo line", truncate(string(line)))
	}
	m := mount{root: unescape(f[3]), mountPoint: unescape(f[4]), fsType: f[sep+1]}
	if sep+3 < len(f) {
		m.superOpts = f[sep+3]
	}
	return m, nil
}

// unescape undoes the octal escapes (\040 for a space) of mountinfo paths.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b bytes.Buffer
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
