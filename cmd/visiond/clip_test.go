package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
)

// clipT0 is the start of the first clip of the box the tests run against.
var clipT0 = time.UnixMilli(1764600000000).UTC()

// clipBox is a box's server holding clips, as the daemon stores them.
type clipBox struct {
	url   string
	mp4   []byte
	names []string // door's clip, then yard's (the newest)
}

// startClipBox starts a box (site and JetStream domain "lab", its leaf link to leafURL if
// set) and stores a 3 s clip of the sample recording for cameras door and yard.
func startClipBox(t *testing.T, leafURL string) *clipBox {
	t.Helper()
	mp4 := testutil.SampleMP4(t, 3)
	s := &sinks.Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab", Leaf: sinks.Leaf{URL: leafURL}}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	p := &sinks.Publisher{Server: s, JetStream: true, Prefix: "visiond", Site: "lab", Instance: "inst",
		Stream: sinks.StreamConfig{Name: "visiond-lab", MaxAge: time.Hour}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(5 * time.Second) })
	c := &sinks.Clips{Publisher: p, Dir: t.TempDir()}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(5 * time.Second) })
	box := &clipBox{url: s.ClientURL(), mp4: mp4}
	for i, camera := range []string{"door", "yard"} {
		start := clipT0.Add(time.Duration(i) * 10 * time.Second)
		info := sinks.ClipInfo{Name: sinks.ClipName(camera, start), Camera: camera, Start: start, End: start.Add(3 * time.Second),
			DurationS: 3, Codec: "h264", Width: 768, Height: 576, Frames: 30, Closed: sinks.ClipClosedEnd,
			Objects: []sinks.ClipObject{{TrackID: uint64(7 + i), Label: "person", FirstSeen: start, LastSeen: start.Add(time.Second)}}}
		path := filepath.Join(t.TempDir(), "clip.mp4")
		if err := os.WriteFile(path, mp4, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := c.PutClip(info, nil, path); err != nil {
			t.Fatal(err)
		}
		box.names = append(box.names, info.Name)
	}
	testutil.WaitFor(t, time.Minute, "the clips stored", func() bool { return c.Stats().Stored == 2 })
	return box
}

// visiond clip ls lists the box's clips newest first, per camera, as a table or JSON;
// visiond clip get writes a clip whole, to a file named or its base name, or stdout.
func TestClipLsGet(t *testing.T) {
	box := startClipBox(t, "")
	status, out, errOut := runCLI(t, "clip", "ls", "-nats", box.url, "-site", "lab")
	if status != 0 {
		t.Fatalf("clip ls: status %d, %s", status, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], box.names[1]) ||
		!strings.HasPrefix(lines[2], box.names[0]) || !strings.Contains(lines[1], "3.0 s") ||
		!strings.Contains(lines[1], fmt.Sprintf("%.0f KiB", float64(len(box.mp4))/1024)) || !strings.HasSuffix(lines[1], "person#8") {
		t.Errorf("clip ls printed:\n%s", out)
	}
	status, out, errOut = runCLI(t, "clip", "ls", "-nats", box.url, "-site", "lab", "-camera", "door", "-json")
	var clips []sinks.ClipInfo
	if err := json.Unmarshal([]byte(out), &clips); status != 0 || err != nil || len(clips) != 1 || clips[0].Name != box.names[0] ||
		clips[0].Bytes != int64(len(box.mp4)) || len(clips[0].Objects) != 1 || clips[0].Objects[0].TrackID != 7 {
		t.Errorf("clip ls -camera door -json: status %d, %v, %s%s", status, err, out, errOut)
	}
	if status, out, _ = runCLI(t, "clip", "ls", "-nats", box.url, "-bucket", "visiond-lab-clips", "-limit", "1"); status != 0 ||
		strings.Count(out, "\n") != 2 || !strings.Contains(out, box.names[1]) {
		t.Errorf("clip ls -limit 1: status %d\n%s", status, out)
	}
	if status, out, errOut = runCLI(t, "clip", "ls", "-nats", box.url, "-site", "lab", "-camera", "gate"); status != 0 || out != "" ||
		!strings.Contains(errOut, "no clips in the clip store visiond-lab-clips") {
		t.Errorf("clip ls of a camera without clips: status %d, %q, %q", status, out, errOut)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "door.mp4")
	// Flags before and after the name.
	if status, _, errOut = runCLI(t, "clip", "get", "-nats", box.url, box.names[0], "-site", "lab", "-o", file); status != 0 {
		t.Fatalf("clip get -o: status %d, %s", status, errOut)
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, box.mp4) {
		t.Errorf("clip get -o: wrote %d bytes (%v), want the %d stored", len(got), err, len(box.mp4))
	}
	t.Chdir(dir)
	if status, _, errOut = runCLI(t, "clip", "get", "-nats", box.url, "-site", "lab", box.names[1]); status != 0 {
		t.Fatalf("clip get: status %d, %s", status, errOut)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "c1764600010000.mp4")); err != nil || !bytes.Equal(got, box.mp4) {
		t.Errorf("clip get into the current directory: %d bytes (%v)", len(got), err)
	}
	if status, out, errOut = runCLI(t, "clip", "get", "-nats", box.url, "-site", "lab", "-o", "-", box.names[1]); status != 0 || out != string(box.mp4) {
		t.Errorf("clip get -o -: status %d, %d bytes, %s", status, len(out), errOut)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("files left in the directory: %v, want the two clips", entries)
	}
}

