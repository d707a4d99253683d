// Package samplecam is the built-in sample camera: an in-process RTSP server that plays
// MPEG-TS files with an H.264 track, each looped forever at its own rate on its own path,
// as if it were a live camera. Demos and tests point sources.Camera at it.
package samplecam

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

	"github.com/visiond/visiond/sources/internal/tsfile"
)

// DefaultListen is the address used when Server.Listen is empty.
const DefaultListen = "127.0.0.1:8554"

// clockRate is the RTP clock of H.264, the same 90 kHz as MPEG-TS timestamps.
const clockRate = 90000

// Server serves MPEG-TS H.264 files over RTSP (TCP transport), one path per file.
type Server struct {
	Listen  string            // host:port to listen on; port 0 picks a free one. Defaults to DefaultListen
	Streams map[string]string // URL path (without the leading "/") → MPEG-TS file
	Logger  *slog.Logger      // defaults to slog.Default()
	// Username and Password, when set, are required of readers (RTSP basic/digest auth).
	Username, Password string

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
	path     string
	file     string
	sps, pps []byte
	stream   *gortsplib.ServerStream
	frozen   atomic.Bool // packets are not sent (the file's clock runs on)
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
		sps, pps, err := probe(file)
		if err != nil {
			return fmt.Errorf("samplecam: stream %q: %w", path, err)
		}
		streams[path] = &fileStream{path: path, file: file, sps: sps, pps: pps}
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
			Desc: &description.Session{Medias: []*description.Media{{
				Type: description.MediaTypeVideo,
				Formats: []format.Format{&format.H264{
					PayloadTyp:        96,
					PacketizationMode: 1,
					SPS:               fs.sps,
					PPS:               fs.pps,
				}},
			}}},
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
	if !h.authorized(ctx.Conn, ctx.Request) {
		return &base.Response{StatusCode: base.StatusUnauthorized}, nil, liberrors.ErrServerAuth{}
	}
	fs := h.s.lookup(ctx.Path)
	if fs == nil {
		return &base.Response{StatusCode: base.StatusNotFound}, nil, fmt.Errorf("no stream on path %q", ctx.Path)
	}
	return &base.Response{StatusCode: base.StatusOK}, fs.stream, nil
}

// OnSetup implements gortsplib.ServerHandlerOnSetup.
func (h handler) OnSetup(ctx *gortsplib.ServerHandlerOnSetupCtx) (*base.Response, *gortsplib.ServerStream, error) {
	if !h.authorized(ctx.Conn, ctx.Request) {
		return &base.Response{StatusCode: base.StatusUnauthorized}, nil, liberrors.ErrServerAuth{}
	}
	fs := h.s.lookup(ctx.Path)
	if fs == nil {
		return &base.Response{StatusCode: base.StatusNotFound}, nil, fmt.Errorf("no stream on path %q", ctx.Path)
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

// probe checks that file is MPEG-TS with an H.264 track and returns its first SPS and PPS.
func probe(file string) (sps, pps []byte, err error) {
	r, err := tsfile.Open(file)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	for sps == nil || pps == nil {
		au, err := r.Next()
		if errors.Is(err, io.EOF) {
			return nil, nil, fmt.Errorf("%s: H.264 track has no SPS/PPS", file)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
		for _, n := range au.NALUs {
			switch h264.NALUType(n[0] & 0x1F) {
			case h264.NALUTypeSPS:
				if sps == nil {
					sps = n
				}
			case h264.NALUTypePPS:
				if pps == nil {
					pps = n
				}
			}
		}
	}
	return sps, pps, nil
}

// play sends the file's access units as RTP at the file's own rate, looping, with RTP
// timestamps that keep increasing across loops, until ctx ends.
func (s *Server) play(ctx context.Context, fs *fileStream) {
	log := s.log.With("path", fs.path, "file", fs.file)
	medi := fs.stream.Desc.Medias[0]
	enc, err := medi.Formats[0].(*format.H264).CreateEncoder()
	if err != nil {
		log.Error("H.264 packetizer", "error", err)
		return
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	rtpBase := binary.BigEndian.Uint32(rnd[:])

	start := time.Now()
	var offset int64 // 90 kHz media time of the loops already played
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		r, err := tsfile.Open(fs.file)
		if err != nil {
			log.Error("cannot reopen file, sample stream stopped", "error", err)
			return
		}
		var lastDTS, step int64 = -1, clockRate / 25
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
			due := start.Add(time.Duration(offset+au.DTS) * time.Second / clockRate)
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
				log.Warn("H.264 packetize", "error", err)
				continue
			}
			ts := rtpBase + uint32(offset+au.PTS)
			for _, p := range pkts {
				p.Timestamp = ts
				if err := fs.stream.WritePacketRTP(medi, p); err != nil {
					r.Close()
					log.Error("sample stream stopped", "error", err)
					return
				}
			}
		}
		offset += max(lastDTS, 0) + step
		log.Debug("file ended, looping")
	}
}
