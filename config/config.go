// Package config holds the schema of visiond's YAML file, its defaults, its
// strict decoding and its validation.
//
// Parse (and Load, which reads a file first) starts from Default, decodes the
// document over it so that a key left out keeps its default, rejects keys the
// schema does not know, resolves every camera against camera_defaults and
// validates the result; Load also requires a file to list its cameras, so
// that an empty or half-written file is an error rather than "no cameras".
// All problems found are reported together, each with the path of the field
// (for example "cameras[2].url") and, when the config came from YAML, its
// line.
//
// A camera's analytics settings (objects, masks, zones, lines, events; see
// analytics.go) are package analytics' types, embedded as YAML leaves and
// checked by analytics.Config.Check, whose problems are reported at the
// camera's path. Their class names are checked by CheckClasses once the
// model's labels are known: by CheckFiles with a labels file, by `visiond
// check -load` and by the daemon. Camera.Analytics returns them as package
// analytics takes them; Camera.Events says which events the camera publishes.
//
// String values may name environment variables as ${NAME}, and every secret
// may come from a file through its _file key (secrets.go); documents over
// MaxFileBytes are refused. Validate looks at values only; CheckFiles opens
// the files the config names (`visiond check`).
//
// Every default is stated on its field below.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/pool"
	"github.com/visiond/visiond/internal/limits"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sources"
)

// Config is visiond's configuration, as read from its YAML file.
type Config struct {
	// Site names this box; it is a token of every NATS subject. Default "local".
	// Letters, digits, '_' and '-' only.
	Site string `yaml:"site"`
	// LogLevel is debug, info, warn or error. Default "info".
	LogLevel string `yaml:"log_level"`
	// LogFormat is text or json. Default "text".
	LogFormat string `yaml:"log_format"`
	// StateDir holds what the daemon keeps across restarts: the embedded NATS
	// server's JetStream store (events not yet delivered). Default "":
	// $STATE_DIRECTORY (set by systemd's StateDirectory=), else
	// $XDG_STATE_HOME/visiond, else ~/.local/state/visiond. See StatePath.
	StateDir string `yaml:"state_dir"`
	// MemoryLimitMiB is the memory budget of the daemon and its worker processes
	// together, in MiB: the daemon's Go memory limit is what the budget leaves the Go
	// runtime, the cameras' clip rings share a quarter of it, and the processes holding
	// more is counted and logged (docs/config.md "Memory"). 0, the default: the memory
	// limit of the cgroup visiond runs in (systemd's MemoryMax= or MemoryHigh=), or no
	// budget where there is none. At least 256; a cgroup limit below it wins.
	MemoryLimitMiB int `yaml:"memory_limit_mib"`

	HTTP     HTTP     `yaml:"http"`
	NATS     NATS     `yaml:"nats"`
	Workers  Workers  `yaml:"workers"`
	Pipeline Pipeline `yaml:"pipeline"`
	Sample   Sample   `yaml:"sample"`
	// ClipStore bounds the site's clip store, which holds the cameras' clips
	// (clips.go). Default: 2048 MiB, 7 days, written under the state directory.
	ClipStore ClipStore `yaml:"clip_store"`

	// CameraDefaults holds the settings shared by all cameras; a camera
	// overrides any of them by setting the same key.
	CameraDefaults CameraDefaults `yaml:"camera_defaults"`
	// Cameras are the cameras to watch, resolved: see Camera. None is valid
	// (the daemon idles); a file says so with "cameras: []" (Load rejects a
	// file without the key).
	Cameras []Camera `yaml:"cameras"`

	// lines maps a field path ("cameras[2].url") to its line in the YAML
	// document; nil for a Config built in Go.
	lines map[string]int
}

// HTTP configures the HTTP endpoint (metrics, health, status, snapshots).
type HTTP struct {
	// Listen is the host:port to serve on. Default "127.0.0.1:8080"; "" disables
	// the endpoint.
	Listen string `yaml:"listen"`
	// Pprof serves Go's profiles (net/http/pprof) under /debug/pprof/ on the
	// same endpoint, for finding where memory or CPU goes in a running
	// daemon. Keep the endpoint on loopback when on. Default false.
	Pprof bool `yaml:"pprof"`
	// Auth is what a client must present for every path but /healthz: a
	// bearer token, or a user and the bcrypt hash of the password (basic
	// auth), or both. Required when Listen is not a loopback address, unless
	// AllowUnauthenticated. Default: none.
	Auth HTTPAuth `yaml:"auth"`
	// TLS serves HTTPS with this certificate and key. Default: none (plain HTTP).
	TLS HTTPTLS `yaml:"tls"`
	// AllowUnauthenticated lets the endpoint listen on an address other than
	// loopback without Auth: anyone who reaches it sees every camera.
	// Default false.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated"`
	// Edit lets the status page's editor save a camera's zones, lines and masks
	// into the config file (PUT /api/cameras/<id>/scene), which the daemon then
	// reloads. It needs Auth. Default false: the editor shows the YAML and what
	// check says of it, and saves nothing.
	Edit bool `yaml:"edit"`
}

