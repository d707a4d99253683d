// Package cmem tunes the C allocator (glibc's malloc) that the daemon's C libraries use:
// FFmpeg's decoders, OpenCV and ONNX Runtime allocate there, outside the Go heap.
//
// By default glibc gives every thread that contends for the allocator an arena of its own
// (up to 8 a core), and raises its threshold for serving large blocks from their own mappings
// each time such a block is freed, so that later frame-sized blocks come from the arenas,
// which rarely give memory back. In a daemon whose decoders start and stop with the cameras,
// on many cgo threads, that leaves freed decoders' memory held: 16 720p decoders closed left
// 48 of their 100 MiB resident, 11 with the threshold fixed.
package cmem

// #include <malloc.h>
import "C"

import "os"

// Defaults of Tune.
const (
	// Arenas bounds glibc's arenas: the decoders allocate little once running (their frames
	// come from FFmpeg's pools), so contention is rare.
	Arenas = 4
	// MmapThreshold is the size from which a block gets a mapping of its own, given back to
	// the system when freed: a frame's plane is larger.
	MmapThreshold = 128 << 10
)

// Tune sets glibc's arena bound and mapping threshold to the defaults above, each unless the
// environment sets it (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, which glibc reads itself). It
// returns false where the allocator refused a setting.
func Tune() bool {
	ok := true
	if os.Getenv("MALLOC_ARENA_MAX") == "" {
		ok = C.mallopt(C.M_ARENA_MAX, Arenas) == 1 && ok
	}
	if os.Getenv("MALLOC_MMAP_THRESHOLD_") == "" {
		ok = C.mallopt(C.M_MMAP_THRESHOLD, MmapThreshold) == 1 && ok
	}
	return ok
}

// Trim gives the free memory at the top of glibc's arenas back to the system.
func Trim() { C.malloc_trim(0) }
