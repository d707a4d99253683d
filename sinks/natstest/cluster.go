package natstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
)

// HubCluster is a hub made of n nats-server processes (Debian's /usr/bin/nats-server, as
// scripts/setup.sh installs it) clustered with routes to each other, JetStream on in domain
// "hub", each with a leaf node port, a client port and a monitoring port on loopback. The
// test's cleanup kills every process still running and waits for it.
type HubCluster struct {
	Servers []*ClusterServer
}

// ClusterServer is one server of a HubCluster: a process that can be killed (SIGKILL) and
// started again with the same configuration and store.
type ClusterServer struct {
	Name       string // server_name, hub-1 ... hub-n
	ClientURL  string // nats://127.0.0.1:port
	LeafURL    string // nats-leaf://127.0.0.1:port, for boxes
	MonitorURL string // http://127.0.0.1:port, the monitoring endpoints (/leafz, /healthz)
	Dir        string // holds server.conf, the store (store/) and server.log

	bin     string
	cluster *HubCluster

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the running process has exited and been waited for
	killing bool          // set before this process is killed on purpose
	err     error         // the first exit that was not asked for, with the log's tail
}

// clusterName names the hub's cluster (cluster.name) in its servers' configuration.
const clusterName = "hub"

// StartHubCluster starts n servers (n >= 1), each storing under its own folder of a
// temporary directory of the test, and waits until every one reports healthy (JetStream's
// meta group has a leader and the server is current with it). A server that exits before it
// is ready fails the test with the tail of its log.
func StartHubCluster(tb testing.TB, n int) *HubCluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("StartHubCluster: %d servers; want at least 1", n)
	}
	bin := testutil.LookPath(tb, "nats-server")
	root := tb.TempDir()
	type ports struct{ client, cluster, leaf, http string }
	// nats-server's config file names fixed ports: take free ones now (the routes of each
	// server name the others' cluster ports before they start), all different.
	addrs := freeAddrs(tb, 4*n)
	ps := make([]ports, n)
	for i := range ps {
		ps[i] = ports{addrs[4*i], addrs[4*i+1], addrs[4*i+2], addrs[4*i+3]}
	}
	c := &HubCluster{}
	tb.Cleanup(c.stop(tb))
	for i := range ps {
		var routes []string
		for j := range ps {
			if j != i {
				routes = append(routes, fmt.Sprintf("%q", "nats-route://"+ps[j].cluster))
			}
		}
		s := &ClusterServer{
			Name:       fmt.Sprintf("hub-%d", i+1),
			ClientURL:  "nats://" + ps[i].client,
			LeafURL:    "nats-leaf://" + ps[i].leaf,
			MonitorURL: "http://" + ps[i].http,
			Dir:        filepath.Join(root, fmt.Sprintf("hub-%d", i+1)),
			bin:        bin,
			cluster:    c,
		}
		if err := os.MkdirAll(filepath.Join(s.Dir, "store"), 0o750); err != nil {
			tb.Fatal(err)
		}
		conf := fmt.Sprintf(`# hub-%[1]d of a %[2]d-server hub (natstest.StartHubCluster)
server_name: %[3]s
listen: %[4]q
http: %[5]q
jetstream {
  domain: hub
  store_dir: %[6]q
}
cluster {
  name: %[7]s
  listen: %[8]q
  routes: [%[9]s]
}
leafnodes {
  listen: %[10]q
  no_advertise: true
}
`, i+1, n, s.Name, ps[i].client, ps[i].http, filepath.Join(s.Dir, "store"), clusterName,
			ps[i].cluster, strings.Join(routes, ", "), ps[i].leaf)
		testutil.WriteFile(tb, s.Conf(), conf)
		c.Servers = append(c.Servers, s)
	}
	for _, s := range c.Servers {
		if err := s.start(); err != nil {
			tb.Fatal(err)
		}
	}
	for _, s := range c.Servers {
		s.WaitReady(tb, 2*time.Minute)
	}
	c.WaitMeta(tb, 2*time.Minute)
	return c
}

// WaitMeta waits until a running server leads JetStream's meta group with every other
// running server as a current replica: until then a stream of several replicas may find no
// peers to be placed on. It fails the test when a server exits meanwhile.
func (c *HubCluster) WaitMeta(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	testutil.WaitFor(tb, timeout, "a JetStream meta leader with every running server current", func() bool {
		if err := c.Err(); err != nil {
			tb.Fatal(err)
		}
		running := map[string]bool{}
		for _, s := range c.Servers {
			if s.Running() {
				running[s.Name] = true
			}
		}
		for _, s := range c.Servers {
			if !running[s.Name] {
				continue
			}
			m, err := s.meta()
			if err != nil || m.Leader != s.Name {
				continue
			}
			current := 1 // the leader
			for _, r := range m.Replicas {
				if running[r.Name] && r.Current && !r.Offline {
					current++
				}
			}
			return current == len(running)
		}
		return false
	})
}

