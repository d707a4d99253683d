package sinks

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// Every kind of event, as published, matches its JSON Schema; events that break the schema
// are caught by it.
func TestEventsMatchSchemas(t *testing.T) {
	v := natstest.NewValidator(t, Schemas())
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	now := time.Now().UTC()
	det := detection("door", 3)
	det.CapturedAt, det.PublishedAt, det.Model = now.Add(-80*time.Millisecond), now, "yolov8n"
	det.Detections = []Detection{{Label: "person", ClassID: 0, Score: 0.87,
		Box: Box{X: 412.5, Y: 120, W: 60.2, H: 170.9}, BoxNorm: Box{X: 0.537, Y: 0.208, W: 0.078, H: 0.297}}}
	det.LatencyMS = Latency{Queue: 35.2, Pre: 0.7, Infer: 41, Post: 0.4, Total: 80.3}
	for _, err := range []error{
		p.PublishDetections(det),
		p.PublishStatus(NewStatusEvent("door", "offline", "online", "stalled: no frame for 10s", now, 0)),
		p.PublishStatus(NewStatusEvent("door", "online", "offline", "", now, 12430500*time.Microsecond)),
		p.PublishConfig(NewConfigEvent(now, ConfigChanges{}, errors.New("line 3: cameras[0].url: missing"))),
		p.PublishConfig(NewConfigEvent(now, ConfigChanges{Added: []string{"yard"}, WorkersReplaced: true}, nil)),
		p.PublishHealth(NewHealthEvent(now, 10*time.Second, time.Minute,
			[]CameraHealth{{Camera: "door", State: "online", FPS: 5, Decoded: 250, Analysed: 49, Dropped: 1}}, 2)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	gap := p.gapMessage(NewGapEvent(GapStoreFull, 12, now.Add(-time.Hour), now, 1, 12, now))
	p.out.put(gap)
	testutil.WaitFor(t, time.Minute, "7 acknowledgements", func() bool { return p.Stats().Published == 7 })

	msgs := streamMsgs(t, natstest.ConnectJS(t, s.ClientURL()), "visiond-lab")
	kinds := map[string]int{}
	for _, m := range msgs {
		name := SchemaFile(m.Subject)
		kinds[name]++
		if err := v.Validate(name, m.Data); err != nil {
			t.Errorf("%s: %v\n%s", m.Subject, err, m.Data)
		}
		var id struct{ ID string }
		if err := json.Unmarshal(m.Data, &id); err != nil || id.ID != m.Header.Get(jetstream.MsgIDHeader) {
			t.Errorf("%s: event id %q, Nats-Msg-Id %q", m.Subject, id.ID, m.Header.Get(jetstream.MsgIDHeader))
		}
	}
	if len(kinds) != 5 {
		t.Errorf("kinds of events in the stream: %v, want all 5", kinds)
	}

	// The schemas catch what breaks them.
	good, _ := json.Marshal(det)
	for _, tc := range []struct{ name, schema, data, want string }{
		{"no camera", "detections.json", strings.Replace(string(good), `"camera":"door",`, "", 1), "camera"},
		{"score over 1", "detections.json", strings.Replace(string(good), `"score":0.87`, `"score":1.5`, 1), "score"},
		{"bad time", "detections.json", strings.Replace(string(good), `"captured_at":"`, `"captured_at":"yesterday`, 1), "captured_at"},
		{"unknown state", "status.json", `{"version":1,"id":"x","site":"lab","camera":"door","state":"sleeping","previous":"","at":"2026-11-30T10:00:00Z"}`, "state"},
		{"version 2", "config.json", `{"version":2,"id":"x","site":"lab","result":"applied","at":"2026-11-30T10:00:00Z"}`, "version"},
	} {
		err := v.Validate(tc.schema, []byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: validation error %v, want one about %q", tc.name, err, tc.want)
		}
	}
}

// An ObjectClip event, as published, has its id and matches the object schema; the schema
// refuses a clip event without its clip, a clip on another type and a malformed clip.
func TestObjectClipEventSchema(t *testing.T) {
	v := natstest.NewValidator(t, Schemas())
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	start := t0.Add(-17 * time.Second)
	info := ClipInfo{Name: ClipName("door", start), Camera: "door", Start: start, End: t0.Add(5 * time.Second), DurationS: 22}
	ev := sampleObject(ObjectClip)
	ev.Seq, ev.Clip = 0, &ClipRef{}
	*ev.Clip = info.Ref()
	if err := p.PublishObject(ev); err != nil {
		t.Fatal(err)
	}
	noClip := sampleObject(ObjectClip)
	noClip.Seq = 0
	if err := p.PublishObject(noClip); err == nil || !strings.Contains(err.Error(), "no clip") {
		t.Errorf("publishing a clip event without its clip: %v", err)
	}
	testutil.WaitFor(t, time.Minute, "the clip event acknowledged", func() bool { return p.Stats().Published == 1 })
	msgs := streamMsgs(t, natstest.ConnectJS(t, s.ClientURL()), "visiond-lab")
	if len(msgs) != 1 {
		t.Fatalf("stream holds %d events, want the clip event", len(msgs))
	}
	m := msgs[0]
	wantID := "inst.door.t1042.clip." + itoa(start.UnixMilli())
	if id := m.Header.Get(jetstream.MsgIDHeader); id != wantID || m.Subject != "visiond.lab.door.objects" {
		t.Errorf("clip event %s on %s, want %s on visiond.lab.door.objects", id, m.Subject, wantID)
	}
	if err := v.Validate("objects.json", m.Data); err != nil {
		t.Errorf("%v\n%s", err, m.Data)
	}
	var got ObjectEvent
	if err := json.Unmarshal(m.Data, &got); err != nil || got.Clip == nil || *got.Clip != *ev.Clip {
		t.Errorf("clip event's clip %+v (%v), want %+v", got.Clip, err, ev.Clip)
	}

	good := string(m.Data)
	upd, _ := json.Marshal(sampleObject(ObjectUpdate))
	clipJSON := string(mustJSON(t, ev.Clip))
	for _, tc := range []struct{ name, data, want string }{
		{"clip event without clip", strings.Replace(good, `"clip":`+clipJSON, `"klip":`+clipJSON, 1), "clip"},
		{"clip on an update", strings.Replace(string(upd), `"zones":`, `"clip":`+clipJSON+`,"zones":`, 1), "clip"},
		{"clip without name", strings.Replace(good, `"name":"door/c`, `"nom":"door/c`, 1), "name"},
		{"clip name not a clip's", strings.Replace(good, `.mp4"`, `.jpg"`, 1), "name"},
		{"negative duration", strings.Replace(good, `"duration_s":22`, `"duration_s":-1`, 1), "duration_s"},
		{"bad end", strings.Replace(good, `"end":"`, `"end":"soon`, 1), "end"},
		{"unknown clip field", strings.Replace(good, `"duration_s":22`, `"duration_s":22,"frames":220`, 1), "frames"},
	} {
		if tc.data == good {
			t.Fatalf("%s: the replacement did not apply to %s", tc.name, good)
		}
		err := v.Validate("objects.json", []byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: validation error %v, want one about %q\n%s", tc.name, err, tc.want, tc.data)
		}
	}
}
