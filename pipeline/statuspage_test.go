package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// skipBrowserEnv opts out of the browser test where chromium cannot be installed; without
// it a missing chromium fails the test (scripts/setup.sh installs it).
const skipBrowserEnv = "VISIOND_SKIP_BROWSER_TEST"

// TestStatusPage loads the status page of a real daemon (cameras east and west on the sample
// stream, down unreachable, one CPU worker process) in headless Chromium, through a proxy
// that reloads the daemon's config while the page is open: west is removed and north added.
// The DOM Chromium ends with must show east online with a non-zero fps and its snapshot
// loaded, down offline with its reason and the snapshot placeholder, north's new card, no
// card for west (whose snapshot the page had requested before), and the worker. Chromium
// also takes a screenshot, checked for the page's layout colours (and copied to
// $TMPDIR/statuspage.png for a look).
func TestStatusPage(t *testing.T) {
	chromium := chromiumPath(t)
	d, rtsp := startDaemon(t)
	testutil.WaitFor(t, 2*time.Minute, "east and west online with an achieved fps, the worker's memory sampled", func() bool {
		n := 0
		for _, c := range d.Cameras() {
			if (c.ID == "east" || c.ID == "west") && c.State == "online" && c.FPSAchieved > 0 && c.Analysed >= 3 {
				n++
			}
		}
		ws := d.Workers() // sampled every 5 s: the memory table's workers row shows it
		return n == 2 && len(ws) == 1 && ws[0].RSSBytes > 0
	})

	// The new config: west removed, north added (the east stream, a second session).
	next := *d.Config
	next.Cameras = nil
	for _, cc := range d.Config.Cameras {
		switch cc.ID {
		case "west":
			continue
		case "east":
			north := cc
			north.ID, north.URL = "north", rtsp.URL("east")
			next.Cameras = append(next.Cameras, cc, north)
		default:
			next.Cameras = append(next.Cameras, cc)
		}
	}

	// The proxy passes everything to the daemon, reloads it before answering the page's
	// third poll of /api/cameras, and notes the snapshot requests.
	target, err := url.Parse("http://" + d.HTTPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var (
		mu        sync.Mutex
		polls     int
		snapshots = map[string]int{} // camera -> snapshot requests before the reload
		reloadErr error
		reloaded  bool
		eastFPS   []float64 // east's fps_achieved in each /api/cameras answer
		requests  []string  // for the log of a failed test
	)
	start := time.Now()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			mu.Lock()
			requests = append(requests, fmt.Sprintf("%6.3fs %s %d", time.Since(start).Seconds(), r.URL, sw.code))
			mu.Unlock()
		}()
		mu.Lock()
		switch {
		case r.URL.Path == "/api/cameras":
			polls++
			if polls == 3 {
				_, reloadErr = d.Reload(&next)
				reloaded = true
			}
		case strings.HasSuffix(r.URL.Path, "/snapshot.jpg") && !reloaded:
			snapshots[strings.Split(r.URL.Path, "/")[3]]++
		}
		mu.Unlock()
		if r.URL.Path == "/api/cameras" {
			sw.body = &bytes.Buffer{}
		}
		rp.ServeHTTP(sw, r)
		if sw.body != nil {
			var cams []CameraStatus
			if err := json.Unmarshal(sw.body.Bytes(), &cams); err != nil {
				t.Errorf("/api/cameras: %v", err)
			}
			mu.Lock()
			for _, c := range cams {
				if c.ID == "east" {
					eastFPS = append(eastFPS, c.FPSAchieved)
				}
			}
			mu.Unlock()
		}
	}))
	defer proxy.Close()
	defer func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("requests the page made:\n%s", strings.Join(requests, "\n"))
			mu.Unlock()
		}
	}()

	shot := filepath.Join(t.TempDir(), "statuspage.png")
	dom := runChromium(t, chromium, "--virtual-time-budget=6000", "--window-size=1280,1000", "--screenshot="+shot,
		"--dump-dom", proxy.URL+"/")
	mu.Lock()
	if !reloaded || reloadErr != nil {
		t.Fatalf("the page polled /api/cameras %d times (the reload was due at the 3rd); reload error: %v", polls, reloadErr)
	}
	if snapshots["west"] == 0 {
		t.Errorf("the page did not request west's snapshot before the reload (snapshot requests: %v): its card was never shown", snapshots)
	}
	mu.Unlock()

	cards, ids := parseCards(t, dom)
	if !slices.Equal(ids, []string{"east", "north", "down"}) {
		t.Fatalf("cards %v after the reload, want [east north down] (the config's order, west gone); DOM:\n%s", ids, dom)
	}
	east := cards["east"]
	if east.attr["data-state"] != "online" || east.text("state") != "online" {
		t.Errorf("east: state %q shown as %q, want online", east.attr["data-state"], east.text("state"))
	}
	// The achieved fps shown is one the API gave (positive on a fast machine; 0 where the
	// worker is too slow to have analysed a frame of east in the last few seconds).
	fps, err := strconv.ParseFloat(east.attr["data-fps"], 64)
	mu.Lock()
	fromAPI := slices.Contains(eastFPS, fps)
	mu.Unlock()
	if err != nil || !fromAPI {
		t.Errorf("east: fps %q, want one of the API's %v", east.attr["data-fps"], eastFPS)
	}
	shown, configured, _ := strings.Cut(east.text("fps"), " / ")
	if v, err := strconv.ParseFloat(shown, 64); err != nil || math.Abs(v-fps) > 0.051 || configured != "5" {
		t.Errorf("east: fps shown as %q, want %.1f (to one decimal), then the target 5", east.text("fps"), fps)
	}
	if east.attr["data-snapshot"] != "loaded" || east.attr["data-snapshot-width"] != "640" {
		t.Errorf("east: snapshot %q (width %q), want loaded with the 640-pixel picture",
			east.attr["data-snapshot"], east.attr["data-snapshot-width"])
	}
	if v := east.text("latency"); !strings.HasSuffix(v, " ms") || v == "0.0 ms" {
		t.Errorf("east: latency shown as %q, want a positive number of ms", v)
	}
	if v := east.text("reason"); v != "" {
		t.Errorf("east: reason %q shown while online", v)
	}

	down := cards["down"]
	if st := down.attr["data-state"]; st != "offline" || down.text("state") != "offline" {
		t.Errorf("down: state %q shown as %q, want offline", st, down.text("state"))
	}
	if down.text("reason") == "" || strings.Contains(dom, "hunter2") {
		t.Errorf("down: reason %q, want the connection error, without the password", down.text("reason"))
	}
	if down.attr["data-snapshot"] != "missing" || down.text("placeholder") == "" {
		t.Errorf("down: snapshot %q, placeholder %q: want the placeholder (the endpoint answers 503)",
			down.attr["data-snapshot"], down.text("placeholder"))
	}
	if down.text("analysed") != "0" {
		t.Errorf("down: analysed shown as %q, want 0", down.text("analysed"))
	}

	w := regexp.MustCompile(`(?s)<tr data-worker="0">(.*?)</tr>`).FindStringSubmatch(dom)
	if w == nil || !regexp.MustCompile(`<td data-state="(idle|busy)">(idle|busy)</td><td>cpu</td>`).MatchString(w[1]) {
		t.Errorf("workers table: no row for worker 0, idle or busy on the cpu provider; DOM:\n%s", dom)
	}
	// Memory: the owners, the workers and the total, in MiB, and the budget (startDaemon's
	// memory_limit_mib: 4096).
	for _, owner := range []string{"go", "frame_buffers", "code", "workers", "total"} {
		re := regexp.MustCompile(`<tr data-owner="` + owner + `"><td>[^<]+</td><td class="num">(\d+) MiB</td></tr>`)
		if mm := re.FindStringSubmatch(dom); mm == nil || mm[1] == "0" {
			t.Errorf("memory table: no row for %s with a size in MiB", owner)
		}
	}
	if !regexp.MustCompile(`<tr data-owner="nats_store_caches"><td>NATS store caches</td><td class="num">(?:\d+ MiB|–)</td></tr>`).MatchString(dom) {
		t.Errorf("memory table: no row for the NATS store caches")
	}
	if !regexp.MustCompile(`<p id="memory-budget" class="budget" data-over="(?:true|false)">budget 4096 MiB from memory_limit_mib · Go limit \d+ MiB · \d+ samples over</p>`).MatchString(dom) {
		t.Errorf("memory budget not shown as 4096 MiB from memory_limit_mib, with the Go limit; DOM:\n%s", dom)
	}
	if !strings.Contains(dom, `data-conn="live"`) {
		t.Errorf("the page does not show its connection live")
	}

	// The screenshot, of the same page at the same moment: the layout's colours must be there
	// (the stylesheet applied): the dark header band, and the green of an online badge.
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(os.TempDir(), "statuspage.png"), data, 0o644); err == nil {
		t.Logf("screenshot: %s", filepath.Join(os.TempDir(), "statuspage.png"))
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1000 {
		t.Fatalf("screenshot is %v, want 1280x1000", b)
	}
	header := img.(interface {
		SubImage(image.Rectangle) image.Image
	}).SubImage(image.Rect(0, 0, 1280, 30))
	if n := countNear(header, rgb(0x1d2330), 8); n < 1280*30/2 {
		t.Errorf("screenshot: %d header pixels of the header colour, want most: the stylesheet did not apply", n)
	}
	if n := countNear(img, rgb(0x1a7f37), 8); n < 100 {
		t.Errorf("screenshot: %d pixels of the online colour, want an online badge and border", n)
	}
}

