package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/redact"
	"github.com/visiond/visiond/sources"
)

// Problem is one thing wrong in a configuration.
type Problem struct {
	Field string // path of the field, e.g. "cameras[2].url"; "" for the whole file
	Line  int    // line in the YAML file; 0 if unknown
	Msg   string
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Error lists every problem found in a configuration, in the order of the
// file (those without a line last).
type Error struct {
	Problems []Problem
}

// Error returns the problems one per line, like
// "line 12: cameras[2].url: missing".
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// newError sorts problems by line and wraps them in an *Error.
func newError(problems []Problem) *Error {
	slices.SortStableFunc(problems, func(a, b Problem) int {
		if a.Line == 0 || b.Line == 0 {
			return b.Line - a.Line // unknown lines last
		}
		return a.Line - b.Line
	})
	return &Error{Problems: problems}
}

// Token limits: camera ids and the site are NATS subject tokens.
const maxIDLen = 64

// MinMemoryLimitMiB is the smallest memory budget memory_limit_mib may give: less would
// hold the Go runtime at its floor and the clip rings at theirs from the start.
const MinMemoryLimitMiB = 256

// Validate checks c and returns nil or an *Error listing every problem. When
// c came from Parse, each problem carries its line.
func (c *Config) Validate() error {
	v := validator{lines: c.lines}
	v.daemon(c)
	v.workers(c.Workers)
	v.positive("pipeline.slice", c.Pipeline.Slice)
	v.positive("pipeline.max_frame_age", c.Pipeline.MaxFrameAge)
	v.sample(c.Sample)
	v.cameras(c)
	v.analytics(c, nil) // class names: CheckClasses, once the model's are known

	if len(v.problems) == 0 {
		return nil
	}
	return newError(v.problems)
}

// daemon checks the daemon's own settings: site, logs, HTTP and NATS.
func (v *validator) daemon(c *Config) {
	if !isToken(c.Site) {
		v.add("site", "invalid site %s: want letters, digits, '_' or '-' (it is a NATS subject token)", quoteOrEmpty(c.Site))
	} else if len(c.Site) > maxIDLen {
		v.add("site", "too long: %d characters, at most %d allowed (the event schema's limit for a token)", len(c.Site), maxIDLen)
	}
	v.oneOf("log_level", c.LogLevel, "debug", "info", "warn", "error")
	v.oneOf("log_format", c.LogFormat, "text", "json")
	if c.MemoryLimitMiB != 0 && c.MemoryLimitMiB < MinMemoryLimitMiB {
		v.add("memory_limit_mib", "%d is too small: want 0 (the cgroup's limit) or at least %d MiB", c.MemoryLimitMiB, MinMemoryLimitMiB)
	}

	if c.HTTP.Listen != "" {
		v.listen("http.listen", c.HTTP.Listen)
	}
	v.http(c.HTTP)

	if c.NATS.URL != "" {
		v.natsURLs("nats.url", c.NATS.URL)
	} else if c.NATS.Listen == "" {
		v.add("nats.listen", "missing: needed for the embedded server when nats.url is empty")
	}
	if c.NATS.Listen != "" {
		v.listen("nats.listen", c.NATS.Listen)
	}
	if !isSubjectPrefix(c.NATS.SubjectPrefix) {
		v.add("nats.subject_prefix", "invalid prefix %s: want tokens of letters, digits, '_' or '-', joined by dots", quoteOrEmpty(c.NATS.SubjectPrefix))
	}
	v.nats(c)
}

// workers checks the workers' settings and their pools.
func (v *validator) workers(w Workers) {
	if w.Model == "" {
		v.add("workers.model", "missing")
	}
	if w.Library == "" {
		v.add("workers.library", "missing")
	}
	if w.MemoryLimitMiB < 0 {
		v.add("workers.memory_limit_mib", "must be >= 0 (0 = no limit), got %d", w.MemoryLimitMiB)
	}
	if len(w.GPUMemoryCommand) > 0 && w.GPUMemoryCommand[0] == "" {
		v.add("workers.gpu_memory_command", "the first element must name the program")
	}
	if w.GPUMemoryLimitMiB < 0 {
		v.add("workers.gpu_memory_limit_mib", "must be >= 0 (0 = no limit), got %d", w.GPUMemoryLimitMiB)
	}
	if len(w.Pools) == 0 {
		v.add("workers.pools", "missing: at least one pool of workers")
	}
	for i, p := range w.Pools {
		f := fmt.Sprintf("workers.pools[%d]", i)
		if p.Count < 1 || p.Count > 64 {
			v.add(f+".count", "must be in 1..64 or auto, got %d", p.Count)
		}
		oneOfValues(v, f+".provider", p.Provider, infer.Providers())
		if p.Device < 0 {
			v.add(f+".device", "must be >= 0, got %d", p.Device)
		}
		if p.Threads < 0 {
			v.add(f+".threads", "must be >= 0 (0 = ONNX Runtime's default), got %d", p.Threads)
		}
		if p.Sessions < 0 || p.Sessions > infer.MaxSessions {
			v.add(f+".sessions", "must be in 0..%d (0 = the provider's default), got %d", infer.MaxSessions, p.Sessions)
		}
		if p.Fallback != "" {
			oneOfValues(v, f+".fallback", p.Fallback, []infer.Provider{infer.ProviderCPU})
		}
		if p.CUDA.GPUMemLimitMiB < 0 {
			v.add(f+".cuda.gpu_mem_limit_mib", "must be >= 0, got %d", p.CUDA.GPUMemLimitMiB)
		}
		if p.CUDA.ArenaExtendStrategy != "" {
			v.oneOf(f+".cuda.arena_extend_strategy", p.CUDA.ArenaExtendStrategy, "kNextPowerOfTwo", "kSameAsRequested")
		}
		if p.CUDA.CudnnConvAlgoSearch != "" {
			v.oneOf(f+".cuda.cudnn_conv_algo_search", p.CUDA.CudnnConvAlgoSearch, "EXHAUSTIVE", "HEURISTIC", "DEFAULT")
		}
		if p.CUDA.Graph && p.Provider != infer.ProviderCUDA {
			v.add(f+".cuda.graph", "needs provider cuda (CUDA graphs of the CUDA provider), not %s", p.Provider)
		}
		if p.TensorRT.WorkspaceMiB < 0 {
			v.add(f+".tensorrt.workspace_mib", "must be >= 0, got %d", p.TensorRT.WorkspaceMiB)
		}
		if p.Provider == infer.ProviderCPU && (p.CUDA != CUDA{} || p.TensorRT != TensorRT{}) {
			v.add(f+".provider", "cpu takes no cuda or tensorrt options")
		}
	}
	v.check("workers.confidence", infer.CheckConfidence(w.Confidence))
	v.check("workers.iou", infer.CheckIoU(w.IoU))
	v.positive("workers.job_timeout", w.JobTimeout)
}

// sample checks the built-in sample camera's settings.
func (v *validator) sample(s Sample) {
	if s.Listen != "" {
		v.listen("sample.listen", s.Listen)
	}
	if s.Enabled {
		if s.Listen == "" {
			v.add("sample.listen", "missing: needed when sample.enabled is true")
		}
		if s.File == "" {
			v.add("sample.file", "missing: needed when sample.enabled is true")
		}
	}
}

// cameras checks the camera defaults and each camera's id (unique), source and stream
// settings; their analytics are analytics's.
func (v *validator) cameras(c *Config) {
	v.fps("camera_defaults.fps", c.CameraDefaults.FPS)
	oneOfValues(v, "camera_defaults.transport", c.CameraDefaults.Transport, sources.Transports())
	oneOfValues(v, "camera_defaults.decode", c.CameraDefaults.Decode, sources.DecodeModes())
	oneOfValues(v, "camera_defaults.decoder", c.CameraDefaults.Decoder, sources.Decoders())
	v.positive("camera_defaults.stall_timeout", c.CameraDefaults.StallTimeout)
	v.fps("camera_defaults.weight", c.CameraDefaults.Weight)

	firstByID := map[string]int{}
	for i, cam := range c.Cameras {
		p := fmt.Sprintf("cameras[%d]", i)
		switch {
		case cam.ID == "":
			v.add(p+".id", "missing")
		case len(cam.ID) > maxIDLen:
			v.add(p+".id", "too long: %d characters, at most %d allowed", len(cam.ID), maxIDLen)
		case !isToken(cam.ID):
			v.add(p+".id", "invalid id %q: want letters, digits, '_' or '-' (it is a NATS subject token)", cam.ID)
		default:
			if j, dup := firstByID[cam.ID]; dup {
				first := fmt.Sprintf("cameras[%d]", j)
				if line := v.line(first + ".id"); line > 0 {
					first += fmt.Sprintf(", line %d", line)
				}
				v.add(p+".id", "duplicate id %q (first at %s)", cam.ID, first)
			} else {
				firstByID[cam.ID] = i
			}
		}
		v.source(p, cam)
		v.fps(p+".fps", cam.FPS)
		oneOfValues(v, p+".transport", cam.Transport, sources.Transports())
		oneOfValues(v, p+".decode", cam.Decode, sources.DecodeModes())
		oneOfValues(v, p+".decoder", cam.Decoder, sources.Decoders())
		v.positive(p+".stall_timeout", cam.StallTimeout)
		v.fps(p+".weight", cam.Weight)
	}
}

// source checks that the camera names exactly the source its kind needs.
func (v *validator) source(p string, cam Camera) {
	need := map[sources.Kind]string{sources.KindRTSP: "url", sources.KindGStreamer: "pipeline", sources.KindFile: "file"}
	if _, ok := need[cam.Kind]; !ok {
		oneOfValues(v, p+".kind", cam.Kind, sources.Kinds())
		return
	}
	for _, f := range []struct{ key, val string }{{"url", cam.URL}, {"pipeline", cam.Pipeline}, {"file", cam.File}} {
		if f.key != need[cam.Kind] && f.val != "" {
			v.add(p+"."+f.key, "not used by kind %s (it reads %s)", cam.Kind, need[cam.Kind])
		}
	}
	password := cam.Password != "" || cam.PasswordFile != ""
	v.secretTwins(p+".password", cam.Password, cam.PasswordFile)
	if cam.Kind != sources.KindRTSP && (cam.Username != "" || password) {
		v.add(p+".username", "credentials are for kind rtsp; put them in the %s's pipeline", cam.Kind)
	}
	switch cam.Kind {
	case sources.KindRTSP:
		if msg := checkCameraURL(cam.URL); msg != "" {
			v.add(p+".url", "%s", msg)
		} else if u, _ := url.Parse(cam.URL); u.User != nil && (cam.Username != "" || password) {
			v.add(p+".username", "credentials both in url and in username/password: keep one")
		} else if password && cam.Username == "" {
			v.add(p+".username", "missing: password is set")
		}
	case sources.KindGStreamer:
		if strings.TrimSpace(cam.Pipeline) == "" {
			v.add(p+".pipeline", "missing: kind gstreamer needs a pipeline ending in appsink")
		} else if !strings.Contains(cam.Pipeline, "appsink") {
			v.add(p+".pipeline", "must end in appsink, where visiond takes the frames")
		}
	case sources.KindFile:
		if cam.File == "" {
			v.add(p+".file", "missing: kind file needs a video file")
		}
	}
}

func (v *validator) positive(field string, d time.Duration) {
	if d <= 0 {
		v.add(field, "must be > 0, got %v", d)
	}
}

// validator collects problems, finding their lines in a path→line map.
type validator struct {
	lines    map[string]int
	problems []Problem
}

func (v *validator) add(field, format string, args ...any) {
	v.problems = append(v.problems, Problem{Field: field, Line: v.line(field), Msg: fmt.Sprintf(format, args...)})
}

// line returns the line of field, or of its nearest ancestor present in the
// file (a missing key is reported on the line of its section), or 0.
func (v *validator) line(field string) int {
	for field != "" {
		if line, ok := v.lines[field]; ok {
			return line
		}
		i := strings.LastIndexAny(field, ".[")
		if i < 0 {
			break
		}
		field = field[:i]
	}
	return 0
}

func (v *validator) oneOf(field, value string, allowed ...string) {
	if !slices.Contains(allowed, value) {
		v.add(field, "unknown value %s: want one of %s", quoteOrEmpty(value), strings.Join(allowed, ", "))
	}
}

// oneOfValues is oneOf for the option types of the leaf packages, which list
// their valid values.
func oneOfValues[T ~string](v *validator, field string, value T, allowed []T) {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	v.oneOf(field, string(value), names...)
}

// check adds the error of a check that another package owns (infer.CheckConfidence) to field.
func (v *validator) check(field string, err error) {
	if err != nil {
		v.add(field, "%v", err)
	}
}

func (v *validator) fps(field string, f float64) {
	if !(f > 0) || math.IsInf(f, 0) { // also catches NaN
		v.add(field, "must be a finite number > 0, got %v", f)
	}
}

// listen checks a host:port to listen on; the host may be empty (all
// interfaces) and the port 0 (any free port).
func (v *validator) listen(field, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		v.add(field, "%q: want host:port, e.g. 127.0.0.1:8080 or :8080", addr)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		v.add(field, "%q: port %q is not a number in 0..65535", addr, port)
	}
	if strings.ContainsAny(host, " /") {
		v.add(field, "%q: bad host %q", addr, host)
	}
}

