package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/sinks"
)

// The clips API (issue 23): the clips in the site's clip store, for people (the status page
// lists and plays them) and for scripts.
//
//	GET /api/cameras/{id}/clips[?limit=N]  a camera's recent clips ([]sinks.ClipInfo), newest first
//	GET /api/clips/{camera}/c{ms}.mp4      a clip's MP4, with range requests (a video element seeks)
//
// Both answer 503 where there is no clip store (nats.jetstream off): the clips are in
// JetStream.

// Limits of ?limit=.
const (
	defaultClipList = 20
	maxClipList     = 200
)

// clipStoreTimeout bounds a request's wait on the clip store's list (a slow or stuck server).
const clipStoreTimeout = 10 * time.Second

// clipReader is what the clips API reads: the site's clip store (sinks.Clips).
type clipReader interface {
	// List returns camera's clips, newest first, at most limit.
	List(ctx context.Context, camera string, limit int) ([]sinks.ClipInfo, error)
	// Open opens a clip by its name (sinks.ClipName); an error that wraps
	// jetstream.ErrObjectNotFound when there is none.
	Open(ctx context.Context, name string) (io.ReadSeekCloser, sinks.ClipInfo, error)
}

// clipsAPI serves the clips API from the store that store returns (nil: none); known says
// whether a camera is in the config in force.
type clipsAPI struct {
	store func() clipReader
	known func(camera string) bool
}

// clipNameRE is a clip's name as sinks.ClipName makes it: a camera id (a token), "/c", the
// start in Unix milliseconds, ".mp4".
var clipNameRE = regexp.MustCompile(`^([A-Za-z0-9_-]{1,64})/c(-?[0-9]{1,19})\.mp4$`)

// register adds the API's routes to mux.
func (a clipsAPI) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/cameras/{id}/clips", a.list)
	mux.HandleFunc("GET /api/clips/{name...}", a.get)
}

// list answers a camera's recent clips: 404 for a camera neither configured nor with clips.
func (a clipsAPI) list(w http.ResponseWriter, r *http.Request) {
	camera := r.PathValue("id")
	limit := defaultClipList
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxClipList {
			http.Error(w, fmt.Sprintf("limit %q: want a whole number in 1..%d", s, maxClipList), http.StatusBadRequest)
			return
		}
		limit = n
	}
	store := a.store()
	if store == nil {
		http.Error(w, noClipStore, http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), clipStoreTimeout)
	defer cancel()
	clips, err := store.List(ctx, camera, limit)
	if err != nil {
		http.Error(w, "clip store: "+err.Error(), http.StatusBadGateway)
		return
	}
	if len(clips) == 0 && !a.known(camera) {
		http.Error(w, fmt.Sprintf("no camera %q, and no clips of it", camera), http.StatusNotFound)
		return
	}
	if clips == nil {
		clips = []sinks.ClipInfo{}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(clips)
}

// get serves a clip's MP4 with http.ServeContent: range requests (206), If-Range and
// conditional requests on its ETag, the name.
func (a clipsAPI) get(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !clipNameRE.MatchString(name) {
		http.Error(w, fmt.Sprintf("bad clip name %q: want <camera>/c<start, unix ms>.mp4", name), http.StatusBadRequest)
		return
	}
	store := a.store()
	if store == nil {
		http.Error(w, noClipStore, http.StatusServiceUnavailable)
		return
	}
	rs, info, err := store.Open(r.Context(), name) // it bounds its own waits on the server
	switch {
	case errors.Is(err, jetstream.ErrObjectNotFound):
		http.Error(w, fmt.Sprintf("no clip %q", name), http.StatusNotFound)
		return
	case err != nil:
		http.Error(w, "clip store: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer rs.Close()
	h := w.Header()
	h.Set("Content-Type", "video/mp4")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", strconv.Quote(name)) // a clip's name is its start: a stored clip never changes
	h.Set("Cache-Control", "private, max-age=86400")
	http.ServeContent(w, r, "", info.End, rs)
}

const noClipStore = "no clip store: clips are kept in JetStream, and nats.jetstream is false"

// clipsAPI returns the daemon's clips API: its clip store, the cameras of the config in force.
func (d *Daemon) clipsAPI() clipsAPI {
	return clipsAPI{
		store: func() clipReader {
			if d.clips == nil { // a nil *sinks.Clips is no clipReader
				return nil
			}
			return d.clips
		},
		known: func(camera string) bool {
			cfg := d.Running()
			return cfg != nil && slices.ContainsFunc(cfg.Cameras, func(c config.Camera) bool { return c.ID == camera })
		},
	}
}
