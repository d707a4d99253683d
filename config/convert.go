package config

import (
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// The conversions of a valid Config into the options of the packages that do the
// work: each value is taken as it is (the option types are the leaves'), and the
// sizes in MiB become bytes.

// Source returns the camera's source, not started, with every option the config
// holds; the caller sets the rest (model input size, callbacks, logger) before
// Start.
func (c Camera) Source() *sources.Camera {
	return &sources.Camera{
		ID:           c.ID,
		Kind:         c.Kind,
		URL:          c.URL,
		Username:     c.Username,
		Password:     c.Password,
		Transport:    c.Transport,
		Decode:       c.Decode,
		Pipeline:     c.Pipeline,
		File:         c.File,
		StallTimeout: c.StallTimeout,
	}
}

// NATSPublisher returns the publisher of the site's events, not started, with
// every option the config holds; the caller sets the rest (the embedded Server,
// Instance, Logger) before Start.
func (c *Config) NATSPublisher() *sinks.Publisher {
	n := c.NATS
	return &sinks.Publisher{
		URL:         n.URL,
		Auth:        n.Auth.sinks(),
		TLS:         sinks.TLS(n.TLS),
		Prefix:      n.SubjectPrefix,
		Site:        c.Site,
		JetStream:   n.JetStream,
		OutboxBytes: n.OutboxMiB << 20,
		Stream: sinks.StreamConfig{
			Name:       n.StreamName(c.Site),
			MaxAge:     n.Stream.MaxAge,
			MaxBytes:   int64(n.Stream.MaxBytesMiB) << 20,
			Duplicates: n.Stream.DuplicateWindow,
		},
	}
}

// NATSServer returns the embedded NATS server, not started, which runs when
// nats.url is "": with JetStream, its store is in StatePath and its domain is
// the JetStream domain. The caller sets Logger before Start.
func (c *Config) NATSServer() (*sinks.Server, error) {
	n := c.NATS
	s := &sinks.Server{
		Listen: n.Listen,
		MQTT:   n.MQTT.Listen,
		Auth:   n.Auth.sinks(),
		TLS:    sinks.TLS(n.TLS),
		Leaf:   sinks.Leaf{URL: n.Leaf.URL, Auth: n.Leaf.Auth.sinks(), TLS: sinks.TLS(n.Leaf.TLS)},
	}
	if n.JetStream {
		dir, err := c.StatePath()
		if err != nil {
			return nil, err
		}
		s.StoreDir, s.Domain = dir, n.JetStreamDomain(c.Site)
	}
	return s, nil
}

// sinks returns the credentials as sinks takes them. PasswordFile and TokenFile
// have been read into Password and Token by Parse.
func (a NATSAuth) sinks() sinks.Auth {
	return sinks.Auth{User: a.User, Password: a.Password, Token: a.Token,
		NKeySeedFile: a.NKeySeedFile, CredentialsFile: a.CredentialsFile}
}