// natsURLs checks a comma-separated list of NATS server URLs.
func (v *validator) natsURLs(field, list string) { v.urls(field, list, "nats", "tls") }

// urls checks a comma-separated list of server URLs with one of schemes.
// Messages never echo a URL, which may carry a password or a token.
func (v *validator) urls(field, list string, schemes ...string) {
	for i, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		switch {
		case raw == "":
			v.add(field, "server %d: empty URL in the list", i+1)
		case badURLChar(raw) != "":
			v.add(field, "server %d: %s", i+1, badURLChar(raw))
		case err != nil:
			v.add(field, "server %d: cannot parse URL", i+1)
		case !slices.Contains(schemes, u.Scheme):
			v.add(field, "server %d: scheme %s not supported: want %s://", i+1, quoteOrEmpty(u.Scheme), strings.Join(schemes, ":// or "))
		case u.Hostname() == "":
			v.add(field, "server %d: URL has no host", i+1)
		default:
			if msg := checkURLPort(u); msg != "" {
				v.add(field, "server %d: %s", i+1, msg)
			}
		}
	}
}

// badURLChar returns what is wrong when raw holds a space or a control
// character (which no URL may hold unescaped), or "". The message gives the
// position, never the URL, which may hold a password.
func badURLChar(raw string) string {
	for i, r := range raw {
		switch {
		case r == ' ':
			return fmt.Sprintf("a space at byte %d: a URL holds none (write it as %%20)", i+1)
		case unicode.IsSpace(r) || unicode.IsControl(r):
			return fmt.Sprintf("a control character (%U) at byte %d: a URL holds none", r, i+1)
		}
	}
	return ""
}

