package redact_test

import (
	"strings"
	"testing"

	"github.com/visiond/visiond/internal/redact"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"rtsp://cam/x":                  "rtsp://cam/x",
		"rtsp://admin@cam/x":            "rtsp://admin@cam/x",
		"rtsp://admin:hunter2@cam:554/": "rtsp://admin:xxxxx@cam:554/",
		"rtsp://admin:hun%zz@cam/":      "rtsp://admin:xxxxx@cam/",
		"rtsp://admin:hun/ter@cam/x":    "rtsp://admin:xxxxx@cam/x",
		"not a url %zz":                 "not a url %zz",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A Redactor scrubs a password from messages in every form a library may quote it.
func TestRedactorScrub(t *testing.T) {
	for _, tc := range []struct{ url, msg string }{
		{"rtsp://admin:p@ss w0rd@cam/x", "dial rtsp://admin:p@ss w0rd@cam/x: refused"},
		{"rtsp://admin:p%40ss%20w0rd@cam/x", "auth failed for admin:p%40ss%20w0rd and p@ss w0rd"},
		{"rtsp://admin:a+b@cam/x", "query form a%2Bb, raw a+b"},
		{"nats://u:s3cret@[::1", `parse "nats://u:s3cret@[::1": missing ']' in host`},
	} {
		r := redact.New(tc.url)
		got := r.Scrub(tc.msg)
		for _, secret := range []string{"p@ss", "w0rd", "p%40ss", "a+b", "a%2Bb", "s3cret"} {
			if strings.Contains(got, secret) {
				t.Errorf("New(%q).Scrub(%q) = %q: shows %q", tc.url, tc.msg, got, secret)
			}
		}
		if strings.Contains(r.URL, "w0rd") || strings.Contains(r.URL, "s3cret") {
			t.Errorf("New(%q).URL = %q", tc.url, r.URL)
		}
	}
}
