package sinks

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// startServer starts an embedded server with JetStream, stored in a fresh directory.
func startServer(t *testing.T) *Server {
	t.Helper()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func testStream() StreamConfig {
	return StreamConfig{Name: "visiond-lab", MaxAge: time.Hour, MaxBytes: 64 << 20, Duplicates: 2 * time.Minute}
}

// startPublisher starts a JetStream publisher to s; the test's cleanup closes it.
func startPublisher(t *testing.T, p *Publisher) *Publisher {
	t.Helper()
	if p.Prefix == "" {
		p.Prefix, p.Site, p.Instance = "visiond", "lab", "inst"
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(5 * time.Second) })
	return p
}

func detection(camera string, seq uint64) *DetectionEvent {
	return &DetectionEvent{Camera: camera, Frame: FrameInfo{Seq: seq, Width: 640, Height: 480}, Detections: []Detection{}}
}

// detectionID is the id the publisher of startPublisher gives the detection event of frame
// seq of camera.
func detectionID(camera string, seq uint64) string { return fmt.Sprintf("inst.%s.%d", camera, seq) }

// streamMsgs reads every message of stream name, in order.
func streamMsgs(t *testing.T, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	return natstest.StreamMsgs(t, js, name)
}

// streamIDs returns the Nats-Msg-Id of every message of stream name, in order.
func streamIDs(t *testing.T, js jetstream.JetStream, name string) []string {
	t.Helper()
	var ids []string
	for _, m := range streamMsgs(t, js, name) {
		ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
	}
	return ids
}

func TestPublishDetections(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})

	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("visiond.lab.*.detections")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	captured := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	ev := &DetectionEvent{
		Camera:     "door",
		CapturedAt: captured, PublishedAt: captured.Add(80 * time.Millisecond),
		Frame: FrameInfo{Seq: 7, Width: 640, Height: 480}, Model: "yolov8n",
		Detections: []Detection{{Label: "person", ClassID: 0, Score: 0.9,
			Box: Box{X: 64, Y: 48, W: 32, H: 96}, BoxNorm: Box{X: 0.1, Y: 0.1, W: 0.05, H: 0.2}}},
	}
	if err := p.PublishDetections(ev); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "visiond.lab.door.detections" {
		t.Fatalf("subject %q", m.Subject)
	}
	// The wire format is the documented one (docs/events.md): check field names, not just a round trip.
	var wire map[string]any
	if err := json.Unmarshal(m.Data, &wire); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "id", "site", "camera", "captured_at", "published_at", "frame", "model", "detections", "latency_ms"} {
		if _, ok := wire[k]; !ok {
			t.Errorf("event JSON lacks %q: %s", k, m.Data)
		}
	}
	if wire["id"] != "inst.door.7" || wire["version"] != 1.0 || wire["site"] != "lab" || wire["captured_at"] != "2026-11-30T10:00:00Z" {
		t.Errorf("event JSON: id %v captured_at %v", wire["id"], wire["captured_at"])
	}
	det := wire["detections"].([]any)[0].(map[string]any)
	if det["label"] != "person" || det["box"].(map[string]any)["h"] != 96.0 || det["box_norm"].(map[string]any)["x"] != 0.1 {
		t.Errorf("detection JSON: %v", det)
	}
	// It is in the stream, with its id as Nats-Msg-Id, and counted once acknowledged.
	testutil.WaitFor(t, time.Minute, "the acknowledgement", func() bool { return p.Stats().Published == 1 })
	js, _ := jetstream.New(nc)
	if ids := streamIDs(t, js, "visiond-lab"); len(ids) != 1 || ids[0] != "inst.door.7" {
		t.Errorf("stream holds %v, want [inst.door.7]", ids)
	}
	if st := p.Stats(); st.Failed != 0 || st.Pending != 0 || st.Retried != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Every kind of event gets an id and lands in the stream on its subject.
