package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
)

// The tests' debounce. The watcher promises a notification once the file has been quiet for
// the debounce after a change, and none while nothing changes. It cannot promise one
// notification per write of a test: a writer held up for longer than the debounce (a loaded
// machine) has made two changes, which get a notification each. So the tests expect at
// least one notification after a change, the file's last content when the last one comes,
// and none while the file stays as it is.
const debounce = 50 * time.Millisecond

func startWatcher(t *testing.T, path string) *config.Watcher {
	t.Helper()
	w := &config.Watcher{Path: path, Debounce: debounce}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// expectChange waits for a notification: the debounce after the change, however late a
// loaded machine makes it.
func expectChange(t *testing.T, w *config.Watcher, what string) {
	t.Helper()
	select {
	case <-w.Changed():
	case <-time.After(time.Minute):
		t.Fatalf("no change reported a minute after %s", what)
	}
}

// quiet is how long the tests watch for a notification that must not come: 20 periods of
// the tests' debounce, 5 of the longest one.
const quiet = time.Second

// expectQuiet fails on a notification within quiet.
func expectQuiet(t *testing.T, w *config.Watcher, what string) {
	t.Helper()
	select {
	case <-w.Changed():
		t.Fatalf("a change reported after %s", what)
	case <-time.After(quiet):
	}
}

// settled waits for the notifications of a change of path: at least one, then more while
// they keep coming, until none has come for quiet. It returns how many came and the file's
// content when the last came. It fails when none comes, or when they are still coming a
// minute later: notifications while nothing changes.
func settled(t *testing.T, w *config.Watcher, path, what string) (n int, last string) {
	t.Helper()
	expectChange(t, w, what)
	n, last = 1, testutil.ReadFile(t, path)
	for end := time.Now().Add(time.Minute); ; {
		select {
		case <-w.Changed():
			n, last = n+1, testutil.ReadFile(t, path)
			if time.Now().After(end) {
				t.Fatalf("%d notifications after %s, still coming a minute later", n, what)
			}
		case <-time.After(quiet):
			if n > 1 {
				t.Logf("%d notifications after %s: the writer (or the watcher) was held up for longer than the %v debounce", n, what, w.Debounce)
			}
			return n, last
		}
	}
}

func TestWatcher(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "visiond.yaml")
	testutil.WriteFile(t, path, "site: a\n")
	w := startWatcher(t, path)

	testutil.WriteFile(t, path, "site: b\n")
	if _, got := settled(t, w, path, "a write in place"); got != "site: b\n" {
		t.Fatalf("after a write in place: the file holds %q when notified", got)
	}

	tmp := filepath.Join(dir, ".visiond.yaml.swp")
	testutil.WriteFile(t, tmp, "site: c\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if _, got := settled(t, w, path, "a temporary file renamed over it, as editors do"); got != "site: c\n" {
		t.Fatalf("after a rename over it: the file holds %q when notified", got)
	}

	for i := range 5 {
		testutil.WriteFile(t, path, "site: d"+string(rune('0'+i))+"\n")
	}
	if _, got := settled(t, w, path, "a burst of writes"); got != "site: d4\n" {
		t.Fatalf("after a burst of writes: the file holds %q when last notified", got)
	}

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
	// Written for 1.2 s, six debounce periods, in small pieces, one every 10 ms: no
	// notification may come before the end, unless the writer was held up (a loaded machine)
	// for longer than the debounce, which the watcher rightly takes for the end of the writes.
	// held is the longest the file can have held still: from the start of a change to the end
	// of the next one.
	last, held := time.Now(), time.Duration(0)
	if err := os.Rename(tmp, path); err != nil { // the only event the watcher sees
		t.Fatal(err)
	}
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); {
		start := time.Now()
		if _, err := f.WriteString("# ...\n"); err != nil {
			t.Fatal(err)
		}
		held, last = max(held, time.Since(last)), start
		select {
		case <-w.Changed():
			if held := max(held, time.Since(last)); held <= w.Debounce {
				t.Fatalf("a change reported while the file was still being written (it held still for %v at most, under the %v debounce)", held, w.Debounce)
			}
			t.Logf("a change reported while the file was being written, after the writer was held up for up to %v, over the %v debounce", held, w.Debounce)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := f.WriteString("site: b\n"); err != nil {
		t.Fatal(err)
	}
	_, got := settled(t, w, path, "the writes stopped")
	if cfg, err := config.Parse([]byte(got)); err != nil || cfg.Site != "b" {
		t.Fatalf("after the last notification: %v, %v; want the complete file", cfg, err)
	}
}
