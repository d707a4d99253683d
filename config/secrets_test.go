package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
)

// Issue 13, item 8: ${VAR} in string values, after YAML parsing: on values, not keys; "$$" is
// a "$"; a "$" followed by anything else stays; a variable's value is never parsed as YAML.
func TestEnvSubstitution(t *testing.T) {
	t.Setenv("VISIOND_T_SITE", "lab-7")
	t.Setenv("VISIOND_T_URL", "rtsp://10.0.0.5:554/stream1")
	t.Setenv("VISIOND_T_USER", "x #y: [z], {w}") // YAML syntax, taken as it is
	t.Setenv("VISIOND_T_PASS", "hunter2")
	t.Setenv("VISIOND_T_TRANSPORT", "udp")
	t.Setenv("VISIOND_T_EMPTY", "")
	t.Setenv("VISIOND_T_DIR", "/opt/visiond")
	cfg, err := config.Parse([]byte(`
site: ${VISIOND_T_SITE}
workers:
  model: "${VISIOND_T_DIR}/yolov8n.onnx"
  gpu_memory_command: [sh, -c, 'echo $$HOME ${VISIOND_T_EMPTY}$HOME']
camera_defaults: {transport: "${VISIOND_T_TRANSPORT}"}
cameras:
  - id: door
    url: ${VISIOND_T_URL}
    username: ${VISIOND_T_USER}
    password: 'pa$$${VISIOND_T_PASS}$'
  - {id: yard, url: "rtsp://h/$1/${VISIOND_T_EMPTY}x", transport: tcp}
`))
	if err != nil {
		t.Fatal(err)
	}
	door, yard := cfg.Cameras[0], cfg.Cameras[1]
	for _, c := range []struct{ got, want string }{
		{cfg.Site, "lab-7"},
		{cfg.Workers.Model, "/opt/visiond/yolov8n.onnx"},
		{strings.Join(cfg.Workers.GPUMemoryCommand, "|"), "sh|-c|echo $HOME $HOME"},
		{string(cfg.CameraDefaults.Transport), "udp"},
		{door.URL, "rtsp://10.0.0.5:554/stream1"},
		{door.Username, "x #y: [z], {w}"},
		{door.Password, "pa$hunter2$"},
		{string(door.Transport), "udp"}, // from camera_defaults, substituted there
		{yard.URL, "rtsp://h/$1/x"},
		{string(yard.Transport), "tcp"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}

	// A file without any ${...} parses as before, "$" and all.
	if cfg, err := config.Parse([]byte("cameras:\n  - {id: a, url: rtsp://h/x, username: u, password: 'a$b$'}\n")); err != nil || cfg.Cameras[0].Password != "a$b$" {
		t.Errorf("got %+v, %v", cfg, err)
	}
	// Every unset variable is named, with the field and line of each.
	_, err = config.Parse([]byte("site: ${VISIOND_T_NOPE1}\ncameras:\n  - {id: a, url: 'rtsp://h/${VISIOND_T_NOPE2}'}\n"))
	want := "line 1: site: environment variable VISIOND_T_NOPE1 is not set (named as ${VISIOND_T_NOPE1})\n" +
		"line 3: cameras[0].url: environment variable VISIOND_T_NOPE2 is not set (named as ${VISIOND_T_NOPE2})"
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

// Issue 13, item 8: every secret has a _file twin, read at parse time (one trailing newline
// dropped), as systemd's LoadCredential= hands them to the service in $CREDENTIALS_DIRECTORY.
func TestSecretFiles(t *testing.T) {
	creds := t.TempDir()
	t.Setenv("CREDENTIALS_DIRECTORY", creds)
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"nats-password": "s3cret\n",
		"leaf-token":    "leaf-t0ken\r\n",
		"http-token":    "0123456789abcdef0123\n",
		"http-hash":     string(hash) + "\n",
		"door":          "pa ss\n\n", // one newline only is dropped
	} {
		testutil.WriteFile(t, filepath.Join(creds, name), body)
	}
	path := testutil.TempFile(t, "visiond.yaml", `
http:
  listen: 0.0.0.0:8080
  auth:
    token_file: ${CREDENTIALS_DIRECTORY}/http-token
    user: admin
    password_hash_file: ${CREDENTIALS_DIRECTORY}/http-hash
nats:
  auth: {user: visiond, password_file: "${CREDENTIALS_DIRECTORY}/nats-password"}
  leaf:
    url: nats-leaf://hub:7422
    auth: {token_file: "${CREDENTIALS_DIRECTORY}/leaf-token"}
cameras:
  - {id: door, url: rtsp://10.0.0.5/1, username: admin, password_file: "${CREDENTIALS_DIRECTORY}/door"}
`)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.HTTP.Auth
	if a != (config.HTTPAuth{Token: "0123456789abcdef0123", User: "admin", PasswordHash: string(hash)}) {
		t.Errorf("http.auth = %+v", a)
	}
	if got := cfg.NATSPublisher().Auth; got.User != "visiond" || got.Password != "s3cret" {
		t.Errorf("publisher auth = %+v", got)
	}
	s, err := cfg.NATSServer()
	if err != nil || s.Auth.Password != "s3cret" || s.Leaf.Auth.Token != "leaf-t0ken" {
		t.Errorf("server auth = %+v, leaf %+v, %v", s.Auth, s.Leaf.Auth, err)
	}
	if src := cfg.Cameras[0].Source(); src.Username != "admin" || src.Password != "pa ss\n" {
		t.Errorf("camera credentials %q %q", src.Username, src.Password)
	}
	if cfg.NATS.Auth.PasswordFile != "" || cfg.Cameras[0].PasswordFile != "" {
		t.Errorf("_file fields not cleared once read: %+v", cfg)
	}
	// A changed file is a changed value (a reload sees it).
	testutil.WriteFile(t, filepath.Join(creds, "door"), "other")
	if again, err := config.Load(path); err != nil || again.Cameras[0].Password != "other" {
		t.Errorf("after the file changed: %+v, %v", again, err)
	}

	// Bad files: each named with its field and line, never with what it holds.
	testutil.WriteFile(t, filepath.Join(creds, "empty"), "\n")
	testutil.WriteFile(t, filepath.Join(creds, "big"), strings.Repeat("x", 64<<10+1))
	testutil.WriteFile(t, filepath.Join(creds, "notahash"), "hunter2\n")
	if err := os.Mkdir(filepath.Join(creds, "dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(creds, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = config.Parse([]byte(fmt.Sprintf(`
http: {auth: {user: admin, password_hash_file: %[1]s/notahash}}
nats:
  auth: {user: u, password_file: %[1]s/empty}
  leaf: {auth: {token_file: %[1]s/big}}
cameras:
  - {id: a, url: rtsp://h/1, username: u, password_file: %[1]s/dir}
  - {id: b, url: rtsp://h/2, username: u, password_file: %[1]s/none}
  - {id: c, url: rtsp://h/3, username: u, password_file: %[1]s/fifo}
`, creds)))
	want := fmt.Sprintf(`line 2: http.auth.password_hash: not a bcrypt hash ($2a$, $2b$ or $2y$...): make one with htpasswd -nB USER (Debian's apache2-utils) and keep what follows the ':'
line 4: nats.auth.password_file: "%[1]s/empty" is empty
line 5: nats.leaf.auth.token_file: "%[1]s/big" is larger than 64 KiB: want a file holding only the secret
line 7: cameras[0].password_file: "%[1]s/dir" is a directory, want a file holding the secret
line 8: cameras[1].password_file: cannot read "%[1]s/none": no such file or directory
line 9: cameras[2].password_file: "%[1]s/fifo" is not a regular file (p---------), want a file holding the secret`, creds)
	var cerr *config.Error
	if err == nil || err.Error() != want || !errors.As(err, &cerr) {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows a file's content: %v", err)
	}
}

// Issue 13, item 16: an HTTP endpoint off loopback needs credentials, or says it needs none.
func TestHTTPAuthRule(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("open sesame"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("VISIOND_T_HASH", string(hash))
	t.Setenv("VISIOND_T_TOKEN", "0123456789abcdef")
	for _, doc := range []string{
		"http: {listen: '127.0.0.1:8080'}",
		"http: {listen: '127.0.0.2:0'}",
		"http: {listen: '[::1]:8080'}",
		"http: {listen: 'localhost:8080'}",
		"http: {listen: ''}",
		"http: {listen: ':8080', allow_unauthenticated: true}",
		"http: {listen: ':8080', auth: {token: '${VISIOND_T_TOKEN}'}}",
		"http: {listen: '10.0.0.5:8443', auth: {user: admin, password_hash: '${VISIOND_T_HASH}'}, tls: {cert_file: c.pem, key_file: k.pem}}",
		"http: {listen: '127.0.0.1:8080', auth: {token: '${VISIOND_T_TOKEN}', user: admin, password_hash: '" + string(hash) + "'}}",
		"http: {listen: '127.0.0.1:8080', auth: {token: '${VISIOND_T_TOKEN}'}, edit: true}",
	} {
		if _, err := config.Parse([]byte(doc + "\n")); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
	// Issue 40: the editor saves into the config file only behind credentials, loopback or not.
	for _, doc := range []string{"http: {edit: true}", "http: {listen: ':8080', allow_unauthenticated: true, edit: true}"} {
		if _, err := config.Parse([]byte(doc + "\n")); err == nil || !strings.Contains(err.Error(), "http.edit: needs http.auth") {
			t.Errorf("%s: got %v, want http.edit refused without auth", doc, err)
		}
	}
	// A variable that is set but empty gives no credential: the rule still holds.
	t.Setenv("VISIOND_T_TOKEN", "")
	if _, err := config.Parse([]byte("http: {listen: ':8080', auth: {token: '${VISIOND_T_TOKEN}'}}\n")); err == nil ||
		!strings.Contains(err.Error(), `http.listen: ":8080" is not a loopback address`) {
		t.Errorf("empty token: got %v", err)
	}
}