// TestStatusPageServed checks the page's files and headers over plain HTTP: the page links
// only its own script and stylesheet, which are served with their types.
func TestStatusPageServed(t *testing.T) {
	d := &Daemon{log: testutil.Logger(t)}
	srv := httptest.NewServer(d.handler(false))
	defer srv.Close()
	for _, tc := range []struct {
		path, ctype, contains string
	}{
		{"/", "text/html; charset=utf-8", `<script src="ui/status.js" defer></script>`},
		{"/ui/status.js", "text/javascript; charset=utf-8", `"api/cameras"`},
		{"/ui/status.css", "text/css; charset=utf-8", ".card"},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.ctype || !strings.Contains(body.String(), tc.contains) {
			t.Errorf("GET %s: %s, %q, body has %q: %v; want 200, %q", tc.path, resp.Status, resp.Header.Get("Content-Type"),
				tc.contains, strings.Contains(body.String(), tc.contains), tc.ctype)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", tc.path, csp)
		}
	}
	// Nothing from elsewhere: no absolute URL in the page's files.
	for _, name := range []string{"ui/index.html", "ui/status.js", "ui/status.css"} {
		data, err := uiFiles.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).Find(data); m != nil {
			t.Errorf("%s refers to %q: the page must not load anything from elsewhere", name, m)
		}
	}
	for _, path := range []string{"/ui/", "/ui/nosuch.js", "/index.html", "/nosuch"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, resp.Status)
		}
	}
}

