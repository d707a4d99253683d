package config_test

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/configs"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

func TestShippedConfigs(t *testing.T) {
	for name, data := range map[string][]byte{"default.yaml": configs.Default, "visiond.yaml": configs.Example} {
		t.Run(name, func(t *testing.T) {
			cfg, err := config.Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Cameras) == 0 {
				t.Fatal("no cameras")
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("re-validate: %v", err)
			}
		})
	}

	cfg, err := config.Parse(configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Camera{ID: "sample", Kind: "rtsp", URL: "rtsp://127.0.0.1:8554/sample", FPS: 5, Enabled: true,
		Transport: "tcp", Decode: "all", Decoder: "cpu", StallTimeout: 10 * time.Second, Weight: 1, Events: config.Events{Detections: "all"},
		Clips: config.Clips{Enabled: true, PreCapture: 5 * time.Second, PostCapture: 5 * time.Second, MaxLength: 30 * time.Second}}
	if cfg.Site != "demo" || !cfg.Sample.Enabled || len(cfg.Cameras) != 1 {
		t.Fatalf("default.yaml: got site %q, sample %v, cameras %+v", cfg.Site, cfg.Sample.Enabled, cfg.Cameras)
	}
	// The demo's analytics: a zone over the lower half, a line down the middle; clips cut
	// every 30 s (the demo's walkers never leave the scene empty).
	cam := cfg.Cameras[0]
	zones, lines := cam.Zones, cam.Lines
	cam.Objects, cam.Masks, cam.Zones, cam.Lines = analytics.Objects{}, nil, nil, nil
	if !reflect.DeepEqual(cam, want) {
		t.Errorf("default.yaml: camera %+v, want %+v", cam, want)
	}
	if len(zones) != 1 || fmt.Sprint(zones[0].Polygon) != "[[0 0.5] [1 0.5] [1 1] [0 1]]" ||
		len(lines) != 1 || fmt.Sprint(lines[0].Points) != "[[0.5 0] [0.5 1]]" {
		t.Errorf("default.yaml: zones %+v, lines %+v; want the lower half and a line down the middle", zones, lines)
	}
}

func TestDefaults(t *testing.T) {
	t.Setenv(config.LibraryEnv, "")
	// One-thread CPU workers, as many as the CPUs this process may use allow (the rule and
	// the reading of the CPUs are tested in defaults_test.go and internal/limits).
	cpuPool := config.WorkerPool{Count: config.Default().Workers.Pools[0].Count, Provider: "cpu", Threads: 1}
	if cpuPool.Count < 1 || int(cpuPool.Count) > runtime.NumCPU() {
		t.Fatalf("default count %d on a machine of %d CPUs", cpuPool.Count, runtime.NumCPU())
	}
	for _, doc := range []string{"", "# only a comment\n", "~\n", "cameras: []\n", "http:\nworkers:\n"} {
		cfg, err := config.Parse([]byte(doc))
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if cfg.Site != "local" || cfg.LogLevel != "info" || cfg.LogFormat != "text" ||
			cfg.HTTP.Listen != "127.0.0.1:8080" ||
			cfg.NATS != (config.NATS{Listen: "127.0.0.1:4222", SubjectPrefix: "visiond", JetStream: true,
				Stream:    config.Stream{MaxAge: 7 * 24 * time.Hour, MaxBytesMiB: 1024, DuplicateWindow: 2 * time.Minute},
				OutboxMiB: 64, HealthInterval: 10 * time.Second}) ||
			!reflect.DeepEqual(cfg.Workers, config.Workers{Model: "third_party/yolov8n.onnx", Library: "third_party/libonnxruntime.so.1",
				Confidence: 0.25, IoU: 0.45, JobTimeout: 5 * time.Second, Pools: []config.WorkerPool{cpuPool}}) ||
			cfg.Pipeline != (config.Pipeline{Slice: 200 * time.Millisecond, MaxFrameAge: time.Second}) ||
			cfg.Sample != (config.Sample{Listen: "127.0.0.1:8554", File: "third_party/media/vtest.h264.ts"}) ||
			cfg.CameraDefaults.FPS != 5 || cfg.CameraDefaults.Transport != "tcp" ||
			cfg.CameraDefaults.Decode != "all" || cfg.CameraDefaults.Decoder != "cpu" ||
			cfg.CameraDefaults.StallTimeout != 10*time.Second ||
			cfg.CameraDefaults.Weight != 1 ||
			cfg.CameraDefaults.Enabled == nil || !*cfg.CameraDefaults.Enabled ||
			len(cfg.Cameras) != 0 {
			t.Errorf("%q: not the defaults: %+v", doc, cfg)
		}
	}

	t.Setenv(config.LibraryEnv, "/opt/ort/libonnxruntime.so")
	if cfg, err := config.Parse(nil); err != nil || cfg.Workers.Library != "/opt/ort/libonnxruntime.so" {
		t.Errorf("library from $%s: got %v, %v", config.LibraryEnv, cfg, err)
	}
	if err := config.Default().Validate(); err != nil {
		t.Errorf("Default() does not validate: %v", err)
	}
}

