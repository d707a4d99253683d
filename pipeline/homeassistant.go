package pipeline

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/version"
	"github.com/visiond/visiond/sinks/homeassistant"
)

// Home Assistant discovery (issue 41): with nats.mqtt.discovery the daemon logs into its own
// server's MQTT listener and announces the cameras of the config in force, at start and after
// every reload (package sinks/homeassistant).

// haConnectTimeout bounds the first connection to the daemon's own listener.
const haConnectTimeout = 10 * time.Second

// startDiscovery starts the announcer of cfg's cameras on the embedded server's listener.
func (d *Daemon) startDiscovery(cfg *config.Config) error {
	srv := d.natsServer
	host, port, err := net.SplitHostPort(srv.MQTTAddr())
	if err != nil {
		return fmt.Errorf("nats.mqtt.discovery: the listener's address %q: %w", srv.MQTTAddr(), err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1" // a listener on every address is reached on loopback
	}
	ha := &homeassistant.Discovery{
		Broker: net.JoinHostPort(host, port), Prefix: cfg.NATS.MQTT.Prefix(),
		SubjectPrefix: cfg.NATS.SubjectPrefix, Site: cfg.Site, Events: d.pub.Conn(), Version: version.Get().Version,
		Logger: d.log.With("component", "homeassistant"),
	}
	a := cfg.NATS.Auth
	switch {
	case a.User != "":
		ha.Username, ha.Password = a.User, a.Password
	case a.Token != "":
		ha.Username, ha.Password = "visiond", a.Token // the listener takes a token as the password
	}
	if cfg.NATS.TLS.CertFile != "" {
		if ha.TLS, err = pinnedTLS(cfg.NATS.TLS.CertFile); err != nil {
			return fmt.Errorf("nats.mqtt.discovery: %w", err)
		}
	}
	if err := ha.Start(haCameras(cfg), haConnectTimeout); err != nil {
		return err
	}
	d.ha = ha
	return nil
}

// pinnedTLS is TLS to the daemon's own listener: its certificate must be the one in certFile
// (whoever signed it: the daemon trusts its own certificate, not a CA).
func pinnedTLS(certFile string) (*tls.Config, error) {
	data, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	var own [][]byte
	for rest := data; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			own = append(own, block.Bytes)
		}
	}
	if len(own) == 0 {
		return nil, fmt.Errorf("no certificate in %s", certFile)
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // the chain is not checked: the leaf is compared with our own below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 && bytes.Equal(raw[0], own[0]) {
				return nil
			}
			return errors.New("the MQTT listener's certificate is not the daemon's own (nats.tls.cert_file)")
		},
	}, nil
}

// haCameras are cfg's enabled cameras as Home Assistant discovery announces them: each zone
// and line with its classes, or the camera's tracked classes, or the default ones.
func haCameras(cfg *config.Config) []homeassistant.Camera {
	var cams []homeassistant.Camera
	for _, cc := range cfg.Cameras {
		if !cc.Enabled {
			continue
		}
		classes := func(own []string) []string {
			switch {
			case len(own) > 0:
				return own
			case len(cc.Objects.Track) > 0:
				return cc.Objects.Track
			}
			return homeassistant.DefaultClasses()
		}
		c := homeassistant.Camera{ID: cc.ID}
		for _, z := range cc.Zones {
			c.Zones = append(c.Zones, homeassistant.Scope{ID: z.ID, Classes: classes(z.Classes)})
		}
		for _, l := range cc.Lines {
			c.Lines = append(c.Lines, homeassistant.Scope{ID: l.ID, Classes: classes(l.Classes)})
		}
		cams = append(cams, c)
	}
	return cams
}
