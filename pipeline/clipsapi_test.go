package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
)

// testClip is the info of a clip of camera that starts at start, of the sample stream, with
// a person and a car in it.
func testClip(camera string, start time.Time, seconds int) sinks.ClipInfo {
	start = start.UTC().Truncate(time.Millisecond)
	return sinks.ClipInfo{Name: sinks.ClipName(camera, start), Camera: camera, Start: start,
		End: start.Add(time.Duration(seconds) * time.Second), DurationS: float64(seconds), Codec: "h264", Width: 768, Height: 576,
		Frames: 10 * seconds, Closed: sinks.ClipClosedEnd, Objects: []sinks.ClipObject{
			{TrackID: 3, Label: "person", FirstSeen: start.Add(time.Second), LastSeen: start.Add(2 * time.Second)},
			{TrackID: 4, Label: "car", FirstSeen: start.Add(time.Second), LastSeen: start.Add(3 * time.Second)},
			{TrackID: 5, Label: "person", FirstSeen: start.Add(2 * time.Second), LastSeen: start.Add(3 * time.Second)},
		}}
}

// putClip puts data as clip info into store and waits until the store lists it.
func putClip(t *testing.T, store *sinks.Clips, info sinks.ClipInfo, data []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "clip.mp4")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := store.PutClip(info, nil, path); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "clip "+info.Name+" stored", func() bool {
		clips, err := store.List(context.Background(), info.Camera, 0)
		for _, c := range clips {
			if c.Name == info.Name {
				return true
			}
		}
		if err != nil {
			t.Logf("list: %v", err)
		}
		return false
	})
}

// startClipStore starts an embedded NATS server with JetStream, a publisher and the clip
// store on it, as the daemon does (startNATS); the test's cleanup closes them.
func startClipStore(t testing.TB) *sinks.Clips {
	t.Helper()
	srv := &sinks.Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "test", Logger: testutil.Logger(t)}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	pub := &sinks.Publisher{Server: srv, Prefix: "visiond", Site: "test", Instance: "inst", JetStream: true,
		Stream: sinks.StreamConfig{Name: "visiond-test", MaxAge: time.Hour, MaxBytes: 64 << 20, Duplicates: time.Minute},
		Logger: testutil.Logger(t)}
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close(5 * time.Second) })
	store := &sinks.Clips{Publisher: pub, MaxBytes: 256 << 20, Dir: t.TempDir(), Logger: testutil.Logger(t)}
	if err := store.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(5 * time.Second) })
	return store
}