// checkURLPort returns what is wrong with the port of u, or "" when it has
// none or a port in 1..65535.
func checkURLPort(u *url.URL) string {
	p := u.Port()
	if p == "" {
		return ""
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Sprintf("port %s out of range: want 1..65535", p)
	}
	return ""
}

// nats checks the nats section beyond its URLs and addresses.
func (v *validator) nats(c *Config) {
	n := c.NATS
	embedded := n.URL == ""
	v.auth("nats.auth", n.Auth)
	if embedded && (n.Auth.NKeySeedFile != "" || n.Auth.CredentialsFile != "") {
		v.add("nats.auth", "the embedded server takes user and password or a token; nkey_seed_file and credentials_file are for nats.url and nats.leaf")
	}
	v.tls("nats.tls", n.TLS, embedded)
	if n.Domain != "" && !isToken(n.Domain) {
		v.add("nats.domain", "invalid domain %q: want letters, digits, '_' or '-'", n.Domain)
	}
	if name := n.Stream.Name; name != "" && (strings.ContainsAny(name, " \t.*>/\\") || len(name) > 255) {
		v.add("nats.stream.name", "invalid stream name %q: no spaces, '.', '*', '>' or path separators", name)
	}
	if n.Stream.MaxAge < 0 {
		v.add("nats.stream.max_age", "must be >= 0 (0 = no age limit), got %s", n.Stream.MaxAge)
	}
	if n.Stream.MaxBytesMiB < 1 {
		v.add("nats.stream.max_bytes_mib", "must be >= 1, got %d", n.Stream.MaxBytesMiB)
	}
	if n.Stream.DuplicateWindow <= 0 {
		v.add("nats.stream.duplicate_window", "must be > 0, got %s", n.Stream.DuplicateWindow)
	}
	if n.OutboxMiB < 1 {
		v.add("nats.outbox_mib", "must be >= 1, got %d", n.OutboxMiB)
	}
	if n.HealthInterval <= 0 {
		v.add("nats.health_interval", "must be > 0, got %s", n.HealthInterval)
	}
	if n.Leaf.URL != "" {
		if !embedded {
			v.add("nats.leaf.url", "a leaf node link needs the embedded server: set nats.url to \"\" or drop nats.leaf")
		}
		v.urls("nats.leaf.url", n.Leaf.URL, "nats-leaf", "nats", "tls")
	}
	v.auth("nats.leaf.auth", n.Leaf.Auth)
	v.tls("nats.leaf.tls", n.Leaf.TLS, false)
	if m := n.MQTT.Listen; m != "" {
		v.listen("nats.mqtt.listen", m)
		switch {
		case !embedded:
			v.add("nats.mqtt.listen", "the MQTT listener is the embedded server's: set nats.url to \"\" or drop nats.mqtt")
		case !n.JetStream:
			v.add("nats.mqtt.listen", "the MQTT listener needs nats.jetstream: true (nats-server keeps MQTT sessions in JetStream)")
		case m == n.Listen:
			v.add("nats.mqtt.listen", "%q is nats.listen's address too: give MQTT a port of its own (1883 is MQTT's)", m)
		}
	}
	if n.MQTT.Discovery {
		switch {
		case n.MQTT.Listen == "":
			v.add("nats.mqtt.discovery", "Home Assistant discovery is published on the MQTT listener: set nats.mqtt.listen")
		case n.TLS.CAFile != "":
			v.add("nats.mqtt.discovery", "with nats.tls.ca_file the MQTT listener asks every client for a certificate, and the daemon has none of its own to log in with: drop nats.tls.ca_file or the discovery")
		}
	}
	if p := n.MQTT.DiscoveryPrefix; p != "" && !validTopic(p) {
		v.add("nats.mqtt.discovery_prefix", "%q is not an MQTT topic prefix: letters, digits, '_' and '-', levels joined by '/', no wildcard", p)
	}
}

