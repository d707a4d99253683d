package config

import (
	"net"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// minTokenLen is the shortest bearer token the HTTP endpoint takes.
const minTokenLen = 16

// secretTwins reports a secret given both inline and in a file (field is the
// secret's path; its file key is field + "_file").
func (v *validator) secretTwins(field, value, file string) {
	if value != "" && file != "" {
		key := field[strings.LastIndexAny(field, ".]")+1:]
		v.add(field+"_file", "both %s and %s_file are set: keep one", key, key)
	}
}

// http checks the HTTP endpoint's credentials and TLS, and that an endpoint
// off loopback has credentials or says it needs none.
func (v *validator) http(h HTTP) {
	a := h.Auth
	v.secretTwins("http.auth.token", a.Token, a.TokenFile)
	v.secretTwins("http.auth.password_hash", a.PasswordHash, a.PasswordHashFile)
	token := a.Token != "" || a.TokenFile != ""
	hash := a.PasswordHash != "" || a.PasswordHashFile != ""
	if a.Token != "" && len(a.Token) < minTokenLen {
		v.add("http.auth.token", "too short: %d characters, want at least %d (e.g. the output of openssl rand -hex 32)", len(a.Token), minTokenLen)
	}
	switch {
	case a.User != "" && !hash:
		v.add("http.auth.password_hash", "missing: user %q needs the bcrypt hash of its password", a.User)
	case hash && a.User == "":
		v.add("http.auth.user", "missing: password_hash is set")
	case strings.ContainsAny(a.User, ":\r\n") || strings.ContainsFunc(a.User, isControl):
		v.add("http.auth.user", "must not hold ':' or control characters (basic auth)")
	}
	if a.PasswordHash != "" {
		if _, err := bcrypt.Cost([]byte(a.PasswordHash)); err != nil {
			// Never echo the value: it may be the password itself, put here by mistake.
			v.add("http.auth.password_hash", "not a bcrypt hash ($2a$, $2b$ or $2y$...): make one with htpasswd -nB USER (Debian's apache2-utils) and keep what follows the ':'")
		}
	}
	if (h.TLS.CertFile == "") != (h.TLS.KeyFile == "") {
		v.add("http.tls", "cert_file and key_file go together")
	}
	if h.Edit && !token && !hash {
		v.add("http.edit", "needs http.auth (a token, or a user and password_hash): whoever reaches the endpoint could rewrite the config file")
	}
	if _, _, err := net.SplitHostPort(h.Listen); err == nil && !token && !hash && !h.AllowUnauthenticated && !isLoopback(h.Listen) {
		v.add("http.listen", "%q is not a loopback address, and the endpoint serves every camera's picture: "+
			"set http.auth (a token, or a user and password_hash), or http.allow_unauthenticated: true to serve anyone who reaches it", h.Listen)
	}
}

// isLoopback reports whether the host of the listen address addr is a
// loopback address or "localhost". An empty host (every interface) and any
// other name are not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
