package pool

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/internal/infertest"
	"github.com/visiond/visiond/internal/testutil"
)

func TestParseGPUMemory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    map[int]int64
		skipped int
	}{
		{"empty (no process on a GPU)", "", map[int]int64{}, 0},
		{"two workers", "4242, 764\n4243, 770\n", map[int]int64{4242: 764 << 20, 4243: 770 << 20}, 0},
		{"one process on two GPUs", "10, 100\n10, 28\n", map[int]int64{10: 128 << 20}, 0},
		{"spaces and CRLF", "  77 ,  5 \r\n\n", map[int]int64{77: 5 << 20}, 0},
		{"garbage around", "pid, used_gpu_memory [MiB]\nNo devices were found\n55, 12\nfoo,bar\n,\n-1, 3\n9, -4\n1, 2, 3\n",
			map[int]int64{55: 12 << 20}, 7},
		{"N/A under MIG", "99, [N/A]\n100, 30\n", map[int]int64{100: 30 << 20}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, skipped := parseGPUMemory([]byte(tc.in))
			if !maps.Equal(got, tc.want) || skipped != tc.skipped {
				t.Fatalf("got %v (%d skipped), want %v (%d skipped)", got, skipped, tc.want, tc.skipped)
			}
		})
	}
}

func TestGPUMemoryCommand(t *testing.T) {
	ctx := context.Background()
	got, err := gpuMemory(ctx, []string{"sh", "-c", `printf '123, 45\nwarning: something\n'`}, 10*time.Second)
	if err != nil || !maps.Equal(got, map[int]int64{123: 45 << 20}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, tc := range []struct {
		name    string
		cmd     []string
		wantErr []string
	}{
		{"missing command", []string{"/nonexistent/nvidia-smi", "-q"}, []string{`GPU memory command "/nonexistent/nvidia-smi -q"`, "no such file"}},
		{"failing command", []string{"sh", "-c", "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver'; exit 9"},
			[]string{"exit status 9", "could not communicate"}},
		{"no command", nil, []string{"no GPU memory command"}},
		{"hung command", []string{"sleep", "60"}, []string{"signal: killed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gpuMemory(ctx, tc.cmd, 200*time.Millisecond)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestReadRSS(t *testing.T) {
	rss, err := readRSS("/proc", os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Fatalf("own RSS %d, %v", rss, err)
	}
	dir := t.TempDir()
	for pid, status := range map[string]string{
		"1": "Name:\tvisiond\nVmPeak:\t  900 kB\nVmRSS:\t  123456 kB\nThreads:\t9\n",
		"2": "Name:\tkthreadd\nThreads:\t1\n",
		"3": "Name:\tx\nVmRSS:\tlots kB\n",
	} {
		if err := os.MkdirAll(filepath.Join(dir, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, pid, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rss, err := readRSS(dir, 1); err != nil || rss != 123456<<10 {
		t.Errorf("pid 1: %d, %v", rss, err)
	}
	if _, err := readRSS(dir, 2); err == nil || !strings.Contains(err.Error(), "no VmRSS") {
		t.Errorf("pid 2: %v", err)
	}
	if _, err := readRSS(dir, 3); err == nil || !strings.Contains(err.Error(), `VmRSS "lots kB"`) {
		t.Errorf("pid 3: %v", err)
	}
	if _, err := readRSS(dir, 4); !os.IsNotExist(err) {
		t.Errorf("pid 4: %v", err)
	}
}

func TestOverLimit(t *testing.T) {
	s := memorySample{pid: 1, rss: 600 << 20, gpu: 900 << 20}
	for _, tc := range []struct {
		mem, gpu int64
		want     string
	}{
		{0, 0, ""},
		{1 << 30, 1 << 30, ""},
		{512 << 20, 0, "resident memory 600 MiB over MemoryLimit 512 MiB"},
		{0, 800 << 20, "GPU memory 900 MiB over GPUMemoryLimit 800 MiB"},
	} {
		if got := overLimit(s, tc.mem, tc.gpu); got != tc.want {
			t.Errorf("limits %d/%d: %q, want %q", tc.mem, tc.gpu, got, tc.want)
		}
	}
}

// A worker over its memory limit is recycled between jobs: every job dispatched gets its
// result, none is lost, and the replacement serves.
func TestPoolRecycle(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, log := testPoolConfig(t, a)
	cfg.MemoryLimit = 1 << 20 // below any worker's RSS: each process is recycled after a sample
	cfg.MemoryInterval = 20 * time.Millisecond
	cfg.GPUMemoryCommand = []string{"sh", "-c", "echo 1, 1"} // exercised, not over any limit
	p := startPool(t, cfg)
	pix, lb, w, h := messiFrame(t, a)

	pids := map[int]bool{}
	deadline := time.Now().Add(2 * time.Minute)
	for seq := uint64(0); len(pids) < 3; seq++ {
		if time.Now().After(deadline) {
			t.Fatalf("served by %d processes only: %+v", len(pids), p.Workers())
		}
		ch := make(chan infer.Result, 2)
		if !p.TryDispatch(infer.Job{Camera: "messi", Seq: seq, Letterbox: lb}, infer.RGB(pix), func(r infer.Result) { ch <- r }) {
			time.Sleep(5 * time.Millisecond) // being recycled
			continue
		}
		r := waitResult(t, ch)
		if r.Err != nil {
			t.Fatalf("job %d: %v", seq, r.Err)
		}
		infertest.CheckMessi(t, r.Detections, w, h)
		pids[r.PID] = true
	}
	s := p.Workers()[0]
	if s.Lost != 0 || s.Recycles < 2 || s.Restarts < s.Recycles {
		t.Fatalf("status %+v", s)
	}
	if !strings.Contains(log.String(), "recycling worker between jobs") || !strings.Contains(log.String(), "over MemoryLimit 1 MiB") {
		t.Error("recycle reason not logged")
	}
	if strings.Contains(log.String(), "worker ended") {
		t.Error("a recycle was logged as a failure")
	}
	t.Logf("%d processes served; status %+v; recycled while busy: %v", len(pids), s,
		strings.Contains(log.String(), "busy=true"))
}

// Workers report their memory.
func TestPoolMemoryStatus(t *testing.T) {
	a := infertest.ThirdParty(t)
	cfg, _ := testPoolConfig(t, a)
	cfg.MemoryInterval = 20 * time.Millisecond
	// The fake command reports 42 MiB for each child process of this test: the workers.
	cfg.GPUMemoryCommand = []string{"sh", "-c", "for p in $(pgrep -P " + strconv.Itoa(os.Getpid()) + "); do echo \"$p, 42\"; done"}
	p := startPool(t, cfg)
	testutil.WaitFor(t, time.Minute, "the worker's memory figures", func() bool {
		s := p.Workers()[0]
		return s.RSSBytes > 10<<20 && s.GPUBytes == 42<<20
	})
	t.Logf("status %+v", p.Workers()[0])
}
