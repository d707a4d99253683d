package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/configs"
)

// The status page's editor of a camera's zones, lines and masks (issue 40, item 3):
//
//   - GET /api/cameras/{id}/scene: the camera's zones, lines and masks as the config file
//     has them (the embedded config's without a file), its entry's YAML, the file's version
//     (a digest, also the ETag) and whether the page may save (http.edit, which needs
//     http.auth, and a file to save to), with why not;
//   - POST /api/cameras/{id}/scene/check: a scene the page drew, put into the file's text
//     and checked as `visiond check` checks a file; nothing is written. The camera's entry
//     after the edit and the problems found come back;
//   - PUT /api/cameras/{id}/scene, with If-Match: the file's version the page read: the same
//     edit, written into the file atomically when it passes the check, then reloaded as any
//     edit of the file is. A rejected edit leaves the file as it was.
//
// Bodies are JSON ({"zones": [{"id", "points", "classes"}], "lines": [...], "masks":
// [{"points"}]}: config.Scene), at most maxSceneBytes, sent as application/json from the
// page's own origin. One save at a time: another gets 409 while one is being saved.

// maxSceneBytes bounds an editor's request body: a camera's scene is a few KiB.
const maxSceneBytes = 1 << 20

// sceneReply is GET /api/cameras/{id}/scene's answer.
type sceneReply struct {
	Camera   string       `json:"camera"`
	Scene    config.Scene `json:"scene"`
	YAML     string       `json:"yaml"`              // the camera's entry in the file
	Version  string       `json:"version"`           // the file's, for If-Match
	Editable bool         `json:"editable"`          // PUT saves
	Why      string       `json:"why_not,omitempty"` // why it does not
}

// editReply answers a check or a save.
type editReply struct {
	OK       bool     `json:"ok"`                 // the edited file passes check
	YAML     string   `json:"yaml"`               // the camera's entry after the edit
	Problems []string `json:"problems,omitempty"` // what check says of the edited file
	Saved    bool     `json:"saved"`              // written into the file (PUT)
	Version  string   `json:"version"`            // the file's version now
	Error    string   `json:"error,omitempty"`
}

// editable says whether the editor may save, and why not.
func (d *Daemon) editable() (bool, string) {
	switch {
	case d.ConfigPath == "":
		return false, "the daemon runs on its embedded config: there is no file to save to (start it with -config FILE)"
	case !d.running.Load().HTTP.Edit:
		return false, "saving is off: set http.edit: true (with http.auth) in the config file and restart"
	}
	return true, ""
}

// configText reads the config file the editor edits, or the embedded config without one.
func (d *Daemon) configText() ([]byte, error) {
	if d.ConfigPath == "" {
		return configs.Default, nil
	}
	return os.ReadFile(d.ConfigPath)
}

func (d *Daemon) serveScene(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	data, err := d.configText()
	if err != nil {
		writeEditJSON(w, http.StatusInternalServerError, editReply{Error: err.Error()})
		return
	}
	scene, err := config.SceneOf(data, id)
	if err != nil {
		status := http.StatusUnprocessableEntity // the file does not load: the page shows why
		if errors.Is(err, config.ErrNoSuchCamera) {
			status = http.StatusNotFound
		}
		writeEditJSON(w, status, editReply{Error: err.Error(), Version: config.Version(data)})
		return
	}
	_, entry, err := config.EditScene(data, id, scene)
	if err != nil {
		writeEditJSON(w, http.StatusInternalServerError, editReply{Error: err.Error()})
		return
	}
	ok, why := d.editable()
	w.Header().Set("ETag", `"`+config.Version(data)+`"`)
	writeEditJSON(w, http.StatusOK, sceneReply{Camera: id, Scene: scene, YAML: string(entry),
		Version: config.Version(data), Editable: ok, Why: why})
}

func (d *Daemon) checkScene(w http.ResponseWriter, r *http.Request) { d.editScene(w, r, false) }

