package pipeline

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/version"
	"github.com/visiond/visiond/sources"
)

// startHTTP serves the daemon's HTTP endpoint (see handler), over TLS with http.tls, and
// behind http.auth's credentials when it gives any (see httpAuth). Start calls it last, after
// every other stage has started, so a request it answers comes after a completed Start.
func (d *Daemon) startHTTP(c config.HTTP) error {
	var tlsConf *tls.Config
	if c.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile)
		if err != nil {
			return fmt.Errorf("http.tls: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("http.listen %s: %w", c.Listen, err)
	}
	d.httpAddr = ln.Addr()
	if tlsConf != nil {
		ln = tls.NewListener(ln, tlsConf)
	}
	handler := d.handler(c.Pprof)
	if auth := newHTTPAuth(c.Auth); auth != nil {
		handler = auth.wrap(handler)
	}
	d.httpSrv = &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server stopped", "error", err)
		}
	}()
	d.log.Info("http endpoint ready", "addr", ln.Addr().String(), "tls", tlsConf != nil, "auth", c.Auth.Token != "" || c.Auth.PasswordHash != "")
	return nil
}

// handler serves / (the status page), /healthz (the process is up), /readyz (see notReady),
// /metrics (Prometheus), /api/cameras (JSON status per camera),
// /api/cameras/{id}/objects (the objects it follows), /api/cameras/{id}/snapshot.jpg (the latest analysed frame, with its boxes), /api/cameras/{id}/live (a
// WebSocket of its video as it comes, fragmented MP4: live.go) and /api/workers
// (JSON status per worker process: state, provider, jobs, restarts, host and GPU memory),
// /api/version (JSON: the build's version and revision, Go's version), the clips API
// (clipsapi.go: /api/cameras/{id}/clips, /api/clips/{name...});
// with withPprof, Go's profiles under /debug/pprof/.
func (d *Daemon) handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	if withPprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	statusPage(mux)
	d.clipsAPI().register(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if reason := d.notReady(); reason != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, reason)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", d.metricsHandler())
	mux.HandleFunc("GET /api/cameras", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.Cameras())
	})
	mux.HandleFunc("GET /api/cameras/{id}/objects", func(w http.ResponseWriter, r *http.Request) {
		c := d.camera(r.PathValue("id"))
		if c == nil {
			http.Error(w, "no such camera", http.StatusNotFound)
			return
		}
		objs := []liveObject{}
		if p := c.objects.Load(); p != nil {
			objs = *p
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(objs)
	})
	mux.HandleFunc("GET /api/cameras/{id}/snapshot.jpg", func(w http.ResponseWriter, r *http.Request) {
		c := d.camera(r.PathValue("id"))
		if c == nil {
			http.Error(w, "no such camera", http.StatusNotFound)
			return
		}
		data, ok, err := c.snap.jpeg(r.Context())
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case !ok:
			http.Error(w, "no frame analysed yet", http.StatusServiceUnavailable)
		default:
			w.Header().Set("Content-Type", "image/jpeg")
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(data)
		}
	})
	mux.HandleFunc("GET /api/cameras/{id}/live", d.serveLive)
	mux.HandleFunc("GET /api/cameras/{id}/results", d.serveResults)
	mux.HandleFunc("GET /api/cameras/{id}/scene", d.serveScene)
	mux.HandleFunc("POST /api/cameras/{id}/scene/check", d.checkScene)
	mux.HandleFunc("PUT /api/cameras/{id}/scene", d.saveScene)
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(version.Get())
	})
	mux.HandleFunc("GET /api/workers", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.Workers())
	})
	mux.HandleFunc("GET /api/memory", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.Memory())
	})
	return mux
}

// notReady returns why the daemon is not ready to serve, or "" when it is: Start has
// completed (the HTTP endpoint only starts at its end), the daemon is not stopping, and at
// least one camera is online, or none is configured.
func (d *Daemon) notReady() string {
	select {
	case <-d.done:
		return "stopping"
	default:
	}
	cams := d.Cameras()
	if len(cams) == 0 {
		return ""
	}
	for _, c := range cams {
		if c.State == sources.StateOnline {
			return ""
		}
	}
	return fmt.Sprintf("no camera online (%d enabled)", len(cams))
}
