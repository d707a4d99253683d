// Package redact hides passwords in URLs, and in messages that quote them, before they reach
// logs, errors, events or status. It has no dependencies beyond the standard library, so that
// every package (config, sources, sinks, pipeline) can use it.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces a password wherever one would be shown.
const Mask = "xxxxx"

// Redactor hides the password of one URL: in the URL itself, for logs and status, and in
// any message that quotes the URL or the password (as libraries' errors do).
type Redactor struct {
	URL     string   // the URL with its password replaced by Mask
	raw     string   // the URL as given
	secrets []string // the password in every form a message may quote it: raw and escaped
}

// New returns the Redactor of rawURL, which need not parse.
func New(rawURL string) Redactor {
	r := Redactor{URL: rawURL, raw: rawURL}
	if u, err := url.Parse(rawURL); err == nil {
		r.URL = u.Redacted()
		if p, ok := u.User.Password(); ok && p != "" {
			r.secrets = append(r.secrets, p)
			for _, esc := range []string{url.PathEscape(p), url.QueryEscape(p), url.UserPassword("", p).String()[1:]} {
				if esc != p {
					r.secrets = append(r.secrets, esc)
				}
			}
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
	r.secrets = []string{rest[colon+1 : at]}
	return r
}

// Scrub returns s with the URL replaced by its redacted form and every form of the
// password replaced by Mask.
func (r Redactor) Scrub(s string) string {
	if r.raw != r.URL {
		s = strings.ReplaceAll(s, r.raw, r.URL)
	}
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, Mask)
	}
	return s
}

// URL returns rawURL with the password of its user info, if any, replaced by Mask, for logs
// and messages. It also redacts URLs that do not parse.
func URL(rawURL string) string { return New(rawURL).URL }
