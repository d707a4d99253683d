package pipeline

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
)

// TestResultsFeed subscribes to a camera's results as the page does: the first message is the
// scene (its zone and line as configured), then a message a frame analysed with the frame's
// capture time, size, detections (boxes as fractions, track ids) and the zone's occupancy and
// the line's counts; frames come in capture order, as fast as the camera is analysed. A camera
// that does not exist is a 404; a camera nobody watches marshals nothing.
func TestResultsFeed(t *testing.T) {
	cams := withZone(sampleCameras(t, 1), "cam0")
	cams = strings.Replace(cams, "- {id: cam0,", "- {id: cam0, lines: [{id: middle, points: [[0.5, 0], [0.5, 1]]}],", 1)
	d := startTestDaemon(t, strings.Replace(lifeConfig(t, cams), `http: {listen: ""}`, `http: {listen: "127.0.0.1:0"}`, 1))
	base := "http://" + d.HTTPAddr().String()
	if resp, err := http.Get(base + "/api/cameras/nosuch/results"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("a camera that does not exist: %v %v, want a 404", resp, err)
	}
	c := d.camera("cam0")
	if c.feed.watched() {
		t.Fatal("the feed watched before anyone asked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+d.HTTPAddr().String()+"/api/cameras/cam0/results", nil)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetReadLimit(1 << 20)
	read := func(v any) {
		t.Helper()
		typ, msg, err := conn.Read(ctx)
		if err != nil || typ != websocket.MessageText || json.Unmarshal(msg, v) != nil {
			t.Fatalf("a message: %v %v %s, want JSON text", err, typ, msg)
		}
	}
	var first struct{ Scene *feedScene }
	read(&first)
	scene := first.Scene
	if scene == nil {
		t.Fatal("the first message is not the scene")
	}
	if len(scene.Zones) != 1 || scene.Zones[0].ID != "lower" || len(scene.Zones[0].Points) != 4 ||
		len(scene.Lines) != 1 || scene.Lines[0].ID != "middle" || scene.Lines[0].Points[0][0] != 0.5 {
		t.Errorf("the scene %+v, want zone lower (4 points) and line middle", scene)
	}
	var last time.Time
	dets, tracked, occupied := 0, 0, false
	for i := range 20 {
		var f struct {
			Event struct {
				Camera     string    `json:"camera"`
				CapturedAt time.Time `json:"captured_at"`
				Frame      struct{ Width, Height int }
				Detections []struct {
					Label   string                       `json:"label"`
					BoxNorm struct{ X, Y, W, H float64 } `json:"box_norm"`
					TrackID uint64                       `json:"track_id"`
				} `json:"detections"`
			} `json:"event"`
			Zones []feedZone `json:"zones"`
			Lines []feedLine `json:"lines"`
		}
		read(&f)
		ev := f.Event
		if ev.Camera != "cam0" || ev.Frame.Width != 768 || ev.Frame.Height != 576 || !ev.CapturedAt.After(last) {
			t.Errorf("frame %d: camera %q %dx%d captured %v after %v: want cam0's 768x576 frames in capture order",
				i, ev.Camera, ev.Frame.Width, ev.Frame.Height, ev.CapturedAt, last)
		}
		last = ev.CapturedAt
		for _, det := range ev.Detections {
			dets++
			if det.TrackID > 0 {
				tracked++
			}
			if b := det.BoxNorm; b.X < 0 || b.Y < 0 || b.W <= 0 || b.H <= 0 || b.X+b.W > 1.001 || b.Y+b.H > 1.001 {
				t.Errorf("frame %d: %s box %+v, want fractions of the frame", i, det.Label, b)
			}
		}
		if len(f.Zones) != 1 || f.Zones[0].ID != "lower" || len(f.Lines) != 1 || f.Lines[0].ID != "middle" {
			t.Errorf("frame %d: zones %+v lines %+v, want lower and middle", i, f.Zones, f.Lines)
		}
		occupied = occupied || (len(f.Zones) == 1 && f.Zones[0].Occupancy > 0)
	}
	if dets == 0 || tracked == 0 || !occupied {
		t.Errorf("20 frames of the sample: %d detections, %d with a track id, zone occupied %v; want people tracked in the lower half", dets, tracked, occupied)
	}
	conn.Close(websocket.StatusNormalClosure, "")
	testutil.WaitFor(t, time.Minute, "the subscriber gone", func() bool { return !c.feed.watched() })
}

// A subscriber that reads nothing misses frames once its queue is full; the sender never
// waits, and the others go on getting every frame.
func TestFeedNeverBlocks(t *testing.T) {
	var f feed
	slow, fast := f.watch(), f.watch()
	for i := range 3 * feedQueue {
		f.send([]byte{byte(i)})
		<-fast
	}
	if len(slow) != feedQueue || f.miss.Load() != 2*feedQueue || f.sent.Load() != 4*feedQueue {
		t.Errorf("slow holds %d, missed %d, sent %d; want %d, %d, %d", len(slow), f.miss.Load(), f.sent.Load(), feedQueue, 2*feedQueue, 4*feedQueue)
	}
	f.unwatch(slow)
	f.unwatch(fast)
	if f.watched() {
		t.Error("watched with no subscriber")
	}
}

// BenchmarkFrameMessage is what a watched camera's result stage spends a frame on its feed: a
// crowded frame's message (20 tracked people, two zones, two lines counted both ways).
// Nothing is marshalled while nobody watches (TestResultsFeed).
func BenchmarkFrameMessage(b *testing.B) {
	ev := &sinks.DetectionEvent{Version: 1, ID: "box.cam0.1234", Camera: "cam0", CapturedAt: time.Now(), PublishedAt: time.Now(),
		Frame: sinks.FrameInfo{Seq: 1234, Width: 1280, Height: 720}, Model: "yolov8n"}
	for i := range 20 {
		x := float64(i * 60)
		ev.Detections = append(ev.Detections, sinks.Detection{Label: "person", Score: 0.8, TrackID: uint64(100 + i),
			Box: sinks.Box{X: x, Y: 200, W: 50, H: 180}, BoxNorm: sinks.Box{X: x / 1280, Y: 200.0 / 720, W: 50.0 / 1280, H: 180.0 / 720}})
	}
	st := &sceneState{settings: &analyticsSettings{Analytics: analytics.Config{
		Lines: []analytics.Line{{ID: "door", Points: analytics.Points{{0.5, 0}, {0.5, 1}}}, {ID: "stairs", Points: analytics.Points{{0, 0.5}, {1, 0.5}}}}}},
		occupancy: []analytics.Occupancy{{Zone: "lobby", Total: 12, ByClass: map[string]int{"person": 12}}, {Zone: "desk", Total: 3, ByClass: map[string]int{"person": 3}}},
		counts: []analytics.Count{{Line: "door", Direction: analytics.In, Class: "person", N: 340}, {Line: "door", Direction: analytics.Out, Class: "person", N: 322},
			{Line: "stairs", Direction: analytics.In, Class: "person", N: 41}}}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(frameMessage(ev, st))
	}
	b.SetBytes(int64(n))
}