// Through a hub, -domain reads the box's store (its site taken from the domain).
func TestClipThroughHub(t *testing.T) {
	hub := natstest.StartHub(t, t.TempDir())
	box := startClipBox(t, hub.LeafURL)
	testutil.WaitFor(t, time.Minute, "the hub to reach the box's store", func() bool {
		status, out, _ := runCLI(t, "clip", "ls", "-nats", hub.ClientURL(), "-domain", "lab", "-timeout", "5s")
		return status == 0 && strings.Contains(out, box.names[0]) && strings.Contains(out, box.names[1])
	})
	if status, out, errOut := runCLI(t, "clip", "get", "-nats", hub.ClientURL(), "-domain", "lab", "-o", "-", box.names[0]); status != 0 || out != string(box.mp4) {
		t.Errorf("clip get through the hub: status %d, %d bytes, %s", status, len(out), errOut)
	}
	// Without -domain the hub's own JetStream has no such store.
	if status, _, errOut := runCLI(t, "clip", "ls", "-nats", hub.ClientURL(), "-site", "lab"); status != 1 || !strings.Contains(errOut, "no clip store visiond-lab-clips") {
		t.Errorf("clip ls on the hub without -domain: status %d, %s", status, errOut)
	}
}

// Unknown clips, an unreachable server, a missing store and bad arguments each give an error
// that says so, with status 1 for what failed and 2 for a usage error.
func TestClipBadInput(t *testing.T) {
	box := startClipBox(t, "")
	down := "nats://" + testutil.FreeAddr(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   string
	}{
		{"unknown clip", []string{"get", "-nats", box.url, "-site", "lab", "door/c1.mp4"}, 1,
			"clip door/c1.mp4: not in the clip store visiond-lab-clips on " + box.url},
		{"unreachable server", []string{"ls", "-nats", down}, 1, "cannot reach NATS at " + down},
		{"missing store", []string{"ls", "-nats", box.url, "-site", "other"}, 1, "no clip store visiond-other-clips on " + box.url},
		{"missing store by name", []string{"get", "-nats", box.url, "-bucket", "nope", box.names[0]}, 1, "no clip store nope"},
		{"wrong domain", []string{"ls", "-nats", box.url, "-domain", "elsewhere", "-timeout", "5s"}, 1, "clip store visiond-elsewhere-clips on " + box.url + " (JetStream domain elsewhere): no JetStream answers"},
		{"missing creds file", []string{"ls", "-nats", box.url, "-creds", filepath.Join(dir, "none.creds")}, 1, "-creds: stat"},
		{"creds and user", []string{"ls", "-nats", box.url, "-creds", "x", "-user", "u"}, 2, "-creds and -user: give one"},
		{"not a clip name", []string{"get", "-nats", box.url, "door/t1-5.jpg"}, 2, `"door/t1-5.jpg" is not a clip name`},
		{"path in the name", []string{"get", "-nats", box.url, "../c1.mp4"}, 2, "is not a clip name"},
		{"no name", []string{"get", "-nats", box.url}, 2, "want one clip name, got 0 arguments"},
		{"two names", []string{"get", box.names[0], box.names[1]}, 2, "want one clip name, got 2 arguments"},
		{"negative limit", []string{"ls", "-limit", "-1"}, 2, "-limit -1: must be 0 (all) or more"},
		{"argument to ls", []string{"ls", "door"}, 2, `unexpected argument "door"`},
		{"unknown flag", []string{"ls", "-cam", "door"}, 2, "flag provided but not defined: -cam"},
		{"unknown command", []string{"rm", box.names[0]}, 2, `unknown clip command "rm"`},
		{"no command", nil, 2, "usage: visiond clip ls|get"},
		{"unwritable output", []string{"get", "-nats", box.url, "-site", "lab", "-o", filepath.Join(dir, "no", "such", "dir.mp4"), box.names[0]}, 1, "-o " + filepath.Join(dir, "no", "such", "dir.mp4") + ": open"},
	} {
		status, _, errOut := runCLI(t, append([]string{"clip"}, tc.args...)...)
		if status != tc.status || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: status %d, stderr %q; want %d and %q", tc.name, status, errOut, tc.status, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed gets left files: %v", entries)
	}
	if status, out, _ := runCLI(t, "help"); status != 0 || !strings.Contains(out, "clip    list (clip ls) or fetch") {
		t.Errorf("visiond help does not list clip: %d\n%s", status, out)
	}
}