// metaCluster is the meta_cluster part of /jsz: the leader lists the other servers.
type metaCluster struct {
	Leader   string `json:"leader"`
	Replicas []struct {
		Name    string `json:"name"`
		Current bool   `json:"current"`
		Offline bool   `json:"offline"`
	} `json:"replicas"`
}

// meta reads the server's view of JetStream's meta group from its /jsz.
func (s *ClusterServer) meta() (*metaCluster, error) {
	var z struct {
		Meta *metaCluster `json:"meta_cluster"`
	}
	if err := s.monitor("/jsz", &z); err != nil {
		return nil, err
	}
	if z.Meta == nil {
		return nil, fmt.Errorf("%s /jsz: no meta_cluster", s.Name)
	}
	return z.Meta, nil
}

// freeAddrs returns n different loopback addresses that nothing listened on a moment ago: all
// are listened on at once, then closed (one at a time, the kernel may give a port twice).
func freeAddrs(tb testing.TB, n int) []string {
	tb.Helper()
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// Conf is the path of the server's configuration file.
func (s *ClusterServer) Conf() string { return filepath.Join(s.Dir, "server.conf") }

// Log is the path of the server's log (stdout and stderr of every run, appended).
func (s *ClusterServer) Log() string { return filepath.Join(s.Dir, "server.log") }

// start starts the server's process; a goroutine waits for it and records an exit that Kill
// did not ask for.
func (s *ClusterServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("nats-server %s: already running", s.Name)
	}
	log, err := os.OpenFile(s.Log(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "---- natstest: starting %s %s at %s\n", s.bin, s.Conf(), time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(s.bin, "-c", s.Conf())
	cmd.Stdout, cmd.Stderr = log, log
	// Killed with the test binary, should it die before its cleanup (a test's timeout panic).
	// Linux sends it when the thread that started the process exits; Go ends a thread only
	// when a goroutine locked to it (LockOSThread) exits, which nothing in these tests does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("nats-server %s: %w", s.Name, err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited, s.killing = cmd, exited, false
	go func() {
		werr := cmd.Wait()
		log.Close()
		s.mu.Lock()
		if !s.killing && s.err == nil {
			s.err = fmt.Errorf("nats-server %s (pid %d) exited unasked: %v; the end of its log:\n%s",
				s.Name, cmd.Process.Pid, werr, s.logTail(40))
		}
		s.cmd = nil
		s.mu.Unlock()
		close(exited)
	}()
	return nil
}

// Restart starts the server again, with its configuration and store, and waits until it is
// ready (WaitReady) and current in JetStream's meta group (HubCluster.WaitMeta).
func (s *ClusterServer) Restart(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	if err := s.start(); err != nil {
		tb.Fatal(err)
	}
	s.WaitReady(tb, timeout)
	s.cluster.WaitMeta(tb, timeout)
}

// Kill sends SIGKILL to the server's process and waits until it has exited: a crash, with
// nothing flushed or said to its peers.
func (s *ClusterServer) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	if cmd == nil {
		s.mu.Unlock()
		tb.Fatalf("nats-server %s: not running", s.Name)
	}
	s.killing = true
	s.mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		tb.Fatalf("nats-server %s: kill: %v", s.Name, err)
	}
	<-exited
}