// validTopic reports whether p is a topic of levels of letters, digits, '_' and '-' joined by
// '/' (so that it is a NATS subject too, the embedded server's).
func validTopic(p string) bool {
	for _, level := range strings.Split(p, "/") {
		if level == "" || strings.Trim(level, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			return false
		}
	}
	return true
}

// auth checks that at most one kind of NATS credential is given, and whole.
func (v *validator) auth(field string, a NATSAuth) {
	v.secretTwins(field+".password", a.Password, a.PasswordFile)
	v.secretTwins(field+".token", a.Token, a.TokenFile)
	password, token := a.Password != "" || a.PasswordFile != "", a.Token != "" || a.TokenFile != ""
	kinds := 0
	for _, set := range []bool{a.User != "" || password, token, a.NKeySeedFile != "", a.CredentialsFile != ""} {
		if set {
			kinds++
		}
	}
	if kinds > 1 {
		v.add(field, "give one of user and password, token, nkey_seed_file or credentials_file, not several")
	}
	if password && a.User == "" {
		v.add(field+".user", "missing: a password needs a user")
	}
	if a.User != "" && !password {
		v.add(field+".password", "missing: user %q has no password", a.User)
	}
}

// tls checks that a certificate comes with its key; a server needs both.
func (v *validator) tls(field string, t TLS, server bool) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		v.add(field, "cert_file and key_file go together")
	}
	if server && t.CAFile != "" && t.CertFile == "" {
		v.add(field, "the embedded server needs cert_file and key_file for TLS; ca_file alone verifies nothing")
	}
}

