// Package redact hides passwords in URLs and GStreamer pipelines, and in messages that quote
// them, before they reach logs, errors, events or status. It has no dependencies beyond the standard library, so that
// every package (config, sources, sinks, pipeline) can use it.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a password wherever one would be shown.
const Mask = "xxxxx"

// Redactor hides the password of one URL (New) or the credentials of one GStreamer pipeline
// (Pipeline): in the URL or pipeline itself, for logs and status, and in any message that
// quotes it, a URL in it or a password (as libraries' errors do).
type Redactor struct {
	URL     string   // the URL (or pipeline) with its secrets replaced by Mask
	raw     string   // the URL (or pipeline) as given
	quoted  []string // pairs: a part a message may quote (a URL of a pipeline), its redacted form
	secrets []string // the passwords in every form a message may quote them: raw and escaped
}

// New returns the Redactor of rawURL, which need not parse.
func New(rawURL string) Redactor {
	r := Redactor{URL: rawURL, raw: rawURL}
	if u, err := url.Parse(rawURL); err == nil {
		r.URL = u.Redacted()
		if p, ok := u.User.Password(); ok && p != "" {
			r.secrets = secretForms(p)
		}
		return r
	}
	// Cut by hand: scheme://user:PASSWORD@host/... The last '@' ends the user info, since
	// a password may hold unescaped '/', '?' or '#'. This may hide more than the password,
	// never less.
	prefix, rest := "", rawURL
	if i := strings.Index(rawURL, "://"); i >= 0 {
		prefix, rest = rawURL[:i+3], rawURL[i+3:]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return r
	}
	colon := strings.Index(rest[:at], ":")
	if colon < 0 || colon == at-1 {
		return r // a user name only
	}
	r.URL = prefix + rest[:colon+1] + Mask + rest[at:]
	r.secrets = secretForms(rest[colon+1 : at])
	return r
}

// secretForms returns a password in every form a message may quote it: raw and escaped.
func secretForms(p string) []string {
	forms := []string{p}
	for _, esc := range []string{url.PathEscape(p), url.QueryEscape(p), url.UserPassword("", p).String()[1:]} {
		if esc != p {
			forms = append(forms, esc)
		}
	}
	return forms
}

// Scrub returns s with the URL (or pipeline, and each URL of the pipeline) replaced by its
// redacted form and every form of a password replaced by Mask.
func (r Redactor) Scrub(s string) string {
	if r.raw != r.URL {
		s = strings.ReplaceAll(s, r.raw, r.URL)
	}
	for i := 0; i+1 < len(r.quoted); i += 2 {
		s = strings.ReplaceAll(s, r.quoted[i], r.quoted[i+1])
	}
	for _, sec := range r.secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, Mask)
		}
	}
	return s
}

// pipelineProp matches one property of a gst-launch pipeline description: a name, '=' and a
// value that is double-quoted (with backslash escapes), single-quoted, or runs to the next
// space or '!'.
var pipelineProp = regexp.MustCompile(`([A-Za-z][A-Za-z0-9_-]*)[ \t]*=[ \t]*("(?:[^"\\]|\\.)*"|'[^']*'|[^\s!"']+)`)

// credentialProp reports whether a pipeline property holds a credential: the user and
// password properties of rtspsrc and souphttpsrc (user-id, user-pw, proxy-id, proxy-pw),
// and any password, passphrase or token (srtsrc passphrase, ...). isSecret: its value is
// also scrubbed from messages on its own (a password; a user name alone is not, since a short
// one would mangle every message that holds the word).
func credentialProp(name string) (cred, isSecret bool) {
	n := strings.ToLower(name)
	switch {
	case n == "user-id" || n == "proxy-id":
		return true, false
	case strings.HasSuffix(n, "-pw") || strings.Contains(n, "password") || strings.Contains(n, "passphrase") ||
		strings.Contains(n, "token") || strings.Contains(n, "secret"):
		return true, true
	}
	return false, false
}

// Pipeline returns the Redactor of a GStreamer pipeline description (gst-launch syntax): the
// values of its credential properties (user-id, user-pw, proxy-id, proxy-pw, and any
// password, passphrase or token) are replaced by Mask, and the password of every URL in a
// property (location=rtsp://user:pw@host/..., proxy=...) as New does.
func Pipeline(p string) Redactor {
	r := Redactor{raw: p}
	var b strings.Builder
	last := 0
	for _, m := range pipelineProp.FindAllStringSubmatchIndex(p, -1) {
		name, val := p[m[2]:m[3]], p[m[4]:m[5]]
		inner, open, closing := unquote(val)
		var masked string
		if cred, secret := credentialProp(name); cred {
			if inner == "" {
				continue
			}
			masked = open + Mask + closing
			if secret {
				r.secrets = append(r.secrets, inner)
			}
		} else if strings.Contains(inner, "://") {
			u := New(inner)
			if u.URL == inner {
				continue
			}
			masked = open + u.URL + closing
			r.quoted = append(r.quoted, inner, u.URL)
			r.secrets = append(r.secrets, u.secrets...)
		} else {
			continue
		}
		b.WriteString(p[last:m[4]])
		b.WriteString(masked)
		last = m[5]
	}
	b.WriteString(p[last:])
	r.URL = b.String()
	return r
}

// unquote returns a property value without its quotes (and backslash escapes, for double
// quotes), and the quotes.
func unquote(v string) (inner, open, closing string) {
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		q := v[:1]
		inner = v[1 : len(v)-1]
		if q == `"` {
			inner = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(inner)
		}
		return inner, q, q
	}
	return v, "", ""
}

// URL returns rawURL with the password of its user info, if any, replaced by Mask, for logs
// and messages. It also redacts URLs that do not parse.
func URL(rawURL string) string { return New(rawURL).URL }
