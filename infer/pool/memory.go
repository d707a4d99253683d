package pool

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultGPUMemoryCommand is the command that Config.GPUMemoryCommand defaults to
// when the provider is cuda or tensorrt: it prints "pid, MiB" per process on a GPU.
func DefaultGPUMemoryCommand() []string {
	return []string{"nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"}
}

// readRSS returns the resident memory of pid in bytes, from VmRSS in <procDir>/<pid>/status.
func readRSS(procDir string, pid int) (int64, error) {
	f, err := os.Open(filepath.Join(procDir, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		num, unit, _ := strings.Cut(strings.TrimSpace(v), " ")
		kb, err := strconv.ParseInt(num, 10, 64)
		if err != nil || unit != "kB" {
			return 0, fmt.Errorf("pid %d: VmRSS %q is not a number of kB", pid, strings.TrimSpace(v))
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("pid %d: no VmRSS in its status (a zombie or a kernel thread)", pid)
}

// parseGPUMemory parses the output of DefaultGPUMemoryCommand: lines "pid, MiB". A
// process on several GPUs is summed. Lines that are not two numbers (headers, "[N/A]"
// under MIG or WDDM, warnings) are skipped and counted in skipped.
func parseGPUMemory(out []byte) (byPID map[int]int64, skipped int) {
	byPID = map[int]int64{}
	for line := range bytes.Lines(out) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		ps, ms, ok := strings.Cut(s, ",")
		pid, err1 := strconv.Atoi(strings.TrimSpace(ps))
		mib, err2 := strconv.ParseInt(strings.TrimSpace(ms), 10, 64)
		if !ok || err1 != nil || err2 != nil || pid <= 0 || mib < 0 {
			skipped++
			continue
		}
		byPID[pid] += mib << 20
	}
	return byPID, skipped
}

// gpuMemory runs command (DefaultGPUMemoryCommand's format) and returns the GPU memory
// of each process it lists, in bytes. The command gets timeout to answer.
func gpuMemory(ctx context.Context, command []string, timeout time.Duration) (map[int]int64, error) {
	if len(command) == 0 {
		return nil, errors.New("no GPU memory command")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			err = fmt.Errorf("%w: %s", err, firstLine(msg))
		} else if msg := strings.TrimSpace(string(out)); msg != "" {
			err = fmt.Errorf("%w: %s", err, firstLine(msg)) // nvidia-smi reports on stdout
		}
		return nil, fmt.Errorf("GPU memory command %q: %w", strings.Join(command, " "), err)
	}
	m, _ := parseGPUMemory(out)
	return m, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// memorySample is one reading of a worker process.
type memorySample struct {
	pid      int
	rss, gpu int64
}

// overLimit says why a sample is over the limits (0: none), "" when it is not.
func overLimit(s memorySample, memLimit, gpuLimit int64) string {
	switch {
	case memLimit > 0 && s.rss > memLimit:
		return fmt.Sprintf("resident memory %d MiB over MemoryLimit %d MiB", s.rss>>20, memLimit>>20)
	case gpuLimit > 0 && s.gpu > gpuLimit:
		return fmt.Sprintf("GPU memory %d MiB over GPUMemoryLimit %d MiB", s.gpu>>20, gpuLimit>>20)
	}
	return ""
}
