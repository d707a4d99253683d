package main

import (
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// stepCost is what a measurement window cost the machine: CPU time of the daemon and its
// workers (or of the peer's process), memory, and GPU memory where there is a GPU.
type stepCost struct {
	CPUSeconds    float64 `json:"cpu_s"`
	CoresBusy     float64 `json:"cores_busy"`       // CPUSeconds / window
	CPUPerFrameMS float64 `json:"cpu_ms_per_frame"` // CPUSeconds per analysed frame
	RSSMiB        float64 `json:"rss_mib"`          // daemon and workers at the window's end
	GPUMiB        float64 `json:"gpu_mib"`          // the daemon's and workers' GPU memory at the window's end (nvidia-smi); 0 without
	DeviceGPUMiB  float64 `json:"device_gpu_mib"`   // the device's memory in use then, by every process
	// DaemonGPUMiB and WorkersGPUMiB split GPUMiB: the daemon's pid (NVDEC decoding) and
	// its workers' pids; GPUMiBPerCamera is GPUMiB over the step's cameras.
	DaemonGPUMiB    float64 `json:"daemon_gpu_mib"`
	WorkersGPUMiB   float64 `json:"workers_gpu_mib"`
	GPUMiBPerCamera float64 `json:"gpu_mib_per_camera"`
	Processes       int     `json:"worker_processes"` // worker processes seen (/api/workers)
	Restarted       bool    `json:"workers_restarted,omitempty"`
}

// measureStep measures one window and what it cost: the CPU time of the daemon and its
// workers over it, their resident and GPU memory at its end.
func (d *daemon) measureStep(dur time.Duration) (window, stepCost) {
	var c stepCost
	pids := func() []int {
		ps := []int{d.cmd.Process.Pid}
		ws, _ := d.workers()
		for _, w := range ws {
			if w.PID > 0 && !containsInt(ps, w.PID) {
				ps = append(ps, w.PID)
			}
		}
		return ps
	}
	before := pids()
	c0 := cpuOf(before)
	w := d.measureWindow(dur)
	c.CPUSeconds = cpuOf(before) - c0
	after := pids()
	c.Restarted = !sameInts(before, after)
	c.Processes = len(after) - 1
	c.CoresBusy = c.CPUSeconds / w.Seconds
	if w.Events > 0 {
		c.CPUPerFrameMS = 1000 * c.CPUSeconds / float64(w.Events)
	}
	for _, p := range after {
		c.RSSMiB += mib(procRSS(p))
	}
	c.splitGPU(gpuMemByPID(), after)
	if c.GPUMiB == 0 { // nvidia-smi may not see this PID namespace's processes: the daemon's figures
		if ws, err := d.workers(); err == nil {
			for _, w := range ws {
				c.WorkersGPUMiB += mib(w.GPU)
			}
			c.GPUMiB = c.WorkersGPUMiB
		}
	}
	if len(d.cams) > 0 {
		c.GPUMiBPerCamera = c.GPUMiB / float64(len(d.cams))
	}
	c.DeviceGPUMiB = deviceMemUsed(d.f.Device)
	return w, c
}

// splitGPU sets the GPU memory of pids from byPID (nvidia-smi's, nil without it): pids[0]
// is the daemon's, the rest its workers'.
func (c *stepCost) splitGPU(byPID map[int]float64, pids []int) {
	for i, p := range pids {
		if i == 0 {
			c.DaemonGPUMiB = byPID[p]
		} else {
			c.WorkersGPUMiB += byPID[p]
		}
	}
	c.GPUMiB = c.DaemonGPUMiB + c.WorkersGPUMiB
}

func cpuOf(pids []int) float64 {
	t := 0.0
	for _, p := range pids {
		t += cpuSeconds(p)
	}
	return t
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !containsInt(b, x) {
			return false
		}
	}
	return true
}

// gpuMemByPID is each GPU process's memory in MiB, from nvidia-smi; nil without it.
func gpuMemByPID() map[int]float64 {
	out, err := exec.Command("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return nil
	}
	return parseGPUApps(string(out))
}

// parseGPUApps reads nvidia-smi's "pid, MiB" lines (the same process may hold memory on
// several devices: summed); lines it cannot read ("[N/A]") are skipped.
func parseGPUApps(text string) map[int]float64 {
	m := map[int]float64{}
	for _, l := range strings.Split(text, "\n") {
		a, b, ok := strings.Cut(l, ",")
		if !ok {
			continue
		}
		pid, err1 := strconv.Atoi(strings.TrimSpace(a))
		v, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
		if err1 == nil && err2 == nil {
			m[pid] += v
		}
	}
	return m
}

// deviceMemUsed is GPU dev's memory in use in MiB, by every process; 0 without nvidia-smi.
func deviceMemUsed(dev int) float64 {
	out, err := exec.Command("nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", strconv.Itoa(dev)).Output()
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	return v
}
