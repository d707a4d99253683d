package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// editorConfig is a daemon's config file with the editor on (edit) or off, one camera (not
// reachable: the editor needs none online) with a zone and a comment.
func editorConfig(t *testing.T, edit bool) string {
	return fmt.Sprintf(`site: test
http: {listen: "127.0.0.1:0", auth: {token: %q}, edit: %v}
workers: {model: %q, library: %q, pools: [{count: 1}]}
cameras:
  # the front door
  - id: door
    url: rtsp://127.0.0.1:1/nothing
    zones:
      - {id: lower, polygon: [[0, 0.5], [1, 0.5], [1, 1], [0, 1]], min_seconds: 2} # slow walkers
`, editorToken, edit, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"))
}

const editorToken = "0123456789abcdef-editor"

// editorCall makes one request of the editor's API and decodes its JSON answer.
func editorCall(t *testing.T, d *Daemon, method, path, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+d.HTTPAddr().String()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+editorToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(data) > 0 && json.Unmarshal(data, &m) != nil {
		m = map[string]any{"text": string(data)}
	}
	return resp.StatusCode, m
}

// Issue 40, items 3 and 4: the editor reads a camera's scene from the config file, checks an
// edit as check does, and saves it into the file (comments and other settings kept) only
// with the file's version, one save at a time, from the page's origin; the daemon reloads it.
// Bad input (malformed points, unknown fields, another origin, a camera the file does not
// list, a stale version, an edit while another is being saved) is refused, the file
// untouched.
func TestSceneEditor(t *testing.T) {
	fd := startFileDaemon(t, editorConfig(t, true))
	original, err := os.ReadFile(fd.path)
	if err != nil {
		t.Fatal(err)
	}
	untouched := func(after string) {
		t.Helper()
		if now, _ := os.ReadFile(fd.path); !bytes.Equal(now, original) {
			t.Fatalf("the file changed after %s:\n%s", after, now)
		}
	}
	code, scene := editorCall(t, fd.Daemon, "GET", "/api/cameras/door/scene", "", nil)
	if code != 200 || scene["editable"] != true || !strings.Contains(fmt.Sprint(scene["yaml"]), "id: door") {
		t.Fatalf("GET scene: %d %v", code, scene)
	}
	version := scene["version"].(string)
	if zones := scene["scene"].(map[string]any)["zones"].([]any); len(zones) != 1 || zones[0].(map[string]any)["id"] != "lower" {
		t.Errorf("the scene's zones: %v", zones)
	}
	if code, _ := editorCall(t, fd.Daemon, "GET", "/api/cameras/garage/scene", "", nil); code != 404 {
		t.Errorf("GET the scene of a camera the file does not list: %d, want 404", code)
	}

	good := `{"zones": [{"id": "lower", "points": [[0, 0.6], [1, 0.6], [1, 1], [0, 1]]}], "lines": [{"id": "gate", "points": [[0.5, 0], [0.5, 1]], "classes": ["person"]}], "masks": []}`
	flat := `{"zones": [{"id": "lower", "points": [[0, 0.6], [1, 0.6]]}], "lines": [], "masks": []}`
	code, check := editorCall(t, fd.Daemon, "POST", "/api/cameras/door/scene/check", flat, nil)
	if code != 422 || check["ok"] != false || !strings.Contains(fmt.Sprint(check["problems"]), "cameras[0].zones[0].polygon") {
		t.Errorf("check of a zone of two points: %d %v", code, check)
	}
	code, check = editorCall(t, fd.Daemon, "POST", "/api/cameras/door/scene/check", good, nil)
	if code != 200 || check["ok"] != true || !strings.Contains(fmt.Sprint(check["yaml"]), "id: gate") || check["saved"] != false {
		t.Errorf("check of a good edit: %d %v", code, check)
	}
	untouched("the checks")

	match := map[string]string{"If-Match": `"` + version + `"`}
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		code                     int
		says                     string
	}{
		{"no If-Match", "PUT", "/api/cameras/door/scene", good, nil, 428, "If-Match"},
		{"a stale version", "PUT", "/api/cameras/door/scene", good, map[string]string{"If-Match": `"0123456789abcdef"`}, 412, "changed since"},
		{"not JSON", "PUT", "/api/cameras/door/scene", good, map[string]string{"If-Match": version, "Content-Type": "text/plain"}, 415, "application/json"},
		{"another origin", "PUT", "/api/cameras/door/scene", good, map[string]string{"If-Match": version, "Origin": "http://evil.example"}, 403, "origin"},
		{"points not numbers", "PUT", "/api/cameras/door/scene", `{"zones": [{"id": "z", "points": "here"}]}`, match, 400, "the scene"},
		{"a point of three numbers", "PUT", "/api/cameras/door/scene", `{"zones": [{"id": "z", "points": [[0, 0, 1], [1, 0], [1, 1]]}]}`, match, 422, "zones[0]"},
		{"an unknown field", "PUT", "/api/cameras/door/scene", `{"zones": [], "walls": []}`, match, 400, "walls"},
		{"truncated JSON", "PUT", "/api/cameras/door/scene", `{"zones": [`, match, 400, "the scene"},
		{"two values", "PUT", "/api/cameras/door/scene", `{} {}`, match, 400, "more than one"},
		{"an id twice", "PUT", "/api/cameras/door/scene", `{"zones": [{"id": "a", "points": [[0, 0], [1, 0], [1, 1]]}, {"id": "a", "points": [[0, 0], [1, 0], [0, 1]]}]}`, match, 400, "given twice"},
		{"a camera the file does not list", "PUT", "/api/cameras/garage/scene", good, match, 404, "no camera"},
		{"check from another origin", "POST", "/api/cameras/door/scene/check", good, map[string]string{"Origin": "https://evil.example"}, 403, "origin"},
	} {
		code, reply := editorCall(t, fd.Daemon, tc.method, tc.path, tc.body, tc.header)
		if code != tc.code || !strings.Contains(fmt.Sprint(reply), tc.says) {
			t.Errorf("%s: %d %v, want %d saying %q", tc.name, code, reply, tc.code, tc.says)
		}
		untouched(tc.name)
	}
	fd.editMu.Lock() // a save in progress
	code, reply := editorCall(t, fd.Daemon, "PUT", "/api/cameras/door/scene", good, match)
	fd.editMu.Unlock()
	if code != 409 {
		t.Errorf("an edit while another is being saved: %d %v, want 409", code, reply)
	}
	untouched("the edit refused while another was saved")

	code, reply = editorCall(t, fd.Daemon, "PUT", "/api/cameras/door/scene", good, match)
	if code != 200 || reply["saved"] != true || reply["version"] == version {
		t.Fatalf("save: %d %v", code, reply)
	}
	saved, err := os.ReadFile(fd.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# the front door", "# slow walkers", "min_seconds: 2", "polygon: [[0, 0.6], [1, 0.6], [1, 1], [0, 1]]", "id: gate"} {
		if !strings.Contains(string(saved), want) {
			t.Errorf("the saved file lacks %q:\n%s", want, saved)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "the edit reloaded", func() bool {
		cams := fd.running.Load().Cameras
		return len(cams) == 1 && len(cams[0].Lines) == 1 && cams[0].Lines[0].ID == "gate" && cams[0].Zones[0].Polygon[0][1] == 0.6
	})
	if code, reply := editorCall(t, fd.Daemon, "PUT", "/api/cameras/door/scene", good, match); code != 412 {
		t.Errorf("a second save on the version before the first: %d %v, want 412", code, reply)
	}
	req, _ := http.NewRequest("PUT", "http://"+fd.HTTPAddr().String()+"/api/cameras/door/scene", strings.NewReader(good))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("a save without credentials: %v %v, want 401", resp, err)
	} else {
		resp.Body.Close()
	}
}

// Without http.edit the editor checks but saves nothing, and says why.
func TestSceneEditorOff(t *testing.T) {
	fd := startFileDaemon(t, editorConfig(t, false))
	code, scene := editorCall(t, fd.Daemon, "GET", "/api/cameras/door/scene", "", nil)
	if code != 200 || scene["editable"] != false || !strings.Contains(fmt.Sprint(scene["why_not"]), "http.edit") {
		t.Errorf("GET scene: %d %v", code, scene)
	}
	body := `{"zones": [], "lines": [], "masks": []}`
	if code, reply := editorCall(t, fd.Daemon, "POST", "/api/cameras/door/scene/check", body, nil); code != 200 || reply["ok"] != true {
		t.Errorf("check: %d %v", code, reply)
	}
	code, reply := editorCall(t, fd.Daemon, "PUT", "/api/cameras/door/scene", body, map[string]string{"If-Match": fmt.Sprint(scene["version"])})
	if code != 403 || !strings.Contains(fmt.Sprint(reply), "saving is off") {
		t.Errorf("save: %d %v, want 403 saying saving is off", code, reply)
	}
}
