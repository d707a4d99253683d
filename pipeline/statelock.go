package pipeline

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/visiond/visiond/config"
)

// StateLockFile is the lock file in the state directory: one daemon per directory holds an
// exclusive flock on it while it runs, and writes its PID in it. The kernel drops the lock
// when the daemon exits, however it exits; the file itself stays.
const StateLockFile = "visiond.lock"

// lockState takes the state directory's lock when the daemon keeps anything there (the
// embedded NATS server's JetStream store), so that a second daemon on the same directory
// fails at start instead of opening the first one's live store.
func (d *Daemon) lockState(cfg *config.Config) error {
	if cfg.NATS.URL != "" || !cfg.NATS.JetStream {
		return nil // nothing in the state directory
	}
	dir, err := cfg.StatePath()
	if err != nil {
		return err
	}
	d.stateLock, err = lockDir(dir)
	return err
}

// lockDir takes an exclusive flock on StateLockFile in dir, creating both when missing, and
// writes this process's PID in it. When another process holds it, the error names dir and
// that process's PID.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("state_dir: %w", err)
	}
	path := filepath.Join(dir, StateLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640) // close-on-exec: workers do not inherit it
	if err != nil {
		return nil, fmt.Errorf("state_dir %s: lock file: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := lockHolder(f)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("state_dir %s is in use by another visiond (pid %s, holding %s): give each daemon a state_dir of its own",
				dir, holder, path)
		}
		return nil, fmt.Errorf("state_dir %s: lock %s: %w", dir, path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("state_dir %s: lock file: %w", dir, err)
	}
	return f, nil
}

// lockHolder returns the PID written in the lock file, or "unknown" (a holder that has not
// written it yet, or a file that holds something else).
func lockHolder(f *os.File) string {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 32))
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(b))
	if _, err := strconv.Atoi(s); err != nil {
		return "unknown"
	}
	return s
}

// unlockState releases the state directory's lock (closing the file drops the flock).
func (d *Daemon) unlockState() {
	if d.stateLock != nil {
		d.stateLock.Close()
		d.stateLock = nil
	}
}