// checkCameraURL returns what is wrong with a camera URL, or "". The message
// never holds the URL's password.
func checkCameraURL(raw string) string {
	if raw == "" {
		return "missing"
	}
	if msg := badURLChar(raw); msg != "" {
		return msg
	}
	u, err := url.Parse(raw)
	if err != nil {
		// Explain with the error of the redacted URL, so that the password
		// cannot leak through the parser's message.
		_, rerr := url.Parse(redact.URL(raw))
		var uerr *url.Error
		if errors.As(rerr, &uerr) {
			return "cannot parse URL: " + uerr.Err.Error()
		}
		return "cannot parse URL: bad character or escape in the user name or password"
	}
	switch {
	case u.Scheme == "":
		return "no scheme: want rtsp://host/path or rtsps://host/path"
	case u.Scheme != "rtsp" && u.Scheme != "rtsps":
		return fmt.Sprintf("scheme %q not supported: want rtsp:// or rtsps://", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return "URL has no host"
	}
	return checkURLPort(u)
}

// isToken reports whether s is a non-empty string of [A-Za-z0-9_-].
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// isSubjectPrefix reports whether s is one or more tokens joined by '.'.
func isSubjectPrefix(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if !isToken(tok) {
			return false
		}
	}
	return true
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return "empty"
	}
	return strconv.Quote(s)
}
