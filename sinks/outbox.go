package sinks

import (
	"sync"
	"time"
)

// message is one encoded event waiting to be published.
type message struct {
	subject string
	id      string // Nats-Msg-Id: the server drops a retry of an id it already holds
	data    []byte
	at      time.Time // when the event was made
}

// outbox is the bounded queue between the pipeline and the publisher's goroutine. put never
// blocks: when the queue is full, the oldest events are dropped to make room and counted, so
// that a gap event can say how many were lost and from when to when.
type outbox struct {
	maxBytes int
	signal   chan struct{} // a value when put added to an empty wait

	mu      sync.Mutex
	q       []*message // FIFO; q[head:] are waiting
	head    int
	bytes   int
	dropped gap
	closed  bool
}

// gap describes events dropped from the outbox since the last gap event.
type gap struct {
	n           uint64
	first, last time.Time // when the first and last dropped events were made
}

func newOutbox(maxBytes int) *outbox {
	return &outbox{maxBytes: maxBytes, signal: make(chan struct{}, 1)}
}

// put queues m, dropping the oldest waiting events while the queue is over its bound. It
// reports false, queuing nothing, once the outbox is closed.
func (o *outbox) put(m *message) bool {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return false
	}
	o.q = append(o.q, m)
	o.bytes += len(m.data)
	for o.bytes > o.maxBytes && len(o.q)-o.head > 1 {
		old := o.q[o.head]
		o.q[o.head] = nil
		o.head++
		o.bytes -= len(old.data)
		if o.dropped.n == 0 {
			o.dropped.first = old.at
		}
		o.dropped.n++
		o.dropped.last = old.at
	}
	o.compact()
	o.mu.Unlock()
	select {
	case o.signal <- struct{}{}:
	default:
	}
	return true
}

// compact moves the waiting events to the front once the dead prefix is the larger part, so
// the slice neither grows without bound nor is copied on every pop. Lock held.
func (o *outbox) compact() {
	if o.head > 0 && o.head >= len(o.q)/2 {
		n := copy(o.q, o.q[o.head:])
		clear(o.q[n:])
		o.q = o.q[:n]
		o.head = 0
	}
}

// pop takes the oldest waiting event.
func (o *outbox) pop() (*message, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.head == len(o.q) {
		return nil, false
	}
	m := o.q[o.head]
	o.q[o.head] = nil
	o.head++
	o.bytes -= len(m.data)
	o.compact()
	return m, true
}

// len is the number of waiting events.
func (o *outbox) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.q) - o.head
}

// takeGap returns the events dropped since the last call, and forgets them.
func (o *outbox) takeGap() gap {
	o.mu.Lock()
	defer o.mu.Unlock()
	g := o.dropped
	o.dropped = gap{}
	return g
}

// close makes later puts fail; what is queued stays for the publisher to drain.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}
