package pipeline

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/visiond/visiond/live"
)

// The live view (issue 40): GET /api/cameras/{id}/live upgrades to a WebSocket that carries
// the camera's video as it comes, fragmented MP4 for the browser's Media Source Extensions,
// each segment a binary message (package live), each init segment after a text message
// naming its type and the capture time of its media time 0 ({"mime": "video/mp4;
// codecs=\"avc1.64001f\"", "start": "2026-12-06T08:00:00.1Z"}). A camera's muxer exists while it has
// viewers: the first makes it (and waits for the next keyframe), the last one gone drops it,
// so a camera nobody watches muxes nothing.

// liveQueue is how many segments a viewer's queue holds (about 3 s at 10 fps) before the
// viewer misses fragments until the next keyframe.
const liveQueue = 32

// liveWriteTimeout bounds one segment's write to a viewer: a viewer that takes longer is
// gone.
const liveWriteTimeout = 10 * time.Second

// watchLive adds a viewer of camera c's live video, making its muxer if it has none.
func (c *camera) watchLive() *live.Viewer {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	m := c.live.Load()
	if m == nil {
		m = live.NewMuxer()
		c.live.Store(m)
	}
	c.liveViewers++
	return m.Watch(liveQueue)
}

// unwatchLive removes viewer v of camera c; the last one drops the muxer.
func (c *camera) unwatchLive(v *live.Viewer) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	v.Close()
	if c.liveViewers--; c.liveViewers == 0 {
		if m := c.live.Load(); m != nil {
			c.liveSent.Add(m.Stats().Sent)
		}
		c.live.Store(nil)
	}
}

// liveStats are camera c's viewers now and the bytes sent to viewers since it started.
func (c *camera) liveStats() (viewers int, sent uint64) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	sent = c.liveSent.Load()
	if m := c.live.Load(); m != nil {
		sent += m.Stats().Sent
	}
	return c.liveViewers, sent
}

// liveType is the text message that goes before init segment s: its type, and the capture
// time of its media time 0 (the page matches the frame on screen to its results by it).
func liveType(s live.Segment) []byte {
	b, _ := json.Marshal(struct {
		MIME  string    `json:"mime"`
		Start time.Time `json:"start"`
	}{s.MIME, s.Start})
	return b
}

// cameraSocket answers a WebSocket request for camera {id}: the camera and the accepted
// connection, or nils when it has answered (404 for no such camera; Accept refuses another
// origin with 403).
func (d *Daemon) cameraSocket(w http.ResponseWriter, r *http.Request) (*camera, *websocket.Conn) {
	c := d.camera(r.PathValue("id"))
	if c == nil {
		http.Error(w, "no such camera", http.StatusNotFound)
		return nil, nil
	}
	conn, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, nil // Accept has answered
	}
	return c, conn
}

// serveLive is GET /api/cameras/{id}/live: the WebSocket of camera id's live video.
func (d *Daemon) serveLive(w http.ResponseWriter, r *http.Request) {
	c, conn := d.cameraSocket(w, r)
	if conn == nil {
		return
	}
	defer conn.CloseNow()
	v := c.watchLive()
	defer c.unwatchLive(v)
	ctx := conn.CloseRead(r.Context()) // the page sends nothing; its close ends ctx
	for {
		select {
		case <-ctx.Done():
			return
		case s, ok := <-v.C:
			if !ok {
				return
			}
			wctx, cancel := context.WithTimeout(ctx, liveWriteTimeout)
			err := error(nil)
			if s.Init { // the type first: the page opens a Media Source of it
				err = conn.Write(wctx, websocket.MessageText, liveType(s))
			}
			if err == nil {
				err = conn.Write(wctx, websocket.MessageBinary, s.Data)
			}
			cancel()
			if err != nil {
				return
			}
		}
	}
}
