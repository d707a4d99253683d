// Package natstest provides what tests of visiond's delivery need around a box: a hub (a real
// nats-server with JetStream and a leaf node port, in-process) whose stream sources the boxes'
// streams, a hub that is a cluster of nats-server processes (StartHubCluster, cluster.go), a
// TCP proxy to cut and restore the link between a box and the hub, and a validator of events
// against the published JSON Schemas.
package natstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Hub is a NATS server with JetStream in domain "hub" that accepts leaf node links.
type Hub struct {
	*server.Server
	LeafURL string // nats-leaf://host:port for the boxes
}

// StartHub starts a hub storing under dir; the test's cleanup shuts it down.
func StartHub(tb testing.TB, dir string) *Hub {
	tb.Helper()
	h, err := NewHub(dir)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Close)
	return h
}

// NewHub starts a hub storing under dir, for a program rather than a test (visiond-bench's
// soak); Close shuts it down.
func NewHub(dir string) (*Hub, error) {
	leafAddr, err := freeAddr() // nats-server does not tell a random leaf node port
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(leafAddr)
	leafPort, _ := strconv.Atoi(port)
	ns, err := server.NewServer(&server.Options{
		ServerName:      "hub",
		Host:            "127.0.0.1",
		Port:            server.RANDOM_PORT,
		NoSigs:          true,
		JetStream:       true,
		JetStreamDomain: "hub",
		StoreDir:        dir,
		// NoAdvertise: a box must not learn the hub's own address and go round the proxy.
		LeafNode: server.LeafNodeOpts{Host: "127.0.0.1", Port: leafPort, NoAdvertise: true},
	})
	if err != nil {
		return nil, err
	}
	ns.Start()
	h := &Hub{Server: ns, LeafURL: "nats-leaf://" + leafAddr}
	if !ns.ReadyForConnections(time.Minute) {
		h.Close()
		return nil, fmt.Errorf("hub not ready in a minute")
	}
	return h, nil
}

// Close shuts the hub down and waits for it.
func (h *Hub) Close() { h.Shutdown(); h.WaitForShutdown() }

// freeAddr returns a loopback address that nothing listened on a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Connect connects a JetStream client to the hub; the test's cleanup closes it.
func (h *Hub) Connect(tb testing.TB) jetstream.JetStream { return ConnectJS(tb, h.ClientURL()) }

// SourceStream creates the hub stream name that sources stream boxStream of the box in
// JetStream domain boxDomain: how a hub collects every box's events.
func (h *Hub) SourceStream(tb testing.TB, name, boxDomain, boxStream string) jetstream.Stream {
	tb.Helper()
	return sourceStream(tb, h.Connect(tb), name, boxDomain, boxStream, 0)
}

// Proxy forwards TCP connections from its own address to a target, and can cut every
// connection and refuse new ones (an uplink outage) until Restore.
type Proxy struct {
	Addr   string // where to connect instead of the target
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// StartProxy starts a proxy to target (host:port); the test's cleanup stops it.
func StartProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := NewProxy(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// NewProxy starts a proxy to target (host:port), for a program rather than a test; Close
// stops it.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src) // ends when either side closes, or on a cut
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut closes every connection through the proxy and refuses new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore accepts connections again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and waits for its goroutines.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// Validator checks events against JSON Schemas.
type Validator struct {
	schemas map[string]*jsonschema.Schema
}

// NewValidator compiles every schema in files (sinks.Schemas()).
func NewValidator(tb testing.TB, files fs.FS) *Validator {
	tb.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		tb.Fatal(err)
	}
	for _, name := range names {
		data, err := fs.ReadFile(files, name)
		if err != nil {
			tb.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		if err := c.AddResource("https://visiond.dev/schema/v1/"+name, doc); err != nil {
			tb.Fatal(err)
		}
	}
	v := &Validator{schemas: map[string]*jsonschema.Schema{}}
	for _, name := range names {
		if name == "common.json" {
			continue
		}
		s, err := c.Compile("https://visiond.dev/schema/v1/" + name)
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		v.schemas[name] = s
	}
	return v
}

// Validate checks data against the schema in file name (sinks.SchemaFile(subject)).
func (v *Validator) Validate(name string, data []byte) error {
	s := v.schemas[name]
	if s == nil {
		return fmt.Errorf("no schema %q", name)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	if err := s.Validate(doc); err != nil {
		return fmt.Errorf("against %s: %w", name, err)
	}
	return nil
}

// StreamMsgs reads every message of stream name, in order (deleted ones are skipped).
func StreamMsgs(tb testing.TB, js jetstream.JetStream, name string) []*jetstream.RawStreamMsg {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	var msgs []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// ConnectJS connects a JetStream client to url; the test's cleanup closes it.
func ConnectJS(tb testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	tb.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

// ReadStream reads the events of subject stored in stream on the server at url, as many as
// the stream holds of it when called (events published meanwhile are left), decoding each
// into a T.
func ReadStream[T any](tb testing.TB, url, stream, subject string) []T {
	tb.Helper()
	js := ConnectJS(tb, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		tb.Fatal(err)
	}
	want := info.State.Subjects[subject]
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		tb.Fatal(err)
	}
	var out []T
	for uint64(len(out)) < want {
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			tb.Fatalf("after %d of %d events of %s: %v", len(out), want, subject, err)
		}
		var v T
		if err := json.Unmarshal(msg.Data(), &v); err != nil {
			tb.Fatalf("event %d of %s: %v", len(out)+1, subject, err)
		}
		out = append(out, v)
	}
	return out
}
