package pipeline

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"sync"
)

// MemoryStatus is the daemon's resident memory by owner, and its workers': what the status
// API (/api/memory) and /metrics (visiond_memory_bytes) show. The daemon's owners add up to
// its resident memory:
//   - Go: what the Go runtime holds (its heap, in use or free but not yet given back, stacks
//     and metadata): the daemon's own structures, the embedded NATS server, RTSP sessions,
//     access units on their way to the decoders; less NATSStoreCaches;
//   - NATSStoreCaches: the embedded NATS server's file-store block buffers, in the Go heap:
//     the caches of the blocks its streams write (up to a block, 8 MB for the events stream
//     and the object stores, kept while written to) and read (kept 10 s after the last read),
//     and those in its pools;
//   - FrameBuffers: the cameras' decoded, letterboxed frames (shared, outside the Go heap);
//   - SnapshotBuffers: the frames kept for snapshots and evidence (outside the Go heap);
//   - ClipRings: the cameras' rings of encoded video for their clips' pre_capture, and their
//     recorders' read buffers;
//   - CHeap: the rest of the anonymous memory: the C libraries' allocations (FFmpeg's
//     decoders and their frame pools, above all, and OpenCV), threads' stacks;
//   - GPUDriver: the GPU driver's mappings of its device files (NVIDIA's /dev/nvidia*, a
//     Jetson's /dev/nvmap and /dev/nvhost-*): page-locked host memory, and what the driver
//     keeps on the host for the process's contexts and decoders (4.9 MiB an NVDEC decoder on
//     an H100's driver). The kernel counts it as file-backed, like the code;
//   - Code: the executable's and shared libraries' pages (file-backed: shared with other
//     processes that map them, and reclaimable);
//   - Shared: shared memory, the workers' frame slots.
type MemoryStatus struct {
	ResidentBytes   int64          `json:"resident_bytes"`
	GoBytes         int64          `json:"go_bytes"`
	NATSStoreCaches int64          `json:"nats_store_caches_bytes"`
	FrameBuffers    int64          `json:"frame_buffers_bytes"`
	SnapshotBuffers int64          `json:"snapshot_buffers_bytes"`
	ClipRings       int64          `json:"clip_rings_bytes"`
	CHeapBytes      int64          `json:"c_heap_bytes"`
	GPUDriverBytes  int64          `json:"gpu_driver_bytes"`
	CodeBytes       int64          `json:"code_bytes"`
	SharedBytes     int64          `json:"shared_bytes"`
	Workers         []WorkerMemory `json:"workers"`
	// The budget (budget.go): its bytes and where they came from (memory_limit_mib, or the
	// cgroup's file; zero and "" without one), the Go memory limit it last set (0: none
	// set), and the samples that found the daemon and its workers over it.
	BudgetBytes       int64  `json:"budget_bytes"`
	BudgetFrom        string `json:"budget_from"`
	GoLimitBytes      int64  `json:"go_limit_bytes"`
	OverBudgetSamples uint64 `json:"over_budget_samples"`
	// GCPercent is the Go collector's GOGC (`visiond run` sets 50 unless the environment
	// sets it; -1: off).
	GCPercent int `json:"gc_percent"`
}

// TotalBytes is the resident memory of the daemon and its workers together: what the
// budget bounds.
func (m MemoryStatus) TotalBytes() int64 {
	t := m.ResidentBytes
	for _, w := range m.Workers {
		t += w.ResidentBytes
	}
	return t
}

// GoRuntimeBytes is all that the Go runtime holds: Go and the NATS server's block caches.
func (m MemoryStatus) GoRuntimeBytes() int64 { return m.GoBytes + m.NATSStoreCaches }

// WorkerMemory is a worker process's resident memory at its last sample.
type WorkerMemory struct {
	PID           int    `json:"pid"`
	Provider      string `json:"provider"`
	ResidentBytes int64  `json:"resident_bytes"`
	GPUBytes      int64  `json:"gpu_bytes"`
}

