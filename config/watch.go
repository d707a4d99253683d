package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watcher reports changes of a config file. It watches the file's directory, not the file:
// editors and deploy tools replace files (write a temporary file, rename it over) and
// configuration managers swap symlinks, and a watch on the file itself would be lost with
// the old inode. A notification comes once the writes have settled: no event for the file
// during Debounce, and its size and modification time (and, through symlinks, the file it
// points to) the same at the end of that quiet time as at its last event; until then, every
// change starts the wait again. So a truncate followed by a write ("> f; cp new f") gives
// one notification, for the complete file.
type Watcher struct {
	Path     string        // the config file
	Debounce time.Duration // quiet time the file must hold still before a notification; default 300 ms
	Logger   *slog.Logger

	w       *fsnotify.Watcher
	changed chan struct{}
	done    chan struct{}
	close   sync.Once
}

// Start begins watching.
func (w *Watcher) Start() error {
	if w.Debounce <= 0 {
		w.Debounce = 300 * time.Millisecond
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(w.Path)
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.Path, err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", w.Path, err)
	}
	if err := fw.Add(filepath.Dir(abs)); err != nil {
		fw.Close()
		return fmt.Errorf("watch %s: %w", filepath.Dir(abs), err)
	}
	w.w, w.changed, w.done = fw, make(chan struct{}, 1), make(chan struct{})
	go w.run(abs, resolve(abs)) // the target as of now: a swap right after Start is a change
	return nil
}

// Changed receives once after each burst of changes to the file, when it has settled.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

// Close stops watching and waits for the watcher's goroutine. Safe to call twice.
func (w *Watcher) Close() {
	w.close.Do(func() {
		if w.w == nil {
			return
		}
		w.w.Close()
		<-w.done
	})
}

// run watches until Close; target is the (possibly symlinked) file as it was at Start.
func (w *Watcher) run(path, target string) {
	defer close(w.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			// The file itself, or a symlink swap somewhere on its path.
			if t := resolve(path); filepath.Clean(ev.Name) == path || t != target {
				target = t
				timer.Reset(w.Debounce)
			}
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			w.Logger.Warn("config watcher", "error", err)
		case <-timer.C:
			// Quiet, but has the file held still? It changes without an event we have
			// seen when a write's event is still queued, or when it is a symlink to a
			// file elsewhere written in place: then wait for another quiet period.
			if t := resolve(path); t != target {
				target = t
				timer.Reset(w.Debounce)
				continue
			}
			select {
			case w.changed <- struct{}{}:
			default: // one pending notification is enough
			}
		}
	}
}

// resolve returns the file path points to after symlinks, with its modification time and
// size, so that a swap to a new file is seen even when its name repeats, and a write
// without an event is seen too; "" if it does not exist.
func resolve(path string) string {
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	fi, err := os.Stat(p)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s@%d+%d", p, fi.ModTime().UnixNano(), fi.Size())
}
