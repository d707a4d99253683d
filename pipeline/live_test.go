package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/visiond/visiond/internal/testutil"
)

// TestLiveView watches a camera over the live WebSocket as the page does: the first message
// names the stream's type, then come an init segment and a keyframe's fragment, and 30 frames of them make a
// fragmented MP4 that ffprobe reads as the camera's 768x576 H.264. The camera's muxer exists
// only while it is watched; a camera that does not exist is a 404, a page of another origin
// a 403.
func TestLiveView(t *testing.T) {
	d := startTestDaemon(t, strings.Replace(lifeConfig(t, sampleCameras(t, 1)), `http: {listen: ""}`, `http: {listen: "127.0.0.1:0"}`, 1))
	base := "ws://" + d.HTTPAddr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, base+"/api/cameras/nosuch/live", nil); err == nil || resp == nil || resp.StatusCode != 404 {
		t.Fatalf("a camera that does not exist: %v, want a 404", err)
	}
	// A page of another site cannot open it with the browser's credentials for this one.
	evil := &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"http://elsewhere.example"}}}
	if _, resp, err := websocket.Dial(ctx, base+"/api/cameras/cam0/live", evil); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Fatalf("from another site's page: %v, want a 403", err)
	}
	conn, _, err := websocket.Dial(ctx, base+"/api/cameras/cam0/live", nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(16 << 20)
	c := d.camera("cam0")
	typ, msg, err := conn.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var head struct {
		MIME  string    `json:"mime"`
		Start time.Time `json:"start"`
	}
	if typ != websocket.MessageText || json.Unmarshal(msg, &head) != nil {
		t.Fatalf("the first message: %v %s, want the stream's type as JSON text", typ, msg)
	}
	if want := `video/mp4; codecs="avc1.64001f"`; head.MIME != want || time.Since(head.Start) < 0 || time.Since(head.Start) > time.Minute {
		t.Errorf("the stream's type %q starting %v, want %q started within the last minute", head.MIME, head.Start, want)
	}
	var data []byte
	for i := 0; i < 31; i++ {
		typ, msg, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if typ != websocket.MessageBinary {
			t.Fatalf("message %d: type %v, want binary", i, typ)
		}
		switch {
		case i == 0 && !bytes.Equal(msg[4:8], []byte("ftyp")):
			t.Fatalf("the first message starts with %q, want an init segment (ftyp)", msg[4:8])
		case i > 0 && !bytes.Equal(msg[4:8], []byte("moof")):
			t.Fatalf("message %d starts with %q, want a fragment (moof)", i, msg[4:8])
		}
		data = append(data, msg...)
	}
	if n, sent := c.liveStats(); n != 1 || sent < uint64(len(data)) {
		t.Errorf("while watched: %d viewers, %d bytes sent; want 1 and at least the %d read", n, sent, len(data))
	}
	m := scrape(t, "http://"+d.HTTPAddr().String()+"/metrics")
	if v := m.get(`visiond_camera_live_viewers{camera="cam0"}`); v != 1 {
		t.Errorf("visiond_camera_live_viewers %v while watched, want 1", v)
	}
	if v := m.get(`visiond_camera_live_bytes_total{camera="cam0"}`); v < float64(len(data)) {
		t.Errorf("visiond_camera_live_bytes_total %v, want at least the %d bytes read", v, len(data))
	}
	file := filepath.Join(t.TempDir(), "live.mp4")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if p := testutil.ProbeVideo(t, file); p.Codec != "h264" || p.Width != 768 || p.Height != 576 || !p.FirstKey || p.Frames != 30 || p.Errors != "" {
		t.Errorf("ffprobe of the live view: %+v, want H.264 768x576 from a keyframe, 30 frames, no errors", p)
	}
	conn.Close(websocket.StatusNormalClosure, "")
	testutil.WaitFor(t, time.Minute, "the viewer gone and the muxer dropped", func() bool {
		n, _ := c.liveStats()
		return n == 0 && c.live.Load() == nil
	})
}

// TestLiveViewPlays opens the status page with ?live=cam0 in headless Chromium, as a person who
// clicks a card's live button: the player's video plays the camera's stream through Media
// Source Extensions (its size is the camera's, its currentTime advances), with no error, and
// the canvas over it draws the boxes of the results matched to the frames on screen.
func TestLiveViewPlays(t *testing.T) {
	chromium := chromiumPath(t)
	cams := withZone(sampleCameras(t, 1), "cam0")
	cams = strings.Replace(cams, "- {id: cam0,", "- {id: cam0, lines: [{id: middle, points: [[0.5, 0], [0.5, 1]]}],", 1)
	d := startTestDaemon(t, strings.Replace(lifeConfig(t, cams), `http: {listen: ""}`, `http: {listen: "127.0.0.1:0"}`, 1))
	testutil.WaitFor(t, 2*time.Minute, "cam0 analysed", func() bool { return d.Cameras()[0].Analysed > 0 })
	// In real time, as a person watches: the results come in real time, and a busy box makes
	// them late; the page is read until it has drawn them, or two minutes passed.
	ctx := browser(t, chromium, 1280, 1000, 3*time.Minute)
	const played = `(() => { const v = document.getElementById("player-video"), d = v.dataset;
		return v.videoWidth > 0 && v.currentTime > 1 && Number(d.overlayFrames || 0) >= 1 && Number(d.overlayBoxes || 0) >= 1 &&
			Number(d.overlayFirstBoxAlpha || 0) >= 128; })()`
	err := chromedp.Do(ctx,
		chromedp.Navigate(fmt.Sprintf("http://%s/?live=cam0", d.HTTPAddr())),
		discard(chromedp.Poll[bool](played, chromedp.WithPollingTimeout(2*time.Minute))))
	v, rerr := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`(() => { const v = document.getElementById("player-video");
		return Object.assign({width: String(v.videoWidth), height: String(v.videoHeight), time: String(v.currentTime)}, v.dataset); })()`))
	if rerr != nil {
		t.Fatalf("reading the player: %v (waiting: %v)", rerr, err)
	}
	t.Logf("the player: %v", v)
	if v["live"] != "cam0" || v["error"] != "" || v["width"] != "768" || v["height"] != "576" {
		t.Errorf("the player %v, want cam0 live at 768x576 without error", v)
	}
	if at, perr := strconv.ParseFloat(v["time"], 64); perr != nil || at <= 1 {
		t.Errorf("the live video's currentTime %q, want past 1 s: it did not play", v["time"])
	}
	// The overlay: results matched to frames on screen by capture time, their boxes drawn
	// (the canvas drawn on the first box's top edge, where its event put it; the stroke's
	// edge is anti-aliased, a zone's fill alone is at alpha 31).
	if err != nil || atoi(v["overlayFrames"]) < 1 || atoi(v["overlayBoxes"]) < 1 || atoi(v["overlayFirstBoxAlpha"]) < 128 {
		t.Errorf("%q analysed frames drawn over the video; the last: %q boxes, its first box's edge of alpha %q (at %q); want boxes drawn where the event says (%v)",
			v["overlayFrames"], v["overlayBoxes"], v["overlayFirstBoxAlpha"], v["overlayFirstBox"], err)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
