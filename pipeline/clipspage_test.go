package pipeline

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
)

// TestClipsPage plays a clip from the status page of a real daemon in headless Chromium: two
// clips of east (MP4s that ffmpeg remuxed from the sample stream) are put in the daemon's clip
// store; the page, opened with ?play=<the older one>, must list both in east's card, newest
// first, with their duration and labels, and play the one asked for by clicking it: the DOM
// Chromium dumps must show the player's video advanced past 1 s at the stream's 768x576 (the
// page copies currentTime, videoWidth and videoHeight into data- attributes from the video's
// events), the clip marked playing, and the MP4 read with range requests (206). Chromium runs
// with its default autoplay policy: the page plays the clip muted, as it may without a user's
// gesture. Headless Chromium's virtual time (--virtual-time-budget) drives the media clock too.
func TestClipsPage(t *testing.T) {
	chromium := chromiumPath(t)
	d, _ := startDaemon(t)
	if d.clips == nil {
		t.Fatal("the daemon has JetStream but no clip store")
	}
	now := time.Now()
	older, newer := testClip("east", now.Add(-10*time.Minute), 6), testClip("east", now.Add(-2*time.Minute), 3)
	short, full := 1.0, 5.0 // the first object 1 s into the older clip: a camera's first second; the newer one as asked
	older.ClipPreRoll = sinks.ClipPreRoll{PreCaptureS: 5, PreRollS: &short, Short: sinks.ClipShortStreamStart}
	newer.ClipPreRoll = sinks.ClipPreRoll{PreCaptureS: 5, PreRollS: &full}
	putClip(t, d.clips, older, testutil.SampleMP4(t, 6))
	putClip(t, d.clips, newer, testutil.SampleMP4(t, 3))

	// The proxy notes the page's requests for clips: their Range headers and statuses.
	target, err := url.Parse("http://" + d.HTTPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var (
		mu       sync.Mutex
		requests []string // "<path> <range> <status>" of each clip request
	)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		rp.ServeHTTP(sw, r)
		if strings.Contains(r.URL.Path, "/clips") {
			mu.Lock()
			requests = append(requests, fmt.Sprintf("%s %q %d", r.URL.RequestURI(), r.Header.Get("Range"), sw.code))
			mu.Unlock()
		}
	}))
	defer proxy.Close()

	dom := runChromium(t, chromium, "--virtual-time-budget=8000", "--window-size=1280,1000",
		"--dump-dom", proxy.URL+"/?play="+url.QueryEscape(older.Name))
	mu.Lock()
	defer mu.Unlock()
	t.Logf("clip requests:\n%s", strings.Join(requests, "\n"))

	cards, _ := parseCards(t, dom)
	east, ok := cards["east"]
	if !ok {
		t.Fatalf("no card of east; DOM:\n%s", dom)
	}
	if east.attr["data-clips"] != "2" {
		t.Errorf("east's card lists %q clips, want 2", east.attr["data-clips"])
	}
	buttons := regexp.MustCompile(`<button class="clip"([^>]*)>([^<]*)</button>`).FindAllStringSubmatch(east.inner, -1)
	var names []string
	for _, b := range buttons {
		attrs := attrsOf(b[1])
		names = append(names, attrs["data-clip"])
		c := newer
		if attrs["data-clip"] == older.Name {
			c = older
		}
		text := html.UnescapeString(b[2])
		if want := fmt.Sprintf(" · %.1f s · person, car", c.DurationS); !strings.HasSuffix(text, want) {
			t.Errorf("clip %s shown as %q, want its start, then %q", c.Name, text, want)
		}
		// The title says the pre-roll, and why it is short where it is.
		wantTitle := ", pre-roll 5.0 s of 5.0"
		if c.Name == older.Name {
			wantTitle = ", pre-roll 1.0 s of 5.0 (stream_start)"
		}
		if title := html.UnescapeString(attrs["title"]); !strings.Contains(title, wantTitle) {
			t.Errorf("clip %s: title %q, want it to say %q", c.Name, title, wantTitle)
		}
		if _, short := attrs["data-short"]; short != (c.Name == older.Name) {
			t.Errorf("clip %s: marked short %v", c.Name, short)
		}
		if _, playing := attrs["data-playing"]; playing != (c.Name == older.Name) {
			t.Errorf("clip %s: marked playing %v, want %v", c.Name, playing, c.Name == older.Name)
		}
	}
	if !slices.Equal(names, []string{newer.Name, older.Name}) {
		t.Fatalf("east's card lists %q, want %q (newest first); card:\n%s", names, []string{newer.Name, older.Name}, east.inner)
	}

	if m := regexp.MustCompile(`<section id="player"([^>]*)>`).FindStringSubmatch(dom); m == nil || strings.Contains(m[1], "hidden") {
		t.Errorf("the player is not shown: %v", m)
	}
	m := regexp.MustCompile(`<video id="player-video"([^>]*)>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no player video in the DOM:\n%s", dom)
	}
	t.Logf("the player: %s", m[0])
	v := attrsOf(m[1])
	if v["data-clip"] != older.Name || v["src"] != "api/clips/"+older.Name {
		t.Errorf("the player has clip %q from %q, want %s from api/clips/%s", v["data-clip"], v["src"], older.Name, older.Name)
	}
	if e := v["data-error"]; e != "" {
		t.Errorf("the video failed: %s", e)
	}
	if v["data-video-width"] != "768" || v["data-video-height"] != "576" {
		t.Errorf("the video is %sx%s, want the stream's 768x576", v["data-video-width"], v["data-video-height"])
	}
	if at, err := strconv.ParseFloat(v["data-current-time"], 64); err != nil || at <= 1 {
		t.Errorf("the video's currentTime %q, want past 1 s: it did not play", v["data-current-time"])
	}
	ranged := slices.ContainsFunc(requests, func(r string) bool {
		return strings.HasPrefix(r, "/api/clips/"+older.Name+" ") && strings.Contains(r, `"bytes=`) && strings.HasSuffix(r, " 206")
	})
	if !ranged {
		t.Errorf("Chromium read the clip without a range request answered 206")
	}
}