// Memory reports the daemon's memory by owner and its workers'.
func (d *Daemon) Memory() MemoryStatus {
	var m MemoryStatus
	anon, file, shmem := procMemory("/proc/self/status")
	m.ResidentBytes = anon + file + shmem
	m.GPUDriverBytes = min(file, driverResident("/proc/self/maps", "/proc/self/smaps"))
	m.CodeBytes, m.SharedBytes = file-m.GPUDriverBytes, shmem
	m.NATSStoreCaches = d.natsCaches.get()
	m.GoBytes = max(0, goResident()-m.NATSStoreCaches)
	m.GCPercent = GCPercent()
	if d.frames != nil {
		m.FrameBuffers = d.frames.Stats().Bytes()
		m.SnapshotBuffers = d.snapBufs.Stats().Bytes()
	}
	d.mu.RLock()
	for _, c := range d.cams {
		if r := c.recorder.Load(); r != nil {
			st := r.Stats()
			m.ClipRings += int64(st.Ring.Held + st.ReadBuf)
		}
	}
	d.mu.RUnlock()
	m.CHeapBytes = max(0, anon-m.GoRuntimeBytes()-m.FrameBuffers-m.SnapshotBuffers-m.ClipRings)
	for _, w := range d.Workers() {
		m.Workers = append(m.Workers, WorkerMemory{PID: w.PID, Provider: w.Provider, ResidentBytes: int64(w.RSSBytes), GPUBytes: int64(w.GPUBytes)})
	}
	if b := d.budget; b != nil {
		m.BudgetBytes, m.BudgetFrom = b.limit, b.source
		m.GoLimitBytes, m.OverBudgetSamples = b.goLimit.Load(), b.over.Load()
	}
	return m
}

// procMemory reads a process's resident memory, split as the kernel counts it (RssAnon,
// RssFile, RssShmem of /proc/<pid>/status), in bytes; zeros when it cannot be read.
func procMemory(path string) (anon, file, shmem int64) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			continue
		}
		switch string(k) {
		case "RssAnon":
			anon = n << 10
		case "RssFile":
			file = n << 10
		case "RssShmem":
			shmem = n << 10
		}
	}
	return anon, file, shmem
}

// driverDevices are the prefixes of the device files GPU drivers map into a process: NVIDIA's
// desktop and server driver (/dev/nvidiactl, /dev/nvidia0, /dev/nvidia-uvm), a Jetson's
// (/dev/nvmap, /dev/nvhost-*).
var driverDevices = []string{"/dev/nvidia", "/dev/nvmap", "/dev/nvhost"}

// driverResident is the resident memory, in bytes, of the mappings of driverDevices in a
// process's smaps (Rss of each), or 0. It reads the maps file first, which costs little, and
// the smaps file, which walks the process's page tables, only when a driver's device is mapped.
func driverResident(mapsPath, smapsPath string) int64 {
	maps, err := os.ReadFile(mapsPath)
	if err != nil || !slices.ContainsFunc(driverDevices, func(d string) bool { return bytes.Contains(maps, []byte(" "+d)) }) {
		return 0
	}
	f, err := os.Open(smapsPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	var total int64
	var inDriver bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if k := fields[0]; k[len(k)-1] != ':' { // a mapping's header: range perms offset dev inode [path]
			inDriver = len(fields) >= 6 && slices.ContainsFunc(driverDevices, func(d string) bool { return bytes.HasPrefix(fields[5], []byte(d)) })
			continue
		}
		if inDriver && string(fields[0]) == "Rss:" && len(fields) >= 2 {
			if kb, err := strconv.ParseInt(string(fields[1]), 10, 64); err == nil {
				total += kb << 10
			}
		}
	}
	return total
}

// GCPercent returns the Go collector's GOGC in effect (-1: off).
func GCPercent() int {
	s := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return -1
	}
	v := s[0].Value.Uint64()
	if v > math.MaxInt32 {
		return -1
	}
	return int(v)
}

