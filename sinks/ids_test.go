package sinks

import (
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// Every kind of event arrives with the id of the rule (ids.go), the version and the site,
// stamped by the publisher whether the caller set others or none; the caller's event holds
// them too.
func TestPublisherStampsIDs(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	since, at := itoa(sampleZone(ZoneEnter).Since.UnixMilli()), itoa(sampleLine().At.UnixMilli())

	detMine, detNone := detection("door", 7), detection("door", 8)
	detMine.ID, detMine.Version, detMine.Site = "mine", 9, "elsewhere"
	objMine, objNone := sampleObject(ObjectNew), sampleObject(ObjectUpdate)
	objMine.ID, objMine.Seq, objMine.Why = "k3x9a2.door.t1042.3", 3, nil // today's form, another run's instance
	objNone.Seq = 4
	zoneMine, zoneNone := sampleZone(ZoneEnter), sampleZone(ZoneExit)
	zoneMine.ID, zoneMine.Site = "mine", "elsewhere"
	lineMine, lineNone := sampleLine(), sampleLine()
	lineMine.ID, lineNone.TrackID = "mine", 7
	statusMine := &StatusEvent{ID: "mine", Version: 9, Camera: "door", State: "online", At: now}
	statusNone := &StatusEvent{Camera: "yard", State: "connecting", At: now}
	configMine := &ConfigEvent{ID: "mine", Site: "elsewhere", Result: "applied", At: now}
	configNone := &ConfigEvent{Result: "rejected", Error: "line 1: site: missing", At: now}
	healthMine := &HealthEvent{ID: "mine", Instance: "another", At: now, Cameras: []CameraHealth{}}
	healthNone := &HealthEvent{At: now, Cameras: []CameraHealth{}}
	gap := &GapEvent{ID: "mine", Site: "elsewhere", Reason: "store_full", Events: 1, From: now, To: now, FirstSeq: 1, LastSeq: 1}

	for _, tc := range []struct {
		name    string
		publish func() error
		ev      any // the caller's event, stamped
		want    string
	}{
		{"detection, id set", func() error { return p.PublishDetections(detMine) }, detMine, "inst.door.7"},
		{"detection", func() error { return p.PublishDetections(detNone) }, detNone, "inst.door.8"},
		{"object, id set", func() error { return p.PublishObject(objMine) }, objMine, "inst.door.t1042.3"},
		{"object", func() error { return p.PublishObject(objNone) }, objNone, "inst.door.t1042.4"},
		{"zone, id set", func() error { return p.PublishZone(zoneMine) }, zoneMine, "inst.door.entrance.t1042.enter." + since},
		{"zone", func() error { return p.PublishZone(zoneNone) }, zoneNone, "inst.door.entrance.t1042.exit." + since},
		{"line, id set", func() error { return p.PublishLine(lineMine) }, lineMine, "inst.door.gate.t1042." + at},
		{"line", func() error { return p.PublishLine(lineNone) }, lineNone, "inst.door.gate.t7." + at},
		{"status, id set", func() error { return p.PublishStatus(statusMine) }, statusMine, "inst.door.status.1"},
		{"status", func() error { return p.PublishStatus(statusNone) }, statusNone, "inst.yard.status.2"},
		{"config, id set", func() error { return p.PublishConfig(configMine) }, configMine, "inst.config.3"},
		{"config", func() error { return p.PublishConfig(configNone) }, configNone, "inst.config.4"},
		{"health, id set", func() error { return p.PublishHealth(healthMine) }, healthMine, "inst.health.5"},
		{"health", func() error { return p.PublishHealth(healthNone) }, healthNone, "inst.health.6"},
		{"gap", func() error { p.out.put(p.gapMessage(gap)); return nil }, gap, "inst.gap.7"},
	} {
		if err := tc.publish(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got struct {
			Version  int
			ID, Site string
		}
		if err := json.Unmarshal(mustJSON(t, tc.ev), &got); err != nil {
			t.Fatal(err)
		}
		if got.ID != tc.want || got.Version != Version || got.Site != "lab" {
			t.Errorf("%s: the caller's event holds id %q, version %d, site %q after publishing; want %q, %d, lab",
				tc.name, got.ID, got.Version, got.Site, tc.want, Version)
		}
	}
	if healthMine.Instance != "inst" || healthNone.Instance != "inst" {
		t.Errorf("health events' instance %q and %q, want inst", healthMine.Instance, healthNone.Instance)
	}

	testutil.WaitFor(t, time.Minute, "15 acknowledgements", func() bool { return p.Stats().Published == 15 })
	want := []string{"inst.door.7", "inst.door.8", "inst.door.t1042.3", "inst.door.t1042.4",
		"inst.door.entrance.t1042.enter." + since, "inst.door.entrance.t1042.exit." + since,
		"inst.door.gate.t1042." + at, "inst.door.gate.t7." + at,
		"inst.door.status.1", "inst.yard.status.2", "inst.config.3", "inst.config.4",
		"inst.health.5", "inst.health.6", "inst.gap.7"}
	msgs := streamMsgs(t, natstest.ConnectJS(t, s.ClientURL()), "visiond-lab")
	if len(msgs) != len(want) {
		t.Fatalf("stream holds %d events, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		var ev struct {
			Version            int
			ID, Site, Instance string
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != want[i] || ev.ID != want[i] || ev.Version != Version || ev.Site != "lab" {
			t.Errorf("%s: Nats-Msg-Id %q, id %q, version %d, site %q; want id %q, version %d, site lab",
				m.Subject, id, ev.ID, ev.Version, ev.Site, want[i], Version)
		}
		if SchemaFile(m.Subject) == "health.json" && ev.Instance != "inst" {
			t.Errorf("%s: instance %q, want inst", ev.ID, ev.Instance)
		}
	}
}

// The same event made again (a retry of the daemon's, or again after a reconnect; its caller
// may have set another id) carries the same id, and JetStream stores it once. An object event
// without its number is refused: its id would be another event's.
func TestSameEventStoredOnce(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	noSeq := sampleObject(ObjectNew)
	noSeq.Seq = 0
	if err := p.PublishObject(noSeq); err == nil || p.Stats().Failed != 1 {
		t.Errorf("object event without Seq: error %v, stats %+v; want an error, counted as failed", err, p.Stats())
	}
	for i := range 2 {
		det, obj, zone, line := detection("door", 1), sampleObject(ObjectEnd), sampleZone(ZoneEnter), sampleLine()
		det.PublishedAt = time.Now() // made again: another publishing time, the same frame
		if i == 1 {
			det.ID, obj.ID, zone.ID, line.ID = "again", "again", "again", "again"
		}
		for _, err := range []error{p.PublishDetections(det), p.PublishObject(obj), p.PublishZone(zone), p.PublishLine(line)} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.WaitFor(t, time.Minute, "8 acknowledgements", func() bool { return p.Stats().Published == 8 })
	if st := p.Stats(); st.Duplicates != 4 {
		t.Errorf("stats %+v, want 4 duplicates", st)
	}
	if ids := streamIDs(t, natstest.ConnectJS(t, s.ClientURL()), "visiond-lab"); len(ids) != 4 {
		t.Errorf("stream holds %v, want 4 events", ids)
	}
}

// A publisher without an Instance makes a random one at Start, stamps it on its events and
// tells it; each run has its own.
func TestPublisherInstance(t *testing.T) {
	s := startServer(t)
	hex8 := regexp.MustCompile(`^[0-9a-f]{8}$`)
	var seen []string
	for range 2 {
		p := startPublisher(t, &Publisher{Server: s, Prefix: "visiond", Site: "lab"})
		inst := p.InstanceID()
		if !hex8.MatchString(inst) || p.Instance != inst {
			t.Fatalf("instance %q, field %q: want the same 8 hex digits", inst, p.Instance)
		}
		ev := &HealthEvent{At: time.Now(), Cameras: []CameraHealth{}}
		if err := p.PublishHealth(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Instance != inst || ev.ID != inst+".health.1" {
			t.Errorf("health event: instance %q, id %q; want %s and %s.health.1", ev.Instance, ev.ID, inst, inst)
		}
		seen = append(seen, inst)
	}
	if seen[0] == seen[1] {
		t.Errorf("two runs, one instance %q", seen[0])
	}
}