func TestExplicitValues(t *testing.T) {
	cfg, err := config.Parse([]byte(`
http:
  listen: ""
workers:
  pools:
    - {threads: 0, device: 1, provider: cuda}
    - count: 3
      provider: tensorrt
      fallback: cpu
      cuda: {arena_extend_strategy: kSameAsRequested, gpu_mem_limit_mib: 2048}
      tensorrt: {fp16: true, engine_cache: /var/cache/visiond/trt}
    - {}
    - {provider: cpu, threads: 0, count: 1, spin: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []config.WorkerPool{
		{Count: 1, Provider: "cuda", Device: 1},
		{Count: 3, Provider: "tensorrt", Fallback: "cpu",
			CUDA:     config.CUDA{ArenaExtendStrategy: "kSameAsRequested", GPUMemLimitMiB: 2048},
			TensorRT: config.TensorRT{FP16: true, EngineCache: "/var/cache/visiond/trt"}},
		{Count: config.Default().Workers.Pools[0].Count, Provider: "cpu", Threads: 1},
		{Count: 1, Provider: "cpu", Threads: 0, Spin: true},
	}
	if cfg.HTTP.Listen != "" || !reflect.DeepEqual(cfg.Workers.Pools, want) {
		t.Errorf("got %+v %+v", cfg.HTTP, cfg.Workers.Pools)
	}
}

func TestCameraResolution(t *testing.T) {
	cfg, err := config.Parse([]byte(`
camera_defaults:
  fps: 2
  transport: udp
  decode: keyframes
  decoder: cuda
cameras:
  - id: inherits
    url: rtsp://cam1/stream
  - id: overrides
    url: rtsps://cam2:322/live
    username: user
    password: pw
    fps: 12.5
    transport: auto
    enabled: true
    decode: all
    decoder: cpu
    stall_timeout: 3s
    weight: 2
  - id: off
    url: rtsp://cam3
    enabled: false
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []config.Camera{
		{ID: "inherits", Kind: "rtsp", URL: "rtsp://cam1/stream", FPS: 2, Enabled: true, Transport: "udp",
			Decode: "keyframes", Decoder: "cuda", StallTimeout: 10 * time.Second, Weight: 1, Events: config.Events{Detections: "all"}, Clips: config.DefaultClips()},
		{ID: "overrides", Kind: "rtsp", URL: "rtsps://cam2:322/live", Username: "user", Password: "pw", FPS: 12.5,
			Enabled: true, Transport: "auto", Decode: "all", Decoder: "cpu", StallTimeout: 3 * time.Second, Weight: 2, Events: config.Events{Detections: "all"}, Clips: config.DefaultClips()},
		{ID: "off", Kind: "rtsp", URL: "rtsp://cam3", FPS: 2, Enabled: false, Transport: "udp",
			Decode: "keyframes", Decoder: "cuda", StallTimeout: 10 * time.Second, Weight: 1, Events: config.Events{Detections: "all"}, Clips: config.DefaultClips()},
	}
	if !reflect.DeepEqual(cfg.Cameras, want) {
		t.Errorf("got  %+v\nwant %+v", cfg.Cameras, want)
	}

	// The source is built from the resolved camera as it is: its options are
	// already the sources package's values.
	src := cfg.Cameras[1].Source()
	if src.ID != "overrides" || src.Kind != sources.KindRTSP || src.URL != "rtsps://cam2:322/live" ||
		src.Username != "user" || src.Password != "pw" || src.Transport != sources.TransportAuto ||
		src.Decode != sources.DecodeAll || src.Decoder != sources.DecoderCPU || src.StallTimeout != 3*time.Second {
		t.Errorf("Source() = %+v", src)
	}
	if src := cfg.Cameras[0].Source(); src.Decoder != sources.DecoderCUDA {
		t.Errorf("Source() of a camera inheriting decoder cuda: decoder %q", src.Decoder)
	}

	// Like decode, decoder is for kind rtsp, and not refused for the other kinds: a
	// gstreamer or file camera under camera_defaults.decoder cuda, or setting it, is valid.
	cfg, err = config.Parse([]byte(`
camera_defaults: {decoder: cuda}
cameras:
  - {id: g, kind: gstreamer, pipeline: videotestsrc ! appsink}
  - {id: f, kind: file, file: a.mp4, decoder: cuda}
`))
	if err != nil || cfg.Cameras[0].Decoder != sources.DecoderCUDA || cfg.Cameras[1].Decoder != sources.DecoderCUDA {
		t.Errorf("decoder for kinds gstreamer and file: %v, %+v", err, cfg)
	}

	cfg, err = config.Parse([]byte("camera_defaults:\n  enabled: false\ncameras:\n  - {id: a, url: rtsp://a}\n  - {id: b, url: rtsp://b, enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Cameras[0].Enabled || !cfg.Cameras[1].Enabled {
		t.Errorf("enabled: got %+v", cfg.Cameras)
	}
}

// The nats section converts into the publisher's and the embedded server's
// options, sizes in bytes.
func TestNATSOptions(t *testing.T) {
	cfg, err := config.Parse([]byte(`
site: lab
state_dir: /var/lib/visiond
nats:
  auth: {user: box, password: s3cret}
  tls: {cert_file: s.pem, key_file: s.key}
  outbox_mib: 8
  mqtt: {listen: "127.0.0.1:1883"}
  stream: {max_age: 1h, max_bytes_mib: 16, duplicate_window: 30s}
  leaf:
    url: tls://hub:7422
    auth: {credentials_file: box.creds}
    tls: {ca_file: ca.pem}
`))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.NATSPublisher()
	if p.URL != "" || p.Auth != (sinks.Auth{User: "box", Password: "s3cret"}) || p.TLS != (sinks.TLS{CertFile: "s.pem", KeyFile: "s.key"}) ||
		p.Prefix != "visiond" || p.Site != "lab" || !p.JetStream || p.OutboxBytes != 8<<20 ||
		p.Stream != (sinks.StreamConfig{Name: "visiond-lab", MaxAge: time.Hour, MaxBytes: 16 << 20, Duplicates: 30 * time.Second}) {
		t.Errorf("NATSPublisher() = %+v", p)
	}
	s, err := cfg.NATSServer()
	if err != nil {
		t.Fatal(err)
	}
	want := sinks.Server{Listen: "127.0.0.1:4222", StoreDir: "/var/lib/visiond", Domain: "lab",
		Auth: p.Auth, TLS: p.TLS, Leaf: sinks.Leaf{URL: "tls://hub:7422", Auth: sinks.Auth{CredentialsFile: "box.creds"}, TLS: sinks.TLS{CAFile: "ca.pem"}}}
	if s.Listen != want.Listen || s.MQTT != "127.0.0.1:1883" || s.StoreDir != want.StoreDir || s.Domain != want.Domain || s.Auth != want.Auth || s.TLS != want.TLS || s.Leaf != want.Leaf {
		t.Errorf("NATSServer() = %+v", s)
	}
	cfg.NATS.JetStream = false
	if s, err := cfg.NATSServer(); err != nil || s.StoreDir != "" || s.Domain != "" {
		t.Errorf("without JetStream: NATSServer() = %+v, %v", s, err)
	}
}

// badCases each hold one mistake (or several, where said); the error must
// name the field and its line, and contain msg.
var badCases = []struct {
	name   string
	doc    string
	field  string
	line   int
	msg    string
	absent string // must not appear in the error
}{
	{"unknown top-level key", "site: a\nlog_levl: debug\n", "log_levl", 2, `unknown key "log_levl"`, ""},
	{"unknown camera key", "cameras:\n  - id: a\n    url: rtsp://h\n    fsp: 3\n", "cameras[0].fsp", 4, `unknown key "fsp"`, ""},
	{"unknown nested key", "workers:\n  model: m.onnx\n  gpu: 0\n", "workers.gpu", 3, `unknown key "gpu"`, ""},
	{"repeated key", "site: a\nsite: b\n", "site", 2, "repeated (first at line 1)", ""},
	{"duplicate id", "cameras:\n  - id: door\n    url: rtsp://a\n  - id: yard\n    url: rtsp://b\n  - id: door\n    url: rtsp://c\n",
		"cameras[2].id", 6, `duplicate id "door" (first at cameras[0], line 2)`, ""},
	{"missing url", "cameras:\n  - id: a\n", "cameras[0].url", 2, "missing", ""},
	{"missing id", "cameras:\n  - url: rtsp://h\n", "cameras[0].id", 2, "missing", ""},
	{"http url", "cameras:\n  - id: a\n    url: http://admin:hunter2@cam/x\n", "cameras[0].url", 3, `scheme "http" not supported`, "hunter2"},
	{"no scheme", "cameras:\n  - id: a\n    url: cam.local/stream\n", "cameras[0].url", 3, "no scheme", ""},
	{"no host", "cameras:\n  - id: a\n    url: rtsp:///stream\n", "cameras[0].url", 3, "no host", ""},
	{"port only", "cameras:\n  - id: a\n    url: rtsp://:554/stream\n", "cameras[0].url", 3, "no host", ""},
	{"unparseable url", "cameras:\n  - id: a\n    url: \"rtsp://cam:55x4/\"\n", "cameras[0].url", 3, "cannot parse URL", ""},
	{"password in unparseable url", "cameras:\n  - id: a\n    url: \"rtsp://admin:hunter2%zz@cam:55x4/\"\n", "cameras[0].url", 3, "cannot parse URL", "hunter2"},
	{"password with slash", "cameras:\n  - id: a\n    url: \"rtsp://admin:hun/ter2@cam/x\"\n", "cameras[0].url", 3, "cannot parse URL", "ter2"},
	{"fps 0", "cameras:\n  - id: a\n    url: rtsp://h\n    fps: 0\n", "cameras[0].fps", 4, "must be a finite number > 0, got 0", ""},
	{"fps -1", "cameras:\n  - id: a\n    url: rtsp://h\n    fps: -1\n", "cameras[0].fps", 4, "got -1", ""},
	{"fps NaN", "cameras:\n  - id: a\n    url: rtsp://h\n    fps: .nan\n", "cameras[0].fps", 4, "got NaN", ""},
	{"fps not a number", "cameras:\n  - id: a\n    url: rtsp://h\n    fps: fast\n", "cameras[0].fps", 4, `want a number, got "fast"`, ""},
	{"default fps 0", "camera_defaults:\n  fps: 0\n", "camera_defaults.fps", 2, "> 0", ""},
	{"bad id", "cameras:\n  - id: front.door\n    url: rtsp://h\n", "cameras[0].id", 2, `invalid id "front.door"`, ""},
	{"long id", "cameras:\n  - id: " + strings.Repeat("x", 65) + "\n    url: rtsp://h\n", "cameras[0].id", 2, "too long: 65 characters", ""},
	{"bad transport", "cameras:\n  - id: a\n    url: rtsp://h\n    transport: quic\n", "cameras[0].transport", 4, `unknown value "quic"`, ""},
	{"bad enabled", "cameras:\n  - id: a\n    url: rtsp://h\n    enabled: maybe\n", "cameras[0].enabled", 4, "want true or false", ""},
	{"bad spin", "workers:\n  pools:\n    - {spin: maybe}\n", "workers.pools[0].spin", 3, `want true or false, got "maybe"`, ""},
	{"bad pprof", "http:\n  pprof: yes please\n", "http.pprof", 2, `want true or false, got "yes please"`, ""},
	{"bad provider", "workers:\n  pools:\n    - provider: openvino\n", "workers.pools[0].provider", 3, `unknown value "openvino": want one of cpu, cuda, tensorrt`, ""},
	{"no pools", "workers:\n  pools: []\n", "workers.pools", 2, "missing: at least one pool", ""},
	{"bad arena strategy", "workers:\n  pools:\n    - provider: cuda\n      cuda: {arena_extend_strategy: huge}\n", "workers.pools[0].cuda.arena_extend_strategy", 4, `unknown value "huge"`, ""},
	{"bad fallback", "workers:\n  pools:\n    - {provider: cuda, fallback: gpu}\n", "workers.pools[0].fallback", 3, `unknown value "gpu": want one of cpu`, ""},
	{"cpu with cuda options", "workers:\n  pools:\n    - cuda: {gpu_mem_limit_mib: 10}\n", "workers.pools[0].provider", 3, "cpu takes no cuda or tensorrt options", ""},
	{"empty gpu memory command", "workers:\n  gpu_memory_command: [\"\", x]\n", "workers.gpu_memory_command", 2, "must name the program", ""},
	{"negative memory limit", "workers:\n  memory_limit_mib: -1\n", "workers.memory_limit_mib", 2, "must be >= 0", ""},
	{"tiny memory budget", "memory_limit_mib: 100\n", "memory_limit_mib", 1, "100 is too small: want 0 (the cgroup's limit) or at least 256 MiB", ""},
	{"negative memory budget", "memory_limit_mib: -1\n", "memory_limit_mib", 1, "-1 is too small", ""},
	{"memory budget in words", "memory_limit_mib: 2G\n", "memory_limit_mib", 1, `want a whole number, got "2G"`, ""},
	{"bad log level", "log_level: verbose\n", "log_level", 1, `unknown value "verbose"`, ""},
	{"bad log format", "log_format: xml\n", "log_format", 1, `unknown value "xml"`, ""},
	{"bad site", "site: my site\n", "site", 1, `invalid site "my site"`, ""},
	{"count 0", "workers:\n  pools:\n    - count: 0\n", "workers.pools[0].count", 3, "must be in 1..64 or auto, got 0", ""},
	{"count many", "workers:\n  pools:\n    - count: many\n", "workers.pools[0].count", 3, `want a whole number or auto, got "many"`, ""},
	{"count Auto", "workers:\n  pools:\n    - count: Auto\n", "workers.pools[0].count", 3, `want a whole number or auto, got "Auto"`, ""},
	{"count list", "workers:\n  pools:\n    - count: [auto]\n", "workers.pools[0].count", 3, "want a whole number or auto, got a list", ""},
	{"count -1", "workers:\n  pools:\n    - count: -1\n", "workers.pools[0].count", 3, "must be in 1..64 or auto, got -1", ""},
	{"count 65", "workers:\n  pools:\n    - count: 65\n", "workers.pools[0].count", 3, "got 65", ""},
	{"count 2.5", "workers:\n  pools:\n    - count: 2.5\n", "workers.pools[0].count", 3, `want a whole number or auto, got "2.5"`, ""},
	{"negative device", "workers:\n  pools:\n    - {provider: cuda, device: -1}\n", "workers.pools[0].device", 3, "must be >= 0", ""},
	{"confidence 1.5", "workers:\n  confidence: 1.5\n", "workers.confidence", 2, "between 0 and 1 (exclusive), got 1.5", ""},
	{"iou 0", "workers:\n  iou: 0\n", "workers.iou", 2, "got 0", ""},
	{"empty model", "workers:\n  model: \"\"\n", "workers.model", 2, "missing", ""},
	{"bad duration", "pipeline:\n  slice: 200 ms\n", "pipeline.slice", 2, `invalid duration "200 ms"`, ""},
	{"bare number duration", "workers:\n  job_timeout: 5\n", "workers.job_timeout", 2, `invalid duration "5"`, ""},
	{"zero duration", "pipeline:\n  max_frame_age: 0s\n", "pipeline.max_frame_age", 2, "must be > 0", ""},
	{"bad http listen", "http:\n  listen: localhost\n", "http.listen", 2, "want host:port", ""},
	{"bad kind", "cameras:\n  - id: a\n    kind: usb\n", "cameras[0].kind", 3, `unknown value "usb": want one of rtsp, gstreamer, file`, ""},
	{"gstreamer without pipeline", "cameras:\n  - id: a\n    kind: gstreamer\n", "cameras[0].pipeline", 2, "missing: kind gstreamer needs a pipeline", ""},
	{"gstreamer without appsink", "cameras:\n  - id: a\n    kind: gstreamer\n    pipeline: videotestsrc ! fakesink\n", "cameras[0].pipeline", 4, "must end in appsink", ""},
	{"gstreamer with url", "cameras:\n  - id: a\n    kind: gstreamer\n    pipeline: videotestsrc ! appsink\n    url: rtsp://h\n", "cameras[0].url", 5, "not used by kind gstreamer", ""},
	{"file without file", "cameras:\n  - id: a\n    kind: file\n", "cameras[0].file", 2, "missing: kind file needs a video file", ""},
	{"file with credentials", "cameras:\n  - id: a\n    kind: file\n    file: a.mp4\n    username: u\n", "cameras[0].username", 5, "credentials are for kind rtsp", ""},
	{"credentials twice", "cameras:\n  - id: a\n    url: rtsp://u:hunter2@h/x\n    username: v\n    password: hunter2\n", "cameras[0].username", 4, "credentials both in url and in username/password", "hunter2"},
	{"password without user", "cameras:\n  - id: a\n    url: rtsp://h/x\n    password: hunter2\n", "cameras[0].username", 2, "missing: password is set", "hunter2"},
	{"bad decode", "cameras:\n  - id: a\n    url: rtsp://h\n    decode: some\n", "cameras[0].decode", 4, `unknown value "some": want one of all, keyframes`, ""},
	{"bad default decode", "camera_defaults:\n  decode: iframes\n", "camera_defaults.decode", 2, `unknown value "iframes"`, ""},
	{"bad decoder", "cameras:\n  - id: a\n    url: rtsp://h\n    decoder: nvdec\n", "cameras[0].decoder", 4, `unknown value "nvdec": want one of cpu, cuda`, ""},
	{"bad default decoder", "camera_defaults:\n  decoder: gpu\n", "camera_defaults.decoder", 2, `unknown value "gpu": want one of cpu, cuda`, ""},
	{"decoder in capitals", "cameras:\n  - id: a\n    url: rtsp://h\n    decoder: CUDA\n", "cameras[0].decoder", 4, `unknown value "CUDA"`, ""},
	{"zero weight", "cameras:\n  - id: a\n    url: rtsp://h\n    weight: 0\n", "cameras[0].weight", 4, "must be a finite number > 0, got 0", ""},
	{"zero stall timeout", "cameras:\n  - id: a\n    url: rtsp://h\n    stall_timeout: 0s\n", "cameras[0].stall_timeout", 4, "must be > 0", ""},
	{"bad port", "nats:\n  listen: 127.0.0.1:99999\n", "nats.listen", 2, "not a number in 0..65535", ""},
	{"bad sample listen", "sample:\n  enabled: true\n  listen: 8554\n", "sample.listen", 3, "want host:port", ""},
	{"bad nats url", "nats:\n  url: nats://a:4222,http://u:hunter2@b:4222\n", "nats.url", 2, `server 2: scheme "http" not supported`, "hunter2"},
	{"two kinds of nats credentials", "nats:\n  url: nats://h:4222\n  auth:\n    token: s3cret\n    credentials_file: /etc/visiond/box.creds\n", "nats.auth", 3, "give one of user and password, token", "s3cret"},
	{"nats password without user", "nats:\n  auth:\n    password: s3cret\n", "nats.auth.user", 2, "a password needs a user", "s3cret"},
	{"embedded server with creds", "nats:\n  auth:\n    credentials_file: box.creds\n", "nats.auth", 2, "the embedded server takes user and password or a token", ""},
	{"tls cert without key", "nats:\n  url: tls://h:4222\n  tls:\n    cert_file: c.pem\n", "nats.tls", 3, "cert_file and key_file go together", ""},
	{"leaf with external url", "nats:\n  url: nats://h:4222\n  leaf:\n    url: nats-leaf://hub:7422\n", "nats.leaf.url", 4, "needs the embedded server", ""},
	{"bad leaf scheme", "nats:\n  leaf:\n    url: http://u:hunter2@hub:7422\n", "nats.leaf.url", 3, `scheme "http" not supported: want nats-leaf:// or nats:// or tls://`, "hunter2"},
	{"bad stream name", "nats:\n  stream:\n    name: a.b\n", "nats.stream.name", 3, `invalid stream name "a.b"`, ""},
	{"stream max bytes 0", "nats:\n  stream:\n    max_bytes_mib: 0\n", "nats.stream.max_bytes_mib", 3, "must be >= 1, got 0", ""},
	{"outbox 0", "nats:\n  outbox_mib: 0\n", "nats.outbox_mib", 2, "must be >= 1", ""},
	{"bad domain", "nats:\n  domain: a.b\n", "nats.domain", 2, `invalid domain "a.b"`, ""},
	{"bad subject prefix", "nats:\n  subject_prefix: a.>\n", "nats.subject_prefix", 2, "invalid prefix", ""},
	{"mqtt no port", "nats:\n  mqtt:\n    listen: 127.0.0.1\n", "nats.mqtt.listen", 3, `"127.0.0.1": want host:port`, ""},
	{"mqtt bad port", "nats:\n  mqtt: {listen: \":1883x\"}\n", "nats.mqtt.listen", 2, `port "1883x" is not a number in 0..65535`, ""},
	{"mqtt unknown key", "nats:\n  mqtt:\n    port: 1883\n", "nats.mqtt.port", 3, `unknown key "port"`, ""},
	{"mqtt with external url", "nats:\n  url: nats://h:4222\n  mqtt:\n    listen: 127.0.0.1:1883\n", "nats.mqtt.listen", 4, "the MQTT listener is the embedded server's", ""},
	{"mqtt without jetstream", "nats:\n  jetstream: false\n  mqtt:\n    listen: 127.0.0.1:1883\n", "nats.mqtt.listen", 4, "needs nats.jetstream: true", ""},
	{"discovery without a listener", "nats:\n  mqtt:\n    discovery: true\n", "nats.mqtt.discovery", 3, "set nats.mqtt.listen", ""},
	{"discovery with client certificates", "nats:\n  tls: {cert_file: c.pem, key_file: k.pem, ca_file: ca.pem}\n  mqtt:\n    listen: 127.0.0.1:1883\n    discovery: true\n", "nats.mqtt.discovery", 5, "drop nats.tls.ca_file or the discovery", ""},
	{"discovery prefix with a wildcard", "nats:\n  mqtt:\n    listen: 127.0.0.1:1883\n    discovery_prefix: home/#\n", "nats.mqtt.discovery_prefix", 4, `"home/#" is not an MQTT topic prefix`, ""},
	{"discovery prefix with an empty level", "nats:\n  mqtt:\n    listen: 127.0.0.1:1883\n    discovery_prefix: home//x\n", "nats.mqtt.discovery_prefix", 4, "not an MQTT topic prefix", ""},
	{"mqtt on the nats port", "nats:\n  listen: 127.0.0.1:4222\n  mqtt:\n    listen: 127.0.0.1:4222\n", "nats.mqtt.listen", 4, "is nats.listen's address too", ""},
	{"section not a mapping", "workers: 4\n", "workers", 1, "want a mapping of keys, got a single value", ""},
	{"cameras not a list", "cameras:\n  id: a\n", "cameras", 2, "want a list, got a mapping", ""},
	{"top level a list", "- a\n- b\n", "", 1, "must be a mapping", ""},
	{"two documents", "site: a\n---\nsite: b\n", "", 2, "second YAML document", ""},
	{"syntax error", "site: [a\n", "", 1, "did not find expected", ""},

	// Issue 13, item 5: what check let through and run then failed on.
	{"long site", "site: " + strings.Repeat("s", 65) + "\n", "site", 1, "too long: 65 characters, at most 64 allowed (the event schema's limit", ""},
	{"url port too high", "cameras:\n  - id: a\n    url: rtsp://u:hunter2@h:99999/x\n", "cameras[0].url", 3, "port 99999 out of range: want 1..65535", "hunter2"},
	{"url port 0", "cameras:\n  - id: a\n    url: rtsp://h:0/x\n", "cameras[0].url", 3, "port 0 out of range", ""},
	{"url with a space", "cameras:\n  - id: a\n    url: 'rtsp://u:hunter2@h/a b'\n", "cameras[0].url", 3, "a space at byte 21: a URL holds none (write it as %20)", "hunter2"},
	{"url with a space in the host", "cameras:\n  - id: a\n    url: 'rtsp://cam 1/x'\n", "cameras[0].url", 3, "a space at byte 11", ""},
	{"url with a tab", "cameras:\n  - id: a\n    url: \"rtsp://h/a\\tb\"\n", "cameras[0].url", 3, "a control character (U+0009) at byte 11", ""},
	{"url with a newline", "cameras:\n  - id: a\n    url: \"rtsp://h/a\\n\"\n", "cameras[0].url", 3, "a control character (U+000A)", ""},
	{"nats url port", "nats:\n  url: nats://a:4222,nats://b:70000\n", "nats.url", 2, "server 2: port 70000 out of range: want 1..65535", ""},
	{"nats url space", "nats:\n  url: 'nats://a b:4222'\n", "nats.url", 2, "server 1: a space at byte 9", ""},
	{"leaf url port", "nats:\n  leaf: {url: 'tls://hub:0'}\n", "nats.leaf.url", 2, "server 1: port 0 out of range", ""},
	{"null camera", "cameras: [~]\n", "cameras[0]", 1, "empty entry (a bare '-' or ~)", ""},
	{"bare dash camera", "cameras:\n  - {id: a, url: rtsp://h}\n  -\n", "cameras[1]", 3, "empty entry", ""},
	{"null pool", "workers:\n  pools: [{provider: cpu}, ~]\n", "workers.pools[1]", 2, "empty entry", ""},

	// Issue 13, item 8: environment variables and secrets in files.
	{"unset variable", "site: ${VISIOND_TEST_UNSET_VAR}\n", "site", 1, "environment variable VISIOND_TEST_UNSET_VAR is not set (named as ${VISIOND_TEST_UNSET_VAR})", ""},
	{"unset variable in a password", "nats:\n  auth: {user: u, password: 'hunter2${VISIOND_TEST_UNSET_VAR}'}\n", "nats.auth.password", 2, "VISIOND_TEST_UNSET_VAR is not set", "hunter2"},
	{"unclosed variable", "cameras:\n  - {id: a, url: 'rtsp://h/${PATH'}\n", "cameras[0].url", 2, `"${" without its closing "}" (write "$$" for a "$")`, ""},
	{"bad variable name", "site: ${1X}\n", "site", 1, "${1X}: not a variable name", ""},
	{"empty variable name", "site: ${}\n", "site", 1, "${}: not a variable name", ""},
	{"variable in a number", "camera_defaults: {fps: '${FPS}'}\n", "camera_defaults.fps", 1, `want a number, got "${FPS}"`, ""},
	{"variable in a key", "${SITE}: a\n", "${SITE}", 1, `unknown key "${SITE}"`, ""},
	{"password and password_file", "nats:\n  auth:\n    user: u\n    password: hunter2\n    password_file: /etc/visiond/pw\n", "nats.auth.password_file", 5, "both password and password_file are set: keep one", "hunter2"},
	{"token and token_file", "nats:\n  leaf:\n    auth: {token: hunter2, token_file: /x}\n", "nats.leaf.auth.token_file", 3, "both token and token_file are set", "hunter2"},
	{"camera password and password_file", "cameras:\n  - {id: a, url: rtsp://h, username: u, password: hunter2, password_file: /x}\n", "cameras[0].password_file", 2, "both password and password_file", "hunter2"},
	{"missing password file", "nats:\n  auth:\n    user: u\n    password_file: /nonexistent/pw\n", "nats.auth.password_file", 4, `cannot read "/nonexistent/pw": no such file or directory`, ""},
	{"missing camera password file", "cameras:\n  - {id: a, url: rtsp://h, username: u, password_file: /nonexistent/pw}\n", "cameras[0].password_file", 2, "cannot read", ""},
	{"password file a directory", "nats:\n  auth: {user: u, password_file: /}\n", "nats.auth.password_file", 2, `"/" is a directory, want a file holding the secret`, ""},

	// Issue 13, item 16: the HTTP endpoint off loopback.
	{"http on every interface", "http:\n  listen: ':8080'\n", "http.listen", 2, `":8080" is not a loopback address, and the endpoint serves every camera's picture: set http.auth`, ""},
	{"http on 0.0.0.0", "http:\n  listen: 0.0.0.0:8080\n", "http.listen", 2, "not a loopback address", ""},
	{"http on ::", "http:\n  listen: '[::]:8080'\n", "http.listen", 2, "not a loopback address", ""},
	{"http on a LAN address", "http:\n  listen: 10.0.0.5:8080\n", "http.listen", 2, "not a loopback address", ""},
	{"http on a host name", "http:\n  listen: box.lan:8080\n", "http.listen", 2, "not a loopback address", ""},
	{"http token too short", "http:\n  auth: {token: hunter2}\n", "http.auth.token", 2, "too short: 7 characters, want at least 16", "hunter2"},
	{"http user without hash", "http:\n  auth: {user: admin}\n", "http.auth.password_hash", 2, `missing: user "admin" needs the bcrypt hash`, ""},
	{"http hash without user", "http:\n  auth: {password_hash: '$2a$04$uBzx1WJTKc7/4qRnDFu9s.jx9nfO1lUX.53nAMwzHaO1u6eAlO3zC'}\n", "http.auth.user", 2, "missing: password_hash is set", ""},
	{"http password not hashed", "http:\n  auth: {user: admin, password_hash: hunter2}\n", "http.auth.password_hash", 2, "not a bcrypt hash", "hunter2"},
	{"http user with colon", "http:\n  auth: {user: 'a:b', password_hash: '$2a$04$uBzx1WJTKc7/4qRnDFu9s.jx9nfO1lUX.53nAMwzHaO1u6eAlO3zC'}\n", "http.auth.user", 2, "must not hold ':'", ""},
	{"http token and token_file", "http:\n  auth:\n    token: hunter2hunter2hunter2\n    token_file: /x\n", "http.auth.token_file", 4, "both token and token_file are set", "hunter2"},
	{"http missing hash file", "http:\n  auth: {user: admin, password_hash_file: /nonexistent/hash}\n", "http.auth.password_hash_file", 2, `cannot read "/nonexistent/hash"`, ""},
	{"http cert without key", "http:\n  tls: {cert_file: c.pem}\n", "http.tls", 2, "cert_file and key_file go together", ""},
}

func TestBadConfigs(t *testing.T) {
	for _, tc := range badCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.doc))
			if err == nil {
				t.Fatalf("no error; got %+v", cfg)
			}
			var cerr *config.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error %T is not a *config.Error: %v", err, err)
			}
			found := false
			for _, p := range cerr.Problems {
				if p.Field == tc.field && p.Line == tc.line && strings.Contains(p.Msg, tc.msg) {
					found = true
				}
			}
			if !found {
				t.Errorf("want a problem %q at line %d containing %q; got:\n%v", tc.field, tc.line, tc.msg, err)
			}
			if len(cerr.Problems) != 1 {
				t.Errorf("want exactly one problem, got:\n%v", err)
			}
			if tc.absent != "" && strings.Contains(err.Error(), tc.absent) {
				t.Errorf("error leaks %q:\n%v", tc.absent, err)
			}
		})
	}
}