// HTTPAuth holds the HTTP endpoint's credentials. Each secret is given
// inline (often as "${VAR}") or in a file (the _file key: a systemd
// credential, for example); not both. Parse and Load read the files into
// Token and PasswordHash. Log none of it.
type HTTPAuth struct {
	// Token is a bearer token ("Authorization: Bearer <token>"), at least 16
	// characters.
	Token     string `yaml:"token,omitempty"`
	TokenFile string `yaml:"token_file,omitempty"`
	// User and PasswordHash are basic auth's user and the bcrypt hash of its
	// password ("$2a$...", "$2b$..." or "$2y$...").
	User             string `yaml:"user,omitempty"`
	PasswordHash     string `yaml:"password_hash,omitempty"`
	PasswordHashFile string `yaml:"password_hash_file,omitempty"`
}

// HTTPTLS names the HTTP endpoint's PEM certificate (chain) and key files.
type HTTPTLS struct {
	CertFile string `yaml:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty"`
}

// NATS configures where events are published, and how durably.
type NATS struct {
	// URL lists external servers, comma-separated, each nats:// or tls://.
	// Default "": start an embedded server on Listen.
	URL string `yaml:"url"`
	// Listen is the embedded server's host:port, used when URL is "".
	// Default "127.0.0.1:4222".
	Listen string `yaml:"listen"`
	// MQTT is the embedded server's MQTT listener (nats-server's own): MQTT
	// clients such as Home Assistant or Node-RED subscribe to
	// "<prefix>/<site>/<camera>/detections". Needs URL "" and JetStream.
	MQTT MQTT `yaml:"mqtt"`
	// SubjectPrefix is the first token(s) of every subject, as in
	// "<prefix>.<site>.<camera>.detections". Default "visiond".
	SubjectPrefix string `yaml:"subject_prefix"`
	// Auth holds credentials. With URL, the daemon connects with them; with
	// the embedded server, clients of that server must present them (user
	// and password, or token). Default: none.
	Auth NATSAuth `yaml:"auth"`
	// TLS: with URL, the CA that signs the servers' certificates and an
	// optional client certificate; with the embedded server, its certificate
	// and key (clients then connect with tls://). Default: none.
	TLS TLS `yaml:"tls"`
	// JetStream publishes every event into a stream and waits for the
	// server's acknowledgement, retrying with the event id as Nats-Msg-Id so
	// that a retry never duplicates; the embedded server then keeps the
	// stream on disk in StateDir. false publishes with core NATS (an outage
	// loses what the reconnect buffer cannot hold). Default true.
	JetStream bool `yaml:"jetstream"`
	// Domain is the embedded server's JetStream domain, through which a hub
	// reaches its stream ("$JS.<domain>.API"). Default "": the site.
	Domain string `yaml:"domain"`
	// Stream is the stream that captures "<prefix>.<site>.>".
	Stream Stream `yaml:"stream"`
	// Leaf joins the embedded server to a hub as a leaf node.
	Leaf Leaf `yaml:"leaf"`
	// OutboxMiB bounds the events held in the daemon's memory while they wait
	// for an acknowledgement (the server is unreachable, or slow); past it the
	// oldest go first and a gap event says how many, >= 1. Default
	// sinks.DefaultOutboxBytes (64 MiB).
	OutboxMiB int `yaml:"outbox_mib"`
	// HealthInterval is the period of the health event on
	// "<prefix>.<site>.health", > 0. Default sinks.DefaultHealthInterval (10s).
	HealthInterval time.Duration `yaml:"health_interval"`
}

// MQTT configures the embedded server's MQTT listener (sinks.Server.MQTT).
type MQTT struct {
	// Listen is its host:port, e.g. "127.0.0.1:1883". Default "": none.
	Listen string `yaml:"listen"`
	// Discovery announces the cameras to Home Assistant through MQTT discovery on this
	// listener: a device a camera, with its state, analysed fps, zones' occupancy and
	// lines' counts (package sinks/homeassistant, docs/mqtt.md). Default false.
	Discovery bool `yaml:"discovery"`
	// DiscoveryPrefix is Home Assistant's discovery prefix. Default "homeassistant".
	DiscoveryPrefix string `yaml:"discovery_prefix"`
}

// Prefix is m's discovery prefix, or its default.
func (m MQTT) Prefix() string {
	if m.DiscoveryPrefix == "" {
		return "homeassistant"
	}
	return m.DiscoveryPrefix
}

// NATSAuth holds NATS credentials: user and password, or a token, or an nkey
// seed file, or a credentials (JWT) file; at most one of these. Log none of it.
// Its fields are sinks.Auth's (see there), with their YAML keys, and
// PasswordFile and TokenFile: the password or token in a file (a systemd
// credential, for example) instead of inline; Parse and Load read them into
// Password and Token.
type NATSAuth struct {
	User            string `yaml:"user,omitempty"`
	Password        string `yaml:"password,omitempty"`
	PasswordFile    string `yaml:"password_file,omitempty"`
	Token           string `yaml:"token,omitempty"`
	TokenFile       string `yaml:"token_file,omitempty"`
	NKeySeedFile    string `yaml:"nkey_seed_file,omitempty"`
	CredentialsFile string `yaml:"credentials_file,omitempty"`
}

// Set reports whether any credential is given.
func (a NATSAuth) Set() bool { return a != NATSAuth{} }

// TLS names PEM files: sinks.TLS's fields (see there), with their YAML keys.
type TLS struct {
	CAFile   string `yaml:"ca_file,omitempty"`
	CertFile string `yaml:"cert_file,omitempty"`
	KeyFile  string `yaml:"key_file,omitempty"`
}

