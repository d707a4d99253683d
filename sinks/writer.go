package sinks

import (
	"context"
	"sync"
	"time"
)

// writeRetry is how long a queueWriter waits after a failed write before it tries again.
const writeRetry = time.Second

// queueWriter is the goroutine of a store that writes what its callers queue (State's,
// Snapshots' and Clips'), and its shutdown. The store's Put queues and calls wake; the
// writer calls the store's write until nothing is queued, then sleeps until the next wake;
// after a failed write it waits writeRetry and tries again, while the server is unreachable
// as long as it takes. close asks it to write what is queued and return, and past its
// deadline to give up: the ctx of a write in progress ends and the writer returns.
type queueWriter struct {
	// write writes what is queued, or the next part of it, and says whether it wrote
	// anything (false: nothing was queued); an error means the write failed and what it took
	// is queued again, to be tried after writeRetry. Called on the writer's goroutine only.
	write func(ctx context.Context) (wrote bool, err error)

	wake             chan struct{} // a value when something was queued
	stop, quit, done chan struct{}
	once             sync.Once
}

// start starts the writer, which calls write.
func (w *queueWriter) start(write func(ctx context.Context) (bool, error)) {
	w.write = write
	w.wake = make(chan struct{}, 1)
	w.stop, w.quit, w.done = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go w.run()
}

// started says whether start was called.
func (w *queueWriter) started() bool { return w.done != nil }

// wakeUp tells the writer that something was queued. It never blocks.
func (w *queueWriter) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run writes until close and nothing is queued, or until close gives up.
func (w *queueWriter) run() {
	defer close(w.done)
	// ctx ends a write in progress when close gives up waiting.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	stopping := w.stop
	for {
		wrote, err := w.write(ctx)
		switch {
		case err != nil:
			select { // wait before the next try, whatever is queued meanwhile
			case <-time.After(writeRetry):
			case <-stopping:
				stopping = nil
			case <-w.quit:
				return
			}
			continue
		case wrote:
			continue
		case stopping == nil:
			return // closed and drained
		}
		select {
		case <-w.wake:
		case <-stopping:
			stopping = nil
		case <-w.quit:
			return
		}
	}
}

// close runs closing (the owner refuses new work), asks the writer to finish, waits up to
// timeout, and past it calls late (to say what is left), quits the writer and waits for it.
// Safe to call twice, and for a writer never started (it then does nothing).
func (w *queueWriter) close(timeout time.Duration, closing, late func()) {
	w.once.Do(func() {
		if w.done == nil {
			return
		}
		closing()
		close(w.stop)
		select {
		case <-w.done:
		case <-time.After(timeout):
			late()
			close(w.quit)
			<-w.done
		}
	})
}