func TestSeveralProblems(t *testing.T) {
	_, err := config.Parse([]byte(`site: a
log_level: loud
workers:
  memory_limit_mib: -5
  confidence: 2
cameras:
  - id: a
    url: http://admin:hunter2@cam
  - id: a
    fps: -1
    colour: red
`))
	want := `line 2: log_level: unknown value "loud": want one of debug, info, warn, error
line 4: workers.memory_limit_mib: must be >= 0 (0 = no limit), got -5
line 5: workers.confidence: must be between 0 and 1 (exclusive), got 2
line 8: cameras[0].url: scheme "http" not supported: want rtsp:// or rtsps://
line 9: cameras[1].id: duplicate id "a" (first at cameras[0], line 7)
line 9: cameras[1].url: missing
line 10: cameras[1].fps: must be a finite number > 0, got -1
line 11: cameras[1].colour: unknown key "colour" (known here: clips, decode, decoder, enabled, events, file, fps, id, kind, lines, masks, objects, password, password_file, pipeline, stall_timeout, transport, url, username, weight, zones)`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestValidateGoConfig(t *testing.T) {
	cfg := config.Default()
	cam := config.Camera{ID: "a", Kind: "rtsp", URL: "rtsp://h", FPS: 5, Transport: "tcp", Decode: "all", Decoder: "cpu", StallTimeout: time.Second, Weight: 1}
	cam2 := cam
	cam2.FPS = 0
	cfg.Cameras = []config.Camera{cam, cam2}
	err := cfg.Validate()
	want := "cameras[1].id: duplicate id \"a\" (first at cameras[0])\ncameras[1].fps: must be a finite number > 0, got 0"
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "visiond.yaml")
	testutil.WriteFile(t, path, "cameras:\n  - id: a\n")
	_, err := config.Load(path)
	var cerr *config.Error
	if err == nil || !strings.HasPrefix(err.Error(), path+": line 2: cameras[0].url: missing") || !errors.As(err, &cerr) {
		t.Errorf("got %v", err)
	}
	if _, err := config.Load(filepath.Join(dir, "nope.yaml")); err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("missing file: got %v", err)
	}
	testutil.WriteFile(t, path, string(configs.Example))
	if _, err := config.Load(path); err != nil {
		t.Error(err)
	}
}

