package sinks

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// The size of each new kind of event on realistic values (an 8-character instance, site
// "demo", camera "door", a person in one zone): the JSON, and what the stream stores per event
// (subject, Nats-Msg-Id and the store's record included), read from a fresh stream's bytes
// and messages. The figures go in docs/events.md (go test -run TestEventSizes -v ./sinks);
// the bounds catch a field that grew by mistake.
func TestEventSizes(t *testing.T) {
	const n = 100
	now := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
	kinds := []struct {
		name string
		max  int // JSON bytes
		make func(i int) any
	}{
		{"object new", 680, func(i int) any {
			e := sampleObject(ObjectNew)
			e.Seq, e.TrackID, e.Snapshot, e.ZoneSeconds, e.Zones = 1, uint64(1000+i), "", nil, nil
			return e
		}},
		{"object update", 750, func(i int) any {
			e := sampleObject(ObjectUpdate)
			e.Seq, e.TrackID, e.Snapshot = 2, uint64(1000+i), ""
			delete(e.ZoneSeconds, "lobby")
			return e
		}},
		{"object end", 750, func(i int) any {
			e := sampleObject(ObjectEnd)
			e.Seq, e.TrackID, e.Snapshot = 3, uint64(1000+i), SnapshotName("door", uint64(1000+i), seen)
			e.Zones = nil
			delete(e.ZoneSeconds, "lobby")
			return e
		}},
		{"zone enter", 290, func(i int) any {
			e := sampleZone(ZoneEnter)
			e.TrackID, e.At, e.Since = uint64(1000+i), now, now.Add(-time.Second)
			return e
		}},
		{"zone exit", 300, func(i int) any {
			e := sampleZone(ZoneExit)
			e.TrackID, e.At, e.Since = uint64(1000+i), now, now.Add(-4*time.Second)
			return e
		}},
		{"line", 300, func(i int) any {
			e := sampleLine()
			e.TrackID, e.At = uint64(1000+i), now
			return e
		}},
	}
	var example any // an object end event as published
	for _, k := range kinds {
		s := startServer(t)
		p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream(), Prefix: "visiond", Site: "demo", Instance: "3f9a1c2e"})
		jsonBytes := 0
		for i := range n {
			ev := k.make(i)
			var err error
			switch ev := ev.(type) {
			case *ObjectEvent:
				err = p.PublishObject(ev)
			case *ZoneEvent:
				err = p.PublishZone(ev)
			case *LineEvent:
				err = p.PublishLine(ev)
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(ev) // as published: stamped with its id and site
			if err != nil {
				t.Fatal(err)
			}
			jsonBytes += len(data)
			if k.name == "object end" {
				example = ev
			}
		}
		testutil.WaitFor(t, time.Minute, "acknowledgements", func() bool { return p.Stats().Published == n })
		str, err := natstest.ConnectJS(t, s.ClientURL()).Stream(context.Background(), "visiond-lab")
		if err != nil {
			t.Fatal(err)
		}
		info, err := str.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != n {
			t.Fatalf("%s: stream holds %d events, want %d", k.name, info.State.Msgs, n)
		}
		perEvent := jsonBytes / n
		t.Logf("%-14s JSON %4d bytes/event, stored %4d bytes/event", k.name, perEvent, info.State.Bytes/n)
		if perEvent > k.max {
			t.Errorf("%s: %d JSON bytes per event, over %d", k.name, perEvent, k.max)
		}
	}
	t.Logf("example object end event:\n%s", mustJSON(t, example))
}
