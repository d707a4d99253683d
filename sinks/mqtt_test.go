package sinks

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// mosquittoSub runs Debian's mosquitto_sub (mosquitto-clients) with args until it exits or the
// test ends; the test is skipped when it is not installed.
type mosquittoSub struct {
	mu   sync.Mutex
	out  bytes.Buffer
	done bool
	err  error
}

func startMosquittoSub(t *testing.T, args ...string) *mosquittoSub {
	t.Helper()
	path, err := exec.LookPath("mosquitto_sub")
	if err != nil {
		t.Skip("mosquitto_sub not installed: apt-get install mosquitto-clients (scripts/setup.sh does)")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path, args...)
	m := &mosquittoSub{}
	w := &lockedWriter{mu: &m.mu, buf: &m.out}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		err := cmd.Wait()
		m.mu.Lock()
		m.done, m.err = true, err
		m.mu.Unlock()
	}()
	t.Cleanup(func() { cancel(); <-exited })
	return m
}

// result reports whether mosquitto_sub has exited, with its output and exit error.
func (m *mosquittoSub) result() (bool, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.done, m.out.String(), m.err
}

type lockedWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

// startMQTTServer starts an embedded server with JetStream and an MQTT listener on a free port,
// and a JetStream publisher to it.
func startMQTTServer(t *testing.T, s *Server) (*Publisher, string, string) {
	t.Helper()
	s.Listen, s.MQTT, s.StoreDir, s.Domain = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), "lab"
	s.Logger = testutil.Logger(t)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	host, port, err := net.SplitHostPort(s.MQTTAddr())
	if err != nil || port == "0" {
		t.Fatalf("MQTTAddr() = %q", s.MQTTAddr())
	}
	return startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()}), host, port
}

// receive publishes detection events of camera door until sub has received one and exited,
// and returns what it printed.
func receive(t *testing.T, p *Publisher, sub *mosquittoSub) string {
	t.Helper()
	ev := sampleEvent(t)
	ev.Site, ev.Camera = "lab", "door"
	var out string
	testutil.WaitFor(t, 2*time.Minute, "mosquitto_sub to receive a detection event", func() bool {
		done, o, err := sub.result()
		if done {
			if err != nil {
				t.Fatalf("mosquitto_sub: %v\n%s", err, o)
			}
			out = o
			return true
		}
		ev.Frame.Seq++
		if err := p.PublishDetections(ev); err != nil {
			t.Fatal(err)
		}
		return false
	})
	return out
}

// MQTT clients (Home Assistant, Node-RED) subscribe to the events on the embedded server's MQTT
// listener with the subject's dots as slashes, with the server's credentials: a detection event
// published by the daemon's publisher reaches Debian's mosquitto_sub whole.
func TestMQTTSubscriber(t *testing.T) {
	for _, tc := range []struct {
		name       string
		auth       Auth
		user, pass string
	}{
		{"user and password", Auth{User: "box", Password: "s3cret"}, "box", "s3cret"},
		{"token as the password", Auth{Token: "t0ken"}, "homeassistant", "t0ken"},
		{"no auth", Auth{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, host, port := startMQTTServer(t, &Server{Auth: tc.auth})
			args := []string{"-h", host, "-p", port, "-i", "visiond-test", "-t", "visiond/lab/+/detections", "-C", "1", "-W", "300"}
			if tc.user != "" {
				args = append(args, "-u", tc.user, "-P", tc.pass)
			}
			out := receive(t, p, startMosquittoSub(t, args...))
			if err := natstest.NewValidator(t, Schemas()).Validate("detections.json", []byte(strings.TrimSpace(out))); err != nil {
				t.Fatalf("received over MQTT: %v\n%s", err, out)
			}
			var ev DetectionEvent
			if err := json.Unmarshal([]byte(out), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Camera != "door" || len(ev.Detections) != 3 || ev.Detections[2].Label != "car" || ev.Detections[2].Box.X != 734 {
				t.Errorf("received over MQTT: %s", out)
			}
		})
	}

	// Wrong credentials are refused, as for NATS clients.
	t.Run("wrong password", func(t *testing.T) {
		_, host, port := startMQTTServer(t, &Server{Auth: Auth{User: "box", Password: "s3cret"}})
		for _, creds := range [][]string{{"-u", "box", "-P", "wrong"}, {}} {
			sub := startMosquittoSub(t, append([]string{"-h", host, "-p", port, "-t", "visiond/#", "-C", "1", "-W", "300"}, creds...)...)
			var out string
			var err error
			testutil.WaitFor(t, 2*time.Minute, "mosquitto_sub to be refused", func() bool {
				var done bool
				done, out, err = sub.result()
				return done
			})
			if err == nil || !strings.Contains(out, "not authori") {
				t.Errorf("credentials %q: mosquitto_sub exited with %v, want it refused:\n%s", creds, err, out)
			}
		}
	})
}

// The MQTT listener over TLS: it takes the server's certificate and, with a CA, requires
// client certificates, as the NATS listener does.
func TestMQTTTLS(t *testing.T) {
	pki := newTestPKI(t)
	p, host, port := startMQTTServer(t, &Server{TLS: TLS{CertFile: pki.serverCert, KeyFile: pki.serverKey, CAFile: pki.ca}})
	base := []string{"-h", host, "-p", port, "-t", "visiond/lab/door/detections", "-C", "1", "-W", "300", "--cafile", pki.ca}

	// Without a client certificate: refused.
	sub := startMosquittoSub(t, base...)
	testutil.WaitFor(t, 2*time.Minute, "mosquitto_sub without a client certificate to fail", func() bool {
		done, _, _ := sub.result()
		return done
	})
	if _, out, err := sub.result(); err == nil {
		t.Errorf("without a client certificate: mosquitto_sub succeeded:\n%s", out)
	}

	out := receive(t, p, startMosquittoSub(t, append(base, "--cert", pki.clientCert, "--key", pki.clientKey)...))
	if !strings.Contains(out, `"camera":"door"`) {
		t.Errorf("received over MQTT with TLS: %s", out)
	}
}

// The MQTT listener's address is checked, and it needs JetStream: each mistake is a clear error
// naming the key.
func TestMQTTBadOptions(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		s    Server
		want string
	}{
		{"no port", Server{MQTT: "127.0.0.1", StoreDir: t.TempDir()}, `nats.mqtt.listen "127.0.0.1": address 127.0.0.1: missing port`},
		{"port not a number", Server{MQTT: "127.0.0.1:mqtt", StoreDir: t.TempDir()}, `nats.mqtt.listen "127.0.0.1:mqtt": port "mqtt" is not a number in 0..65535`},
		{"port out of range", Server{MQTT: ":99999", StoreDir: t.TempDir()}, `port "99999" is not a number in 0..65535`},
		{"no JetStream", Server{MQTT: "127.0.0.1:0"}, "nats.mqtt.listen: the MQTT listener needs JetStream (nats.jetstream: true)"},
		{"port in use", Server{MQTT: busy.Addr().String(), StoreDir: t.TempDir()}, "MQTT listener: listen tcp " + busy.Addr().String() + ": bind: address already in use"},
		{"not this host", Server{MQTT: "192.0.2.1:1883", StoreDir: t.TempDir()}, "MQTT listener: listen tcp 192.0.2.1:1883: bind: cannot assign requested address"},
	} {
		s := tc.s
		s.Listen, s.Domain = "127.0.0.1:0", "lab"
		err := s.Start()
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Start() = %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
