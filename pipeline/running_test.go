package pipeline

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// Issue 21, item 4: the config in force is read only through the daemon's atomic pointer,
// so reloads that change the slice, max_frame_age and a camera's schedule, one after the
// other, race with nothing the systemd watchdog (Healthy) and /readyz read meanwhile. Run
// with -race: before the fix, Healthy read a copy of the slice that apply wrote.
func TestReloadWhileWatchdogAndReadyzPoll(t *testing.T) {
	body := fmt.Sprintf("site: test\nhttp: {listen: \"127.0.0.1:0\"}\nnats: {listen: \"127.0.0.1:0\"}\n"+
		"workers: {model: %q, library: %q, pools: [{count: 1}]}\npipeline: {slice: 100ms}\ncameras:\n%s",
		testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), sampleCameras(t, 1))
	d := startTestDaemon(t, body)
	start := d.Running()

	stop := make(chan struct{})
	var wg, started sync.WaitGroup
	var rounds, errs sync.Map // by poller: rounds gone, the last error
	poll := func(name string, f func() error) {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				if n == 1 {
					started.Done()
				}
				select {
				case <-stop:
					rounds.Store(name, n)
					return
				default:
				}
				if err := f(); err != nil {
					errs.Store(name, err)
				}
			}
		}()
	}
	poll("watchdog", func() error { d.Healthy(); return nil })
	poll("readyz", func() error {
		resp, err := http.Get("http://" + d.HTTPAddr().String() + "/readyz")
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return err
	})
	started.Wait() // both go round while the config is reloaded

	const reloads = 12
	for i := range reloads {
		next := *start
		next.Pipeline.Slice = time.Duration(100+50*(i%3)) * time.Millisecond
		next.Pipeline.MaxFrameAge = time.Duration(2+i%2) * time.Second
		next.Cameras = append(next.Cameras[:0:0], start.Cameras...)
		next.Cameras[0].FPS = float64(2 + i%3)
		res, err := d.Reload(&next)
		if err != nil {
			t.Fatalf("reload %d: %v", i, err)
		}
		if i > 0 && (len(res.Updated) != 1 || len(res.Restarted) != 0) {
			t.Fatalf("reload %d: %+v, want cam0 updated (its fps), nothing restarted", i, res)
		}
		if got := d.Running().Pipeline.Slice; got != next.Pipeline.Slice {
			t.Fatalf("reload %d: slice in force %v, want %v", i, got, next.Pipeline.Slice)
		}
	}
	close(stop)
	wg.Wait()
	for _, name := range []string{"watchdog", "readyz"} {
		n, _ := rounds.Load(name)
		if err, ok := errs.Load(name); ok {
			t.Errorf("%s: %v", name, err)
		}
		t.Logf("%s: %d rounds during %d reloads", name, n, reloads)
	}
	if !d.Healthy() {
		t.Error("unhealthy after the reloads")
	}
}
