package sources

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The option types of a Camera and its states. Each is a string type whose valid values are
// the constants below, listed by Kinds, Transports, DecodeModes, Decoders and States and
// checked by ParseKind, ParseTransport, ParseDecodeMode, ParseDecoder and ParseState; a Camera field left at "" takes
// the default named here.

// Kind is the kind of a camera's source: which of Camera's URL, Pipeline and File is read.
type Kind string

// Camera kinds.
const (
	KindRTSP      Kind = "rtsp"      // an RTSP camera: Camera.URL
	KindGStreamer Kind = "gstreamer" // a GStreamer pipeline ending in appsink: Camera.Pipeline
	KindFile      Kind = "file"      // a video file played at its own rate, looped: Camera.File
)

// Transport is how an RTSP session receives its RTP packets.
type Transport string

// RTSP transports.
const (
	TransportTCP  Transport = "tcp"  // interleaved in the RTSP connection
	TransportUDP  Transport = "udp"  // UDP packets, one port pair per track
	TransportAuto Transport = "auto" // UDP, then TCP if no UDP packet arrives
)

// DecodeMode is which of an RTSP stream's access units are decoded.
type DecodeMode string

// Decode modes.
const (
	DecodeAll DecodeMode = "all" // every access unit
	// DecodeKeyframes decodes only random-access units: far less CPU when the camera is
	// analysed at or below its stream's keyframe rate.
	DecodeKeyframes DecodeMode = "keyframes"
)

// Decoder is what decodes an RTSP stream's video.
type Decoder string

// Decoders.
const (
	DecoderCPU Decoder = "cpu" // libavcodec on the CPU
	// DecoderCUDA decodes on an NVIDIA GPU's video decoder (NVDEC, through libavcodec's
	// CUDA hardware acceleration, on the device's primary CUDA context) and copies only the
	// frames to be analysed back to the host; a session that cannot open it fails with an
	// error that says so (no GPU, a driver without libnvcuvid, a codec or size the decoder
	// does not take).
	DecoderCUDA Decoder = "cuda"
)

// State is a camera's state, as reported by Status and StatusChange.
type State string

// Camera states.
const (
	StateConnecting   State = "connecting"   // no session has ended yet and none is online
	StateOnline       State = "online"       // the current session has decoded a frame
	StateOffline      State = "offline"      // the last session failed; retrying with backoff
	StateUnauthorized State = "unauthorized" // the camera refused the credentials; retrying slowly
)

// Defaults of a Camera's fields left at their zero value.
const (
	DefaultKind         = KindRTSP
	DefaultTransport    = TransportTCP
	DefaultDecode       = DecodeAll
	DefaultDecoder      = DecoderCPU
	DefaultStallTimeout = 10 * time.Second
	DefaultInputW       = 640
	DefaultInputH       = 640
)

// Kinds returns the camera kinds, the default first.
func Kinds() []Kind { return []Kind{KindRTSP, KindGStreamer, KindFile} }

// Transports returns the RTSP transports, the default first.
func Transports() []Transport { return []Transport{TransportTCP, TransportUDP, TransportAuto} }

// DecodeModes returns the decode modes, the default first.
func DecodeModes() []DecodeMode { return []DecodeMode{DecodeAll, DecodeKeyframes} }

// Decoders returns the decoders, the default first.
func Decoders() []Decoder { return []Decoder{DecoderCPU, DecoderCUDA} }

// States returns the camera states, in the order a camera meets them.
func States() []State {
	return []State{StateConnecting, StateOnline, StateOffline, StateUnauthorized}
}

// ParseKind returns the kind named s; "" is not a name (a Camera's empty Kind is its default).
func ParseKind(s string) (Kind, error) { return parse("camera kind", s, Kinds()) }

// ParseTransport returns the transport named s.
func ParseTransport(s string) (Transport, error) { return parse("transport", s, Transports()) }

// ParseDecodeMode returns the decode mode named s.
func ParseDecodeMode(s string) (DecodeMode, error) { return parse("decode mode", s, DecodeModes()) }

// ParseDecoder returns the decoder named s.
func ParseDecoder(s string) (Decoder, error) { return parse("decoder", s, Decoders()) }

// ParseState returns the state named s, as a status event or /api/cameras carries it.
func ParseState(s string) (State, error) { return parse("camera state", s, States()) }

// parse returns the value of valid named s, or an error like
// `unknown transport "quic" (want tcp, udp or auto)`.
func parse[T ~string](what, s string, valid []T) (T, error) {
	if i := slices.Index(valid, T(s)); i >= 0 {
		return valid[i], nil
	}
	names := make([]string, len(valid))
	for i, v := range valid {
		names[i] = string(v)
	}
	last := len(names) - 1
	return "", fmt.Errorf("unknown %s %q (want %s or %s)", what, s, strings.Join(names[:last], ", "), names[last])
}