// Stream configures the JetStream stream that holds the site's events.
type Stream struct {
	// Name is the stream's name. Default "": the subject prefix with '.' as
	// '_', a '-', and the site, e.g. "visiond-warehouse-7".
	Name string `yaml:"name"`
	// MaxAge removes events older than this, >= 0; 0 keeps them until
	// MaxBytesMiB. Default sinks.DefaultStreamMaxAge (168h, 7 days).
	MaxAge time.Duration `yaml:"max_age"`
	// MaxBytesMiB bounds the stream: when full, the oldest events go first
	// and a gap event says how many, >= 1. Default sinks.DefaultStreamMaxBytes
	// (1024 MiB).
	MaxBytesMiB int `yaml:"max_bytes_mib"`
	// DuplicateWindow is how long the server remembers event ids to drop
	// a retried event it already holds, > 0. Default
	// sinks.DefaultDuplicateWindow (2m).
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
}

// Leaf joins the embedded server to a hub as a leaf node: events published
// on the box flow to the hub while the link is up, and the hub's stream
// sources the box's stream (which keeps them while the link is down).
type Leaf struct {
	// URL lists the hub's leaf node URLs, comma-separated, each nats-leaf://,
	// nats:// or tls://. Default "": no hub.
	URL string `yaml:"url"`
	// Auth is what the box presents to the hub: user and password, a token,
	// an nkey seed file or a credentials file.
	Auth NATSAuth `yaml:"auth"`
	// TLS: the CA that signs the hub's certificate, and an optional client
	// certificate.
	TLS TLS `yaml:"tls"`
}

// StreamName is the stream's name, Stream.Name or its default.
func (n NATS) StreamName(site string) string {
	if n.Stream.Name != "" {
		return n.Stream.Name
	}
	return strings.ReplaceAll(n.SubjectPrefix, ".", "_") + "-" + site
}

// JetStreamDomain is the embedded server's JetStream domain, Domain or the site.
func (n NATS) JetStreamDomain(site string) string {
	if n.Domain != "" {
		return n.Domain
	}
	return site
}

// StatePath is the state directory: StateDir, or where systemd or the XDG
// base directory convention puts it.
func (c *Config) StatePath() (string, error) {
	if c.StateDir != "" {
		return c.StateDir, nil
	}
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		// systemd may list several, separated by ':'; ours is the first.
		return strings.Split(d, ":")[0], nil
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "visiond"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state_dir: not set, and no home directory: %w", err)
	}
	return filepath.Join(home, ".local", "state", "visiond"), nil
}

// Workers configures the detector worker processes.
type Workers struct {
	// Model is the path of the YOLO ONNX model (YOLOv5/v7/v8/v9/v10/v11 output
	// layouts, float32 or float16). Default "third_party/yolov8n.onnx". Required.
	Model string `yaml:"model"`
	// Labels is a file of class names, one per line, for models whose metadata
	// has none. Default "": the model's metadata.
	Labels string `yaml:"labels"`
	// Library is the path of libonnxruntime.so. Default:
	// $ONNXRUNTIME_SHARED_LIBRARY_PATH if set, else
	// "third_party/libonnxruntime.so.1". Required.
	Library string `yaml:"library"`
	// Confidence is the minimum score of a detection, in (0, 1). Default 0.25.
	Confidence float64 `yaml:"confidence"`
	// IoU is the non-maximum suppression IoU threshold, in (0, 1). Default 0.45.
	IoU float64 `yaml:"iou"`
	// JobTimeout is how long a worker may take on one frame before it is
	// killed and replaced, > 0. Default 5s.
	JobTimeout time.Duration `yaml:"job_timeout"`
	// MemoryLimitMiB recycles, between jobs, a worker whose resident memory
	// passes it; 0 disables. Default 0.
	MemoryLimitMiB int `yaml:"memory_limit_mib"`
	// GPUMemoryLimitMiB does the same for a worker's GPU memory; 0 disables.
	// Default 0.
	GPUMemoryLimitMiB int `yaml:"gpu_memory_limit_mib"`
	// GPUMemoryCommand is the command (program and arguments) that prints the
	// GPU memory of each process as "pid, MiB" lines, for the GPU memory
	// limit and metrics of cuda and tensorrt workers. Default: nvidia-smi
	// --query-compute-apps=pid,used_memory --format=csv,noheader,nounits. On
	// a Jetson, whose nvidia-smi has no per-process figures, point it at a
	// script that prints the same format.
	GPUMemoryCommand []string `yaml:"gpu_memory_command"`
	// Pools are the groups of workers, one per device. Default: one pool of
	// CPU workers (WorkerPool's defaults).
	Pools []WorkerPool `yaml:"pools"`
}

