// Package samplecam is the built-in sample camera: an in-process RTSP server that plays
// MPEG-TS or MP4 files with an H.264 or H.265 track, each looped forever at its own rate on
// its own path, as if it were a live camera. Demos and tests point sources.Camera at it.
package samplecam

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluenviron/gortsplib/v4"
	"github.com/bluenviron/gortsplib/v4/pkg/base"
	"github.com/bluenviron/gortsplib/v4/pkg/description"
	"github.com/bluenviron/gortsplib/v4/pkg/format"
	"github.com/bluenviron/gortsplib/v4/pkg/liberrors"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h264"
	"github.com/bluenviron/mediacommon/v2/pkg/codecs/h265"
	"github.com/pion/rtp"

	"github.com/visiond/visiond/internal/videofile"
)

// DefaultListen is the address used when Server.Listen is empty.
const DefaultListen = "127.0.0.1:8554"

// Path is the path the daemon's built-in sample camera (config's sample section) is served
// on: rtsp://<listen>/sample.
const Path = "sample"

// clockRate is the RTP clock of H.264 and H.265, the same 90 kHz as MPEG-TS timestamps.
const clockRate = 90000

// Server serves MPEG-TS or MP4 files of H.264 or H.265 video over RTSP (TCP transport), one path per file.
type Server struct {
	Listen  string            // host:port to listen on; port 0 picks a free one. Defaults to DefaultListen
	Streams map[string]string // URL path (without the leading "/") → MPEG-TS or MP4 file
	Logger  *slog.Logger      // defaults to slog.Default()
	// Username and Password, when set, are required of readers (RTSP basic/digest auth).
	Username, Password string
	// Audio also offers a silent G.711 audio track after the video, as many cameras do.
	Audio bool
	// ClockOffset sets the camera's clock, as its RTCP sender reports show it, this far from
	// this host's (a camera with a wrong clock). Default 0.
	ClockOffset time.Duration
	// Damage is the fraction of video RTP packets, 0..1, that are dropped or have bytes of
	// their payload flipped, to rehearse a bad link. Default 0.
	Damage float64

	log     *slog.Logger
	srv     *gortsplib.Server
	addr    net.Addr
	mu      sync.RWMutex
	streams map[string]*fileStream
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	close   sync.Once
}

// fileStream is one looped file.
type fileStream struct {
	path   string
	file   string
	format format.Format // H.264 or H.265 with the file's parameter sets
	stream *gortsplib.ServerStream
	frozen atomic.Bool // packets are not sent (the file's clock runs on)
}

// Freeze stops (frozen true) or resumes sending the stream on path while its sessions stay
// open, as a camera that hangs does. It reports whether the path exists.
func (s *Server) Freeze(path string, frozen bool) bool {
	fs := s.lookup(path)
	if fs != nil {
		fs.frozen.Store(frozen)
	}
	return fs != nil
}

