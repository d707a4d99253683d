package pipeline

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"

	"github.com/visiond/visiond/config"
)

// maxVerifiedLogins bounds the logins (user and password) the endpoint remembers as checked.
const maxVerifiedLogins = 8

// httpAuth asks every request but /healthz for the credentials of http.auth: a bearer token,
// or basic auth with a user and a password checked against a bcrypt hash. Secrets are
// compared through their SHA-256 in constant time. A login that passed bcrypt is remembered
// (its SHA-256, at most maxVerifiedLogins), so that a browser on the status page, which sends
// it with every request, costs one bcrypt, not one a request; a login not remembered costs a
// bcrypt run, one at a time, so wrong passwords cost at most one CPU however many come.
type httpAuth struct {
	token []byte // SHA-256 of the bearer token; nil: no token
	user  []byte // SHA-256 of the basic auth user; nil: no basic auth
	hash  []byte // bcrypt hash of its password

	bcrypt chan struct{} // a slot for the one bcrypt run at a time

	mu       sync.Mutex
	verified [][sha256.Size]byte // SHA-256 of "user:password" of logins that passed, oldest first
}

// newHTTPAuth returns the check of a's credentials, or nil when a gives none.
func newHTTPAuth(a config.HTTPAuth) *httpAuth {
	if a.Token == "" && a.PasswordHash == "" {
		return nil
	}
	h := &httpAuth{bcrypt: make(chan struct{}, 1)}
	if a.Token != "" {
		sum := sha256.Sum256([]byte(a.Token))
		h.token = sum[:]
	}
	if a.PasswordHash != "" {
		sum := sha256.Sum256([]byte(a.User))
		h.user, h.hash = sum[:], []byte(a.PasswordHash)
	}
	return h
}

// wrap returns next behind the check: a request without valid credentials gets 401 and the
// schemes it may use.
func (h *httpAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || h.allowed(r) {
			next.ServeHTTP(w, r)
			return
		}
		if h.hash != nil {
			w.Header().Add("WWW-Authenticate", `Basic realm="visiond", charset="UTF-8"`)
		}
		if h.token != nil {
			w.Header().Add("WWW-Authenticate", `Bearer realm="visiond"`)
		}
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
}

// allowed reports whether r carries valid credentials.
func (h *httpAuth) allowed(r *http.Request) bool {
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	switch {
	case h.token != nil && strings.EqualFold(scheme, "Bearer"):
		sum := sha256.Sum256([]byte(strings.TrimSpace(cred)))
		return subtle.ConstantTimeCompare(sum[:], h.token) == 1
	case h.hash != nil && strings.EqualFold(scheme, "Basic"):
		user, password, ok := r.BasicAuth()
		return ok && h.login(r, user, password)
	}
	return false
}

// login checks a basic auth user and password.
func (h *httpAuth) login(r *http.Request, user, password string) bool {
	key := sha256.Sum256([]byte(user + ":" + password)) // a user holds no ':' (config)
	h.mu.Lock()
	known := false
	for _, v := range h.verified {
		known = subtle.ConstantTimeCompare(v[:], key[:]) == 1 || known
	}
	h.mu.Unlock()
	if known {
		return true
	}

	select {
	case h.bcrypt <- struct{}{}:
	case <-r.Context().Done():
		return false
	}
	userSum := sha256.Sum256([]byte(user))
	userOK := subtle.ConstantTimeCompare(userSum[:], h.user) == 1
	// Checked even for a wrong user, so that the time taken does not tell users apart.
	passwordOK := bcrypt.CompareHashAndPassword(h.hash, []byte(password)) == nil
	<-h.bcrypt
	if !userOK || !passwordOK {
		return false
	}
	h.mu.Lock()
	if len(h.verified) == maxVerifiedLogins {
		h.verified = h.verified[1:]
	}
	h.verified = append(h.verified, key)
	h.mu.Unlock()
	return true
}
