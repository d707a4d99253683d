package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// OwnGPUMiB is this process's GPU memory as nvidia-smi reports it (0 if not listed), for
// the GPU benchmarks.
func OwnGPUMiB() (float64, error) {
	out, err := exec.Command("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return 0, fmt.Errorf("nvidia-smi: %w", err)
	}
	me := strconv.Itoa(os.Getpid())
	for line := range strings.Lines(string(bytes.TrimSpace(out))) {
		pid, m, ok := strings.Cut(line, ",")
		if ok && strings.TrimSpace(pid) == me {
			return strconv.ParseFloat(strings.TrimSpace(m), 64)
		}
	}
	return 0, nil
}

// EnvInts sets each int from its environment variable, where that is set (the GPU
// benchmarks' knobs); a value that is not an integer fails tb, naming the variable.
func EnvInts(tb testing.TB, vars map[string]*int) {
	tb.Helper()
	for v, p := range vars {
		if s := os.Getenv(v); s != "" {
			if _, err := fmt.Sscan(s, p); err != nil {
				tb.Fatalf("%s=%q: %v", v, s, err)
			}
		}
	}
}

// OwnHostMiB is this process's resident memory (the Rss of /proc/self/smaps) and the part of
// it in the NVIDIA driver's mappings (files under /dev/nvidia: page-locked host memory and
// what the driver keeps for the process's contexts, streams and decoders), for the GPU
// benchmarks. The driver's part is file-backed, so tools that split RSS into anonymous and
// file pages count it with the code.
func OwnHostMiB() (rss, driver float64, err error) {
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, 0, err
	}
	var inDriver bool
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			inDriver = len(f) >= 6 && strings.HasPrefix(f[5], "/dev/nvidia")
		case len(f) >= 2 && f[0] == "Rss:":
			kb, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return 0, 0, fmt.Errorf("/proc/self/smaps: %q: %w", strings.TrimSpace(line), err)
			}
			rss += kb / 1024
			if inDriver {
				driver += kb / 1024
			}
		}
	}
	return rss, driver, nil
}
