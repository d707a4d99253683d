package sinks

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/visiond/visiond/internal/testutil"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client certificate, all signed
// by the CA, as PEM files in a temporary folder.
type testPKI struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "visiond test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := testPKI{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

// The embedded server with TLS, and a publisher that connects to it as to an external server:
// with the CA it connects; without it, the certificate is refused; and when the server requires
// client certificates, one without is refused and one with is accepted.
func TestTLS(t *testing.T) {
	pki := newTestPKI(t)
	s := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab",
		TLS: TLS{CertFile: pki.serverCert, KeyFile: pki.serverKey}}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	url := s.ClientURL() // tls://

	noCA := &Publisher{URL: url, Prefix: "visiond", Site: "lab", JetStream: true, Stream: testStream()}
	if err := noCA.Start(); err == nil || !strings.Contains(err.Error(), "certificate") {
		noCA.Close(time.Second)
		t.Fatalf("without the CA: %v, want a certificate error", err)
	}
	p := startPublisher(t, &Publisher{URL: url, TLS: TLS{CAFile: pki.ca}, JetStream: true, Stream: testStream()})
	if err := p.PublishDetections(detection("door", 1)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the acknowledgement over TLS", func() bool { return p.Stats().Published == 1 })

	mtls := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab2",
		TLS: TLS{CAFile: pki.ca, CertFile: pki.serverCert, KeyFile: pki.serverKey}}
	if err := mtls.Start(); err != nil {
		t.Fatal(err)
	}
	defer mtls.Close()
	url = mtls.ClientURL()
	anon := &Publisher{URL: url, TLS: TLS{CAFile: pki.ca}, Prefix: "visiond", Site: "lab", JetStream: true, Stream: testStream()}
	if err := anon.Start(); err == nil {
		anon.Close(time.Second)
		t.Fatal("a client without a certificate connected to a server that requires one")
	}
	startPublisher(t, &Publisher{URL: url, JetStream: true, Stream: testStream(),
		TLS: TLS{CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey}})

	// The daemon's own publisher, in-process, needs neither (it used to fail on the tls:// URL).
	in := startPublisher(t, &Publisher{Server: mtls, JetStream: true, Stream: StreamConfig{Name: "in-process",
		MaxAge: time.Hour, MaxBytes: 1 << 20, Duplicates: time.Minute}, Prefix: "inproc", Site: "lab", Instance: "inst"})
	if err := in.PublishDetections(detection("door", 1)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the in-process acknowledgement", func() bool { return in.Stats().Published == 1 })
}

// Token and nkey credentials against servers that require them; a wrong token is refused with
// an error that does not show it.
func TestTokenAndNKeyAuth(t *testing.T) {
	s := &Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab", Auth: Auth{Token: "t0ken-s3cret"}}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := &Publisher{URL: s.ClientURL(), Auth: Auth{Token: "wr0ng-t0ken"}, Prefix: "visiond", Site: "lab", JetStream: true, Stream: testStream()}
	if err := bad.Start(); err == nil || !strings.Contains(err.Error(), "uthorization") || strings.Contains(err.Error(), "wr0ng") {
		t.Fatalf("wrong token: %v", err)
	}
	startPublisher(t, &Publisher{URL: s.ClientURL(), Auth: Auth{Token: "t0ken-s3cret"}, JetStream: true, Stream: testStream()})

	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := testutil.TempFile(t, "box.nk", string(seed)+"\n")
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(time.Minute) {
		t.Fatal("server not ready")
	}
	anon := &Publisher{URL: ns.ClientURL(), Prefix: "visiond", Site: "lab", JetStream: true, Stream: testStream()}
	if err := anon.Start(); err == nil {
		anon.Close(time.Second)
		t.Fatal("connected without the nkey")
	}
	p := startPublisher(t, &Publisher{URL: ns.ClientURL(), Auth: Auth{NKeySeedFile: seedFile}, JetStream: true, Stream: testStream()})
	if err := p.PublishDetections(detection("door", 1)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the acknowledgement", func() bool { return p.Stats().Published == 1 })
}
