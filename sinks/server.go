package sinks

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/visiond/visiond/internal/redact"
)

// Server is the embedded NATS server, so the default configuration works with nothing else
// installed. Other services on the box subscribe to it like to any NATS server.
//
// With StoreDir set it runs JetStream with its store there (in a "jetstream" folder), in the
// JetStream domain Domain, so that events published into its stream survive a crash of the
// daemon and wait there while the uplink is down. With Leaf.URL set it joins a hub as a leaf
// node; the hub reaches the box's stream through "$JS.<Domain>.API". With MQTT set it serves
// MQTT clients as well.
type Server struct {
	// Listen is the host:port to serve clients on; port 0 picks a free port. Required.
	Listen string
	// StoreDir is the JetStream store's parent folder. Default "": no JetStream.
	StoreDir string
	// Domain is the JetStream domain, through which a hub reaches the box's stream; it
	// also names the server in its store. Default "".
	Domain string
	// Auth is what clients must present: user and password, or a token. Default: none.
	Auth Auth
	// TLS holds the server's certificate and key, which turn TLS on, and a CA whose
	// certificates clients must then present. Default: none, no TLS.
	TLS TLS
	// Leaf joins the server to a hub as a leaf node. Default: no hub.
	Leaf Leaf
	// MQTT is the host:port of an MQTT listener (nats-server's own, MQTT 3.1.1), where MQTT
	// clients subscribe to the events with the subject's '.' as '/' in the topic
	// (visiond/<site>/<camera>/detections); port 0 picks a free port. It takes the same
	// credentials (user and password, or the token as the MQTT password) and TLS as NATS
	// clients. nats-server keeps MQTT sessions in JetStream, so it needs StoreDir.
	// Default "": no MQTT listener.
	MQTT string
	// Logger receives the server's log lines (notices at debug level). Default: none are
	// written.
	Logger *slog.Logger

	ns *server.Server
}

// Start starts the server and waits until it accepts connections (and, with JetStream, until
// JetStream has recovered its store).
func (s *Server) Start() error {
	opts, err := s.options()
	if err != nil {
		return fmt.Errorf("embedded NATS server: %w", err)
	}
	// nats-server reports a busy port only in its log; probe them for a clear error now.
	if opts.Port != server.RANDOM_PORT {
		if err := probe(s.Listen); err != nil {
			return fmt.Errorf("embedded NATS server: %w", err)
		}
	}
	if opts.MQTT.Port > 0 {
		if err := probe(s.MQTT); err != nil {
			return fmt.Errorf("embedded NATS server: MQTT listener: %w", err)
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("embedded NATS server: %w", err)
	}
	if s.Logger != nil {
		ns.SetLoggerV2(&serverLog{log: s.Logger}, false, false, false)
	}
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return fmt.Errorf("embedded NATS server: not ready on %s after 30s (port in use, or the JetStream store in %s unreadable?)", s.Listen, opts.StoreDir)
	}
	if opts.JetStream && !ns.JetStreamEnabled() {
		ns.Shutdown()
		return fmt.Errorf("embedded NATS server: JetStream did not start with its store in %s (see the log above)", opts.StoreDir)
	}
	s.ns = ns
	if s.Logger != nil {
		args := []any{"url", ns.ClientURL(), "jetstream", opts.JetStream,
			"store", opts.StoreDir, "domain", opts.JetStreamDomain, "leaf", redact.URL(s.Leaf.URL)}
		if s.MQTT != "" {
			args = append(args, "mqtt", s.MQTTAddr())
		}
		s.Logger.Info("embedded NATS server ready", args...)
	}
	return nil
}

// probe reports whether addr cannot be listened on (a busy port, an address not of this host).
func probe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

