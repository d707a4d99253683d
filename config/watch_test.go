package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
)

func startWatcher(t *testing.T, path string) *config.Watcher {
	t.Helper()
	w := &config.Watcher{Path: path, Debounce: 50 * time.Millisecond}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func expectChange(t *testing.T, w *config.Watcher, what string) {
	t.Helper()
	select {
	case <-w.Changed():
	case <-time.After(5 * time.Second):
		t.Fatalf("no change reported after %s", what)
	}
}

func expectQuiet(t *testing.T, w *config.Watcher, what string) {
	t.Helper()
	select {
	case <-w.Changed():
		t.Fatalf("a change reported after %s", what)
	case <-time.After(300 * time.Millisecond): // six debounce periods
	}
}

func TestWatcher(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "visiond.yaml")
	testutil.WriteFile(t, path, "site: a\n")
	w := startWatcher(t, path)

	testutil.WriteFile(t, path, "site: b\n")
	expectChange(t, w, "a write in place")

	tmp := filepath.Join(dir, ".visiond.yaml.swp")
	testutil.WriteFile(t, tmp, "site: c\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	expectChange(t, w, "a temporary file renamed over it, as editors do")

	for i := range 5 {
		testutil.WriteFile(t, path, "site: d"+string(rune('0'+i))+"\n")
	}
	expectChange(t, w, "a burst of writes")
	expectQuiet(t, w, "the burst's single notification")

	testutil.WriteFile(t, filepath.Join(dir, "other.yaml"), "x\n")
	expectQuiet(t, w, "a write to another file in the directory")
}

// Configuration managers (and Kubernetes ConfigMaps) swap a symlink to a new directory.
func TestWatcherSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o700); err != nil {
			t.Fatal(err)
		}
		testutil.WriteFile(t, filepath.Join(dir, v, "visiond.yaml"), "site: "+v+"\ncameras: []\n")
	}
	if err := os.Symlink("v1", filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "visiond.yaml")
	if err := os.Symlink(filepath.Join("data", "visiond.yaml"), path); err != nil {
		t.Fatal(err)
	}
	w := startWatcher(t, path)

	tmp := filepath.Join(dir, "data.tmp")
	if err := os.Symlink("v2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "data")); err != nil {
		t.Fatal(err)
	}
	expectChange(t, w, "the data symlink swapped to a new version")
	if cfg, err := config.Load(path); err != nil || cfg.Site != "v2" {
		t.Fatalf("after the swap: %v, %v", cfg, err)
	}
}

func TestWatcherMissingDirectory(t *testing.T) {
	w := &config.Watcher{Path: filepath.Join(t.TempDir(), "nope", "visiond.yaml")}
	if err := w.Start(); err == nil {
		w.Close()
		t.Fatal("watching a file in a missing directory succeeded")
	}
}

// A notification waits until the file holds still, also when it changes without an event in
// the watched directory: here the config is a symlink to a file elsewhere, swapped to a new
// file that is then still being written, in place, for a while.
func TestWatcherWaitsForWritesToSettle(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	testutil.WriteFile(t, filepath.Join(elsewhere, "v1.yaml"), "site: a\n")
	path := filepath.Join(dir, "visiond.yaml")
	if err := os.Symlink(filepath.Join(elsewhere, "v1.yaml"), path); err != nil {
		t.Fatal(err)
	}
	w := &config.Watcher{Path: path, Debounce: 200 * time.Millisecond}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)

	v2 := filepath.Join(elsewhere, "v2.yaml")
	f, err := os.Create(v2)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tmp := filepath.Join(dir, "visiond.yaml.new")
	if err := os.Symlink(v2, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // the only event the watcher sees
		t.Fatal(err)
	}
	// Written for 1.2 s, six debounce periods, in small pieces.
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); {
		if _, err := f.WriteString("# ...\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w.Changed():
			t.Fatal("a change reported while the file was still being written")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := f.WriteString("site: b\n"); err != nil {
		t.Fatal(err)
	}
	expectChange(t, w, "the writes stopped")
	if cfg, err := config.Parse([]byte(testutil.ReadFile(t, path))); err != nil || cfg.Site != "b" {
		t.Fatalf("after the notification: %v, %v; want the complete file", cfg, err)
	}
	expectQuiet(t, w, "the single notification")
}
