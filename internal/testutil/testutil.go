// Package testutil holds the helpers that the tests of every visiond package share: the
// files scripts/setup.sh fetches into third_party/, waiting for a condition, loggers that
// write to the test's log or to a buffer, the warnings of a log, free loopback addresses,
// files in temporary directories, and a check that goroutines end. It imports only the
// standard library (no cgo), so that any package's tests can use it; it is imported by tests
// only.
//
// Waits take generous timeouts: a test must pass on a machine slowed 5-10 times by other
// work, and a wait that succeeds returns as soon as its condition holds, so a long timeout
// costs nothing when the machine is fast.
package testutil

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// libraryEnv names another ONNX Runtime library than third_party's (config.LibraryEnv,
// which this package does not import).
const libraryEnv = "ONNXRUNTIME_SHARED_LIBRARY_PATH"

// library is ONNX Runtime's file in third_party/.
const library = "libonnxruntime.so.1"

// ModuleRoot returns the directory of go.mod above the test's working directory (its
// package's directory).
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("testutil: no go.mod above the working directory")
		}
		dir = parent
	}
}

// ThirdParty returns the absolute path of a file that scripts/setup.sh fetches into the
// module's third_party/ directory, rel being its path there in one or more elements
// ("yolov8n.onnx", or "media", "vtest.h264.ts"). For "libonnxruntime.so.1" it returns
// $ONNXRUNTIME_SHARED_LIBRARY_PATH when that is set, as the daemon does (the GPU machine's
// build, with the CUDA provider). The test fails when the file is missing.
func ThirdParty(tb testing.TB, rel ...string) string {
	tb.Helper()
	name := filepath.Join(rel...)
	p := filepath.Join(ModuleRoot(tb), "third_party", name)
	if lib := os.Getenv(libraryEnv); name == library && lib != "" {
		abs, err := filepath.Abs(lib)
		if err != nil {
			tb.Fatal(err)
		}
		p = abs
	}
	if _, err := os.Stat(p); err != nil {
		tb.Fatalf("%v: run scripts/setup.sh", err)
	}
	return p
}

// Media returns the absolute path of a sample media file in third_party/media/.
func Media(tb testing.TB, name string) string {
	tb.Helper()
	return ThirdParty(tb, "media", name)
}

// LookPath returns the path of a program that scripts/setup.sh installs; the test fails when
// it is not on the PATH.
func LookPath(tb testing.TB, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("%s not installed (%v): run scripts/setup.sh", name, err)
	}
	return p
}

// GOPStreams encodes the first seconds of the sample video (scaled to 384x288, 10 fps) once
// for each keyframe interval of gops (in seconds, keyframes exactly that far apart) as MPEG-TS
// files, named "g<gop>" in the map returned: streams for a sample camera.
func GOPStreams(tb testing.TB, seconds int, gops ...int) map[string]string {
	tb.Helper()
	ffmpeg := LookPath(tb, "ffmpeg")
	streams := map[string]string{}
	for _, gop := range gops {
		name := "g" + strconv.Itoa(gop)
		out := filepath.Join(tb.TempDir(), name+".ts")
		frames := strconv.Itoa(10 * gop)
		if b, err := exec.Command(ffmpeg, "-v", "error", "-i", Media(tb, "vtest.h264.ts"), "-t", strconv.Itoa(seconds), "-vf", "scale=384:288",
			"-c:v", "libx264", "-preset", "ultrafast", "-g", frames, "-keyint_min", frames, "-sc_threshold", "0",
			"-an", "-f", "mpegts", out).CombinedOutput(); err != nil {
			tb.Fatalf("ffmpeg: %v\n%s", err, b)
		}
		streams[name] = out
	}
	return streams
}

// pollEvery is how often WaitFor checks its condition.
const pollEvery = 20 * time.Millisecond

// WaitFor checks cond every 20 ms until it holds, and fails the test when it still does not
// after timeout; what says what was awaited ("camera online"). Give a timeout that a machine
// 5-10 times slower than usual still meets: a minute for anything that starts a worker
// process (model load) or an RTSP session.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
}

// Logger returns a logger at debug level whose lines go to the test's log (shown for a failed
// test, or with -v). Lines logged once the test and its cleanups are over (a goroutine that
// outlives them) are dropped: testing panics on a log after the test ended.
func Logger(tb testing.TB) *slog.Logger {
	w := &testWriter{tb: tb}
	tb.Cleanup(w.end)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu    sync.Mutex
	tb    testing.TB
	ended bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.tb.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}

// LogBuffer collects log output for a test to look into; safe for concurrent use. Its zero
// value is ready.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a text logger at debug level that writes to b.
func (b *LogBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// warnRecord is a text log record (slog.TextHandler) at level WARN or ERROR, or above.
var warnRecord = regexp.MustCompile(`(?m)^(?:time=\S+ )?level=(?:WARN|ERROR)\S* .*$`)

// Warnings returns the records of log, the lines of a slog.TextHandler (a LogBuffer's, a
// daemon's stderr), logged at level WARN or above: what a clean run logs none of. A record
// that quotes another log's line (the pool forwards each line of a worker's stderr at INFO)
// counts at its own level, not the quoted one's.
func Warnings(log string) []string {
	return warnRecord.FindAllString(log, -1)
}

// FreeAddr returns a loopback address (127.0.0.1:port) that nothing listened on a moment
// ago: for a server the test starts later on a known address, or for one that must refuse
// connections.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WriteFile writes body to path (mode 0600), failing the test on an error.
func WriteFile(tb testing.TB, path, body string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// TempFile writes body to a file called name in a new temporary directory of the test, and
// returns its path.
func TempFile(tb testing.TB, name, body string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	WriteFile(tb, p, body)
	return p
}

// ReadFile returns the content of path, failing the test on an error.
func ReadFile(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// CheckGoroutines fails the test, with every goroutine's stack, unless the number of
// goroutines comes back down to base (runtime.NumGoroutine() taken before the test started
// what it stopped) within 30 s.
func CheckGoroutines(tb testing.TB, base int) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			tb.Fatalf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
