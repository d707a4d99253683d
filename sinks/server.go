package sinks

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an embedded NATS server, so the default configuration works with nothing else
// installed. Other services on the box subscribe to it like to any NATS server.
type Server struct {
	Listen string // host:port; port 0 picks a free port
	Logger *slog.Logger

	ns *server.Server
}

// Start starts the server and waits until it accepts connections.
func (s *Server) Start() error {
	host, portStr, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return fmt.Errorf("embedded NATS server: listen address %q: %w", s.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("embedded NATS server: listen port %q: %w", portStr, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	} else {
		// nats-server reports a busy port only in its log; probe it for a clear error now.
		ln, err := net.Listen("tcp", s.Listen)
		if err != nil {
			return fmt.Errorf("embedded NATS server: %w", err)
		}
		ln.Close()
	}
	ns, err := server.NewServer(&server.Options{
		ServerName: "visiond",
		Host:       host,
		Port:       port,
		NoSigs:     true, // the daemon owns signal handling
		MaxPayload: 1 << 20,
	})
	if err != nil {
		return fmt.Errorf("embedded NATS server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return fmt.Errorf("embedded NATS server: not accepting connections on %s after 10s (port in use?)", s.Listen)
	}
	s.ns = ns
	if s.Logger != nil {
		s.Logger.Info("embedded NATS server ready", "url", ns.ClientURL())
	}
	return nil
}

// ClientURL is the URL clients connect to.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Close shuts the server down and waits for it. Safe to call twice.
func (s *Server) Close() {
	if s.ns == nil {
		return
	}
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
}
