package sinks

import (
	"encoding/json"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func startServer(t *testing.T) *Server {
	t.Helper()
	s := &Server{Listen: "127.0.0.1:0"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestPublishDetections(t *testing.T) {
	s := startServer(t)
	p := &Publisher{URL: s.ClientURL(), Prefix: "visiond", Site: "lab"}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)

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
		Version: Version, ID: EventID("abcd", "door", 7), Site: "lab", Camera: "door",
		CapturedAt: captured, PublishedAt: captured.Add(80 * time.Millisecond),
		Frame: FrameInfo{Seq: 7, Width: 640, Height: 480}, Model: "yolov8n",
		Detections: []Detection{{Label: "person", ClassID: 0, Score: 0.9,
			Box: Box{X: 64, Y: 48, W: 32, H: 96}, BoxNorm: Box{X: 0.1, Y: 0.1, W: 0.05, H: 0.2}}},
	}
	if err := p.PublishDetections(ev); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
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
	if wire["id"] != "abcd.door.7" || wire["captured_at"] != "2026-11-30T10:00:00Z" {
		t.Errorf("event JSON: id %v captured_at %v", wire["id"], wire["captured_at"])
	}
	det := wire["detections"].([]any)[0].(map[string]any)
	if det["label"] != "person" || det["box"].(map[string]any)["h"] != 96.0 || det["box_norm"].(map[string]any)["x"] != 0.1 {
		t.Errorf("detection JSON: %v", det)
	}
	if pub, failed := p.Stats(); pub != 1 || failed != 0 {
		t.Errorf("stats: published %d failed %d", pub, failed)
	}
}

// Events published while the server is away wait in the reconnect buffer and are delivered
// when it comes back on the same address.
func TestPublishRidesOutServerRestart(t *testing.T) {
	s := &Server{Listen: "127.0.0.1:0"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	p := &Publisher{URL: s.ClientURL(), Prefix: "visiond", Site: "lab"}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	s.Close()
	waitFor(t, "publisher to notice the outage", func() bool { return !p.nc.IsConnected() })

	for i := uint64(1); i <= 5; i++ {
		if err := p.PublishDetections(&DetectionEvent{Version: Version, ID: EventID("x", "door", i), Camera: "door"}); err != nil {
			t.Fatalf("publish during outage: %v", err)
		}
	}

	s2 := &Server{Listen: addr}
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	nc, err := nats.Connect(s2.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("visiond.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The subscriber must be in place before the publisher reconnects and flushes.
	waitFor(t, "publisher to reconnect", p.nc.IsConnected)
	for i := 1; i <= 5; i++ {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("event %d of 5 after the restart: %v", i, err)
		}
		var ev DetectionEvent
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if want := EventID("x", "door", uint64(i)); ev.ID != want {
			t.Fatalf("event %d after the restart has id %q, want %q (in order, none lost)", i, ev.ID, want)
		}
	}
}

func TestPublisherBadURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct{ url, want string }{
		{"nats://user:s3cret@" + closed, "no servers available"},
		{"http://" + closed, "http"},
		{"nats://user:s3cret@[::1", "s3cret"},
	} {
		p := &Publisher{URL: tc.url, Prefix: "visiond", Site: "lab"}
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The publisher against a third-party server: Debian's nats-server, as an operator's own
// server would be configured with nats.url.
func TestPublishToExternalServer(t *testing.T) {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		t.Fatal("nats-server not installed: run scripts/setup.sh")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(addr.Port), "--user", "visiond", "--pass", "s3cret")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "nats-server to listen", func() bool {
		c, err := net.Dial("tcp", addr.String())
		if err == nil {
			c.Close()
		}
		return err == nil
	})

	// Wrong credentials: a clear error at start, password not shown.
	bad := &Publisher{URL: "nats://visiond:wrong@" + addr.String(), Prefix: "visiond", Site: "lab"}
	if err := bad.Start(); err == nil || !strings.Contains(err.Error(), "uthorization") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Start with a wrong password: %v; want an authorization error without the password", err)
	}

	url := "nats://visiond:s3cret@" + addr.String()
	p := &Publisher{URL: url, Prefix: "visiond", Site: "lab"}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Close(time.Second)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync("visiond.lab.gate.detections")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishDetections(&DetectionEvent{Version: Version, ID: EventID("x", "gate", 1), Camera: "gate"}); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ev DetectionEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil || ev.ID != "x.gate.1" {
		t.Fatalf("received %s (%v)", m.Data, err)
	}
}
