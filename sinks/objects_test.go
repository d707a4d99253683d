package sinks

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// sampleObject is an object event with realistic values: a person walking down and left on a
// 768x576 frame for 12.4 s, in one zone, with unrounded numbers as the tracker makes them.
func sampleObject(typ string) *ObjectEvent {
	ev := &ObjectEvent{Camera: "door", Seq: 3,
		Type: typ, TrackID: 1042, Label: "person", ClassID: 0,
		FirstSeen: t0.Add(-12400*time.Millisecond + 123456), LastSeen: t0.Add(987654),
		Box:     Box{X: 412.53779785, Y: 120.0001, W: 60.2219, H: 170.9337},
		BoxNorm: Box{X: 0.53715338, Y: 0.20833351, W: 0.07841393, H: 0.29676684},
		Score:   0.87123456,
		Best: Best{Box: Box{X: 400.11, Y: 118.93, W: 62.4, H: 175.25}, BoxNorm: Box{X: 0.52097, Y: 0.206476, W: 0.08125, H: 0.304253},
			Score: 0.91234, At: t0.Add(-3 * time.Second)},
		Zones:       []string{"entrance"},
		ZoneSeconds: map[string]float64{"entrance": 4.3499999, "lobby": 2.06},
		Path:        NewPath(Point{X: 0.612345, Y: 0.48123}, Point{X: 0.5754321, Y: 0.5050987}, 768, 576),
		Snapshot:    SnapshotName("door", 1042, seen),
	}
	switch typ {
	case ObjectUpdate:
		ev.Why = []string{WhyZoneEnter}
	case ObjectEnd:
		ev.Reason = EndCameraRemoved
	}
	return ev
}

func sampleZone(typ string) *ZoneEvent {
	ev := &ZoneEvent{Camera: "door", Type: typ, Zone: "entrance", TrackID: 1042,
		Label: "person", At: t0.Add(1234567), Since: t0.Add(-4*time.Second + 7654321),
		Occupancy: map[string]int{"person": 2, "car": 0}}
	if typ != ZoneEnter {
		ev.DwellS = 4.04999
	}
	return ev
}

func sampleLine() *LineEvent {
	return &LineEvent{Camera: "door", Line: "gate", TrackID: 1042, Label: "person",
		Direction: DirectionIn, At: t0.Add(1234567), Point: Point{X: 0.5000001, Y: 0.7312345},
		Counts: map[string]map[string]uint64{DirectionIn: {"person": 17, "car": 0}, DirectionOut: {"person": 12}}}
}