func TestPublishEveryKind(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	now := time.Now().UTC()
	for _, err := range []error{
		p.PublishDetections(detection("door", 1)),
		p.PublishStatus(&StatusEvent{Version: Version, Site: "lab", Camera: "door", State: "online", At: now}),
		p.PublishConfig(&ConfigEvent{Version: Version, Site: "lab", Result: "applied", At: now}),
		p.PublishHealth(&HealthEvent{Version: Version, Site: "lab", At: now, Cameras: []CameraHealth{}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "4 acknowledgements", func() bool { return p.Stats().Published == 4 })
	js := natstest.ConnectJS(t, s.ClientURL())
	ids := streamIDs(t, js, "visiond-lab")
	want := []string{"inst.door.1", "inst.door.status.1", "inst.config.2", "inst.health.3"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("stream ids %v, want %v", ids, want)
	}
}

// A retry of an event the server already holds is dropped by the server, not stored twice.
func TestRetryNeverDuplicates(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	for range 3 {
		if err := p.PublishDetections(detection("door", 1)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "3 acknowledgements", func() bool { return p.Stats().Published == 3 })
	if st := p.Stats(); st.Duplicates != 2 {
		t.Errorf("duplicates %d, want 2", st.Duplicates)
	}
	js := natstest.ConnectJS(t, s.ClientURL())
	if ids := streamIDs(t, js, "visiond-lab"); len(ids) != 1 {
		t.Errorf("stream holds %v, want one event", ids)
	}
}

// An external JetStream server that goes away and comes back on the same address with the
// same store: events made during the outage wait in the outbox and arrive exactly once.
func TestPublishRidesOutServerRestart(t *testing.T) {
	dir := t.TempDir()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "ext"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	p := startPublisher(t, &Publisher{URL: s.ClientURL(), JetStream: true, Stream: testStream(), AckTimeout: time.Second})
	for i := uint64(1); i <= 5; i++ {
		if err := p.PublishDetections(detection("door", i)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "5 acknowledgements", func() bool { return p.Stats().Published == 5 })
	s.Close()
	testutil.WaitFor(t, time.Minute, "publisher to notice the outage", func() bool { return !p.nc.IsConnected() })
	for i := uint64(6); i <= 50; i++ {
		if err := p.PublishDetections(detection("door", i)); err != nil {
			t.Fatalf("publish during outage: %v", err)
		}
	}
	if st := p.Stats(); st.Published != 5 || st.Pending != 45 {
		t.Errorf("during the outage: %+v, want 5 published and 45 pending", st)
	}

	s2 := &Server{Listen: addr, StoreDir: dir, Domain: "ext"}
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	testutil.WaitFor(t, time.Minute, "50 acknowledgements", func() bool { return p.Stats().Published == 50 })
	js := natstest.ConnectJS(t, s2.ClientURL())
	ids := streamIDs(t, js, "visiond-lab")
	checkExactlyOnce(t, ids, "door", 50)
}

// checkExactlyOnce checks that ids holds the ids of frames 1..n of camera exactly once each.
func checkExactlyOnce(t *testing.T, ids []string, camera string, n int) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	for i := 1; i <= n; i++ {
		id := detectionID(camera, uint64(i))
		if seen[id] != 1 {
			t.Errorf("event %s stored %d times, want once", id, seen[id])
		}
		delete(seen, id)
	}
	if len(seen) > 0 {
		t.Errorf("unexpected events: %v", seen)
	}
}

// A full outbox drops the oldest events and says so in a gap event: how many and when.
func TestOutboxFullGapEvent(t *testing.T) {
	dir := t.TempDir()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "ext"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	stamped := detection("door", 100) // as published, its size that of the 30 below
	stamped.Version, stamped.Site, stamped.ID = Version, "lab", detectionID("door", 100)
	size := len(mustJSON(t, stamped))
	p := startPublisher(t, &Publisher{URL: s.ClientURL(), JetStream: true, Stream: testStream(), OutboxBytes: 10 * size})
	s.Close()
	testutil.WaitFor(t, time.Minute, "publisher to notice the outage", func() bool { return !p.nc.IsConnected() })
	for i := uint64(100); i < 130; i++ { // 30 events of one size, room for 10
		if err := p.PublishDetections(detection("door", i)); err != nil {
			t.Fatal(err)
		}
	}
	s2 := &Server{Listen: addr, StoreDir: dir, Domain: "ext"}
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	testutil.WaitFor(t, time.Minute, "the kept events and the gap event", func() bool { st := p.Stats(); return st.Published > 0 && st.Pending == 0 })
	st := p.Stats()
	js := natstest.ConnectJS(t, s2.ClientURL())
	// Gap events (one or more) account for every dropped event; the kept events are the newest
	// 10, in order, and possibly the first, taken from the outbox to be sent just before the
	// outage was noticed.
	var kept []string
	var gapped uint64
	for _, m := range streamMsgs(t, js, "visiond-lab") {
		switch m.Subject {
		case "visiond.lab.gaps":
			var g GapEvent
			if err := json.Unmarshal(m.Data, &g); err != nil {
				t.Fatal(err)
			}
			if g.Reason != "outbox_full" || g.Events == 0 || g.From.IsZero() || g.To.Before(g.From) {
				t.Errorf("gap event %+v", g)
			}
			gapped += g.Events
		case "visiond.lab.door.detections":
			kept = append(kept, m.Header.Get(jetstream.MsgIDHeader))
		}
	}
	if n := uint64(len(kept)); n < 10 || n > 11 || st.Dropped != 30-n || gapped != st.Dropped {
		t.Errorf("kept %d, dropped %d, gap events say %d: want 10 or 11 kept and the rest of 30 dropped and reported", n, st.Dropped, gapped)
	}
	var want []string
	if len(kept) == 11 {
		want = append(want, detectionID("door", 100)) // the one taken before the outage was noticed
	}
	for i := uint64(120); i < 130; i++ {
		want = append(want, detectionID("door", i))
	}
	if strings.Join(kept, " ") != strings.Join(want, " ") {
		t.Errorf("stream holds %v, want %v", kept, want)
	}
}

// A stream at its size limit drops its oldest events and a gap event says which.
func TestStoreFullGapEvent(t *testing.T) {
	s := startServer(t)
	st := testStream()
	st.MaxBytes = 16 << 10
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: st, StoreCheck: 50 * time.Millisecond})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	gaps, err := nc.SubscribeSync("visiond.lab.gaps")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.PublishDetections(detection("door", 1)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the first event stored", func() bool { return p.Stats().Published == 1 })
	// A gap event can only say what a check saw before it was removed: wait for a check that
	// sees the first event, counting the checks by their stream info requests (copies of them
	// come to any subscriber). A request seen here was made after the event was stored, and
	// checks run one after the other: once a second is seen, the first has seen the event.
	checks, err := nc.SubscribeSync("$JS.API.STREAM.INFO." + st.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := checks.NextMsg(time.Minute); err != nil {
			t.Fatalf("no stream check: %v", err)
		}
	}
	for i := uint64(2); i <= 400; i++ {
		if err := p.PublishDetections(detection("door", i)); err != nil {
			t.Fatal(err)
		}
	}
	m, err := gaps.NextMsg(time.Minute)
	if err != nil {
		t.Fatalf("no gap event: %v", err)
	}
	var g GapEvent
	if err := json.Unmarshal(m.Data, &g); err != nil {
		t.Fatal(err)
	}
	if g.Reason != "store_full" || g.Events == 0 || g.FirstSeq != 1 || g.LastSeq != g.FirstSeq+g.Events-1 {
		t.Errorf("gap event %+v", g)
	}
}

// A subscriber that does not keep up is cut off by the server as a slow consumer; the
// publisher goes on, and every event is in the stream.
func TestSlowSubscriberDoesNotStallPublishing(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	slow, err := nc.SubscribeSync("visiond.lab.>") // never read
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.SetPendingLimits(10, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const n = 2000
	for i := uint64(1); i <= n; i++ {
		if err := p.PublishDetections(detection("door", i)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "every acknowledgement", func() bool { return p.Stats().Published == n })
	if dropped, _ := slow.Dropped(); dropped == 0 {
		t.Error("the slow subscriber dropped nothing: the test did not make it slow")
	}
	js, _ := jetstream.New(nc)
	checkExactlyOnce(t, streamIDs(t, js, "visiond-lab"), "door", n)
}

// Close publishes what is waiting before it returns.
func TestCloseDrains(t *testing.T) {
	s := startServer(t)
	p := &Publisher{Server: s, JetStream: true, Stream: testStream(), Prefix: "visiond", Site: "lab", Instance: "inst"}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 500; i++ {
		if err := p.PublishDetections(detection("door", i)); err != nil {
			t.Fatal(err)
		}
	}
	p.Close(time.Minute) // returns once all are published: a minute only for a loaded machine
	if st := p.Stats(); st.Published != 500 || st.Pending != 0 {
		t.Errorf("after Close: %+v, want all 500 published", st)
	}
	if err := p.PublishDetections(detection("door", 501)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("publish after Close: %v", err)
	}
}

// The box's embedded server as a leaf node of a hub whose stream sources the box's stream:
// events published on the box reach the hub's stream, also those published while the link
// was cut, exactly once.
func TestLeafNodeToHub(t *testing.T) {
	hub := natstest.StartHub(t, t.TempDir())
	link := natstest.StartProxy(t, strings.TrimPrefix(hub.LeafURL, "nats-leaf://"))
	box := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab",
		Leaf: Leaf{URL: "nats-leaf://" + link.Addr}}
	if err := box.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(box.Close)
	p := startPublisher(t, &Publisher{Server: box, JetStream: true, Stream: testStream()})
	testutil.WaitFor(t, time.Minute, "the leaf node link", box.LeafConnected)
	hubStream := hub.SourceStream(t, "ALL", "lab", "visiond-lab")

	publish := func(from, to uint64) {
		for i := from; i <= to; i++ {
			if err := p.PublishDetections(detection("door", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(1, 100)
	testutil.WaitFor(t, time.Minute, "the hub to hold the first 100 events", func() bool {
		info, err := hubStream.Info(context.Background())
		return err == nil && info.State.Msgs == 100
	})
	link.Cut()
	testutil.WaitFor(t, time.Minute, "the link to drop", func() bool { return !box.LeafConnected() })
	publish(101, 200)
	testutil.WaitFor(t, time.Minute, "the box to store 200 events", func() bool { return p.Stats().Published == 200 })
	link.Restore()
	testutil.WaitFor(t, time.Minute, "the hub to hold 200 events", func() bool {
		info, err := hubStream.Info(context.Background())
		return err == nil && info.State.Msgs >= 200
	})
	js := hub.Connect(t)
	checkExactlyOnce(t, streamIDs(t, js, "ALL"), "door", 200)
}

func TestPublisherBadURL(t *testing.T) {
	closed := testutil.FreeAddr(t)
	for _, tc := range []struct{ url, want string }{
		{"nats://user:s3cret@" + closed, "no servers available"},
		{"http://" + closed, "http"},
		{"nats://user:s3cret@[::1", "s3cret"},
	} {
		p := &Publisher{URL: tc.url, Prefix: "visiond", Site: "lab", JetStream: true, Stream: testStream()}
		err := p.Start()
		if err == nil {
			p.Close(time.Second)
			t.Fatalf("Start(%q) succeeded", tc.url)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Start(%q): error shows the password: %v", tc.url, err)
		}
		if tc.want != "s3cret" && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%q): error %q, want it to mention %q", tc.url, err, tc.want)
		}
	}
}

// Bad credentials and TLS files are reported at start, naming the config field.
func TestPublisherBadSecurityFiles(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	notPEM := testutil.TempFile(t, "junk.pem", "not a certificate\n")
	notCreds := testutil.TempFile(t, "box.creds", "-----BEGIN NATS USER JWT-----\nxyz\n------END NATS USER JWT------\n")
	notSeed := testutil.TempFile(t, "box.nk", "SUAXXXX\n")
	for _, tc := range []struct {
		name string
		auth Auth
		tls  TLS
		want string
	}{
		{"missing credentials file", Auth{CredentialsFile: dir + "/missing.creds"}, TLS{}, "nats.auth.credentials_file: open"},
		{"not a credentials file", Auth{CredentialsFile: notCreds}, TLS{}, "nats.auth.credentials_file: " + notCreds + " is not a NATS credentials file"},
		{"malformed seed", Auth{NKeySeedFile: notSeed}, TLS{}, "nats.auth.nkey_seed_file: " + notSeed + " holds a malformed user seed"},
		{"missing CA", Auth{}, TLS{CAFile: dir + "/missing.pem"}, "nats.tls.ca_file: open"},
		{"CA not PEM", Auth{}, TLS{CAFile: notPEM}, "nats.tls.ca_file: " + notPEM + " holds no PEM certificate"},
		{"bad client certificate", Auth{}, TLS{CertFile: notPEM, KeyFile: notPEM}, "nats.tls.cert_file/key_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Publisher{URL: s.ClientURL(), Auth: tc.auth, TLS: tc.tls, Prefix: "visiond", Site: "lab", JetStream: true, Stream: testStream()}
			err := p.Start()
			if err == nil {
				p.Close(time.Second)
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %q", err, tc.want)
			}
		})
	}
	// The same files for the leaf node link fail the embedded server's start.
	box := &Server{Listen: "127.0.0.1:0", Leaf: Leaf{URL: "nats-leaf://127.0.0.1:1", Auth: Auth{CredentialsFile: notCreds}}}
	if err := box.Start(); err == nil || !strings.Contains(err.Error(), "nats.leaf.auth.credentials_file") {
		box.Close()
		t.Errorf("leaf with a bad credentials file: %v", err)
	}
}

// A server without JetStream: a clear error that says what to do.
func TestPublisherNoJetStream(t *testing.T) {
	s := &Server{Listen: "127.0.0.1:0"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &Publisher{URL: s.ClientURL(), Prefix: "visiond", Site: "lab", JetStream: true, Stream: testStream()}
	err := p.Start()
	if err == nil {
		p.Close(time.Second)
		t.Fatal("Start succeeded")
	}
	if !strings.Contains(err.Error(), "nats.jetstream: false") {
		t.Errorf("error %q does not say how to use core NATS", err)
	}
	// And with core NATS it works.
	core := startPublisher(t, &Publisher{URL: s.ClientURL()})
	if err := core.PublishDetections(detection("door", 1)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the event sent", func() bool { return core.Stats().Published == 1 })
}

// The embedded server with a user and password: clients without them are refused, the
// daemon's own in-process connection is not.
func TestServerAuth(t *testing.T) {
	s := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab", Auth: Auth{User: "box", Password: "s3cret"}}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	}
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	if err := p.PublishDetections(detection("door", 1)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the acknowledgement", func() bool { return p.Stats().Published == 1 })
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("box", "s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}

func TestServerBadListen(t *testing.T) {
	s := startServer(t)
	taken := strings.TrimPrefix(s.ClientURL(), "nats://")
	for _, listen := range []string{"localhost", "127.0.0.1:port", taken} {
		s := &Server{Listen: listen}
		err := s.Start()
		if err == nil {
			s.Close()
			t.Fatalf("Start(%q) succeeded", listen)
		}
		if !strings.Contains(err.Error(), "embedded NATS server") {
			t.Errorf("Start(%q): %v", listen, err)
		}
	}
}

// The publisher against a third-party server: Debian's nats-server with JetStream, as an
// operator's own server would be configured with nats.url.
func TestPublishToExternalServer(t *testing.T) {
	bin := testutil.LookPath(t, "nats-server")
	addr := testutil.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", port, "--user", "visiond", "--pass", "s3cret", "-js", "-sd", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	testutil.WaitFor(t, time.Minute, "nats-server to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	// Wrong credentials: a clear error at start, password not shown.
	bad := &Publisher{URL: "nats://" + addr, Auth: Auth{User: "visiond", Password: "wrong"}, Prefix: "visiond", Site: "lab"}
	if err := bad.Start(); err == nil || !strings.Contains(err.Error(), "uthorization") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Start with a wrong password: %v; want an authorization error without the password", err)
	}

	p := startPublisher(t, &Publisher{URL: "nats://" + addr, Auth: Auth{User: "visiond", Password: "s3cret"},
		JetStream: true, Stream: testStream()})
	for i := uint64(1); i <= 20; i++ {
		if err := p.PublishDetections(detection("gate", i)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "20 acknowledgements", func() bool { return p.Stats().Published == 20 })
	js := natstest.ConnectJS(t, "nats://visiond:s3cret@"+addr)
	checkExactlyOnce(t, streamIDs(t, js, "visiond-lab"), "gate", 20)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A stream's settings left at zero take their defaults; MaxAge 0 is no age limit.
func TestStreamDefaults(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: StreamConfig{Name: "visiond-lab"}})
	info, err := p.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := info.Config; c.MaxBytes != DefaultStreamMaxBytes || c.Duplicates != DefaultDuplicateWindow || c.MaxAge != 0 {
		t.Errorf("stream: max bytes %d, duplicates %v, max age %v", c.MaxBytes, c.Duplicates, c.MaxAge)
	}
	if p.OutboxBytes != DefaultOutboxBytes {
		t.Errorf("outbox: %d bytes", p.OutboxBytes)
	}
}