// WorkerPool is a group of identical worker processes on one device, each with
// Sessions ONNX Runtime sessions in one runtime environment (one GPU context).
type WorkerPool struct {
	// Count is the number of worker processes, 1 to 64, or auto (the same as
	// leaving it out). Default (auto): for cpu, one one-thread worker per CPU
	// this process may use (its affinity mask, capped by its cgroup's CPU
	// quota: internal/limits), less one CPU in every 20 left to decoding, at
	// most 64 (cpuWorkers says why); for cuda and tensorrt, 1.
	Count WorkerCount `yaml:"count"`
	// Provider is the ONNX Runtime execution provider: cpu, cuda or tensorrt.
	// Default "cpu".
	Provider infer.Provider `yaml:"provider"`
	// Device is the GPU id for cuda and tensorrt, >= 0. Default 0.
	Device int `yaml:"device"`
	// Sessions is the number of ONNX Runtime sessions in each worker process,
	// running jobs at once (in one CUDA context on a GPU), 0 to 64; each takes
	// two frame slots of the worker, and a crash of the process loses the jobs
	// of all its sessions; threads applies to each session. 0 or unset: the
	// provider's default, which the
	// pool takes at start, infer.DefaultSessions (cpu 1: one-thread workers in processes of their
	// own scale with the cores; cuda and tensorrt 4: on an H200, 1/2/4/8
	// sessions of one process ran 223/407/766/980 frames/s where as many
	// processes took turns on the GPU for 232/267/307/339).
	Sessions int `yaml:"sessions"`
	// Threads is ONNX Runtime's intra-op thread count per worker, >= 0; 0
	// leaves ONNX Runtime's own default (a thread per physical core). Default:
	// 1 for cpu (several one-thread workers analyse more frames per CPU second
	// than one worker with several threads: docs/bench), 0 for cuda and
	// tensorrt.
	Threads int `yaml:"threads"`
	// Spin lets ONNX Runtime's idle threads poll for work before they sleep:
	// a little less latency for CPU time the decoders and other workers could
	// use. Default false.
	Spin bool `yaml:"spin"`
	// Fallback "cpu" lets a worker whose provider cannot be used run on the
	// CPU, saying so in its status; "" fails the worker at start. Default "".
	Fallback infer.Provider `yaml:"fallback"`
	// CUDA holds options of the cuda provider (also used by tensorrt for the
	// nodes TensorRT does not take).
	CUDA CUDA `yaml:"cuda"`
	// TensorRT holds options of the tensorrt provider.
	TensorRT TensorRT `yaml:"tensorrt"`
}

// CUDA holds options of ONNX Runtime's CUDA execution provider; zero values
// keep ONNX Runtime's defaults, except the arena's growth and cuDNN's
// workspace, which default to flatter memory (the fields say how).
type CUDA struct {
	// GPUMemLimitMiB caps the provider's memory arena, >= 0; 0: no cap.
	GPUMemLimitMiB int `yaml:"gpu_mem_limit_mib"`
	// ArenaExtendStrategy is kNextPowerOfTwo (ONNX Runtime's own default:
	// doubles) or kSameAsRequested (grows the arena only by what is asked:
	// flatter memory). Default "": kSameAsRequested (infer.CUDAOptions).
	ArenaExtendStrategy string `yaml:"arena_extend_strategy"`
	// CudnnConvAlgoSearch is EXHAUSTIVE, HEURISTIC or DEFAULT. Default "".
	CudnnConvAlgoSearch string `yaml:"cudnn_conv_algo_search"`
	// CudnnConvMaxWorkspace lets cuDNN use its largest workspace for
	// convolutions (ONNX Runtime's own default), which the arena then keeps:
	// more GPU memory per session. Default false (a small workspace).
	CudnnConvMaxWorkspace bool `yaml:"cudnn_conv_max_workspace"`
	// DeviceIO keeps each session's input and output in GPU memory at fixed
	// addresses, copied from pinned host memory by the worker (no arena
	// shrinkage then). Default false.
	DeviceIO bool `yaml:"device_io"`
	// Graph replays each session's kernels as one CUDA graph (ONNX Runtime's
	// enable_cuda_graph); implies device_io; provider cuda only. Default false.
	Graph bool `yaml:"graph"`
}

// TensorRT holds options of ONNX Runtime's TensorRT execution provider.
type TensorRT struct {
	// FP16 lets TensorRT run layers in half precision. Default false.
	FP16 bool `yaml:"fp16"`
	// INT8 lets TensorRT run layers in 8-bit integers (needs calibration or
	// a QDQ model). Default false.
	INT8 bool `yaml:"int8"`
	// EngineCache is a directory where built engines are kept, keyed by model,
	// ONNX Runtime version and GPU; "" builds them at every start. Default "".
	EngineCache string `yaml:"engine_cache"`
	// WorkspaceMiB is TensorRT's workspace size, >= 0; 0: its default.
	WorkspaceMiB int `yaml:"workspace_mib"`
}

// Pipeline configures the scheduling of frames to workers.
type Pipeline struct {
	// Slice is the scheduler's period: every slice, the cameras that are due
	// get a job, > 0. Default 200ms.
	Slice time.Duration `yaml:"slice"`
	// MaxFrameAge is the age past which a frame is dropped instead of being
	// analysed, > 0. Default 1s.
	MaxFrameAge time.Duration `yaml:"max_frame_age"`
}

// Sample configures the built-in sample camera: an RTSP server on loopback
// that plays a file in a loop, for demos and tests.
type Sample struct {
	// Enabled starts the sample server. Default false.
	Enabled bool `yaml:"enabled"`
	// Listen is the sample server's host:port. Default "127.0.0.1:8554".
	Listen string `yaml:"listen"`
	// File is the MPEG-TS file (H.264) to play. Default
	// "third_party/media/vtest.h264.ts".
	File string `yaml:"file"`
}

