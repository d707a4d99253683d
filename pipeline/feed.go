package pipeline

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/sinks"
)

// The results feed (issue 40, item 2): GET /api/cameras/{id}/results is a WebSocket of what
// the camera's result stage finishes, for the page to draw over the live video, matched to
// the frame on screen by capture time:
//   - the scene first, and again after a reload changed it: the camera's zones, lines and
//     masks as configured (feedScene);
//   - a message a frame analysed (feedFrame): its detection event (every detection the scene
//     kept, with its track id), the zones' occupancy and the lines' counts after it.
// A camera marshals nothing for the feed while nobody watches it. A subscriber whose queue is
// full misses frames, never the stage.

// feedQueue is how many frames a subscriber's queue holds before it misses some.
const feedQueue = 32

// feed is a camera's subscribers to its results.
type feed struct {
	n    atomic.Int32 // subscribers, read by the stage without the lock
	mu   sync.Mutex
	subs map[chan []byte]struct{}
	sent atomic.Uint64 // frames queued to subscribers
	miss atomic.Uint64 // frames subscribers missed, their queue full
}

func (f *feed) watch() chan []byte {
	c := make(chan []byte, feedQueue)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs == nil {
		f.subs = map[chan []byte]struct{}{}
	}
	f.subs[c] = struct{}{}
	f.n.Add(1)
	return c
}

func (f *feed) unwatch(c chan []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.subs[c]; ok {
		delete(f.subs, c)
		f.n.Add(-1)
	}
}

// watched reports whether anyone subscribes: the stage marshals a frame only then.
func (f *feed) watched() bool { return f.n.Load() > 0 }

// send queues msg to every subscriber that has room. It never blocks.
func (f *feed) send(msg []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for c := range f.subs {
		select {
		case c <- msg:
			f.sent.Add(1)
		default:
			f.miss.Add(1)
		}
	}
}

// feedFrame is a feed's message for one analysed frame.
type feedFrame struct {
	Event *sinks.DetectionEvent `json:"event"`
	Zones []feedZone            `json:"zones"`
	Lines []feedLine            `json:"lines"`
}

type feedZone struct {
	ID        string         `json:"id"`
	Occupancy int            `json:"occupancy"`
	ByClass   map[string]int `json:"by_class,omitempty"`
}

type feedLine struct {
	ID  string `json:"id"`
	In  uint64 `json:"in"`
	Out uint64 `json:"out"`
}

// feedScene is a feed's "scene" message: the zones and lines as configured, coordinates as
// fractions of the frame.
type feedScene struct {
	Zones []feedShape `json:"zones"`
	Lines []feedShape `json:"lines"`
	Masks []feedShape `json:"masks"`
}

type feedShape struct {
	ID      string           `json:"id,omitempty"`
	Points  analytics.Points `json:"points"`
	Classes []string         `json:"classes,omitempty"`
}

// frameMessage marshals ev (its detections all those of the frame) with st's counts.
func frameMessage(ev *sinks.DetectionEvent, st *sceneState) []byte {
	m := feedFrame{Event: ev, Zones: []feedZone{}, Lines: []feedLine{}}
	if st != nil {
		for _, o := range st.occupancy {
			m.Zones = append(m.Zones, feedZone{ID: o.Zone, Occupancy: o.Total, ByClass: o.ByClass})
		}
		idx := map[string]int{}
		if st.settings != nil { // every line, counted or not yet
			for _, l := range st.settings.Analytics.Lines {
				idx[l.ID] = len(m.Lines)
				m.Lines = append(m.Lines, feedLine{ID: l.ID})
			}
		}
		for _, c := range st.counts {
			i, ok := idx[c.Line]
			if !ok {
				continue // a line a reload removed
			}
			if c.Direction == analytics.In {
				m.Lines[i].In += c.N
			} else {
				m.Lines[i].Out += c.N
			}
		}
	}
	b, _ := json.Marshal(m) // its types marshal without error
	return b
}

func sceneMessage(s *analyticsSettings) []byte {
	m := feedScene{Zones: []feedShape{}, Lines: []feedShape{}, Masks: []feedShape{}}
	if s != nil {
		for _, z := range s.Analytics.Zones {
			m.Zones = append(m.Zones, feedShape{ID: z.ID, Points: z.Polygon, Classes: z.Classes})
		}
		for _, l := range s.Analytics.Lines {
			m.Lines = append(m.Lines, feedShape{ID: l.ID, Points: l.Points, Classes: l.Classes})
		}
		for _, p := range s.Analytics.Masks {
			m.Masks = append(m.Masks, feedShape{Points: p})
		}
	}
	b, _ := json.Marshal(m)
	return b
}

// serveResults is GET /api/cameras/{id}/results: a WebSocket of camera id's results, each a
// text message: {"scene": ...} first and after a reload changed it, then a frame's message.
// (A WebSocket rather than Server-Sent Events: a browser under test with virtual time waits
// for a pending request to end, which an event stream never does.)
func (d *Daemon) serveResults(w http.ResponseWriter, r *http.Request) {
	c, conn := d.cameraSocket(w, r)
	if conn == nil {
		return
	}
	defer conn.CloseNow()
	sub := c.feed.watch()
	defer c.feed.unwatch(sub)
	ctx := conn.CloseRead(r.Context()) // the page sends nothing; its close ends ctx
	var scene *analyticsSettings
	first := true
	for {
		var msg []byte
		if s := c.analytics(); first || s != scene {
			scene, first = s, false
			msg = append(append([]byte(`{"scene":`), sceneMessage(s)...), '}')
		} else {
			select {
			case <-ctx.Done():
				return
			case msg = <-sub:
			}
		}
		wctx, cancel := context.WithTimeout(ctx, liveWriteTimeout)
		err := conn.Write(wctx, websocket.MessageText, msg)
		cancel()
		if err != nil {
			return
		}
	}
}