// hostPort splits the address of the listener named field into nats-server's host and port;
// port 0 (any free port) becomes server.RANDOM_PORT.
func hostPort(field, addr string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("%s %q: %w", field, addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("%s %q: port %q is not a number in 0..65535", field, addr, portStr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

func (s *Server) options() (*server.Options, error) {
	host, port, err := hostPort("nats.listen", s.Listen)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: "visiond",
		Host:       host,
		Port:       port,
		NoSigs:     true, // the daemon owns signal handling
		MaxPayload: 1 << 20,
		Username:   s.Auth.User,
		Password:   s.Auth.Password,
	}
	opts.Authorization = s.Auth.Token
	tc, err := tlsConfig("nats.tls", s.TLS)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		tc.RootCAs = nil
		opts.TLSConfig, opts.TLS = tc, true
		opts.TLSVerify = tc.ClientCAs != nil // a CA given: clients must present certificates it signed
		if opts.TLSVerify {
			tc.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	if s.StoreDir != "" {
		dir := filepath.Join(s.StoreDir, "jetstream")
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("state_dir: %w", err)
		}
		opts.JetStream = true
		opts.StoreDir = dir
		opts.JetStreamDomain = s.Domain
		// A server name that is stable across restarts: JetStream keeps it in its store.
		opts.ServerName = "visiond-" + s.Domain
	}
	if s.MQTT != "" {
		if !opts.JetStream {
			return nil, fmt.Errorf("nats.mqtt.listen: the MQTT listener needs JetStream (nats.jetstream: true), where nats-server keeps MQTT sessions")
		}
		mqttHost, mqttPort, err := hostPort("nats.mqtt.listen", s.MQTT)
		if err != nil {
			return nil, err
		}
		opts.MQTT.Host, opts.MQTT.Port = mqttHost, mqttPort
		// Its sessions in this server's JetStream, never in a hub's across the leaf link.
		opts.MQTT.JsDomain = s.Domain
		// No MQTT-only credentials: the server's user and password or token apply (an MQTT
		// client sends the token as its password), and its TLS.
		if opts.TLSConfig != nil {
			opts.MQTT.TLSConfig = opts.TLSConfig.Clone()
		}
	}
	if s.Leaf.URL != "" {
		remote, err := leafRemote(s.Leaf)
		if err != nil {
			return nil, err
		}
		opts.LeafNode.Remotes = []*server.RemoteLeafOpts{remote}
		opts.LeafNode.ReconnectInterval = 2 * time.Second
	}
	return opts, nil
}

// Connect opens an in-process client connection to the server, with the server's own
// credentials (no TCP, no TLS handshake).
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	opts = append(opts, nats.InProcessServer(s.ns))
	switch {
	case s.Auth.User != "":
		opts = append(opts, nats.UserInfo(s.Auth.User, s.Auth.Password))
	case s.Auth.Token != "":
		opts = append(opts, nats.Token(s.Auth.Token))
	}
	// nats-server offers TLS to an in-process client without requiring it; a tls:// URL
	// would make nats.go insist on a handshake, and verify the server's certificate against
	// roots it does not have.
	return nats.Connect(strings.Replace(s.ns.ClientURL(), "tls://", "nats://", 1), opts...)
}

// ClientURL is the URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// MQTTAddr is the host:port of the MQTT listener ("" without one), with the port it got when
// MQTT asked for port 0.
func (s *Server) MQTTAddr() string {
	if s.ns == nil || s.MQTT == "" {
		return ""
	}
	v, err := s.ns.Varz(nil)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(v.MQTT.Host, strconv.Itoa(v.MQTT.Port))
}

// LeafConnected reports whether the link to the hub is up.
func (s *Server) LeafConnected() bool { return s.ns != nil && s.ns.NumLeafNodes() > 0 }

// Close shuts the server down and waits for it. Safe to call twice.
func (s *Server) Close() {
	if s.ns == nil {
		return
	}
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}

// serverLog routes nats-server's log into slog: warnings and errors as they are, notices (its
// start-up banner, links made and lost) at debug. A warning or error repeats at most once a
// minute per message format, with the count of those held back: a hub that is down for an
// hour gives 60 lines, not 1800.
type serverLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	seen map[string]*repeat
}

type repeat struct {
	last time.Time
	held int
}

const repeatEvery = time.Minute

func (l *serverLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Warnf(format string, v ...any)   { l.limited(slog.LevelWarn, format, v) }
func (l *serverLog) Fatalf(format string, v ...any)  { l.log.Error(fmt.Sprintf(format, v...)) }
func (l *serverLog) Errorf(format string, v ...any)  { l.limited(slog.LevelError, format, v) }
func (l *serverLog) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Tracef(string, ...any)           {}

func (l *serverLog) limited(level slog.Level, format string, v []any) {
	now := time.Now()
	l.mu.Lock()
	if l.seen == nil {
		l.seen = map[string]*repeat{}
	}
	r := l.seen[format]
	if r == nil {
		r = &repeat{}
		l.seen[format] = r
	}
	if !r.last.IsZero() && now.Sub(r.last) < repeatEvery {
		r.held++
		l.mu.Unlock()
		return
	}
	held := r.held
	r.last, r.held = now, 0
	l.mu.Unlock()
	args := []any{}
	if held > 0 {
		args = append(args, "repeated", held, "in", repeatEvery)
	}
	l.log.Log(context.Background(), level, fmt.Sprintf(format, v...), args...)
}