// Start checks every file, starts listening and starts playing every file (streams run
// like live cameras, readers or not). Errors name the file or the address.
func (s *Server) Start() error {
	if s.Listen == "" {
		s.Listen = DefaultListen
	}
	s.log = s.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("component", "samplecam")
	if len(s.Streams) == 0 {
		return errors.New("samplecam: no streams configured")
	}

	streams := make(map[string]*fileStream, len(s.Streams))
	for path, file := range s.Streams {
		path = strings.Trim(path, "/")
		forma, err := probe(file)
		if err != nil {
			return fmt.Errorf("samplecam: stream %q: %w", path, err)
		}
		streams[path] = &fileStream{path: path, file: file, format: forma}
	}

	s.srv = &gortsplib.Server{
		Handler:     handler{s},
		RTSPAddress: s.Listen,
		// The Listen hook is how we learn the bound address when the port is 0.
		Listen: func(network, address string) (net.Listener, error) {
			ln, err := net.Listen(network, address)
			if err == nil {
				s.addr = ln.Addr()
			}
			return ln, err
		},
	}
	s.mu.Lock() // no DESCRIBE is answered before the streams exist
	defer s.mu.Unlock()
	if err := s.srv.Start(); err != nil {
		return fmt.Errorf("samplecam: listen on %s: %w", s.Listen, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	for _, fs := range streams {
		fs.stream = &gortsplib.ServerStream{
			Server: s.srv,
			Desc:   s.description(fs.format),
		}
		if err := fs.stream.Initialize(); err != nil {
			cancel()
			s.wg.Wait()
			for _, o := range streams {
				if o.stream != nil && o != fs {
					o.stream.Close()
				}
			}
			s.srv.Close()
			return fmt.Errorf("samplecam: stream %q: %w", fs.path, err)
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.play(ctx, fs)
		}()
	}
	s.streams = streams
	s.log.Info("sample camera listening", "addr", s.addr.String(), "streams", len(streams))
	return nil
}

// description is the SDP of a stream: its video, then a silent audio track if Audio.
func (s *Server) description(video format.Format) *description.Session {
	desc := &description.Session{Medias: []*description.Media{{Type: description.MediaTypeVideo, Formats: []format.Format{video}}}}
	if s.Audio {
		desc.Medias = append(desc.Medias, &description.Media{Type: description.MediaTypeAudio,
			Formats: []format.Format{&format.G711{PayloadTyp: 0, MULaw: true, SampleRate: 8000, ChannelCount: 1}}})
	}
	return desc
}

// URL returns the stream's rtsp:// URL with the real port. It is valid after Start.
func (s *Server) URL(path string) string {
	host := s.Listen
	if s.addr != nil {
		host = s.addr.String()
		if ta, ok := s.addr.(*net.TCPAddr); ok && ta.IP.IsUnspecified() {
			host = net.JoinHostPort("127.0.0.1", fmt.Sprint(ta.Port))
		}
	}
	return "rtsp://" + host + "/" + strings.Trim(path, "/")
}

// Close stops the players and the server and waits for them. Safe to call twice.
func (s *Server) Close() {
	s.close.Do(func() {
		if s.cancel == nil {
			return
		}
		s.cancel()
		s.wg.Wait()
		s.srv.Close()
		for _, fs := range s.streams {
			fs.stream.Close()
		}
	})
}

func (s *Server) lookup(path string) *fileStream {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.streams[strings.Trim(path, "/")]
}

// handler answers the server's requests; a separate type keeps its methods out of
// Server's API.
type handler struct{ s *Server }

// authorized checks a reader's credentials when the server requires some.
func (h handler) authorized(conn *gortsplib.ServerConn, req *base.Request) bool {
	return h.s.Username == "" || conn.VerifyCredentials(req, h.s.Username, h.s.Password)
}

// OnDescribe implements gortsplib.ServerHandlerOnDescribe.
func (h handler) OnDescribe(ctx *gortsplib.ServerHandlerOnDescribeCtx) (*base.Response, *gortsplib.ServerStream, error) {
	return h.serve(ctx.Conn, ctx.Request, ctx.Path)
}

// OnSetup implements gortsplib.ServerHandlerOnSetup.
func (h handler) OnSetup(ctx *gortsplib.ServerHandlerOnSetupCtx) (*base.Response, *gortsplib.ServerStream, error) {
	return h.serve(ctx.Conn, ctx.Request, ctx.Path)
}

// serve answers DESCRIBE and SETUP: the credentials, when required, then the path's stream.
func (h handler) serve(conn *gortsplib.ServerConn, req *base.Request, path string) (*base.Response, *gortsplib.ServerStream, error) {
	if !h.authorized(conn, req) {
		return &base.Response{StatusCode: base.StatusUnauthorized}, nil, liberrors.ErrServerAuth{}
	}
	fs := h.s.lookup(path)
	if fs == nil {
		return &base.Response{StatusCode: base.StatusNotFound}, nil, fmt.Errorf("no stream on path %q", path)
	}
	return &base.Response{StatusCode: base.StatusOK}, fs.stream, nil
}

// OnPlay implements gortsplib.ServerHandlerOnPlay.
func (h handler) OnPlay(_ *gortsplib.ServerHandlerOnPlayCtx) (*base.Response, error) {
	return &base.Response{StatusCode: base.StatusOK}, nil
}

// OnConnClose implements gortsplib.ServerHandlerOnConnClose.
func (h handler) OnConnClose(ctx *gortsplib.ServerHandlerOnConnCloseCtx) {
	h.s.log.Debug("connection closed", "remote", ctx.Conn.NetConn().RemoteAddr().String(), "reason", ctx.Error)
}

// probe checks that file is MPEG-TS or MP4 with an H.264 or H.265 track and returns the
// track's RTP format, with the parameter sets the container holds apart (MP4) or those found
// in the first access units.
func probe(file string) (format.Format, error) {
	r, err := videofile.Open(file)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var vps, sps, pps []byte
	// note keeps the first parameter set of each kind among nalus.
	note := func(nalus [][]byte) {
		for _, n := range nalus {
			if r.Codec == "H.265" {
				switch h265.NALUType((n[0] >> 1) & 0x3F) {
				case h265.NALUType_VPS_NUT:
					vps = first(vps, n)
				case h265.NALUType_SPS_NUT:
					sps = first(sps, n)
				case h265.NALUType_PPS_NUT:
					pps = first(pps, n)
				}
				continue
			}
			switch h264.NALUType(n[0] & 0x1F) {
			case h264.NALUTypeSPS:
				sps = first(sps, n)
			case h264.NALUTypePPS:
				pps = first(pps, n)
			}
		}
	}
	note(r.Params) // an MP4 holds them apart from the stream (they go in the SDP; the stream has none)
	for i := 0; i < 100 && (sps == nil || pps == nil || r.Codec == "H.265" && vps == nil); i++ {
		au, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		note(au.NALUs)
	}
	if sps == nil || pps == nil || r.Codec == "H.265" && vps == nil {
		return nil, fmt.Errorf("%s: %s track has no parameter sets in its first access units", file, r.Codec)
	}
	if r.Codec == "H.265" {
		return &format.H265{PayloadTyp: 96, VPS: vps, SPS: sps, PPS: pps}, nil
	}
	return &format.H264{PayloadTyp: 96, PacketizationMode: 1, SPS: sps, PPS: pps}, nil
}

func first(have, n []byte) []byte {
	if have != nil {
		return have
	}
	return n
}

// encoder packetizes access units into RTP: rtph264.Encoder or rtph265.Encoder.
type encoder interface {
	Encode([][]byte) ([]*rtp.Packet, error)
}

func newEncoder(f format.Format) (encoder, error) {
	switch f := f.(type) {
	case *format.H265:
		return f.CreateEncoder()
	case *format.H264:
		return f.CreateEncoder()
	}
	return nil, fmt.Errorf("no packetizer for %s", f.Codec())
}

// play sends the file's access units as RTP at the file's own rate, looping, with RTP
// timestamps that keep increasing across loops, until ctx ends.
func (s *Server) play(ctx context.Context, fs *fileStream) {
	log := s.log.With("path", fs.path, "file", fs.file)
	medi := fs.stream.Desc.Medias[0]
	enc, err := newEncoder(fs.format)
	if err != nil {
		log.Error("packetizer", "error", err)
		return
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	rtpBase := binary.BigEndian.Uint32(rnd[:])

	audio := &rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 0, SSRC: rtpBase}}
	silence := bytes.Repeat([]byte{0xFF}, 1200) // μ-law silence, up to 150 ms

	start := time.Now()
	var offset int64 // 90 kHz media time of the loops already played
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		r, err := videofile.Open(fs.file)
		if err != nil {
			log.Error("cannot reopen file, sample stream stopped", "error", err)
			return
		}
		var lastDTS, step int64 = -1, clockRate / 25
		var shown int64 = -1 // the latest presentation time of the units sent so far
		for {
			au, err := r.Next()
			if err != nil {
				r.Close()
				if !errors.Is(err, io.EOF) {
					log.Error("sample stream stopped", "error", err)
					return
				}
				break
			}
			// Sent as a camera sends it: once the latest frame it needs is captured. Without
			// B-frames that is the unit's own time; with them, a P-frame goes out when it is
			// captured, and the B-frames shown before it right after it.
			shown = max(shown, au.PTS)
			due := start.Add(time.Duration(offset+shown) * time.Second / clockRate)
			if d := time.Until(due); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					r.Close()
					return
				case <-timer.C:
				}
			} else if ctx.Err() != nil {
				r.Close()
				return
			}
			if lastDTS >= 0 && au.DTS > lastDTS {
				step = au.DTS - lastDTS
			}
			lastDTS = au.DTS
			if fs.frozen.Load() {
				continue
			}
			pkts, err := enc.Encode(au.NALUs)
			if err != nil {
				log.Warn("packetize", "error", err)
				continue
			}
			ts := rtpBase + uint32(offset+au.PTS)
			for _, p := range pkts {
				p.Timestamp = ts
				if s.Damage > 0 && mrand.Float64() < s.Damage {
					if mrand.IntN(2) == 0 {
						continue // lost
					}
					for range 4 {
						p.Payload[mrand.IntN(len(p.Payload))] ^= byte(1 + mrand.IntN(255))
					}
				}
				if err := fs.stream.WritePacketRTPWithNTP(medi, p, time.Now().Add(s.ClockOffset)); err != nil {
					r.Close()
					log.Error("sample stream stopped", "error", err)
					return
				}
			}
			if s.Audio { // silence for the length of this video frame, at 8 kHz
				audio.SequenceNumber++
				audio.Timestamp = uint32((offset + au.DTS) * 8000 / clockRate)
				audio.Payload = silence[:min(len(silence), int(step*8000/clockRate))]
				if err := fs.stream.WritePacketRTP(fs.stream.Desc.Medias[1], audio); err != nil {
					r.Close()
					log.Error("sample stream stopped", "error", err)
					return
				}
			}
		}
		offset += max(lastDTS, shown, 0) + step
		log.Debug("file ended, looping")
	}
}