// Running reports whether the server's process is running.
func (s *ClusterServer) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Err is the first exit of the server that Kill did not ask for (with its log's tail), or nil.
func (s *ClusterServer) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// WaitReady waits until the server answers /healthz with 200 (it accepts clients, and its
// JetStream is current with the cluster's meta group); it fails the test when the process
// exits meanwhile (with its log's tail) or timeout passes.
func (s *ClusterServer) WaitReady(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	testutil.WaitFor(tb, timeout, "nats-server "+s.Name+" to be healthy", func() bool {
		if err := s.Err(); err != nil {
			tb.Fatal(err)
		}
		return s.Healthy()
	})
}

// monitorClient reads the monitoring endpoints; short timeouts, a stopped server refuses.
var monitorClient = &http.Client{Timeout: 5 * time.Second}

// Healthy reports whether the server answers /healthz with 200.
func (s *ClusterServer) Healthy() bool {
	resp, err := monitorClient.Get(s.MonitorURL + "/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Leafs is the number of leaf node connections the server holds, from its /leafz.
func (s *ClusterServer) Leafs() (int, error) {
	var z struct {
		Leafs int `json:"leafnodes"`
	}
	err := s.monitor("/leafz", &z)
	return z.Leafs, err
}

// monitor decodes the JSON of the server's monitoring endpoint path into v.
func (s *ClusterServer) monitor(path string, v any) error {
	resp, err := monitorClient.Get(s.MonitorURL + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", s.Name, path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s %s: %w", s.Name, path, err)
	}
	return nil
}

// logTail is the last n lines of the server's log; s.mu may be held.
func (s *ClusterServer) logTail(n int) string {
	data, err := os.ReadFile(s.Log())
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// stop is the cleanup: kill every running server and wait for it; report an exit that was not
// asked for.
func (c *HubCluster) stop(tb testing.TB) func() {
	return func() {
		for _, s := range c.Servers {
			s.mu.Lock()
			cmd, exited := s.cmd, s.exited
			s.killing = true
			s.mu.Unlock()
			if cmd != nil {
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		if err := c.Err(); err != nil && !tb.Failed() { // a failed test has reported it
			tb.Error(err)
		}
	}
}

// Err is the first exit of any server that was not asked for, or nil. A test checks it while
// it waits, to stop at once instead of at its deadline.
func (c *HubCluster) Err() error {
	var errs []error
	for _, s := range c.Servers {
		if err := s.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ClientURLs lists every server's client URL, comma-separated, as nats.Connect takes them.
func (c *HubCluster) ClientURLs() string {
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, s.ClientURL)
	}
	return strings.Join(urls, ",")
}

// LeafURLs lists every server's leaf node URL, comma-separated, as a box's nats.leaf.url
// takes them.
func (c *HubCluster) LeafURLs() string {
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, s.LeafURL)
	}
	return strings.Join(urls, ",")
}

// LeafServer is the server that holds the leaf node connection; nil when no running server
// holds one (or more than one server does).
func (c *HubCluster) LeafServer() *ClusterServer {
	var at *ClusterServer
	for _, s := range c.Servers {
		if !s.Running() {
			continue
		}
		n, err := s.Leafs()
		if err != nil || n == 0 {
			continue
		}
		if at != nil {
			return nil
		}
		at = s
	}
	return at
}

// Connect connects a JetStream client to the cluster, to any of its servers (reconnecting to
// another when one goes); the test's cleanup closes it.
func (c *HubCluster) Connect(tb testing.TB) jetstream.JetStream {
	return ConnectJS(tb, c.ClientURLs(), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
}

// SourceStream creates the hub stream name, with replicas copies on the cluster's servers,
// that sources stream boxStream of the box in JetStream domain boxDomain.
func (c *HubCluster) SourceStream(tb testing.TB, name, boxDomain, boxStream string, replicas int) jetstream.Stream {
	tb.Helper()
	return sourceStream(tb, c.Connect(tb), name, boxDomain, boxStream, replicas)
}

// sourceStream creates the stream name on js, with replicas copies (0: one), that sources
// stream boxStream of the box in JetStream domain boxDomain.
func sourceStream(tb testing.TB, js jetstream.JetStream, name, boxDomain, boxStream string, replicas int) jetstream.Stream {
	tb.Helper()
	var s jetstream.Stream
	Retry(tb, time.Minute, "create stream "+name, func(ctx context.Context) error {
		var err error
		cfg := SourceConfig(name, boxDomain, boxStream)
		cfg.Replicas = replicas
		s, err = js.CreateStream(ctx, cfg)
		return err
	})
	return s
}

// SourceConfig is the config of hub stream name sourcing stream boxStream of the box in
// JetStream domain boxDomain: how a hub collects every box's events.
func SourceConfig(name, boxDomain, boxStream string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:    name,
		Storage: jetstream.FileStorage,
		Sources: []*jetstream.StreamSource{{
			Name:     boxStream,
			External: &jetstream.ExternalStream{APIPrefix: "$JS." + boxDomain + ".API"},
		}},
	}
}

// Retry calls f, with a context of 10 s, until it returns nil; it fails the test with f's
// last error when timeout has passed. For what a cluster may refuse for a moment (a stream of
// several replicas while a server rejoins or a leader is elected).
func Retry(tb testing.TB, timeout time.Duration, what string, f func(context.Context) error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// StreamIDs reads the Nats-Msg-Id of every message of stream name, in order, as many as the
// stream holds when called, with an ordered consumer (thousands of messages in seconds, where
// StreamMsgs asks for each).
func StreamIDs(tb testing.TB, js jetstream.JetStream, name string) []string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	want := info.State.Msgs
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	ids := make([]string, 0, want)
	for uint64(len(ids)) < want {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			tb.Fatalf("stream %s: after %d of %d messages: %v", name, len(ids), want, err)
		}
		got := 0
		for m := range batch.Messages() {
			ids = append(ids, m.Headers().Get(jetstream.MsgIDHeader))
			got++
		}
		if err := batch.Error(); err != nil || got == 0 {
			tb.Fatalf("stream %s: after %d of %d messages: %d in a fetch, %v", name, len(ids), want, got, err)
		}
	}
	return ids
}
