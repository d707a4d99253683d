package pipeline

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
)

// Issue 13, item 16: with http.auth, every path but /healthz wants a valid bearer token or
// basic auth login, over TLS with http.tls; secrets come from ${VAR} and files. Config's rule
// (auth required off loopback) is in config's tests; here auth applies on loopback because it
// is configured.
func TestHTTPAuth(t *testing.T) {
	dir := t.TempDir()
	cert, key, roots := selfSignedCert(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hashFile := filepath.Join(dir, "http-hash")
	testutil.WriteFile(t, hashFile, string(hash)+"\n")
	const token = "0123456789abcdef-token"
	t.Setenv("VISIOND_TEST_HTTP_TOKEN", token)
	d := startTestDaemon(t, fmt.Sprintf(`
site: test
http:
  listen: "127.0.0.1:0"
  auth: {token: "${VISIOND_TEST_HTTP_TOKEN}", user: admin, password_hash_file: %q}
  tls: {cert_file: %q, key_file: %q}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1, provider: cpu, threads: 1}]}
cameras: []
`, hashFile, cert, key, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1")))
	base := "https://" + d.HTTPAddr().String()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	t.Cleanup(client.CloseIdleConnections)

	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	basic := func(user, password string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth(user, password) }
	}
	none := func(*http.Request) {}
	for _, tc := range []struct {
		name, path string
		auth       func(*http.Request)
		code       int
	}{
		{"healthz open", "/healthz", none, 200},
		{"no credentials", "/api/cameras", none, 401},
		{"status page", "/", none, 401},
		{"metrics", "/metrics", none, 401},
		{"snapshot", "/api/cameras/a/snapshot.jpg", none, 401},
		{"live view", "/api/cameras/a/live", none, 401},
		{"live view with a login, no such camera", "/api/cameras/a/live", basic("admin", "open sesame"), 404},
		{"readyz", "/readyz", none, 401},
		{"unknown path", "/nosuch", none, 401},
		{"token", "/api/cameras", bearer(token), 200},
		{"token, scheme in lower case", "/api/workers", func(r *http.Request) { r.Header.Set("Authorization", "bearer "+token) }, 200},
		{"wrong token", "/api/cameras", bearer(token + "x"), 401},
		{"token prefix", "/api/cameras", bearer(token[:16]), 401},
		{"empty token", "/api/cameras", bearer(""), 401},
		{"token as basic password", "/api/cameras", basic("admin", token), 401},
		{"login", "/", basic("admin", "open sesame"), 200},
		{"login again (remembered)", "/metrics", basic("admin", "open sesame"), 200},
		{"wrong password", "/", basic("admin", "open sesame!"), 401},
		{"wrong user", "/", basic("root", "open sesame"), 401},
		{"password as bearer token", "/", bearer("open sesame"), 401},
		{"unknown scheme", "/", func(r *http.Request) { r.Header.Set("Authorization", "Digest x") }, 401},
	} {
		req, err := http.NewRequest("GET", base+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		tc.auth(req)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s: GET %s: %d %q, want %d", tc.name, tc.path, resp.StatusCode, body, tc.code)
		}
		if tc.code == 401 {
			if got := resp.Header.Values("WWW-Authenticate"); len(got) != 2 || !strings.HasPrefix(got[0], "Basic ") || !strings.HasPrefix(got[1], "Bearer ") {
				t.Errorf("%s: WWW-Authenticate %q, want Basic and Bearer", tc.name, got)
			}
			if strings.Contains(string(body), "camera") {
				t.Errorf("%s: 401 with a body that says something: %q", tc.name, body)
			}
		}
	}

	// Logins at once, right and wrong, while bcrypt runs one at a time: each gets its answer.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			req, _ := http.NewRequest("GET", base+"/api/workers", nil)
			password, want := "open sesame", 200
			if i%2 == 1 {
				password, want = fmt.Sprint("guess ", i), 401
			}
			req.SetBasicAuth("admin", password)
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("login %d: %d, want %d", i, resp.StatusCode, want)
			}
		})
	}
	wg.Wait()

	// Plain HTTP on the TLS port gets nothing but a refusal.
	resp, err := http.Get("http://" + d.HTTPAddr().String() + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS endpoint: %d", resp.StatusCode)
		}
	}
}

// A certificate or key that cannot be loaded stops Start with an error naming http.tls.
func TestHTTPBadCert(t *testing.T) {
	dir := t.TempDir()
	cert, _, _ := selfSignedCert(t, dir)
	cfg := fmt.Sprintf(`
http: {listen: "127.0.0.1:0", tls: {cert_file: %q, key_file: %q}}
nats: {listen: "127.0.0.1:0"}
workers: {model: %q, library: %q, pools: [{count: 1, provider: cpu, threads: 1}]}
`, cert, cert, testutil.ThirdParty(t, "yolov8n.onnx"), testutil.ThirdParty(t, "libonnxruntime.so.1"))
	parsed, err := config.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{Config: parsed, Logger: testutil.Logger(t), WorkerCommand: []string{os.Args[0]}, WorkerEnv: []string{workerEnv}}
	d.Config.StateDir = t.TempDir()
	err = d.Start()
	if err == nil {
		d.Close()
		t.Fatal("started with a certificate as its key")
	}
	if !strings.HasPrefix(err.Error(), "http.tls: ") {
		t.Errorf("got %v, want an error naming http.tls", err)
	}
}

// selfSignedCert writes a self-signed certificate for 127.0.0.1 and its key into dir and
// returns their paths and a pool that trusts it.
func selfSignedCert(t *testing.T, dir string) (cert, key string, roots *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "visiond test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	testutil.WriteFile(t, cert, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	testutil.WriteFile(t, key, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(parsed)
	return cert, key, roots
}
