package pipeline

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/testutil"
)

// The state directory's lock: a second holder is refused with the directory and the first
// holder's PID; once the first lets go, the next takes it. A state_dir that cannot be a
// directory, or a lock file that cannot be opened, is a clear error.
func TestLockDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state") // created by lockDir
	first, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(testutil.ReadFile(t, filepath.Join(dir, StateLockFile))); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want this process's PID %d", got, os.Getpid())
	}
	// flock belongs to the open file, so a second open in the same process is refused too.
	if second, err := lockDir(dir); err == nil {
		second.Close()
		t.Fatal("a second lock of the same state_dir succeeded")
	} else {
		for _, want := range []string{"state_dir " + dir + " is in use", "pid " + strconv.Itoa(os.Getpid()), StateLockFile} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		}
	}
	first.Close()
	again, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lock after the first holder closed it: %v", err)
	}
	again.Close()

	// A holder that has not written its PID (or a file holding anything else): "unknown".
	garbage := t.TempDir()
	held, err := lockDir(garbage)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := held.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(garbage); err == nil || !strings.Contains(err.Error(), "pid unknown") {
		t.Errorf("lock held by a file without a PID: %v, want an error with pid unknown", err)
	}

	file := testutil.TempFile(t, "not-a-dir", "x")
	if f, err := lockDir(file); err == nil {
		f.Close()
		t.Error("lockDir on a file succeeded")
	} else if !strings.Contains(err.Error(), "state_dir") || !strings.Contains(err.Error(), file) {
		t.Errorf("lockDir on a file: %v, want an error naming state_dir and %s", err, file)
	}
}
