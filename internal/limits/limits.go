// Package limits tells what this machine lets this process use: how many CPUs (its
// affinity mask, capped by its cgroup's CPU bandwidth quota) and how much memory (its
// cgroup's memory limit). A cgroup's limit may be set on the process's own cgroup or on one
// above it (a systemd slice, a container's parent): the tightest along the path counts.
//
// runtime.NumCPU counts only the affinity mask, and the Go runtime's own cgroup-aware
// GOMAXPROCS can be overridden by the GOMAXPROCS environment variable and reads only the
// process's own cgroup; configuration defaults (config's worker count) need the CPUs the
// box really gives this process, whatever the Go scheduler was told. The Go runtime reads
// no memory limit at all: the daemon's memory budget starts from Memory's.
package limits

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultProc is where the proc file system is mounted.
const DefaultProc = "/proc"

// cgroupDir is one cgroup directory of the process and how to read its limit.
type cgroupDir struct {
	dir   string // the process's cgroup directory
	mount string // the hierarchy's mount point: the walk up stops there
	v1    bool
}

// tightest walks from the process's cgroup directory of controller up to its hierarchy's
// mount point and returns the lowest positive limit that read gives a directory (0: none
// anywhere) and the file it came from. read returns 0 for a directory without a limit.
func tightest[T int64 | float64](proc, controller string, read func(dir string, v1 bool) (T, string, error)) (T, string, error) {
	cg, ok, err := findCgroup(proc, controller)
	if err != nil || !ok {
		return 0, "", err
	}
	var best T
	var bestFile string
	for dir := cg.dir; ; dir = filepath.Dir(dir) {
		v, file, err := read(dir, cg.v1)
		if err != nil {
			return 0, "", err
		}
		if v > 0 && (best == 0 || v < best) {
			best, bestFile = v, file
		}
		if dir == cg.mount || len(dir) <= len(cg.mount) || dir == filepath.Dir(dir) {
			break
		}
	}
	return best, bestFile, nil
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

// findCgroup locates the process's cgroup directory for controller ("cpu", "memory") from
// proc/self/cgroup and proc/self/mountinfo: a v1 hierarchy with the controller if one is
// mounted, else the v2 hierarchy. ok is false when neither is found (no cgroups: no limit).
func findCgroup(proc, controller string) (cgroupDir, bool, error) {
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
		case hasController(parts[1], controller):
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
		case haveV1 && m.fsType == "cgroup" && hasController(m.superOpts, controller):
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