// CameraDefaults holds the camera settings shared by all cameras.
type CameraDefaults struct {
	// FPS is the number of frames analysed per second, > 0. Default 5.
	FPS float64 `yaml:"fps"`
	// Enabled says whether cameras are watched; nil means true. Default true.
	Enabled *bool `yaml:"enabled"`
	// Transport is the RTSP transport: tcp, udp or auto (UDP, then TCP if no
	// UDP packet arrives). Default sources.DefaultTransport (tcp).
	Transport sources.Transport `yaml:"transport"`
	// Decode is which frames are decoded: all, or keyframes (only random-access
	// units: far less CPU when fps is at or below the stream's keyframe rate).
	// Default sources.DefaultDecode (all).
	Decode sources.DecodeMode `yaml:"decode"`
	// Decoder is what decodes an RTSP stream's video: cpu (libavcodec), or
	// cuda (the NVIDIA GPU's video decoder, NVDEC). Default
	// sources.DefaultDecoder (cpu).
	Decoder sources.Decoder `yaml:"decoder"`
	// StallTimeout is how long a camera may deliver no frame before its session
	// is closed and reopened, > 0. Default sources.DefaultStallTimeout (10s).
	StallTimeout time.Duration `yaml:"stall_timeout"`
	// Weight is the camera's share of the workers when they cannot keep up
	// with every camera's fps, > 0: under overload each camera's analysed fps
	// falls in proportion to its weight. Default 1.
	Weight float64 `yaml:"weight"`
	// Objects says which detections are kept before tracking: the classes
	// tracked and thresholds per class (analytics.Objects). A camera that sets
	// one of its keys replaces that key. Default: every class of the model, no
	// thresholds.
	Objects analytics.Objects `yaml:"objects"`
	// Events says which events cameras publish. Default: detections all.
	Events Events `yaml:"events"`
	// Clips says whether cameras' objects make clips, and which (clips.go). A
	// camera that sets one of its keys replaces that key. Default: off, 5s
	// before and after, at most 2m, every class, any zone (DefaultClips).
	Clips Clips `yaml:"clips"`
}

// Camera is one camera, in resolved form: after Parse every field holds its
// effective value, taken from camera_defaults where the camera does not set it.
// Kind, Transport, Decode and Decoder hold the sources package's values,
// checked by Validate, so that a camera's source is built from them as they are
// (Source).
type Camera struct {
	// ID names the camera; it is a token of NATS subjects. Required, unique,
	// letters, digits, '_' and '-' only, at most 64 characters.
	ID string `yaml:"id"`
	// Kind is the kind of source: rtsp, gstreamer or file. Default
	// sources.DefaultKind (rtsp).
	Kind sources.Kind `yaml:"kind"`
	// URL is the camera's rtsp:// or rtsps:// URL, credentials included or in
	// Username and Password. Required for kind rtsp. Log it through redact.URL.
	URL string `yaml:"url,omitempty"`
	// Username and Password are the RTSP credentials, when not in URL.
	// PasswordFile holds the password in a file instead; Parse and Load read
	// it into Password.
	Username     string `yaml:"username,omitempty"`
	Password     string `yaml:"password,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty"`
	// Pipeline is a GStreamer pipeline that ends in an appsink, e.g.
	// "rtspsrc location=rtsp://... ! rtph264depay ! h264parse ! nvv4l2decoder !
	// nvvidconv ! video/x-raw,format=BGRx ! videoconvert ! appsink".
	// Required for kind gstreamer.
	Pipeline string `yaml:"pipeline,omitempty"`
	// File is a video file, required for kind file.
	File string `yaml:"file,omitempty"`
	// FPS is the number of frames analysed per second, > 0.
	FPS float64 `yaml:"fps"`
	// Enabled says whether the camera is watched.
	Enabled bool `yaml:"enabled"`
	// Transport is the RTSP transport: tcp, udp or auto.
	Transport sources.Transport `yaml:"transport"`
	// Decode is all or keyframes.
	Decode sources.DecodeMode `yaml:"decode"`
	// Decoder is cpu or cuda.
	Decoder sources.Decoder `yaml:"decoder"`
	// StallTimeout closes and reopens a session that delivers no frame for this long.
	StallTimeout time.Duration `yaml:"stall_timeout"`
	// Weight is the camera's share of the workers under overload.
	Weight float64 `yaml:"weight"`

	// The analytics settings (analytics.go), applied live by a reload: the
	// camera keeps its session. Objects and Events are resolved key by key
	// against camera_defaults; Masks, Zones and Lines are the camera's own.

	// Objects says which detections are tracked, and per-class thresholds.
	Objects analytics.Objects `yaml:"objects"`
	// Masks are polygons (normalized coordinates) where detections are dropped
	// before tracking. Default: none.
	Masks []analytics.Points `yaml:"masks,omitempty"`
	// Zones are regions whose visitors are followed. Default: none.
	Zones []analytics.Zone `yaml:"zones,omitempty"`
	// Lines are segments whose crossings are counted. Default: none.
	Lines []analytics.Line `yaml:"lines,omitempty"`
	// Events says which events the camera publishes.
	Events Events `yaml:"events"`
	// Clips says whether the camera's objects make clips, and which; applied
	// live by a reload. Resolved key by key against camera_defaults.
	Clips Clips `yaml:"clips"`
}

