package pipeline

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// uiFiles is the status page: plain HTML, CSS and JavaScript, with nothing loaded from
// elsewhere (edge boxes are often offline). The page polls /api/cameras and /api/workers.
//
//go:embed ui
var uiFiles embed.FS

// statusPage registers the status page on mux: GET / is the page, /ui/ its style and script.
func statusPage(mux *http.ServeMux) {
	ui, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the directory is embedded at build time
	}
	index, err := fs.ReadFile(ui, "index.html")
	if err != nil {
		panic(err)
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(ui))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		pageHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(index)
	})
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") { // no directory listings
			http.NotFound(w, r)
			return
		}
		pageHeaders(w)
		files.ServeHTTP(w, r)
	})
}

// pageHeaders keeps the page to its own origin and makes browsers check for a new version
// (after an upgrade) instead of running a cached one.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	// media-src blob: is the live view's Media Source; connect-src 'self' takes in its
	// WebSocket (same host and port, ws: or wss:).
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self'; media-src 'self' blob:; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
}
