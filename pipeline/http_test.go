package pipeline

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/testutil"
)

// TestHTTPNotReady runs a daemon whose only camera is unreachable and checks each endpoint,
// the error answers included: /readyz is 503 with the reason while no camera is online, 200
// once the config has no camera, and 503 "stopping" after Close; the camera's snapshot is
// 503 (nothing analysed), an unknown camera's 404.
func TestHTTPNotReady(t *testing.T) {
	d := startTestDaemon(t, fmt.Sprintf(`
site: test
http: {listen: "127.0.0.1:0"}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1, provider: cpu, threads: 1}]}
cameras:
  - {id: down, url: "rtsp://%s/stream"}
`, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), testutil.FreeAddr(t)))
	base := "http://" + d.HTTPAddr().String()

	for _, tc := range []struct {
		method, path string
		code         int
		ctype        string // a prefix of the Content-Type
		body, has    string // the whole body; a part of it
	}{
		{"GET", "/readyz", 503, "text/plain; charset=utf-8", "no camera online (1 enabled)\n", ""},
		{"GET", "/healthz", 200, "", "ok\n", ""},
		{"GET", "/api/cameras/down/snapshot.jpg", 503, "text/plain; charset=utf-8", "no frame analysed yet\n", ""},
		{"GET", "/api/cameras/nosuch/snapshot.jpg", 404, "text/plain; charset=utf-8", "no such camera\n", ""},
		{"GET", "/api/cameras/down/other", 404, "", "", ""},
		{"POST", "/api/cameras", 405, "", "", ""},
		{"DELETE", "/readyz", 405, "", "", ""},
		{"GET", "/nosuch", 404, "", "", ""},
		{"GET", "/api/cameras", 200, "application/json", "", `"id": "down"`},
		{"GET", "/api/workers", 200, "application/json", "", `"provider": "cpu"`},
		{"GET", "/metrics", 200, "text/plain; version=0.0.4", "", `visiond_camera_state{camera="down",state="online"} 0`},
		{"GET", "/", 200, "text/html; charset=utf-8", "", "<title>visiond</title>"},
	} {
		code, ctype, body := request(t, tc.method, base+tc.path)
		if code != tc.code || !strings.HasPrefix(ctype, tc.ctype) || tc.body != "" && body != tc.body || !strings.Contains(body, tc.has) {
			t.Errorf("%s %s: %d %q %q; want %d %q with %q%q", tc.method, tc.path, code, ctype, body, tc.code, tc.ctype, tc.body, tc.has)
		}
	}

	var cams []CameraStatus
	if _, _, body := request(t, "GET", base+"/api/cameras"); json.Unmarshal([]byte(body), &cams) != nil ||
		len(cams) != 1 || cams[0].State == "online" || cams[0].Analysed != 0 {
		t.Errorf("/api/cameras: %s; want the one camera, not online, nothing analysed", body)
	}
	var ws []infer.WorkerStatus
	if _, _, body := request(t, "GET", base+"/api/workers"); json.Unmarshal([]byte(body), &ws) != nil || len(ws) != 1 || ws[0].PID == 0 {
		t.Errorf("/api/workers: %s; want the one worker with its process", body)
	}

	// With no camera configured the daemon is ready.
	next := *d.Config
	next.Cameras = nil
	if _, err := d.Reload(&next); err != nil {
		t.Fatal(err)
	}
	if code, _, body := request(t, "GET", base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz without cameras: %d %q, want 200 \"ready\"", code, body)
	}
	if code, _, _ := request(t, "GET", base+"/api/cameras/down/snapshot.jpg"); code != 404 {
		t.Errorf("snapshot of the removed camera: %d, want 404", code)
	}

	// Stopping: the endpoint is closed with the daemon, and its handler says why it is not ready.
	d.Close()
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Errorf("the HTTP endpoint still answers after Close")
	}
	rec := httptest.NewRecorder()
	d.handler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || rec.Body.String() != "stopping\n" {
		t.Errorf("/readyz after Close: %d %q, want 503 \"stopping\"", rec.Code, rec.Body.String())
	}

	// Go's profiles only when http.pprof asks for them.
	for _, on := range []bool{false, true} {
		rec := httptest.NewRecorder()
		d.handler(on).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/heap?debug=1", nil))
		if want := map[bool]int{false: 404, true: 200}[on]; rec.Code != want || on && !strings.Contains(rec.Body.String(), "heap profile") {
			t.Errorf("pprof %v: /debug/pprof/heap %d, want %d; %.80q", on, rec.Code, want, rec.Body.String())
		}
	}
}

// request makes one request and returns the status code, content type and body.
func request(t *testing.T, method, url string) (code int, ctype, body string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}
