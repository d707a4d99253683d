// Package offheap lends large byte buffers of one size that live outside the Go heap: the
// letterboxed frames of every camera and the frames kept for snapshots.
//
// A frame of a 640x640 model is 1.2 MiB. Kept per camera in the Go heap, such buffers were
// most of the daemon's live heap, and the garbage collector's target (GOGC 100) doubled them
// in its resident memory. A Pool makes a buffer (an anonymous mapping) only when no free one
// is left, so the buffers follow the frames in flight rather than the cameras, and gives a
// free buffer back to the system once it has lain unused for the pool's idle time.
//
// A buffer carries a note of the borrower's choosing (M), kept with it while it is reused
// (what a frame buffer's padding was drawn for, say); a new buffer's note is M's zero value.
// A buffer must not be used after it is put back: a trimmed buffer is unmapped, and a read or
// write of it then faults.
package offheap

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultIdle is how long a free buffer is kept for reuse before it is unmapped.
const DefaultIdle = 10 * time.Second

// Buffer is one buffer lent: its bytes (Size of them, in a mapping of its own) and its note.
type Buffer[M any] struct {
	B    []byte
	Note M
}

// Pool lends buffers of Size bytes. Safe for concurrent use.
type Pool[M any] struct {
	size int
	idle time.Duration

	mu     sync.Mutex
	free   []freeBuf[M] // the most recently put on top: the bottom ones have lain longest
	inUse  int
	made   uint64 // buffers mapped, ever
	closed bool
}

type freeBuf[M any] struct {
	b   *Buffer[M]
	put time.Time
}

// Stats is what a pool holds.
type Stats struct {
	Size  int    // bytes per buffer
	InUse int    // buffers lent and not put back
	Free  int    // buffers kept for reuse
	Made  uint64 // buffers mapped since the pool was made
}

// Bytes is the memory the pool holds: its buffers lent and free.
func (s Stats) Bytes() int64 { return int64(s.InUse+s.Free) * int64(s.Size) }

// New returns a pool of buffers of size bytes, each kept free for reuse up to idle (0:
// DefaultIdle) before it is unmapped.
func New[M any](size int, idle time.Duration) *Pool[M] {
	if idle <= 0 {
		idle = DefaultIdle
	}
	return &Pool[M]{size: size, idle: idle}
}

// Size is the length of the pool's buffers.
func (p *Pool[M]) Size() int { return p.size }

// Get lends a buffer of Size bytes: a free one (its content and note are what it last held),
// else a new one, zeroed. It fails only when the system refuses the mapping.
func (p *Pool[M]) Get() (*Buffer[M], error) {
	p.mu.Lock()
	if n := len(p.free); n > 0 {
		b := p.free[n-1].b
		p.free[n-1] = freeBuf[M]{}
		p.free = p.free[:n-1]
		p.inUse++
		p.mu.Unlock()
		return b, nil
	}
	p.inUse++ // counted before the mapping, so that Stats never shows less than is held
	p.made++
	p.mu.Unlock()
	b, err := unix.Mmap(-1, 0, p.size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		p.mu.Lock()
		p.inUse--
		p.mu.Unlock()
		return nil, fmt.Errorf("offheap: mapping a buffer of %d bytes: %w", p.size, err)
	}
	return &Buffer[M]{B: b}, nil
}

// Put gives back a buffer that Get lent; b must not be used afterwards. It unmaps the free
// buffers that have lain unused longer than the pool's idle time, and after Close, b itself.
func (p *Pool[M]) Put(b *Buffer[M]) {
	if b == nil {
		return
	}
	if len(b.B) != p.size {
		panic(fmt.Sprintf("offheap: a buffer of %d bytes put into a pool of %d", len(b.B), p.size))
	}
	now := time.Now()
	p.mu.Lock()
	p.inUse--
	var unmap []*Buffer[M]
	if p.closed {
		unmap = append(unmap, b)
	} else {
		p.free = append(p.free, freeBuf[M]{b: b, put: now})
		unmap = p.expire(now, 1)
	}
	p.mu.Unlock()
	for _, u := range unmap {
		_ = unix.Munmap(u.B) // cannot fail for a mapping of ours
	}
}

// Trim unmaps the free buffers that have lain unused longer than the idle time; Put does it
// too, so a pool in use needs no call.
func (p *Pool[M]) Trim() {
	p.mu.Lock()
	unmap := p.expire(time.Now(), 0)
	p.mu.Unlock()
	for _, u := range unmap {
		_ = unix.Munmap(u.B)
	}
}

// expire takes out of the free list, and returns for unmapping, the buffers that have lain
// free longer than the idle time, keeping the keep most recently put whatever their age. It
// is called with p.mu held.
func (p *Pool[M]) expire(now time.Time, keep int) []*Buffer[M] {
	var old []*Buffer[M]
	for len(old) < len(p.free)-keep && now.Sub(p.free[len(old)].put) > p.idle {
		old = append(old, p.free[len(old)].b)
	}
	if len(old) > 0 {
		n := copy(p.free, p.free[len(old):])
		clear(p.free[n:])
		p.free = p.free[:n]
	}
	return old
}

// Stats returns what the pool holds now.
func (p *Pool[M]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Size: p.size, InUse: p.inUse, Free: len(p.free), Made: p.made}
}

// Close unmaps the free buffers; those lent are unmapped when they are put back. Safe to call
// twice.
func (p *Pool[M]) Close() {
	p.mu.Lock()
	p.closed = true
	free := p.free
	p.free = nil
	p.mu.Unlock()
	for _, f := range free {
		_ = unix.Munmap(f.b.B)
	}
}