// A file must list its cameras: an empty file, or one cut short before (or just after) its
// cameras key, is what an editor or a deploy tool leaves while it writes, and must not be
// taken for "the defaults, no cameras". Parse (documents built in code) keeps the defaults.
func TestLoadWantsCameras(t *testing.T) {
	path := filepath.Join(t.TempDir(), "visiond.yaml")
	for _, tc := range []struct {
		doc  string
		want []string // what Load's error begins with, then what else it says; none: no error
	}{
		{"", []string{path + ": empty file"}},
		{"  \n\n   \n", []string{path + ": empty file"}},
		{"# being edited\n\n# cameras: [a]\n", []string{path + ": empty file"}},
		{"~\n", []string{path + ": empty file"}},
		{"site: lab\nhttp: {listen: '127.0.0.1:8080'}\n", []string{path + `: cameras: no list of cameras: a config file must list its cameras ("cameras: []" for none)`}},
		{"site: lab\ncameras:\n", []string{path + ": line 2: cameras: no list of cameras"}},
		{"site: lab\nfoo: 1\n", []string{path + `: line 2: foo: unknown key "foo"`, "cameras: no list of cameras"}},
		{"cameras: []\n", nil},
		{"site: lab\ncameras:\n  - {id: a, url: rtsp://h/1}\n", nil},
	} {
		testutil.WriteFile(t, path, tc.doc)
		_, err := config.Load(path)
		var cerr *config.Error
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%q: %v", tc.doc, err)
		case tc.want != nil && (err == nil || !strings.HasPrefix(err.Error(), tc.want[0]) || !errors.As(err, &cerr)):
			t.Errorf("%q: got %v, want an error beginning %q", tc.doc, err, tc.want[0])
		case len(tc.want) > 1 && !strings.Contains(err.Error(), tc.want[1]):
			t.Errorf("%q: got %v, want it to say %q too", tc.doc, err, tc.want[1])
		}
		// Parse gives the defaults for what a document leaves out, cameras included.
		if _, err := config.Parse([]byte(tc.doc)); err != nil && !strings.Contains(tc.doc, "foo") {
			t.Errorf("Parse(%q): %v", tc.doc, err)
		}
	}
}