func (d *Daemon) saveScene(w http.ResponseWriter, r *http.Request) { d.editScene(w, r, true) }

// editScene is the check (save false) and the save.
func (d *Daemon) editScene(w http.ResponseWriter, r *http.Request, save bool) {
	if err := sameOrigin(r); err != nil {
		writeEditJSON(w, http.StatusForbidden, editReply{Error: err.Error()})
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeEditJSON(w, http.StatusUnsupportedMediaType, editReply{Error: "the body must be application/json"})
		return
	}
	var scene config.Scene
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxSceneBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&scene); err != nil {
		writeEditJSON(w, http.StatusBadRequest, editReply{Error: "the scene: " + err.Error()})
		return
	}
	if dec.Decode(new(json.RawMessage)) != io.EOF {
		writeEditJSON(w, http.StatusBadRequest, editReply{Error: "the scene: more than one JSON value"})
		return
	}
	if save {
		if ok, why := d.editable(); !ok {
			writeEditJSON(w, http.StatusForbidden, editReply{Error: why})
			return
		}
		if r.Header.Get("If-Match") == "" {
			writeEditJSON(w, http.StatusPreconditionRequired, editReply{Error: "If-Match: the file's version the edit was made on is required"})
			return
		}
		if !d.editMu.TryLock() {
			writeEditJSON(w, http.StatusConflict, editReply{Error: "another edit is being saved; read the scene again and retry"})
			return
		}
		defer d.editMu.Unlock()
	}
	id := r.PathValue("id")
	data, err := d.configText()
	if err != nil {
		writeEditJSON(w, http.StatusInternalServerError, editReply{Error: err.Error()})
		return
	}
	version := config.Version(data)
	if save && strings.Trim(r.Header.Get("If-Match"), `"`) != version {
		writeEditJSON(w, http.StatusPreconditionFailed, editReply{Version: version,
			Error: "the config file changed since the scene was read: read it again and redo the edit"})
		return
	}
	text, entry, err := config.EditScene(data, id, scene)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, config.ErrNoSuchCamera) {
			status = http.StatusNotFound
		}
		writeEditJSON(w, status, editReply{Version: version, Error: err.Error()})
		return
	}
	reply := editReply{YAML: string(entry), Version: version}
	if _, err := config.Validate(text); err != nil {
		reply.Problems = problemsOf(err)
		writeEditJSON(w, http.StatusUnprocessableEntity, reply)
		return
	}
	reply.OK = true
	if !save {
		writeEditJSON(w, http.StatusOK, reply)
		return
	}
	if err := config.WriteFile(d.ConfigPath, text); err != nil {
		reply.Error = err.Error()
		writeEditJSON(w, http.StatusInternalServerError, reply)
		return
	}
	reply.Saved, reply.Version = true, config.Version(text)
	d.log.Info("config edited from the status page", "camera", id, "config", d.ConfigPath,
		"zones", len(scene.Zones), "lines", len(scene.Lines), "masks", len(scene.Masks))
	d.ReloadNow("edit of camera " + id + " from the status page")
	w.Header().Set("ETag", `"`+reply.Version+`"`)
	writeEditJSON(w, http.StatusOK, reply)
}

// problemsOf lists err's problems one by one (a *config.Error's), else err itself.
func problemsOf(err error) []string {
	var ce *config.Error
	if !errors.As(err, &ce) {
		return []string{err.Error()}
	}
	out := make([]string, len(ce.Problems))
	for i, p := range ce.Problems {
		out[i] = p.String()
	}
	return out
}

// sameOrigin refuses a request that a page of another origin sent (its Origin header names
// another host): a form or a script elsewhere must not edit the config with the browser's
// credentials. A request without Origin (curl, a script) passes: it carries credentials
// only if given them.
func sameOrigin(r *http.Request) error {
	o := r.Header.Get("Origin")
	if o == "" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("origin %q is not this endpoint's (%s)", o, r.Host)
	}
	return nil
}

func writeEditJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