// natsBlockAlloc is the function of nats-server (v2.10 to v2.15 at least) that takes every
// file-store block buffer from its pools, which allocate them.
const natsBlockAlloc = "github.com/nats-io/nats-server/v2/server.getMsgBlockBuf"

// natsBlockSize reports whether n is the size of one of nats-server's block buffers (its
// pools' arrays of 256 KiB, 1, 4 and 8 MiB): only records of objects of these sizes have
// their stacks read, a few among the profile's thousands.
func natsBlockSize(n int64) bool {
	switch n {
	case 256 << 10, 1 << 20, 4 << 20, 8 << 20:
		return true
	}
	return false
}

// natsCachesFigure keeps natsBlockBuffers' figure for Daemon.Memory, which the status page
// asks for every second and /metrics at every scrape: reading the heap profile copies every
// record, and the profile only changes when a collection ends, so the figure is read again
// only after one has.
type natsCachesFigure struct {
	mu     sync.Mutex
	cycles uint64 // the collections ended when bytes was read; 0: never read
	bytes  int64
	reads  int // of the profile
}

// get returns the NATS server's block buffers as of the last collection.
func (f *natsCachesFigure) get() int64 {
	s := []rtmetrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	rtmetrics.Read(s)
	cycles := s[0].Value.Uint64() + 1 // + 1: 0 stands for never read
	f.mu.Lock()
	defer f.mu.Unlock()
	if cycles != f.cycles {
		f.bytes, f.cycles = natsBlockBuffers(), cycles
		f.reads++
	}
	return f.bytes
}

// allocFrames is how deep allocatedIn looks: a nats-server block buffer's stack is the
// runtime's allocation (mallocgc, newobject), a sync.Pool's New, Pool.Get, natsBlockAlloc
// (Go 1.26), with room for a runtime that calls through more of its own functions.
const allocFrames = 8

// natsBlockBuffers returns the bytes of the embedded NATS server's file-store block buffers
// in the Go heap, from the runtime's heap profile: the records allocated under natsBlockAlloc,
// each scaled as pprof scales a sample (the profile samples one allocation in
// runtime.MemProfileRate bytes; a block buffer is 1 to 8 MB, so nearly every one is sampled).
// The profile is as of the last collection. 0 where the server allocates elsewhere.
func natsBlockBuffers() int64 {
	n, _ := runtime.MemProfile(nil, false)
	var recs []runtime.MemProfileRecord
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	var total float64
	for i := range recs {
		r := &recs[i]
		if r.InUseBytes() <= 0 || r.AllocObjects <= 0 || !natsBlockSize(r.AllocBytes/r.AllocObjects) ||
			!allocatedIn(r.Stack(), natsBlockAlloc) {
			continue
		}
		total += scaledInUse(r, runtime.MemProfileRate)
	}
	return int64(total)
}

// allocatedIn reports whether fn is among the innermost allocFrames calls of an allocation
// stack (inlined calls included).
func allocatedIn(stack []uintptr, fn string) bool {
	frames := runtime.CallersFrames(stack[:min(len(stack), allocFrames)])
	for {
		f, more := frames.Next()
		if f.Function == fn {
			return true
		}
		if !more {
			return false
		}
	}
}

// scaledInUse is a heap profile record's bytes in use, scaled for the sampling at rate as
// pprof does: an allocation of size s is sampled with probability 1 - exp(-s/rate).
func scaledInUse(r *runtime.MemProfileRecord, rate int) float64 {
	objs, bytes := r.InUseObjects(), r.InUseBytes()
	if objs <= 0 || rate <= 1 {
		return float64(bytes)
	}
	avg := float64(r.AllocBytes) / float64(max(r.AllocObjects, 1))
	return float64(bytes) / (1 - math.Exp(-avg/float64(rate)))
}

// goResident is the memory the Go runtime has mapped less what its scavenger gave back: an
// upper bound of its resident part.
func goResident() int64 {
	s := []rtmetrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	rtmetrics.Read(s)
	return int64(s[0].Value.Uint64()) - int64(s[1].Value.Uint64())
}