// rawCamera is a camera as written in YAML: a nil field was left unset and
// takes its value from camera_defaults.
type rawCamera struct {
	ID           *string             `yaml:"id"`
	Kind         *sources.Kind       `yaml:"kind"`
	URL          *string             `yaml:"url"`
	Username     *string             `yaml:"username"`
	Password     *string             `yaml:"password"`
	PasswordFile *string             `yaml:"password_file"`
	Pipeline     *string             `yaml:"pipeline"`
	File         *string             `yaml:"file"`
	FPS          *float64            `yaml:"fps"`
	Enabled      *bool               `yaml:"enabled"`
	Transport    *sources.Transport  `yaml:"transport"`
	Decode       *sources.DecodeMode `yaml:"decode"`
	Decoder      *sources.Decoder    `yaml:"decoder"`
	StallTimeout *time.Duration      `yaml:"stall_timeout"`
	Weight       *float64            `yaml:"weight"`
	Objects      *rawObjects         `yaml:"objects"`
	Masks        []analytics.Points  `yaml:"masks"`
	Zones        []analytics.Zone    `yaml:"zones"`
	Lines        []analytics.Line    `yaml:"lines"`
	Events       *rawEvents          `yaml:"events"`
	Clips        *rawClips           `yaml:"clips"`
}

// resolve fills the fields r leaves unset from d.
func (r rawCamera) resolve(d CameraDefaults) Camera {
	return Camera{
		ID:           or(r.ID, ""),
		Kind:         or(r.Kind, sources.DefaultKind),
		URL:          or(r.URL, ""),
		Username:     or(r.Username, ""),
		Password:     or(r.Password, ""),
		PasswordFile: or(r.PasswordFile, ""),
		Pipeline:     or(r.Pipeline, ""),
		File:         or(r.File, ""),
		FPS:          or(r.FPS, d.FPS),
		Enabled:      or(r.Enabled, d.Enabled == nil || *d.Enabled),
		Transport:    or(r.Transport, d.Transport),
		Decode:       or(r.Decode, d.Decode),
		Decoder:      or(r.Decoder, d.Decoder),
		StallTimeout: or(r.StallTimeout, d.StallTimeout),
		Weight:       or(r.Weight, d.Weight),
		Objects:      r.Objects.resolve(d.Objects),
		Masks:        r.Masks,
		Zones:        r.Zones,
		Lines:        r.Lines,
		Events:       r.Events.resolve(d.Events),
		Clips:        r.Clips.resolve(d.Clips),
	}
}

// or returns *p, or def when p is nil.
func or[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// LibraryEnv is the environment variable that, when set, gives the default of
// Workers.Library.
const LibraryEnv = "ONNXRUNTIME_SHARED_LIBRARY_PATH"

// Default returns the configuration used for every key a YAML file leaves
// out, with no cameras. It is valid as it is.
func Default() *Config {
	library := os.Getenv(LibraryEnv)
	if library == "" {
		library = "third_party/libonnxruntime.so.1"
	}
	enabled := true
	return &Config{
		Site:      "local",
		LogLevel:  "info",
		LogFormat: "text",
		HTTP:      HTTP{Listen: "127.0.0.1:8080"},
		NATS: NATS{
			Listen:        "127.0.0.1:4222",
			SubjectPrefix: "visiond",
			JetStream:     true,
			Stream: Stream{
				MaxAge:          sinks.DefaultStreamMaxAge,
				MaxBytesMiB:     sinks.DefaultStreamMaxBytes >> 20,
				DuplicateWindow: sinks.DefaultDuplicateWindow,
			},
			OutboxMiB:      sinks.DefaultOutboxBytes >> 20,
			HealthInterval: sinks.DefaultHealthInterval,
		},
		Workers: Workers{
			Model:      "third_party/yolov8n.onnx",
			Library:    library,
			Confidence: infer.DefaultConfidence,
			IoU:        infer.DefaultIoU,
			JobTimeout: pool.DefaultJobTimeout,
			Pools:      []WorkerPool{defaultPool(usableCPUs().N())},
		},
		Pipeline:  Pipeline{Slice: 200 * time.Millisecond, MaxFrameAge: time.Second},
		Sample:    Sample{Listen: "127.0.0.1:8554", File: "third_party/media/vtest.h264.ts"},
		ClipStore: ClipStore{MaxBytesMiB: DefaultClipStoreMaxBytesMiB, MaxAge: DefaultClipStoreMaxAge},
		CameraDefaults: CameraDefaults{
			FPS:          5,
			Enabled:      &enabled,
			Transport:    sources.DefaultTransport,
			Decode:       sources.DefaultDecode,
			Decoder:      sources.DefaultDecoder,
			StallTimeout: sources.DefaultStallTimeout,
			Weight:       1,
			Events:       Events{Detections: DefaultDetectionEvents},
			Clips:        DefaultClips(),
		},
	}
}

// Load reads the YAML file at path and parses it as Parse does, with one rule
// more for a file: it must list its cameras ("cameras: []" for none). An empty
// file (nothing, or only whitespace and comments) and a file without a cameras
// key are errors, at start, on reload and in `visiond check` alike: such a file
// is most often one caught while an editor or a deploy tool writes it, and
// taking its defaults would stop every camera (on reload) or start with the
// default site, NATS and HTTP settings that only a restart can change (at
// start). Its errors begin with path; those of parsing wrap an *Error.
func Load(path string) (*Config, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err // names the path
	}
	cfg, err := parse(data, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// MaxFileBytes bounds a config file, and a document given to Parse: a file
// of thousands of cameras takes a few hundred KiB, and parsing a file of tens
// of MiB takes minutes and GiB of memory, in check and on reload alike.
const MaxFileBytes = 4 << 20

// tooLargeMsg is the problem of a file or document over MaxFileBytes.
const tooLargeMsg = "larger than 4 MiB, the most a config may hold: is this the right file?"

// readFile reads the file at path, refusing one over MaxFileBytes before
// reading it whole. Its errors begin with path.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // already names the path
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxFileBytes {
		return nil, fmt.Errorf("%s: %w", path, newError([]Problem{{Msg: fmt.Sprintf("%d bytes: %s", st.Size(), tooLargeMsg)}}))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1)) // a pipe or a file still growing
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: %w", path, newError([]Problem{{Msg: tooLargeMsg}}))
	}
	return data, nil
}

