package pipeline

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/sinks"
)

// A running daemon takes a new config: cameras added, restarted (new URL), rescheduled (new
// fps, same session), removed, and new worker pools swapped in; the untouched camera keeps
// its RTSP session throughout.
func TestDaemonReload(t *testing.T) {
	d, rtsp := startDaemon(t)
	nc, err := nats.Connect(d.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	events := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe("visiond.test.config", events); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 60*time.Second, "east and west analysed", func() bool {
		n := 0
		for _, c := range d.Cameras() {
			if c.Analysed > 0 {
				n++
			}
		}
		return n >= 2
	})
	east := d.camera("east").src
	oldPIDs := pids(d)

	next := *d.Config
	next.Cameras = nil
	for _, c := range d.Config.Cameras {
		switch c.ID {
		case "west":
			c.FPS = 2 // same stream: keeps its session
		case "down":
			c.URL = rtsp.URL("west") // its server comes up: a new session
		}
		next.Cameras = append(next.Cameras, c)
	}
	north := next.Cameras[0]
	north.ID = "north"
	next.Cameras = append(next.Cameras, north)
	next.Workers.Pools = []config.WorkerPool{{Count: 1, Provider: "cpu", Threads: 2}}
	res, err := d.Reload(&next)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"north"}) || !slices.Equal(res.Restarted, []string{"down"}) ||
		!slices.Equal(res.Updated, []string{"west"}) || !slices.Equal(res.Kept, []string{"east"}) || !res.Workers {
		t.Fatalf("reload result %+v", res)
	}
	ev := nextConfigEvent(t, events)
	if ev.Result != "applied" || !slices.Equal(ev.Added, []string{"north"}) || !ev.WorkersReplaced {
		t.Fatalf("config event %+v", ev)
	}
	if got := d.camera("east").src; got != east {
		t.Fatal("east was restarted by a reload that did not change it")
	}
	waitUntil(t, 60*time.Second, "north and the restarted camera analysed, on the new worker", func() bool {
		st := map[string]CameraStatus{}
		for _, c := range d.Cameras() {
			st[c.ID] = c
		}
		return st["north"].Analysed > 0 && st["down"].Analysed > 0 && !slices.Equal(pids(d), oldPIDs)
	})
	if st := east.Status(); st.Reconnects != 0 {
		t.Fatalf("east reconnected %d times during the reload", st.Reconnects)
	}
	for _, c := range d.Cameras() {
		if c.ID == "west" && c.FPS != 2 {
			t.Fatalf("west fps %v after reload, want 2", c.FPS)
		}
	}

	// Removing a camera stops it; a config that cannot be loaded is rejected and counted.
	next2 := next
	next2.Cameras = next.Cameras[:len(next.Cameras)-1]
	if res, err := d.Reload(&next2); err != nil || !slices.Equal(res.Removed, []string{"north"}) {
		t.Fatalf("second reload: %+v, %v", res, err)
	}
	nextConfigEvent(t, events)
	if d.camera("north") != nil {
		t.Fatal("north still there after its removal")
	}
	d.Rejected(errors.New("visiond.yaml: line 3: cameras[0].url: missing"))
	if ev := nextConfigEvent(t, events); ev.Result != "rejected" || ev.Error == "" || d.ReloadFailures() != 1 {
		t.Fatalf("rejected config: event %+v, failures %d", ev, d.ReloadFailures())
	}
	if len(d.Cameras()) != 3 {
		t.Fatalf("cameras after a rejected reload: %d, want the 3 in force", len(d.Cameras()))
	}
}

func pids(d *Daemon) []int {
	var out []int
	for _, w := range d.Workers() {
		out = append(out, w.PID)
	}
	return out
}

func nextConfigEvent(t *testing.T, msgs chan *nats.Msg) sinks.ConfigEvent {
	t.Helper()
	select {
	case m := <-msgs:
		var ev sinks.ConfigEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no config event")
	}
	return sinks.ConfigEvent{}
}
