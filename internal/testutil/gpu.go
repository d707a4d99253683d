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