// Parse decodes one YAML document over Default, strictly (an unknown key is an
// error), resolves the cameras against camera_defaults and validates the
// result. An empty document gives Default, and a document without cameras
// none (Load, for files, requires them). On failure the error is an *Error
// listing every problem found.
func Parse(data []byte) (*Config, error) { return parse(data, false) }

// Problems of a file that does not list its cameras (Load).
const (
	emptyFileMsg      = `empty file (nothing but whitespace or comments): a config file must list its cameras ("cameras: []" for none)`
	missingCamerasMsg = `no list of cameras: a config file must list its cameras ("cameras: []" for none); is the file complete?`
)

// parse is Parse; wantCameras adds Load's rule that the document lists its cameras.
func parse(data []byte, wantCameras bool) (*Config, error) {
	return parseOn(data, wantCameras, thisHost())
}

// parseOn is parse on the machine h describes.
func parseOn(data []byte, wantCameras bool, h host) (*Config, error) {
	if len(data) > MaxFileBytes {
		return nil, newError([]Problem{{Msg: fmt.Sprintf("%d bytes: %s", len(data), tooLargeMsg)}})
	}
	cfg := Default()
	root, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	if root == nil { // empty document, or only comments, or "~"
		if wantCameras {
			return nil, newError([]Problem{{Msg: emptyFileMsg}})
		}
		return cfg, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, newError([]Problem{{Line: root.Line, Msg: "the file must be a mapping of keys (site:, cameras:, ...), got " + kindName(root)}})
	}

	// Walk the tree against the schema first: it finds unknown keys and values
	// of the wrong type with their field paths, and records each path's line.
	s := schemaWalker{lines: map[string]int{}, lookupEnv: os.LookupEnv}
	s.walk(root, configType, "")
	if wantCameras {
		if p, ok := camerasListed(root); !ok {
			s.problems = append(s.problems, p)
		}
	}

	// Then decode for real, strictly, over the defaults. The walker has
	// already explained every error this decode can report, with paths; keep
	// the decoder's own words only if it found something the walker did not.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && len(s.problems) == 0 {
		s.problems = append(s.problems, yamlProblems(err)...)
	}
	if s.substituted {
		// The walker put the values of environment variables in the tree:
		// decode the values from there (the strict decode above has checked
		// the keys, which substitution does not touch).
		cfg = Default()
		_ = root.Decode(cfg)
	}

	// Decode the cameras again with pointer fields, to tell a key left unset
	// (which takes camera_defaults) from a key set to 0, false or "".
	var raw struct {
		Cameras []rawCamera `yaml:"cameras"`
	}
	_ = root.Decode(&raw) // its errors were reported just above
	cfg.Cameras = nil
	for _, rc := range raw.Cameras {
		cfg.Cameras = append(cfg.Cameras, rc.resolve(cfg.CameraDefaults))
	}

	// Read the secrets given in files (secrets.go).
	sv := validator{lines: s.lines}
	sv.readSecrets(cfg)
	s.problems = append(s.problems, sv.problems...)

	// A worker pool takes provider cpu unless it says otherwise, and the count
	// (unset or auto) and threads of its provider (WorkerPool).
	usable, cpusErr := h.cpus()
	for i := range cfg.Workers.Pools {
		p := &cfg.Workers.Pools[i]
		if _, set := s.lines[fmt.Sprintf("workers.pools[%d].provider", i)]; !set {
			p.Provider = infer.ProviderCPU
		}
		count, threads := poolDefaults(p.Provider, usable.N())
		field := fmt.Sprintf("workers.pools[%d].count", i)
		if _, set := s.lines[field]; !set {
			p.Count = WorkerCount(count)
			if cpusErr != nil && p.Provider == infer.ProviderCPU {
				s.problems = append(s.problems, Problem{Field: field, Line: s.lines[fmt.Sprintf("workers.pools[%d]", i)],
					Msg: fmt.Sprintf("cannot tell how many CPUs this process may use (%v): give count as a number", cpusErr)})
			}
		}
		if _, set := s.lines[fmt.Sprintf("workers.pools[%d].threads", i)]; !set {
			p.Threads = threads
		}
	}

	cfg.lines = s.lines
	// A value that failed to decode is left at zero or its default; do not
	// report it a second time as out of range.
	problems := s.problems
	var verr *Error
	if err := cfg.Validate(); errors.As(err, &verr) {
		for _, p := range verr.Problems {
			if !explainedBy(p.Field, s.problems) {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) > 0 {
		return nil, newError(problems)
	}
	return cfg, nil
}

// explainedBy reports whether one of problems is about field or a field that
// holds it ("cameras[0]" explains "cameras[0].id").
func explainedBy(field string, problems []Problem) bool {
	for _, p := range problems {
		if p.Field == field || p.Field != "" && strings.HasPrefix(field, p.Field) &&
			(field[len(p.Field)] == '.' || field[len(p.Field)] == '[') {
			return true
		}
	}
	return false
}

// camerasListed reports whether the document's top mapping has a cameras key
// with a value ("cameras:" alone, as a file cut short after it ends, is no
// list), and the problem to report when it has not.
func camerasListed(root *yaml.Node) (Problem, bool) {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k, v := root.Content[i], root.Content[i+1]; k.Value == "cameras" {
			if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null" {
				return Problem{Field: "cameras", Line: k.Line, Msg: missingCamerasMsg}, false
			}
			return Problem{}, true
		}
	}
	return Problem{Field: "cameras", Msg: missingCamerasMsg}, false
}

