package sources

import (
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

func TestParseOptions(t *testing.T) {
	for _, k := range Kinds() {
		if got, err := ParseKind(string(k)); got != k || err != nil {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	for _, tr := range Transports() {
		if got, err := ParseTransport(string(tr)); got != tr || err != nil {
			t.Errorf("ParseTransport(%q) = %q, %v", tr, got, err)
		}
	}
	for _, d := range DecodeModes() {
		if got, err := ParseDecodeMode(string(d)); got != d || err != nil {
			t.Errorf("ParseDecodeMode(%q) = %q, %v", d, got, err)
		}
	}
	for _, s := range States() {
		if got, err := ParseState(string(s)); got != s || err != nil {
			t.Errorf("ParseState(%q) = %q, %v", s, got, err)
		}
	}
	// The defaults come first in the lists, which config's messages quote in this order.
	if Kinds()[0] != DefaultKind || Transports()[0] != DefaultTransport || DecodeModes()[0] != DefaultDecode {
		t.Errorf("defaults not first: %v %v %v", Kinds(), Transports(), DecodeModes())
	}
	for _, c := range []struct {
		parse func(string) error
		in    string
		want  string
	}{
		{func(s string) error { _, err := ParseKind(s); return err }, "usb", `unknown camera kind "usb" (want rtsp, gstreamer or file)`},
		{func(s string) error { _, err := ParseKind(s); return err }, "", `unknown camera kind "" (want rtsp, gstreamer or file)`},
		{func(s string) error { _, err := ParseTransport(s); return err }, "TCP", `unknown transport "TCP" (want tcp, udp or auto)`},
		{func(s string) error { _, err := ParseDecodeMode(s); return err }, "iframes", `unknown decode mode "iframes" (want all or keyframes)`},
		{func(s string) error { _, err := ParseState(s); return err }, "up", `unknown camera state "up" (want connecting, online, offline or unauthorized)`},
	} {
		if err := c.parse(c.in); err == nil || err.Error() != c.want {
			t.Errorf("parse %q: %v, want %s", c.in, err, c.want)
		}
	}
}

// A camera whose options are not valid values fails each session with the parse error.
func TestCameraInvalidOptions(t *testing.T) {
	for _, c := range []struct {
		cam  *Camera
		want string
	}{
		{&Camera{Kind: "usb"}, `unknown camera kind "usb"`},
		{&Camera{Decode: "some"}, `unknown decode mode "some"`},
	} {
		cam := c.cam
		cam.ID, cam.URL, cam.Logger, cam.retryMin = "x", "rtsp://127.0.0.1:1/x", (&testutil.LogBuffer{}).Logger(), time.Hour
		cam.Start()
		testutil.WaitFor(t, time.Minute, "offline", func() bool { return cam.Status().State == StateOffline })
		cam.Close()
		if e := cam.Status().LastError; !strings.Contains(e, c.want) {
			t.Errorf("LastError %q, want %q", e, c.want)
		}
	}
}

// The zero value of each option is its default.
func TestCameraDefaults(t *testing.T) {
	cam := &Camera{ID: "x", URL: "rtsp://127.0.0.1:1/x", Logger: (&testutil.LogBuffer{}).Logger()}
	cam.init()
	if cam.Kind != DefaultKind || cam.Transport != DefaultTransport || cam.Decode != DefaultDecode ||
		cam.StallTimeout != DefaultStallTimeout || cam.InputW != DefaultInputW || cam.InputH != DefaultInputH {
		t.Errorf("defaults: %+v", cam)
	}
}
