package pipeline

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/visiond/visiond/internal/cmem"
	"github.com/visiond/visiond/internal/limits"
)

// The memory budget (config's memory_limit_mib, else the cgroup's limit): one number for
// the daemon and its workers together, as the cgroup that systemd gives them counts them.
// Every summaryEvery the run goroutine measures the processes (Daemon.Memory) and
//   - sets the Go runtime's memory limit (GOMEMLIMIT) to what the budget leaves it: the
//     budget less a tenth as headroom, less what the rest holds (the daemon's memory outside
//     the Go heap, and the workers), never below goLimitFloor;
//   - counts a sample where the processes hold more than the budget, logs it at most once
//     a minute with where the memory is, and gives back the free pages of the Go heap and
//     of glibc's arenas (idle frame and snapshot buffers go back every summaryEvery anyway).
//
// The clip rings share a quarter of the budget (ringShare). Nothing here kills or refuses:
// past the budget the daemon runs on, and the kernel decides at the cgroup's own limit.

// goLimitFloor is the lowest Go memory limit the budget sets: below it the collector would
// run all the time (the runtime caps it at half the CPU) for a few MiB.
const goLimitFloor = 64 << 20

// overLogEvery bounds how often the budget logs that it is exceeded.
const overLogEvery = time.Minute

// ringBudgetShare is the part of the budget that the cameras' clip rings share.
const ringBudgetShare = 4

// ringMinBytes is the least a camera's ring gets, however many cameras share the budget:
// a few seconds of a main stream.
const ringMinBytes = 2 << 20

// memoryBudget holds the processes to the budget. limit, source, fromEnv and prevGoLimit
// are set at start; the rest is the run goroutine's, but for the counters, read by the
// status API and /metrics.
type memoryBudget struct {
	limit  int64  // bytes; 0: no budget
	source string // where limit came from: "memory_limit_mib", or the cgroup's file
	// fromEnv: GOMEMLIMIT is set in the environment, and the budget leaves the Go limit to it.
	fromEnv     bool
	setGoLimit  func(int64) int64 // debug.SetMemoryLimit; tests give their own
	prevGoLimit int64             // the Go limit before start, put back by close
	log         *slog.Logger

	goLimit atomic.Int64  // the Go limit last set; 0 before the first or with none
	over    atomic.Uint64 // samples over the budget
	lastLog time.Time     // run goroutine
}

// newMemoryBudget resolves the budget: configMiB when set (the cgroup's limit when that is
// lower), else the cgroup's limit, else none. cgErr, from reading the cgroup, is logged and
// leaves the configured value alone.
func newMemoryBudget(configMiB int, cg limits.Memory, cgErr error, log *slog.Logger) *memoryBudget {
	b := &memoryBudget{setGoLimit: debug.SetMemoryLimit, log: log}
	b.fromEnv = os.Getenv("GOMEMLIMIT") != ""
	if cgErr != nil {
		log.Warn("cannot read the cgroup's memory limit", "err", cgErr)
	}
	switch {
	case configMiB > 0 && cg.Limit > 0 && cg.Limit < int64(configMiB)<<20:
		log.Warn("memory_limit_mib is above the cgroup's memory limit: the cgroup's is the budget",
			"memory_limit_mib", configMiB, "cgroup", cg.String())
		b.limit, b.source = cg.Limit, cg.File
	case configMiB > 0:
		b.limit, b.source = int64(configMiB)<<20, "memory_limit_mib"
	default:
		b.limit, b.source = cg.Limit, cg.File
	}
	b.prevGoLimit = b.setGoLimit(-1) // reads it
	return b
}

// ringShare is the most a camera's clip ring holds when n cameras have clips on: an equal
// share of the rings' part of the budget, between ringMinBytes and ringMaxBytes
// (ringMaxBytes alone without a budget).
func (b *memoryBudget) ringShare(n int) int {
	if b == nil || b.limit <= 0 || n <= 0 {
		return ringMaxBytes
	}
	share := b.limit / ringBudgetShare / int64(n)
	return int(min(max(share, ringMinBytes), ringMaxBytes))
}

// observe applies the budget to a sample of the processes' memory, m (Daemon.Memory), and
// returns whether they hold more than it.
func (b *memoryBudget) observe(m MemoryStatus, now time.Time) bool {
	if b.limit <= 0 {
		return false
	}
	total := m.TotalBytes()
	if !b.fromEnv {
		rest := total - m.GoRuntimeBytes() // the daemon outside the Go runtime, and the workers
		goLimit := max(b.limit-b.limit/10-rest, goLimitFloor)
		b.setGoLimit(goLimit)
		b.goLimit.Store(goLimit)
	}
	if total <= b.limit {
		return false
	}
	b.over.Add(1)
	if now.Sub(b.lastLog) >= overLogEvery {
		b.lastLog = now
		workers := total - m.ResidentBytes
		b.log.Warn("the daemon and its workers hold more memory than the budget; giving back free pages",
			"resident_mib", total>>20, "budget_mib", b.limit>>20, "budget_from", b.source,
			"go_mib", m.GoBytes>>20, "nats_store_caches_mib", m.NATSStoreCaches>>20, "frame_buffers_mib", m.FrameBuffers>>20, "snapshot_buffers_mib", m.SnapshotBuffers>>20,
			"clip_rings_mib", m.ClipRings>>20, "c_heap_mib", m.CHeapBytes>>20, "gpu_driver_mib", m.GPUDriverBytes>>20, "code_mib", m.CodeBytes>>20,
			"workers_mib", workers>>20, "samples_over", b.over.Load())
		debug.FreeOSMemory()
		cmem.Trim()
	}
	return true
}

// applyBudget samples the processes' memory and applies the budget to it; without a budget
// it samples nothing.
func (d *Daemon) applyBudget(now time.Time) {
	if d.budget.limit > 0 {
		d.budget.observe(d.Memory(), now)
	}
}

// close puts back the Go memory limit found at start (a daemon in a test's process, or
// one started again, does not keep the last one's).
func (b *memoryBudget) close() {
	if b.limit > 0 && !b.fromEnv {
		b.setGoLimit(b.prevGoLimit)
	}
}

// describe says what the budget is, for the start's log line.
func (b *memoryBudget) describe() string {
	switch {
	case b.limit <= 0:
		return "none"
	case b.fromEnv:
		return fmt.Sprintf("%d MiB from %s (the Go limit from GOMEMLIMIT)", b.limit>>20, b.source)
	default:
		return fmt.Sprintf("%d MiB from %s", b.limit>>20, b.source)
	}
}
