// Package config holds the schema of visiond's YAML file, its defaults, its
// strict decoding and its validation.
//
// Parse (and Load, which reads a file first) starts from Default, decodes the
// document over it so that a key left out keeps its default, rejects keys the
// schema does not know, resolves every camera against camera_defaults and
// validates the result. All problems found are reported together, each with
// the path of the field (for example "cameras[2].url") and, when the config
// came from YAML, its line.
//
// Every default is stated on its field below.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"gopkg.in/yaml.v3"
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

	HTTP     HTTP     `yaml:"http"`
	NATS     NATS     `yaml:"nats"`
	Workers  Workers  `yaml:"workers"`
	Pipeline Pipeline `yaml:"pipeline"`
	Sample   Sample   `yaml:"sample"`

	// CameraDefaults holds the settings shared by all cameras; a camera
	// overrides any of them by setting the same key.
	CameraDefaults CameraDefaults `yaml:"camera_defaults"`
	// Cameras are the cameras to watch, resolved: see Camera. None is valid
	// (the daemon idles).
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
}

// NATS configures where detections are published.
type NATS struct {
	// URL lists external servers, comma-separated, each nats:// or tls://.
	// Default "": start an embedded server on Listen.
	URL string `yaml:"url"`
	// Listen is the embedded server's host:port, used when URL is "".
	// Default "127.0.0.1:4222".
	Listen string `yaml:"listen"`
	// SubjectPrefix is the first token(s) of every subject, as in
	// "<prefix>.<site>.<camera>.detections". Default "visiond".
	SubjectPrefix string `yaml:"subject_prefix"`
}

// Workers configures the detector worker processes.
type Workers struct {
	// Count is the number of worker processes, 1 to 64. Default 1.
	Count int `yaml:"count"`
	// Model is the path of the YOLO ONNX model. Default
	// "third_party/yolov8n.onnx". Required.
	Model string `yaml:"model"`
	// Library is the path of libonnxruntime.so. Default:
	// $ONNXRUNTIME_SHARED_LIBRARY_PATH if set, else
	// "third_party/libonnxruntime.so.1". Required.
	Library string `yaml:"library"`
	// Provider is the ONNX Runtime execution provider, cpu or cuda. Default "cpu".
	Provider string `yaml:"provider"`
	// Device is the GPU id used with the cuda provider, >= 0. Default 0.
	Device int `yaml:"device"`
	// Threads is ONNX Runtime's intra-op thread count, >= 0; 0 leaves ONNX
	// Runtime's own default. Default 0.
	Threads int `yaml:"threads"`
	// Confidence is the minimum score of a detection, in (0, 1). Default 0.25.
	Confidence float64 `yaml:"confidence"`
	// IoU is the non-maximum suppression IoU threshold, in (0, 1). Default 0.45.
	IoU float64 `yaml:"iou"`
	// JobTimeout is how long a worker may take on one frame before it is
	// killed and replaced, > 0. Default 5s.
	JobTimeout time.Duration `yaml:"job_timeout"`
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
	// UDP packet arrives). Default "tcp".
	Transport string `yaml:"transport"`
	// Decode is which frames are decoded: all, or keyframes (only random-access
	// units: far less CPU when fps is at or below the stream's keyframe rate).
	// Default "all".
	Decode string `yaml:"decode"`
	// StallTimeout is how long a camera may deliver no frame before its session
	// is closed and reopened, > 0. Default 10s.
	StallTimeout time.Duration `yaml:"stall_timeout"`
}

// Camera kinds.
const (
	KindRTSP      = "rtsp"      // an RTSP camera: url
	KindGStreamer = "gstreamer" // a GStreamer pipeline ending in appsink: pipeline
	KindFile      = "file"      // a video file played at its own rate, looped: file
)

// Camera is one camera, in resolved form: after Parse every field holds its
// effective value, taken from camera_defaults where the camera does not set it.
type Camera struct {
	// ID names the camera; it is a token of NATS subjects. Required, unique,
	// letters, digits, '_' and '-' only, at most 64 characters.
	ID string `yaml:"id"`
	// Kind is the kind of source: rtsp, gstreamer or file. Default "rtsp".
	Kind string `yaml:"kind"`
	// URL is the camera's rtsp:// or rtsps:// URL, credentials included or in
	// Username and Password. Required for kind rtsp. Log it through Redact.
	URL string `yaml:"url,omitempty"`
	// Username and Password are the RTSP credentials, when not in URL.
	Username string `yaml:"username,omitempty"`
	Password string `yaml:"password,omitempty"`
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
	Transport string `yaml:"transport"`
	// Decode is all or keyframes.
	Decode string `yaml:"decode"`
	// StallTimeout closes and reopens a session that delivers no frame for this long.
	StallTimeout time.Duration `yaml:"stall_timeout"`
}

