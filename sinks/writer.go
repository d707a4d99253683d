package sinks

import (
	"sync"
	"time"
)

// writerStop is the shutdown of a background writer (State's and Snapshots'): closing stop
// asks it to write what is queued and return; closing quit, once the deadline has passed, to
// give up; it closes done when it has returned.
type writerStop struct {
	stop, quit, done chan struct{}
	once             sync.Once
}

// init makes the channels; the writer is started after it.
func (w *writerStop) init() {
	w.stop, w.quit, w.done = make(chan struct{}), make(chan struct{}), make(chan struct{})
}

// close runs closing (the owner refuses new work), asks the writer to finish, waits up to
// timeout, and past it calls late (to say what is left), quits the writer and waits for it.
// Safe to call twice, and for a writer never started (it then does nothing).
func (w *writerStop) close(timeout time.Duration, closing, late func()) {
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
