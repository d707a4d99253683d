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

// Pipeline masks the credential properties of a GStreamer pipeline and the passwords of its
// URLs, keeping the rest as it was; Scrub hides them in messages quoting the pipeline, a URL
// or a password.
func TestPipeline(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`rtspsrc location=rtsp://cam/x user-id=admin user-pw=hunter2 ! appsink`,
			`rtspsrc location=rtsp://cam/x user-id=xxxxx user-pw=xxxxx ! appsink`},
		{`rtspsrc location="rtsp://admin:s3cr3t@10.0.0.5:554/s1" latency=0 ! appsink`,
			`rtspsrc location="rtsp://admin:xxxxx@10.0.0.5:554/s1" latency=0 ! appsink`},
		{`rtspsrc location=rtsp://admin:pa55w0rd@cam/x proxy=http://px:pr0xy@proxy:3128 proxy-id=pu proxy-pw="a b\"c" ! decodebin ! videoconvert ! video/x-raw,format=BGR ! appsink`,
			`rtspsrc location=rtsp://admin:xxxxx@cam/x proxy=http://px:xxxxx@proxy:3128 proxy-id=xxxxx proxy-pw="xxxxx" ! decodebin ! videoconvert ! video/x-raw,format=BGR ! appsink`},
		{`souphttpsrc location='https://u:tok3n@host/v.mjpg' user-pw = hunter2 ! jpegdec ! appsink`,
			`souphttpsrc location='https://u:xxxxx@host/v.mjpg' user-pw = xxxxx ! jpegdec ! appsink`},
		{`srtsrc uri=srt://host:9000 passphrase=longsecret123 ! appsink`, `srtsrc uri=srt://host:9000 passphrase=xxxxx ! appsink`},
		{`videotestsrc ! video/x-raw,width=64,format=BGR ! appsink`, `videotestsrc ! video/x-raw,width=64,format=BGR ! appsink`},
		{`rtspsrc user-pw= ! appsink`, `rtspsrc user-pw= ! appsink`},
		{``, ``},
	} {
		r := redact.Pipeline(tc.in)
		if r.URL != tc.want {
			t.Errorf("Pipeline(%q).URL =\n%q, want\n%q", tc.in, r.URL, tc.want)
		}
	}

	p := `rtspsrc location="rtsp://admin:p@ss w0rd@cam/x" user-id=operator user-pw="hunter 2" ! appsink`
	r := redact.Pipeline(p)
	msg := `could not open resource "rtsp://admin:p@ss w0rd@cam/x" (admin:p%40ss%20w0rd); pipeline ` + p +
		`; auth with hunter 2 failed; user operator`
	got := r.Scrub(msg)
	for _, secret := range []string{"p@ss", "w0rd", "p%40ss", "hunter 2", "user-id=operator"} {
		if strings.Contains(got, secret) {
			t.Errorf("Scrub shows %q: %s", secret, got)
		}
	}
	if !strings.Contains(got, "rtsp://admin:xxxxx@cam/x") || !strings.Contains(got, r.URL) {
		t.Errorf("Scrub lost the redacted URL or pipeline: %s", got)
	}
	if redact.Pipeline("").Scrub("nothing to hide") != "nothing to hide" {
		t.Error("an empty pipeline changes messages")
	}
}

// FuzzPipeline: whatever precedes them, a password property and a URL password appended to a
// pipeline never show in its redacted form nor in a message quoting it.
func FuzzPipeline(f *testing.F) {
	for _, s := range []string{"", "rtspsrc", `rtspsrc location="rtsp://a:b@c/d" ! appsink`, "x=\"", "x='", `a=\`, "caps,format=BGR !"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		full := p + " ! rtspsrc location=rtsp://u:Zq9UrlPw@cam/x user-pw=Zq9PropPw ! appsink"
		r := redact.Pipeline(full)
		for _, s := range []string{r.URL, r.Scrub("opening " + full + " failed")} {
			if strings.Contains(s, "Zq9UrlPw") || strings.Contains(s, "Zq9PropPw") {
				t.Fatalf("Pipeline(%q) shows a password: %s", full, s)
			}
		}
	})
}