type statusWriter struct {
	http.ResponseWriter
	code int
	body *bytes.Buffer // if not nil, gets a copy of the body
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.body != nil {
		w.body.Write(p)
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// chromiumPath returns Debian's chromium, or fails the test when it is missing (scripts/setup.sh
// installs it) unless VISIOND_SKIP_BROWSER_TEST=1 opts out.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv(skipBrowserEnv) == "1" {
			t.Skipf("chromium not found; skipped as %s=1 asks", skipBrowserEnv)
		}
		t.Fatalf("chromium not found (%v): run scripts/setup.sh, or set %s=1 to skip this test", err, skipBrowserEnv)
	}
	return p
}

// runChromium runs headless Chromium with a fresh profile and returns its standard output.
// Chromium starts helper processes: it runs in a process group of its own, which is killed
// when it ends or times out.
func runChromium(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hung browser; it takes 3-15 s, more on a loaded machine
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--hide-scrollbars", "--user-data-dir=" + filepath.Join(dir, "profile"),
	}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left behind
	}
	t.Logf("chromium %s: %v", args[len(args)-2], time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// card is a camera card of the dumped DOM: its attributes and its inner HTML.
type card struct {
	attr  map[string]string
	inner string
}

// text returns the unescaped text of the card's first element of class cls (elements
// without children).
func (c card) text(cls string) string {
	m := regexp.MustCompile(`<[a-z0-9]+ class="` + regexp.QuoteMeta(cls) + `"[^>]*>([^<]*)<`).FindStringSubmatch(c.inner)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// parseCards returns the camera cards in the dumped DOM by camera id, and the ids in page
// order.
func parseCards(t *testing.T, dom string) (map[string]card, []string) {
	t.Helper()
	cardRE := regexp.MustCompile(`(?s)<article class="card"([^>]*)>(.*?)</article>`)
	attrRE := regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
	cards := map[string]card{}
	var ids []string
	for _, m := range cardRE.FindAllStringSubmatch(dom, -1) {
		c := card{attr: map[string]string{}, inner: m[2]}
		for _, a := range attrRE.FindAllStringSubmatch(m[1], -1) {
			c.attr[a[1]] = html.UnescapeString(a[2])
		}
		id := c.attr["data-camera"]
		if id == "" {
			t.Fatalf("a card without data-camera: %s", m[0])
		}
		cards[id] = c
		ids = append(ids, id)
	}
	return cards, ids
}

func rgb(v uint32) color.RGBA {
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}