// parseTree decodes data into a node tree and returns the document's top
// node, or nil for an empty document. More than one document is an error.
func parseTree(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, newError(yamlProblems(err))
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, newError(yamlProblems(err))
	default:
		return nil, newError([]Problem{{Line: next.Line, Msg: "a second YAML document (after ---): the file must hold one"}})
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, nil
	}
	return root, nil
}

// cpuWorkers is the default number of one-thread CPU workers where this process may
// use cpus CPUs: one per CPU, less one CPU in every 20 left to the decoders, at most 64
// (the most a pool may have).
//
// The rule comes from what a camera costs (docs/config.md, "Worker count"): decoding the sample
// camera (768x576 H.264 at 15 fps, every frame decoded, the 5 analysed scaled into the
// letterbox: 30 ms CPU per second, BenchmarkSkipNonRef) takes 5-7% of the CPU of analysing it at
// 5 fps (yolov8n on a one-thread worker: 89-107 ms CPU per frame on the 2-CPU box,
// BenchmarkDetectCPUOneThread; 116 ms on the 16-CPU GPU machine, where the share is 5%). So
// when the workers keep every CPU busy, the cameras they serve decode on one CPU in 15-20; the
// rule sets aside one in 20, the GPU machine's share, rounded down: below 20 CPUs none, the
// decoders taking their share from the workers' idle moments (on the 16-CPU GPU machine, 16
// one-thread workers sustained 20 cameras at 5 fps, the former cap of 8 only 12).
// Each worker holds its own model and arena (about 100-230 MiB resident): set count lower
// where memory is scarcer than CPUs.
func cpuWorkers(cpus int) int {
	return min(max(1, cpus-cpus/decodeShare), maxWorkers)
}

// decodeShare: one CPU in decodeShare is left to decoding (cpuWorkers).
const decodeShare = 20

// maxWorkers is the most workers a pool may have.
const maxWorkers = 64

// poolDefaults returns the default worker count and intra-op threads of a pool of
// provider on a machine where this process may use cpus CPUs (WorkerPool.Count and
// Threads).
func poolDefaults(provider infer.Provider, cpus int) (count, threads int) {
	if provider != infer.ProviderCPU {
		return 1, 0
	}
	return cpuWorkers(cpus), 1
}

// defaultPool is the pool of a config without workers.pools: CPU workers.
func defaultPool(cpus int) WorkerPool {
	count, threads := poolDefaults(infer.ProviderCPU, cpus)
	return WorkerPool{Count: WorkerCount(count), Provider: infer.ProviderCPU, Threads: threads}
}

// WorkerCount is WorkerPool.Count: a whole number, or auto in YAML, which takes the default
// of the pool's provider (parse treats it as a count left out).
type WorkerCount int

// autoCount is the YAML value of a WorkerCount that asks for the default.
const autoCount = "auto"

// UnmarshalYAML takes a whole number or auto (decoded as 0: parse then applies the default).
func (c *WorkerCount) UnmarshalYAML(n *yaml.Node) error {
	if isAutoCount(n) {
		*c = 0
		return nil
	}
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return fmt.Errorf("line %d: want a whole number or %s, got %s", n.Line, autoCount, describe(n))
	}
	*c = WorkerCount(v)
	return nil
}

// isAutoCount reports whether n is the scalar auto.
func isAutoCount(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == autoCount
}

// host is what parse learns from the machine it runs on; tests give fixtures.
type host struct {
	// cpus reads the CPUs this process may use (internal/limits.ReadCPUs).
	cpus func() (limits.CPUs, error)
}

// thisHost is the machine this process runs on.
func thisHost() host { return host{cpus: readCPUs} }

func readCPUs() (limits.CPUs, error) { return limits.ReadCPUs(limits.DefaultProc) }

// usableCPUs returns the CPUs this process may use for Default, which cannot fail: on an
// error reading the cgroup files, the affinity mask alone (parse reports the error for every
// cpu pool left to its default count).
func usableCPUs() limits.CPUs {
	u, _ := readCPUs()
	return u
}