// get requests path from srv with the request headers hdr ("Name: value") and returns the
// response with its body read.
func get(t *testing.T, srv *httptest.Server, path string, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// The clips API on the daemon's handler, over a real clip store: a camera's clips newest
// first with their info and limit; 404 for a camera neither configured nor with clips, 200
// and [] for one configured without, 200 for the clips of a camera since removed; the MP4
// whole, in ranges (206 with the file's bytes), conditionally; 400 for bad names and limits,
// 404 for a clip not stored, 416 for a range past its end.
func TestClipsAPI(t *testing.T) {
	store := startClipStore(t)
	cfg, err := config.Parse([]byte("cameras:\n  - {id: door, url: rtsp://h/1}\n  - {id: gate, url: rtsp://h/2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Config: cfg, log: testutil.Logger(t), clips: store}
	srv := httptest.NewServer(d.handler(false))
	defer srv.Close()

	mp4 := testutil.SampleMP4(t, 3)
	t0 := time.Now().Add(-time.Hour)
	older, newer, gone := testClip("door", t0, 3), testClip("door", t0.Add(time.Minute), 3), testClip("old", t0, 3)
	for _, c := range []sinks.ClipInfo{older, newer, gone} {
		putClip(t, store, c, mp4)
	}

	list := func(path string) []sinks.ClipInfo {
		t.Helper()
		resp, body := get(t, srv, path)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET %s: %s %q: %s", path, resp.Status, resp.Header.Get("Content-Type"), body)
		}
		var clips []sinks.ClipInfo
		if err := json.Unmarshal(body, &clips); err != nil || clips == nil {
			t.Fatalf("GET %s: %v: %s", path, err, body)
		}
		return clips
	}
	clips := list("/api/cameras/door/clips")
	if len(clips) != 2 || clips[0].Name != newer.Name || clips[1].Name != older.Name {
		t.Fatalf("door's clips %+v, want %s then %s", clips, newer.Name, older.Name)
	}
	want := newer
	want.Bytes = int64(len(mp4))
	if got := clips[0]; !got.Start.Equal(want.Start) || !got.End.Equal(want.End) || got.Bytes != want.Bytes || got.Width != 768 ||
		got.Height != 576 || got.DurationS != 3 || len(got.Objects) != 3 || got.Objects[1].Label != "car" || got.Closed != "end" {
		t.Errorf("door's newest clip %+v, want %+v", got, want)
	}
	if clips := list("/api/cameras/door/clips?limit=1"); len(clips) != 1 || clips[0].Name != newer.Name {
		t.Errorf("limit=1: %+v, want the newest only", clips)
	}
	if clips := list("/api/cameras/gate/clips"); len(clips) != 0 {
		t.Errorf("gate (configured, no clips): %+v", clips)
	}
	if clips := list("/api/cameras/old/clips"); len(clips) != 1 || clips[0].Name != gone.Name {
		t.Errorf("old (removed from the config, its clip kept): %+v", clips)
	}

	// The MP4: whole, in ranges, conditionally.
	path := "/api/clips/" + newer.Name
	resp, body := get(t, srv, path)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "video/mp4" || !bytes.Equal(body, mp4) ||
		resp.Header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("GET %s: %s %q, %d bytes (want %d), Accept-Ranges %q", path, resp.Status, resp.Header.Get("Content-Type"),
			len(body), len(mp4), resp.Header.Get("Accept-Ranges"))
	}
	etag := resp.Header.Get("ETag")
	n := len(mp4)
	for _, tc := range []struct {
		rng       string
		from, end int // the bytes wanted: mp4[from:end]
	}{
		{"bytes=1000-1999", 1000, 2000},
		{"bytes=0-0", 0, 1},
		{fmt.Sprintf("bytes=%d-", n-300), n - 300, n},
		{"bytes=-500", n - 500, n},
		{fmt.Sprintf("bytes=%d-%d", n/2, n+1000), n / 2, n}, // past the end: to the end
	} {
		resp, body := get(t, srv, path, "Range: "+tc.rng)
		wantRange := fmt.Sprintf("bytes %d-%d/%d", tc.from, tc.end-1, n)
		if resp.StatusCode != http.StatusPartialContent || resp.Header.Get("Content-Range") != wantRange ||
			!bytes.Equal(body, mp4[tc.from:tc.end]) || resp.Header.Get("Content-Type") != "video/mp4" {
			t.Errorf("Range %s: %s, Content-Range %q (want %q), %d bytes equal to the file's: %v", tc.rng, resp.Status,
				resp.Header.Get("Content-Range"), wantRange, len(body), bytes.Equal(body, mp4[tc.from:tc.end]))
		}
	}
	if resp, _ := get(t, srv, path, fmt.Sprintf("Range: bytes=%d-", n+10)); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("a range past the end: %s, want 416", resp.Status)
	}
	if resp, body := get(t, srv, path, "Range: bytes=100-199", "If-Range: "+etag); resp.StatusCode != http.StatusPartialContent ||
		!bytes.Equal(body, mp4[100:200]) {
		t.Errorf("If-Range with its ETag %s: %s, want 206", etag, resp.Status)
	}
	if resp, body := get(t, srv, path, "Range: bytes=100-199", `If-Range: "other"`); resp.StatusCode != http.StatusOK || !bytes.Equal(body, mp4) {
		t.Errorf("If-Range with another ETag: %s, want 200 and the whole file", resp.Status)
	}
	if resp, _ := get(t, srv, path, "If-None-Match: "+etag); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match its ETag: %s, want 304", resp.Status)
	}

	// Bad input.
	for _, tc := range []struct {
		path   string
		status int
		msg    string
	}{
		{"/api/cameras/nosuch/clips", http.StatusNotFound, `no camera "nosuch", and no clips of it`},
		{"/api/cameras/door/clips?limit=0", http.StatusBadRequest, `limit "0": want a whole number in 1..200`},
		{"/api/cameras/door/clips?limit=201", http.StatusBadRequest, `limit "201"`},
		{"/api/cameras/door/clips?limit=ten", http.StatusBadRequest, `limit "ten"`},
		{"/api/cameras/door/clips?limit=-1", http.StatusBadRequest, `limit "-1"`},
		{"/api/clips/door/c1.mp4", http.StatusNotFound, `no clip "door/c1.mp4"`},
		{"/api/clips/door/c1.jpg", http.StatusBadRequest, `bad clip name "door/c1.jpg": want <camera>/c<start, unix ms>.mp4`},
		{"/api/clips/door/x1.mp4", http.StatusBadRequest, "bad clip name"},
		{"/api/clips/door/c1.mp4/more", http.StatusBadRequest, "bad clip name"},
		{"/api/clips/c1.mp4", http.StatusBadRequest, "bad clip name"},
		{"/api/clips/do%20or/c1.mp4", http.StatusBadRequest, `bad clip name "do or/c1.mp4"`},
		{"/api/clips/door/c" + strings.Repeat("9", 30) + ".mp4", http.StatusBadRequest, "bad clip name"},
		{"/api/clips/", http.StatusBadRequest, `bad clip name ""`},
	} {
		resp, body := get(t, srv, tc.path)
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.msg) {
			t.Errorf("GET %s: %s %q, want %d with %q", tc.path, resp.Status, body, tc.status, tc.msg)
		}
	}
}

