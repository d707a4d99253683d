package sinks

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// The credentials and TLS files of the nats section are read here, at start, so that a missing
// or malformed file is reported then, naming its config field, rather than at the first
// (re)connection. No message quotes a secret.

// tlsConfig loads t's PEM files. A server needs cert_file and key_file; a client needs neither,
// and ca_file, when given, replaces the system's roots.
func tlsConfig(field string, t TLS) (*tls.Config, error) {
	if t == (TLS{}) {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", field, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s.ca_file: %s holds no PEM certificate", field, t.CAFile)
		}
		c.RootCAs, c.ClientCAs = pool, pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s.cert_file/key_file: %w", field, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// clientOptions are the nats.go options for a connection with a's credentials and t's TLS.
func clientOptions(field string, a Auth, t TLS) ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.Token != "":
		opts = append(opts, nats.Token(a.Token))
	case a.NKeySeedFile != "":
		if _, err := readSeed(field+".nkey_seed_file", a.NKeySeedFile); err != nil {
			return nil, err
		}
		opt, err := nats.NkeyOptionFromSeed(a.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("%s.nkey_seed_file: %w", field, err)
		}
		opts = append(opts, opt)
	case a.CredentialsFile != "":
		if err := checkCreds(field+".credentials_file", a.CredentialsFile); err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserCredentials(a.CredentialsFile))
	}
	tc, err := tlsConfig(strings.TrimSuffix(field, ".auth")+".tls", t)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		tc.ClientCAs = nil
		opts = append(opts, nats.Secure(tc))
	}
	return opts, nil
}

// readSeed reads an nkey user seed from path.
func readSeed(field, path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	for line := range bytes.Lines(data) {
		line = bytes.TrimSpace(line)
		if bytes.HasPrefix(line, []byte("SU")) {
			if _, err := nkeys.FromSeed(line); err != nil {
				return "", fmt.Errorf("%s: %s holds a malformed user seed", field, path)
			}
			return string(line), nil
		}
	}
	return "", fmt.Errorf("%s: %s holds no nkey user seed (a line starting with SU)", field, path)
}

// checkCreds checks that path is a NATS credentials file: a user JWT and its seed.
func checkCreds(field, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	_, kerr := nkeys.ParseDecoratedUserNKey(data)
	if kerr != nil || !bytes.Contains(data, []byte("BEGIN NATS USER JWT")) {
		return fmt.Errorf("%s: %s is not a NATS credentials file (a user JWT and its nkey seed)", field, path)
	}
	return nil
}

// leafRemote is the embedded server's link to a hub.
func leafRemote(l Leaf) (*server.RemoteLeafOpts, error) {
	r := &server.RemoteLeafOpts{}
	for i, raw := range strings.Split(l.URL, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("nats.leaf.url: server %d: cannot parse URL", i+1)
		}
		switch {
		case l.Auth.User != "":
			u.User = url.UserPassword(l.Auth.User, l.Auth.Password)
		case l.Auth.Token != "":
			u.User = url.User(l.Auth.Token)
		}
		if u.Scheme == "tls" {
			r.TLS = true
		}
		r.URLs = append(r.URLs, u)
	}
	switch {
	case l.Auth.NKeySeedFile != "":
		seed, err := readSeed("nats.leaf.auth.nkey_seed_file", l.Auth.NKeySeedFile)
		if err != nil {
			return nil, err
		}
		r.Nkey = seed
	case l.Auth.CredentialsFile != "":
		if err := checkCreds("nats.leaf.auth.credentials_file", l.Auth.CredentialsFile); err != nil {
			return nil, err
		}
		r.Credentials = l.Auth.CredentialsFile
	}
	tc, err := tlsConfig("nats.leaf.tls", l.TLS)
	if err != nil {
		return nil, err
	}
	if tc != nil {
		tc.ClientCAs = nil
		r.TLS, r.TLSConfig = true, tc
	}
	return r, nil
}
