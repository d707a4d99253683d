package limits

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Memory is the memory limit of this process's cgroup: the processes of the cgroup (the
// daemon and its workers, under systemd) share it, and the kernel reclaims, then kills,
// past it.
type Memory struct {
	// Limit is the lowest limit along the cgroup path, in bytes: cgroup v2's memory.max or
	// memory.high (systemd's MemoryMax= and MemoryHigh=; past memory.high the kernel
	// throttles the cgroup and reclaims hard), v1's memory.limit_in_bytes. 0: none.
	Limit int64
	// File is the file Limit was read from; "" when there is no limit.
	File string
}

// String describes m for logs: "2048 MiB from /sys/fs/cgroup/system.slice/visiond.service/memory.max".
func (m Memory) String() string {
	if m.Limit <= 0 {
		return "no cgroup memory limit"
	}
	return fmt.Sprintf("%d MiB from %s", m.Limit>>20, m.File)
}

// v1Unlimited: cgroup v1 gives a cgroup without a limit the page counter's maximum in
// bytes (9223372036854771712 with 4 KiB pages); anything from here up is no limit.
const v1Unlimited = int64(1) << 62

// ReadMemory returns this process's cgroup memory limit. proc is the proc file system's
// mount point ("" is DefaultProc). A file that is missing means no limit at that level;
// one that cannot be parsed is an error naming the file and its content.
func ReadMemory(proc string) (Memory, error) {
	if proc == "" {
		proc = DefaultProc
	}
	limit, file, err := tightest(proc, "memory", dirMemory)
	return Memory{Limit: limit, File: file}, err
}

// dirMemory reads one cgroup directory's memory limit in bytes (0: none, or no such file):
// v2's lower of memory.max and memory.high, v1's memory.limit_in_bytes.
func dirMemory(dir string, v1 bool) (int64, string, error) {
	if v1 {
		file := filepath.Join(dir, "memory.limit_in_bytes")
		v, ok, err := readInt(file)
		if err != nil || !ok || v >= v1Unlimited {
			return 0, "", err
		}
		if v <= 0 {
			return 0, "", fmt.Errorf("%s: limit %d: want a positive number of bytes", file, v)
		}
		return v, file, nil
	}
	var best int64
	var bestFile string
	for _, name := range []string{"memory.max", "memory.high"} {
		file := filepath.Join(dir, name)
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, "", err
		}
		v, err := ParseMemoryMax(string(data))
		if err != nil {
			return 0, "", fmt.Errorf("%s: %w", file, err)
		}
		if v > 0 && (best == 0 || v < best) {
			best, bestFile = v, file
		}
	}
	return best, bestFile, nil
}

// ParseMemoryMax parses a cgroup v2 memory.max or memory.high file, "max" or a number of
// bytes, and returns the bytes (0 for max).
func ParseMemoryMax(s string) (int64, error) {
	v := strings.TrimSpace(s)
	if v == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cannot parse %q: want \"max\" or a number of bytes", truncate(v))
	}
	return n, nil
}