// The new events, as published, land on their subjects with their ids, match their schemas,
// and the schemas catch what breaks them.
func TestObjectEventsMatchSchemas(t *testing.T) {
	v := natstest.NewValidator(t, Schemas())
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	det := detection("door", 9)
	det.CapturedAt, det.PublishedAt, det.Model = t0, t0, "yolov8n"
	det.Detections = []Detection{
		{Label: "person", Score: 0.9, TrackID: 1042, Box: Box{X: 1, Y: 2, W: 3, H: 4}, BoxNorm: Box{X: 0.1, Y: 0.1, W: 0.1, H: 0.1}},
		{Label: "person", Score: 0.2, Box: Box{X: 1, Y: 2, W: 3, H: 4}, BoxNorm: Box{X: 0.1, Y: 0.1, W: 0.1, H: 0.1}},
	}
	newEv, upd, end := sampleObject(ObjectNew), sampleObject(ObjectUpdate), sampleObject(ObjectEnd)
	upd.Seq, end.Seq = 4, 5
	end.Zones, end.Stationary = nil, true
	newEv.Seq, newEv.Snapshot, newEv.ZoneSeconds = 1, "", nil
	enter, exit, loiter := sampleZone(ZoneEnter), sampleZone(ZoneExit), sampleZone(ZoneLoiter)
	exit.Ended, exit.Occupancy = true, nil
	line := sampleLine()
	for _, err := range []error{
		p.PublishDetections(det),
		p.PublishObject(newEv), p.PublishObject(upd), p.PublishObject(end),
		p.PublishZone(enter), p.PublishZone(exit), p.PublishZone(loiter),
		p.PublishLine(line),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "8 acknowledgements", func() bool { return p.Stats().Published == 8 })

	since := t0.Add(-4*time.Second + 7654321).UnixMilli()
	wantIDs := map[string]string{
		"inst.door.9":       "visiond.lab.door.detections",
		"inst.door.t1042.1": "visiond.lab.door.objects",
		"inst.door.t1042.4": "visiond.lab.door.objects",
		"inst.door.t1042.5": "visiond.lab.door.objects",
		"inst.door.gate.t1042." + itoa(t0.Add(1234567).UnixMilli()): "visiond.lab.door.lines",
	}
	for _, typ := range []string{"enter", "exit", "loiter"} {
		wantIDs["inst.door.entrance.t1042."+typ+"."+itoa(since)] = "visiond.lab.door.zones"
	}

	msgs := streamMsgs(t, natstest.ConnectJS(t, s.ClientURL()), "visiond-lab")
	if len(msgs) != len(wantIDs) {
		t.Errorf("stream holds %d events, want %d", len(msgs), len(wantIDs))
	}
	for _, m := range msgs {
		id := m.Header.Get(jetstream.MsgIDHeader)
		if wantIDs[id] != m.Subject {
			t.Errorf("event %s on %s, want it on %q", id, m.Subject, wantIDs[id])
		}
		if err := v.Validate(SchemaFile(m.Subject), m.Data); err != nil {
			t.Errorf("%s: %v\n%s", m.Subject, err, m.Data)
		}
		var ev struct{ ID string }
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev.ID != id {
			t.Errorf("%s: event id %q, Nats-Msg-Id %q", m.Subject, ev.ID, id)
		}
	}

	// The schemas catch what breaks them.
	obj, _ := json.Marshal(upd)
	zone, _ := json.Marshal(exit)
	ln, _ := json.Marshal(line)
	detJSON, _ := json.Marshal(det)
	for _, tc := range []struct{ name, schema, data, want string }{
		{"track_id 0 in a detection", "detections.json", strings.Replace(string(detJSON), `"track_id":1042`, `"track_id":0`, 1), "track_id"},
		{"track_id a string", "detections.json", strings.Replace(string(detJSON), `"track_id":1042`, `"track_id":"1042"`, 1), "track_id"},
		{"unknown object type", "objects.json", strings.Replace(string(obj), `"type":"update"`, `"type":"moved"`, 1), "type"},
		{"update without why", "objects.json", strings.Replace(string(obj), `"why":["zone_enter"],`, "", 1), "why"},
		{"why on new", "objects.json", strings.Replace(string(obj), `"type":"update"`, `"type":"new"`, 1), "why"},
		{"unknown why", "objects.json", strings.Replace(string(obj), `"zone_enter"`, `"teleported"`, 1), "why"},
		{"no best", "objects.json", strings.Replace(string(obj), `"best":`, `"bext":`, 1), "best"},
		{"direction 360", "objects.json", strings.Replace(string(obj), `"direction":154.1`, `"direction":360`, 1), "direction"},
		{"path point off the frame", "objects.json", strings.Replace(string(obj), `"start":{"x":0.6123`, `"start":{"x":1.6123`, 1), "start"},
		{"zone id not a token", "objects.json", strings.Replace(string(obj), `"zones":["entrance"]`, `"zones":["front door"]`, 1), "zones"},
		{"negative zone seconds", "objects.json", strings.Replace(string(obj), `"lobby":2.1`, `"lobby":-2.1`, 1), "zone_seconds"},
		{"zone without track", "zones.json", strings.Replace(string(zone), `"track_id":1042,`, "", 1), "track_id"},
		{"dwell on enter", "zones.json", strings.Replace(string(zone), `"type":"exit"`, `"type":"enter"`, 1), "dwell_s"},
		{"ended on a loiter", "zones.json", strings.Replace(string(zone), `"type":"exit"`, `"type":"loiter"`, 1), "ended"},
		{"occupancy a number", "zones.json", strings.Replace(string(zone), `"occupancy":{}`, `"occupancy":3`, 1), "occupancy"},
		{"sideways", "lines.json", strings.Replace(string(ln), `"direction":"in"`, `"direction":"sideways"`, 1), "direction"},
		{"counts by an unknown direction", "lines.json", strings.Replace(string(ln), `"counts":{`, `"counts":{"up":{"person":1},`, 1), "'up'"},
		{"no counts", "lines.json", strings.Replace(string(ln), `"counts":`, `"kounts":`, 1), "counts"},
	} {
		err := v.Validate(tc.schema, []byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: validation error %v, want one about %q\n%s", tc.name, err, tc.want, tc.data)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// The numbers of the new events carry the precision documented in docs/events.md, and no
// more.
func TestObjectEventPrecision(t *testing.T) {
	data, err := json.Marshal(sampleObject(ObjectUpdate))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"box":{"x":412.5,"y":120,"w":60.3,"h":170.9}`, // corners rounded: 412.5378+60.2219 = 472.7597,
		`"box_norm":{"x":0.5372,"y":0.2083,"w":0.0784,"h":0.2968}`,
		`"score":0.871`,
		`"best":{"box":{"x":400.1,"y":118.9,"w":62.4,"h":175.3},"box_norm":{"x":0.521,"y":0.2065,"w":0.0812,"h":0.3042},"score":0.912,"at":"2026-11-30T09:59:57Z"}`,
		`"first_seen":"2026-11-30T09:59:47.6Z"`,
		`"last_seen":"2026-11-30T10:00:00Z"`, // 0.987654 ms truncated to the millisecond
		`"zones":["entrance"]`,
		`"zone_seconds":{"entrance":4.3,"lobby":2.1}`,
		`"path":{"start":{"x":0.6123,"y":0.4812},"end":{"x":0.5754,"y":0.5051},`,
		`"direction":154.1,"distance":0.0328}`, // down and to the left,
		`"snapshot":"door/t1042-1764600000000.jpg"`,
		`"why":["zone_enter"]`,
		`"track_id":1042`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("object event lacks %s:\n%s", want, data)
		}
	}
	// An object in no zone says so with an empty list, not null; a new event has no why.
	ev := sampleObject(ObjectNew)
	ev.Zones, ev.ZoneSeconds, ev.Snapshot = nil, nil, ""
	data, _ = json.Marshal(ev)
	for _, want := range []string{`"zones":[]`, `"stationary":false`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("new object event lacks %s:\n%s", want, data)
		}
	}
	for _, absent := range []string{"why", "zone_seconds", "snapshot"} {
		if strings.Contains(string(data), `"`+absent+`"`) {
			t.Errorf("new object event has %s:\n%s", absent, data)
		}
	}

	data, _ = json.Marshal(sampleZone(ZoneExit))
	for _, want := range []string{`"dwell_s":4`, `"occupancy":{"person":2}`, `"at":"2026-11-30T10:00:00.001Z"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("zone event lacks %s:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), `"ended"`) {
		t.Errorf("a plain exit says ended:\n%s", data)
	}
	data, _ = json.Marshal(sampleZone(ZoneEnter))
	if strings.Contains(string(data), "dwell_s") {
		t.Errorf("an enter has a dwell:\n%s", data)
	}
	data, _ = json.Marshal(sampleLine())
	if want := `"point":{"x":0.5,"y":0.7312},"counts":{"in":{"person":17},"out":{"person":12}}`; !strings.Contains(string(data), want) {
		t.Errorf("line event lacks %s:\n%s", want, data)
	}
	// A detection of no track has no track_id.
	data, _ = json.Marshal(Detection{Label: "car"})
	if strings.Contains(string(data), "track_id") {
		t.Errorf("untracked detection: %s", data)
	}
	data, _ = json.Marshal(Detection{Label: "car", TrackID: 7})
	if !strings.Contains(string(data), `"track_id":7`) {
		t.Errorf("tracked detection: %s", data)
	}
}

func TestNewPath(t *testing.T) {
	for _, tc := range []struct {
		name       string
		start, end Point
		w, h       int
		dir, dist  float64
	}{
		{"still", Point{0.5, 0.5}, Point{0.5, 0.5}, 640, 480, 0, 0},
		{"right", Point{0.1, 0.5}, Point{0.6, 0.5}, 640, 480, 0, 320.0 / 800},
		{"down", Point{0.5, 0.1}, Point{0.5, 0.6}, 640, 480, 90, 240.0 / 800},
		{"left", Point{0.6, 0.5}, Point{0.1, 0.5}, 640, 480, 180, 320.0 / 800},
		{"up", Point{0.5, 0.6}, Point{0.5, 0.1}, 640, 480, 270, 240.0 / 800},
		// Corner to corner of a wide frame is 45° in normalized units but not as drawn.
		{"diagonal of a 2:1 frame", Point{0, 0}, Point{1, 1}, 200, 100, math.Atan2(100, 200) * 180 / math.Pi, 1},
		{"up and right", Point{0, 1}, Point{1, 0}, 100, 100, 315, 1},
	} {
		p := NewPath(tc.start, tc.end, tc.w, tc.h)
		if math.Abs(p.Direction-tc.dir) > 1e-9 || math.Abs(p.Distance-tc.dist) > 1e-9 {
			t.Errorf("%s: direction %.4f distance %.4f, want %.4f %.4f", tc.name, p.Direction, p.Distance, tc.dir, tc.dist)
		}
	}
	// A heading just under 360 does not round to 360.
	ev := sampleObject(ObjectNew)
	ev.Path = Path{Direction: 359.96}
	data, _ := json.Marshal(ev)
	if !strings.Contains(string(data), `"direction":0,`) {
		t.Errorf("359.96°: %s", data)
	}
}

// Object, zone and line events made while the server is away wait in the outbox and arrive
// exactly once when it returns, counted like detections.
func TestObjectEventsRideOutServerRestart(t *testing.T) {
	dir := t.TempDir()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "ext"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	p := startPublisher(t, &Publisher{URL: s.ClientURL(), JetStream: true, Stream: testStream(), AckTimeout: time.Second})
	publish := func(track uint64) {
		t.Helper()
		obj := sampleObject(ObjectEnd)
		obj.Seq, obj.TrackID = 2, track
		zone, line := sampleZone(ZoneExit), sampleLine()
		zone.TrackID, line.TrackID = track, track
		for _, err := range []error{p.PublishObject(obj), p.PublishZone(zone), p.PublishLine(line)} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(1)
	testutil.WaitFor(t, time.Minute, "3 acknowledgements", func() bool { return p.Stats().Published == 3 })
	s.Close()
	testutil.WaitFor(t, time.Minute, "publisher to notice the outage", func() bool { return !p.nc.IsConnected() })
	for track := uint64(2); track <= 20; track++ {
		publish(track)
	}
	if st := p.Stats(); st.Published != 3 || st.Pending != 57 {
		t.Errorf("during the outage: %+v, want 3 published and 57 pending", st)
	}
	s2 := &Server{Listen: addr, StoreDir: dir, Domain: "ext"}
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Close)
	testutil.WaitFor(t, time.Minute, "60 acknowledgements", func() bool { return p.Stats().Published == 60 })
	ids := streamIDs(t, natstest.ConnectJS(t, s2.ClientURL()), "visiond-lab")
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	if len(ids) != 60 || len(seen) != 60 {
		t.Errorf("stream holds %d events, %d distinct; want 60 once each", len(ids), len(seen))
	}
	if st := p.Stats(); st.Dropped != 0 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

// BenchmarkEncodeObjectEvents is the cost of encoding each new kind of event with its
// rounding.
func BenchmarkEncodeObjectEvents(b *testing.B) {
	for _, c := range []struct {
		name string
		v    any
	}{{"object", sampleObject(ObjectUpdate)}, {"zone", sampleZone(ZoneExit)}, {"line", sampleLine()}} {
		b.Run(c.name, func(b *testing.B) {
			var n int
			for b.Loop() {
				data, err := json.Marshal(c.v)
				if err != nil {
					b.Fatal(err)
				}
				n = len(data)
			}
			b.ReportMetric(float64(n), "bytes/event")
		})
	}
}