// attrsOf parses the attributes of an element's start tag, unescaped; a bare attribute
// ("hidden", "data-playing") has the value "".
func attrsOf(tag string) map[string]string {
	attrs := map[string]string{}
	for _, a := range regexp.MustCompile(`([a-z-]+)(?:="([^"]*)")?`).FindAllStringSubmatch(tag, -1) {
		attrs[a[1]] = html.UnescapeString(a[2])
	}
	return attrs
}

// TestRecordedClipPlays: a clip the daemon recorded itself from the sample camera (clips on,
// max_length 12 s) plays in headless Chromium from the status page: its video advances past
// 1 s at the stream's 768x576, with no error.
func TestRecordedClipPlays(t *testing.T) {
	chromium := chromiumPath(t)
	cams := strings.Replace(sampleCameras(t, 1), "- {id: cam0,", "- {id: cam0, clips: {enabled: true, max_length: 12s},", 1)
	d := startTestDaemon(t, strings.Replace(lifeConfig(t, cams), `http: {listen: ""}`, `http: {listen: "127.0.0.1:0"}`, 1))
	var name string
	testutil.WaitFor(t, 3*time.Minute, "a clip recorded and stored", func() bool {
		list, err := d.clips.List(context.Background(), "cam0", 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) > 0 {
			name = list[0].Name
		}
		return name != ""
	})
	dom := runChromium(t, chromium, "--virtual-time-budget=8000", "--window-size=1280,1000",
		"--dump-dom", fmt.Sprintf("http://%s/?play=%s", d.HTTPAddr(), url.QueryEscape(name)))
	m := regexp.MustCompile(`<video id="player-video"([^>]*)>`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no player video in the DOM:\n%s", dom)
	}
	v := attrsOf(m[1])
	t.Logf("the player: %s", m[0])
	if v["data-clip"] != name || v["data-error"] != "" || v["data-video-width"] != "768" || v["data-video-height"] != "576" {
		t.Errorf("the player %v, want clip %s at 768x576 without error", v, name)
	}
	if at, err := strconv.ParseFloat(v["data-current-time"], 64); err != nil || at <= 1 {
		t.Errorf("the video's currentTime %q, want past 1 s: it did not play", v["data-current-time"])
	}
}
