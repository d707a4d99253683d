package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/visiond/visiond/internal/videofile"

	"github.com/visiond/visiond/sources"
)

// CheckFiles checks that every file the config names, and that the daemon
// opens, can be read: the model, ONNX Runtime's library, the labels, every
// TLS file, NATS nkey seed and credentials files, the sample camera's file
// (when enabled) and the file of each enabled camera of kind file; and, with a
// labels file, that the class names of the analytics settings are in it
// (CheckClasses). Validate
// does not, as it looks at values only; `visiond check` does, so that a file
// run would fail on is found before. It returns nil or an *Error naming each
// field, its line and the path.
//
// It checks as the user it runs as: a file readable by root but not by the
// service's user passes when check runs as root.
func (c *Config) CheckFiles() error {
	v := validator{lines: c.lines}
	v.readable("workers.model", c.Workers.Model)
	v.readable("workers.library", c.Workers.Library)
	v.readable("workers.labels", c.Workers.Labels)
	v.readable("http.tls.cert_file", c.HTTP.TLS.CertFile)
	v.readable("http.tls.key_file", c.HTTP.TLS.KeyFile)
	for _, t := range []struct {
		field string
		tls   TLS
		auth  NATSAuth
	}{{"nats", c.NATS.TLS, c.NATS.Auth}, {"nats.leaf", c.NATS.Leaf.TLS, c.NATS.Leaf.Auth}} {
		v.readable(t.field+".tls.ca_file", t.tls.CAFile)
		v.readable(t.field+".tls.cert_file", t.tls.CertFile)
		v.readable(t.field+".tls.key_file", t.tls.KeyFile)
		v.readable(t.field+".auth.nkey_seed_file", t.auth.NKeySeedFile)
		v.readable(t.field+".auth.credentials_file", t.auth.CredentialsFile)
	}
	if c.Sample.Enabled {
		v.readable("sample.file", c.Sample.File)
	}
	for i, cam := range c.Cameras {
		if cam.Enabled && cam.Kind == sources.KindFile {
			field := fmt.Sprintf("cameras[%d].file", i)
			n := len(v.problems)
			v.readable(field, cam.File)
			if cam.Clips.Enabled && len(v.problems) == n {
				// Clips of a file camera come from its packets: MPEG-TS or MP4 with H.264 or H.265.
				if r, err := videofile.Open(cam.File); err != nil {
					v.add(fmt.Sprintf("cameras[%d].clips.enabled", i), "camera %q makes clips of its file's packets, which need an MPEG-TS or MP4 file with H.264 or H.265 video: %v", cam.ID, err)
				} else {
					_ = r.Close()
				}
			}
		}
	}
	labelsRead := !slices.ContainsFunc(v.problems, func(p Problem) bool { return p.Field == "workers.labels" })
	if c.Workers.Labels != "" && labelsRead {
		// The labels file reads: the analytics settings' class names must be in it.
		labels, err := ReadLabels(c.Workers.Labels)
		var cerr *Error
		switch {
		case err != nil:
			v.add("workers.labels", "%v", err)
		case errors.As(c.CheckClasses(labels), &cerr):
			for _, p := range cerr.Problems {
				p.Msg += fmt.Sprintf(" (workers.labels %s: %d classes)", c.Workers.Labels, len(labels))
				v.problems = append(v.problems, p)
			}
		}
	}
	if len(v.problems) == 0 {
		return nil
	}
	return newError(v.problems)
}

// readable reports at field a path that cannot be opened and read, is a
// directory or is empty. An empty path is not checked.
func (v *validator) readable(field, path string) {
	if path == "" {
		return
	}
	// Stat first: opening a FIFO or a terminal would wait for a writer.
	switch st, err := os.Stat(path); {
	case err != nil:
		v.add(field, "cannot read %q: %s", path, pathErrReason(err))
		return
	case st.IsDir():
		v.add(field, "%q is a directory, want a file", path)
		return
	case !st.Mode().IsRegular():
		v.add(field, "%q is not a regular file (%s)", path, st.Mode().Type())
		return
	}
	f, err := os.Open(path)
	if err != nil {
		v.add(field, "cannot read %q: %s", path, pathErrReason(err))
		return
	}
	defer f.Close()
	var b [1]byte
	switch _, err := f.Read(b[:]); {
	case errors.Is(err, io.EOF):
		v.add(field, "%q is empty", path)
	case err != nil:
		v.add(field, "cannot read %q: %s", path, pathErrReason(err))
	}
}