// Without JetStream there is no clip store: both endpoints say so with 503, naming the key.
func TestClipsAPINoStore(t *testing.T) {
	cfg, err := config.Parse([]byte("nats: {jetstream: false}\ncameras:\n  - {id: door, url: rtsp://h/1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Config: cfg, log: testutil.Logger(t)}
	srv := httptest.NewServer(d.handler(false))
	defer srv.Close()
	for _, path := range []string{"/api/cameras/door/clips", "/api/cameras/nosuch/clips", "/api/clips/door/c1.mp4"} {
		resp, body := get(t, srv, path)
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "no clip store") ||
			!strings.Contains(string(body), "nats.jetstream is false") {
			t.Errorf("GET %s: %s %q, want 503 saying there is no clip store without nats.jetstream", path, resp.Status, body)
		}
	}
	// A bad request is still one.
	if resp, _ := get(t, srv, "/api/clips/door/c1.jpg"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad name without a store: %s, want 400", resp.Status)
	}
}

// A clip store the JetStream server refuses (its bucket would reserve more than the server's
// storage) fails the daemon's start when a camera makes clips, naming the store; when none
// does, the daemon runs without it and the clips API says so with 503.
func TestClipStoreRefused(t *testing.T) {
	start := func(clips bool) (*Daemon, error) {
		yaml := fmt.Sprintf(`site: test
http: {listen: "127.0.0.1:0"}
nats: {listen: "127.0.0.1:0"}
clip_store: {max_bytes_mib: %d}
workers: {model: %q, library: %q, pools: [{count: 1, provider: cpu}]}
cameras:
  - {id: door, url: %q, clips: {enabled: %v}}
`, config.MaxClipStoreMiB, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"),
			"rtsp://"+testutil.FreeAddr(t)+"/stream", clips)
		cfg, err := config.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		cfg.StateDir = t.TempDir()
		d := &Daemon{Config: cfg, Logger: testutil.Logger(t), WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
		return d, d.Start()
	}
	if d, err := start(true); err == nil {
		d.Close()
		t.Fatal("the daemon started with a camera making clips and no clip store")
	} else if !strings.Contains(err.Error(), "clip store visiond-test-clips") {
		t.Errorf("start: %v, want the clip store named", err)
	}

	d, err := start(false)
	if err != nil {
		t.Fatalf("no camera makes clips, yet the refused clip store failed the start: %v", err)
	}
	defer d.Close()
	resp, err := http.Get("http://" + d.HTTPAddr().String() + "/api/cameras/door/clips")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "no clip store") {
		t.Errorf("clips of door: %s %q, want 503", resp.Status, body)
	}
}

// BenchmarkClipServe serves a 6 s clip of the sample stream (about 0.9 MB) from the daemon's
// handler over a real clip store: whole, and a seek's range (64 KiB from the middle). After
// the first Open the store serves from its local copy; each request still asks the server for
// the clip's info (Open's GetInfo).
func BenchmarkClipServe(b *testing.B) {
	store := startClipStore(b)
	mp4 := testutil.SampleMP4(b, 6)
	info := testClip("door", time.Now().Add(-time.Minute), 6)
	path := filepath.Join(b.TempDir(), "clip.mp4")
	if err := os.WriteFile(path, mp4, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := store.PutClip(info, nil, path); err != nil {
		b.Fatal(err)
	}
	testutil.WaitFor(b, time.Minute, "clip stored", func() bool { return store.Stats().Stored == 1 })
	cfg, err := config.Parse([]byte("cameras: [{id: door, url: rtsp://h/1}]\n"))
	if err != nil {
		b.Fatal(err)
	}
	d := &Daemon{Config: cfg, log: testutil.Logger(b), clips: store}
	srv := httptest.NewServer(d.handler(false))
	defer srv.Close()
	for _, bc := range []struct{ name, rng string }{
		{"whole", ""},
		{"seek", fmt.Sprintf("bytes=%d-%d", len(mp4)/2, len(mp4)/2+64<<10-1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var n int64
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/clips/"+info.Name, nil)
				if bc.rng != "" {
					req.Header.Set("Range", bc.rng)
				}
				resp, err := srv.Client().Do(req)
				if err != nil {
					b.Fatal(err)
				}
				m, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					b.Fatalf("%s", resp.Status)
				}
				n = m
			}
			b.SetBytes(n)
		})
	}
}