// rawCamera is a camera as written in YAML: a nil field was left unset and
// takes its value from camera_defaults.
type rawCamera struct {
	ID           *string        `yaml:"id"`
	Kind         *string        `yaml:"kind"`
	URL          *string        `yaml:"url"`
	Username     *string        `yaml:"username"`
	Password     *string        `yaml:"password"`
	Pipeline     *string        `yaml:"pipeline"`
	File         *string        `yaml:"file"`
	FPS          *float64       `yaml:"fps"`
	Enabled      *bool          `yaml:"enabled"`
	Transport    *string        `yaml:"transport"`
	Decode       *string        `yaml:"decode"`
	StallTimeout *time.Duration `yaml:"stall_timeout"`
}

// resolve fills the fields r leaves unset from d.
func (r rawCamera) resolve(d CameraDefaults) Camera {
	return Camera{
		ID:           or(r.ID, ""),
		Kind:         or(r.Kind, KindRTSP),
		URL:          or(r.URL, ""),
		Username:     or(r.Username, ""),
		Password:     or(r.Password, ""),
		Pipeline:     or(r.Pipeline, ""),
		File:         or(r.File, ""),
		FPS:          or(r.FPS, d.FPS),
		Enabled:      or(r.Enabled, d.Enabled == nil || *d.Enabled),
		Transport:    or(r.Transport, d.Transport),
		Decode:       or(r.Decode, d.Decode),
		StallTimeout: or(r.StallTimeout, d.StallTimeout),
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
		NATS:      NATS{Listen: "127.0.0.1:4222", SubjectPrefix: "visiond"},
		Workers: Workers{
			Count:      1,
			Model:      "third_party/yolov8n.onnx",
			Library:    library,
			Provider:   "cpu",
			Confidence: 0.25,
			IoU:        0.45,
			JobTimeout: 5 * time.Second,
		},
		Pipeline: Pipeline{Slice: 200 * time.Millisecond, MaxFrameAge: time.Second},
		Sample:   Sample{Listen: "127.0.0.1:8554", File: "third_party/media/vtest.h264.ts"},
		CameraDefaults: CameraDefaults{
			FPS:          5,
			Enabled:      &enabled,
			Transport:    "tcp",
			Decode:       "all",
			StallTimeout: 10 * time.Second,
		},
	}
}

// Load reads the YAML file at path and parses it with Parse. Its errors begin
// with path; those of Parse wrap an *Error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err // already names the path
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes one YAML document over Default, strictly (an unknown key is an
// error), resolves the cameras against camera_defaults and validates the
// result. An empty document gives Default. On failure the error is an *Error
// listing every problem found.
func Parse(data []byte) (*Config, error) {
	cfg := Default()
	root, err := parseTree(data)
	if err != nil {
		return nil, err
	}
	if root == nil { // empty document, or only comments, or "~"
		return cfg, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, newError([]Problem{{Line: root.Line, Msg: "the file must be a mapping of keys (site:, cameras:, ...), got " + kindName(root)}})
	}

	// Walk the tree against the schema first: it finds unknown keys and values
	// of the wrong type with their field paths, and records each path's line.
	s := schemaWalker{lines: map[string]int{}}
	s.walk(root, configType, "")

	// Then decode for real, strictly, over the defaults. The walker has
	// already explained every error this decode can report, with paths; keep
	// the decoder's own words only if it found something the walker did not.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(cfg); err != nil && len(s.problems) == 0 {
		s.problems = append(s.problems, yamlProblems(err)...)
	}

	// Decode the cameras again with pointer fields, to tell a key left unset
	// (which takes camera_defaults) from a key set to 0, false or "".
	var raw struct {
		Cameras []rawCamera `yaml:"cameras"`
	}
	_ = yaml.Unmarshal(data, &raw) // its errors were reported just above
	cfg.Cameras = nil
	for _, rc := range raw.Cameras {
		cfg.Cameras = append(cfg.Cameras, rc.resolve(cfg.CameraDefaults))
	}

	cfg.lines = s.lines
	// A value that failed to decode is left at zero or its default; do not
	// report it a second time as out of range.
	problems := s.problems
	explained := map[string]bool{}
	for _, p := range problems {
		explained[p.Field] = true
	}
	var verr *Error
	if err := cfg.Validate(); errors.As(err, &verr) {
		for _, p := range verr.Problems {
			if !explained[p.Field] {
				problems = append(problems, p)
			}
		}
	}
	if len(problems) > 0 {
		return nil, newError(problems)
	}
	return cfg, nil
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
