package pipeline

import (
	"sync"
	"sync/atomic"

	"github.com/visiond/visiond/sources"
)

// Mailbox holds a camera's newest decoded frame, and only that one: a new frame replaces
// (and releases) an older one that was not taken yet, so a slow pipeline sees fresh frames
// and a source never blocks. Replaced frames are counted.
type Mailbox struct {
	mu      sync.Mutex
	f       *sources.Frame
	dropped atomic.Uint64
}

// Put stores f, releasing the frame it replaces. It never blocks.
func (m *Mailbox) Put(f *sources.Frame) {
	m.mu.Lock()
	old := m.f
	m.f = f
	m.mu.Unlock()
	if old != nil {
		old.Release()
		m.dropped.Add(1)
	}
}

// Take removes and returns the newest frame, or nil when there is none.
func (m *Mailbox) Take() *sources.Frame {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.f
	m.f = nil
	return f
}

// Restore gives back a frame that was taken but could not be used, unless a newer frame
// arrived meanwhile, in which case f is released (and not counted as dropped: the newer
// frame supersedes it).
func (m *Mailbox) Restore(f *sources.Frame) {
	m.mu.Lock()
	if m.f == nil {
		m.f, f = f, nil
	}
	m.mu.Unlock()
	if f != nil {
		f.Release()
	}
}

// Dropped is the number of frames replaced before anyone took them.
func (m *Mailbox) Dropped() uint64 { return m.dropped.Load() }

// Close releases the frame held, if any.
func (m *Mailbox) Close() {
	if f := m.Take(); f != nil {
		f.Release()
	}
}
