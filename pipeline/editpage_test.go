package pipeline

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
)

// screenshotsEnv names a folder where the browser tests leave their screenshots (docs/img's
// come from there); unset, none are taken.
const screenshotsEnv = "VISIOND_SCREENSHOTS"

// TestEditorDrawsAZone is issue 40's item 5 for the editor: in headless Chromium, driven
// through the DevTools protocol as a person uses the page, the status page plays cam0 live
// with the editor open (?live=cam0&edit=1); a zone over the lower half is drawn by four
// clicks on the picture, named, finished and saved; the config file then holds it (its
// comments kept), the daemon reloads it, and a zone event of the drawn zone follows (the
// sample's people walk there).
func TestEditorDrawsAZone(t *testing.T) {
	chromium := chromiumPath(t)
	cams := sampleCameras(t, 1)
	body := fmt.Sprintf("site: test\nhttp: {listen: \"127.0.0.1:0\", auth: {token: %q}, edit: true}\n"+
		"workers: {model: %q, library: %q, pools: [{count: 1}]}\n# the cameras\ncameras:\n%s",
		editorToken, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), cams)
	fd := startFileDaemon(t, body)
	events := subscribeScene(t, fd.NATSURL(), "visiond.test.cam0")
	testutil.WaitFor(t, 2*time.Minute, "cam0 analysed", func() bool { return fd.Cameras()[0].Analysed > 0 })

	// The browser reaches the daemon through a proxy that logs in (the page is the proxy's
	// origin, as it would be the daemon's).
	target, err := url.Parse("http://" + fd.HTTPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+editorToken)
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()

	ctx := browser(t, chromium, 1280, 1400, 3*time.Minute)

	// The picture's place on the page: the video letterboxed into the overlay.
	const pictureJS = `(() => { const o = document.getElementById("player-overlay"), v = document.getElementById("player-video");
		const r = o.getBoundingClientRect(), s = Math.min(r.width / v.videoWidth, r.height / v.videoHeight);
		const pw = v.videoWidth * s, ph = v.videoHeight * s; return [r.left + (r.width - pw) / 2, r.top + (r.height - ph) / 2, pw, ph]; })()`
	err = chromedp.Do(ctx,
		chromedp.Navigate(proxy.URL+"/?live=cam0&edit=1"),
		discard(chromedp.Poll[bool](`document.getElementById("player-video").videoWidth === 768 && !!document.getElementById("editor").dataset.version`,
			chromedp.WithPollingTimeout(time.Minute))),
	)
	if err != nil {
		t.Fatalf("the page: %v", err)
	}
	box, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](pictureJS))
	if err != nil || len(box) != 4 {
		t.Fatalf("the picture's place: %v %v", box, err)
	}
	click := func(x, y float64) chromedp.Action[chromedp.Void] {
		return chromedp.MouseClickXY(box[0]+x*box[2], box[1]+y*box[3])
	}
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("edit-kind"), "zones"),
		chromedp.SendKeys(chromedp.ID("edit-id"), "drawn"),
		chromedp.SendKeys(chromedp.ID("edit-classes"), "person"),
		chromedp.Click(chromedp.ID("edit-new")),
		click(0.02, 0.5), click(0.98, 0.5), click(0.98, 0.98), click(0.02, 0.98),
		chromedp.Click(chromedp.ID("edit-finish")),
		discard(chromedp.Poll[bool](`document.getElementById("editor").dataset.checked === "200" && !document.getElementById("edit-save").disabled`,
			chromedp.WithPollingTimeout(30*time.Second))),
		chromedp.Click(chromedp.ID("edit-save")),
		discard(chromedp.Poll[string](`document.getElementById("editor").dataset.saved || ""`, chromedp.WithPollingTimeout(30*time.Second))),
	)
	if err != nil {
		status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("edit-status").textContent + " | " + document.getElementById("edit-problems").textContent`))
		t.Fatalf("drawing and saving the zone: %v (the editor says %q)", err, status)
	}
	if shot := os.Getenv(screenshotsEnv); shot != "" {
		if png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot()); err == nil {
			testutil.WriteFile(t, filepath.Join(shot, "status-editor.png"), string(png))
		}
	}
	text, err := os.ReadFile(fd.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# the cameras", "id: drawn", "classes: [person]"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("the saved file lacks %q:\n%s", want, text)
		}
	}
	// The points where the clicks fell: the page rounds to 3 decimals, the mouse to whole pixels.
	cfg, err := config.Load(fd.path)
	if err != nil {
		t.Fatal(err)
	}
	clicked := analytics.Points{{0.02, 0.5}, {0.98, 0.5}, {0.98, 0.98}, {0.02, 0.98}}
	if z := cfg.Cameras[0].Zones; len(z) != 1 || len(z[0].Polygon) != 4 {
		t.Fatalf("the saved zones: %+v", z)
	} else {
		for i, p := range z[0].Polygon {
			if math.Abs(p[0]-clicked[i][0]) > 0.005 || math.Abs(p[1]-clicked[i][1]) > 0.005 {
				t.Errorf("point %d saved at %v, clicked at %v", i, p, clicked[i])
			}
		}
	}
	testutil.WaitFor(t, time.Minute, "the drawn zone in force", func() bool {
		z := fd.running.Load().Cameras[0].Zones
		return len(z) == 1 && z[0].ID == "drawn"
	})
	testutil.WaitFor(t, 2*time.Minute, "a zone event of the drawn zone", func() bool {
		events.mu.Lock()
		defer events.mu.Unlock()
		for _, z := range events.zones {
			if z.Zone == "drawn" {
				return true
			}
		}
		return false
	})
}

// browser starts headless Chromium at chromium, driven through the DevTools protocol, in real
// time (no virtual time: the daemon's results come in real time), with a window of w x h; its
// context ends after timeout, and the test's cleanup closes it.
func browser(t *testing.T, chromium string, w, h int, timeout time.Duration) context.Context {
	t.Helper()
	dir := t.TempDir()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Flag("autoplay-policy", "no-user-gesture-required"), chromedp.WindowSize(w, h),
		chromedp.Env("HOME="+dir))...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancel(); cancelCtx(); cancelAlloc() })
	return ctx
}

// discard runs a and drops its value: a step of chromedp.Do.
func discard[T any](a chromedp.Action[T]) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := a(ctx, t)
		return chromedp.Void{}, err
	}
}
