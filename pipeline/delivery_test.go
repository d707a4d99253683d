package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
)

// The box's embedded server is a leaf node of a hub whose stream sources the box's stream.
// While 4 cameras publish, the uplink is cut for 30 s (longer on a machine too busy to make
// 20 events in that time) and restored: every event the daemon published reaches the hub's
// stream exactly once, none missing, those of the outage too.
func TestDeliveryAcrossUplinkOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("cuts the uplink for 30 s")
	}
	hub := natstest.StartHub(t, t.TempDir())
	link := natstest.StartProxy(t, strings.TrimPrefix(hub.LeafURL, "nats-leaf://"))

	d := startTestDaemon(t, fmt.Sprintf(`
site: box1
http: {listen: ""}
nats:
  listen: "127.0.0.1:0"
  health_interval: 2s
  leaf: {url: %q}
workers: {model: %q, library: %q, pools: [{count: 1}]}
camera_defaults: {fps: 2}
cameras:
%s`, "nats-leaf://"+link.Addr, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"), sampleCameras(t, 4)))

	// A local subscriber on the box records every detection event id the daemon publishes.
	local, err := nats.Connect(d.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	var mu sync.Mutex
	published := map[string]bool{}
	duringCut := 0
	cut := false
	sub, err := local.Subscribe("visiond.box1.*.detections", func(m *nats.Msg) {
		var ev sinks.DetectionEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Errorf("bad event: %v", err)
			return
		}
		mu.Lock()
		published[ev.ID] = true
		if cut {
			duringCut++
		}
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(published)
	}

	hubStream := hub.SourceStream(t, "ALL", "box1", d.StreamName())
	hubMsgs := func() uint64 {
		info, err := hubStream.Info(context.Background())
		if err != nil {
			return 0
		}
		return info.State.Msgs
	}
	testutil.WaitFor(t, 2*time.Minute, "events flowing to the hub", func() bool { return count() >= 8 && hubMsgs() >= 8 })

	link.Cut()
	cutAt := time.Now()
	mu.Lock()
	cut = true
	mu.Unlock()
	// What was on its way arrives, or not: the hub's count then holds still (2 s, or longer
	// on a loaded machine).
	var beforeCut uint64
	testutil.WaitFor(t, time.Minute, "the hub's count to hold still after the cut", func() bool {
		n := hubMsgs()
		time.Sleep(2 * time.Second)
		beforeCut = hubMsgs()
		return beforeCut == n
	})
	// An outage of 30 s with at least 20 events published during it: more than 30 s where
	// the worker is too slow for that.
	testutil.WaitFor(t, 5*time.Minute, "30 s of outage and 20 events published during it", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return time.Since(cutAt) >= 30*time.Second && duringCut >= 20
	})
	atHub := hubMsgs()
	if atHub != beforeCut {
		t.Fatalf("the hub went from %d to %d messages while the link was cut: the cut is not one", beforeCut, atHub)
	}
	mu.Lock()
	cut = false
	n := duringCut
	mu.Unlock()
	outage := time.Since(cutAt).Round(time.Second)
	link.Restore()

	// One more event after the restore, then stop recording; every event recorded must reach
	// the hub exactly once.
	restored := count()
	testutil.WaitFor(t, time.Minute, "one more event after the restore", func() bool { return count() > restored })
	if err := sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := local.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want := make(map[string]bool, len(published))
	for id := range published {
		want[id] = true
	}
	mu.Unlock()

	js := hub.Connect(t)
	var seen map[string]int
	testutil.WaitFor(t, 2*time.Minute, "every event in the hub", func() bool {
		seen = detectionIDs(t, js, "ALL", nil)
		for id := range want {
			if seen[id] == 0 {
				return false
			}
		}
		return true
	})
	seen = detectionIDs(t, js, "ALL", natstest.NewValidator(t, sinks.Schemas())) // and every event matches its schema
	for id, c := range seen {
		if c != 1 {
			t.Errorf("event %s is %d times in the hub's stream", id, c)
		}
	}
	t.Logf("%d events published, %d during the %v outage (the hub held %d messages then); all in the hub once",
		len(want), n, outage, atHub)

	// Health events went the same way: they list the 4 cameras and what each analysed in its
	// 2 s, which may be nothing for a slow worker: counted over them all.
	var health []sinks.HealthEvent
	for _, m := range natstest.StreamMsgs(t, js, "ALL") {
		if m.Subject == "visiond.box1.health" {
			var h sinks.HealthEvent
			if err := json.Unmarshal(m.Data, &h); err != nil {
				t.Fatal(err)
			}
			health = append(health, h)
		}
	}
	if len(health) == 0 {
		t.Fatal("no health event at the hub")
	}
	analysed := uint64(0)
	for _, h := range health {
		for _, c := range h.Cameras {
			analysed += c.Analysed
		}
	}
	if h := health[len(health)-1]; len(h.Cameras) != 4 || analysed == 0 || h.Workers != 1 {
		t.Errorf("last health event %+v; %d frames analysed in all %d", h, analysed, len(health))
	}
}

// detectionIDs counts the detection event ids in stream name; with v, it checks every event
// in the stream against its schema.
func detectionIDs(t *testing.T, js jetstream.JetStream, name string, v *natstest.Validator) map[string]int {
	t.Helper()
	ids := map[string]int{}
	for _, m := range natstest.StreamMsgs(t, js, name) {
		if strings.HasSuffix(m.Subject, ".detections") {
			ids[m.Header.Get(jetstream.MsgIDHeader)]++
		}
		if v != nil {
			if err := v.Validate(sinks.SchemaFile(m.Subject), m.Data); err != nil {
				t.Errorf("%s: %v\n%s", m.Subject, err, m.Data)
			}
		}
	}
	return ids
}
