package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// startHTTP serves /healthz (the process is up), /api/cameras (JSON status per camera) and
// /api/workers (JSON status per worker process: state, provider, jobs, restarts, host and
// GPU memory).
func (d *Daemon) startHTTP(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("http.listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /api/cameras", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.Cameras())
	})
	mux.HandleFunc("GET /api/workers", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.Workers())
	})
	d.httpAddr = ln.Addr()
	d.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		if err := d.httpSrv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server stopped", "error", err)
		}
	}()
	d.log.Info("http endpoint ready", "addr", ln.Addr().String())
	return nil
}