// TestRoundTrip checks that a parsed Config marshals to YAML that parses back
// to the same Config: the resolved form is itself a valid file.
func TestRoundTrip(t *testing.T) {
	for _, data := range [][]byte{configs.Default, configs.Example} {
		checkRoundTrip(t, data)
	}
}

func checkRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	cfg, err := config.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := config.Parse(out)
	if err != nil {
		t.Fatalf("re-parse of\n%s: %v", out, err)
	}
	if out2, _ := yaml.Marshal(again); string(out2) != string(out) {
		t.Fatalf("round trip differs:\n%s\nthen\n%s", out, out2)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(configs.Default)
	f.Add(configs.Example)
	for _, tc := range badCases {
		f.Add([]byte(tc.doc))
	}
	for _, tc := range badAnalytics {
		f.Add([]byte(tc.yaml))
	}
	for _, tc := range badClips {
		f.Add([]byte(tc.yaml))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse(data)
		if err != nil {
			var cerr *config.Error
			if !errors.As(err, &cerr) || len(cerr.Problems) == 0 {
				t.Fatalf("error without problems: %T %v", err, err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed, but does not re-validate: %v", err)
		}
		if bytes.Contains(data, []byte("$")) || bytes.Contains(data, []byte("_file")) {
			// Substituted values ("$$" became "$") and secrets read from files are written
			// back as they are, not as the file gave them: no round trip.
			return
		}
		checkRoundTrip(t, data)
	})
}
