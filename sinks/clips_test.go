package sinks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// clipStart is the start of the first clip the tests store; clipAt(i) that of the i-th.
var clipStart = time.UnixMilli(1764600000000).UTC()

func clipAt(i int) time.Time { return clipStart.Add(time.Duration(i) * 10 * time.Second) }

// clipFile writes data into a new file in dir, as the clips package hands its files over.
func clipFile(t testing.TB, dir string, data []byte) string {
	t.Helper()
	f, err := os.CreateTemp(dir, "clip-*.mp4")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// clipInfo is the info of a clip of camera starting at start, with a person in it.
func clipInfo(camera string, start time.Time) ClipInfo {
	return ClipInfo{Name: ClipName(camera, start), Camera: camera, Start: start, End: start.Add(3 * time.Second),
		DurationS: 3, Codec: "h264", Width: 768, Height: 576, Frames: 30, Closed: ClipClosedEnd,
		Objects: []ClipObject{{TrackID: 7, Label: "person", FirstSeen: start.Add(time.Second), LastSeen: start.Add(2 * time.Second)}}}
}

func startClips(t *testing.T, c *Clips) *Clips {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(5 * time.Second) })
	return c
}

// readClip reads the stored clip name through Open.
func readClip(ctx context.Context, c *Clips, name string) ([]byte, ClipInfo, error) {
	r, info, err := c.Open(ctx, name)
	if err != nil {
		return nil, info, err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	return data, info, err
}

// queueFiles lists the files waiting in c's queue folder.
func queueFiles(t *testing.T, c *Clips) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(c.Dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// Clips are stored under their names with their info, read back whole by Open and by another
// client of the box, listed newest first per camera, and announced to OnStored; their files
// leave the queue.
func TestClipsPutAndRead(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	var mu sync.Mutex
	var announced []string
	c := startClips(t, &Clips{Publisher: p, OnStored: func(info ClipInfo, _ []ObjectEvent) {
		mu.Lock()
		announced = append(announced, info.Name)
		mu.Unlock()
	}})
	mp4 := testutil.SampleMP4(t, 3)
	in := t.TempDir()
	infos := []ClipInfo{clipInfo("door", clipAt(0)), clipInfo("yard", clipAt(1)), clipInfo("door", clipAt(2))}
	for _, info := range infos {
		path := clipFile(t, in, mp4)
		if err := c.PutClip(info, nil, path); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the file put is still there (%v)", info.Name, err)
		}
	}
	testutil.WaitFor(t, time.Minute, "3 clips stored", func() bool { st := c.Stats(); return st.Stored == 3 && st.Pending == 0 })
	if st := c.Stats(); st.PendingBytes != 0 || st.Failed != 0 || st.Dropped != 0 {
		t.Errorf("stats %+v", st)
	}
	if left := queueFiles(t, c); len(left) != 0 {
		t.Errorf("queue folder after storing: %v", left)
	}
	mu.Lock()
	if strings.Join(announced, " ") != "door/c1764600000000.mp4 yard/c1764600010000.mp4 door/c1764600020000.mp4" {
		t.Errorf("OnStored got %v, want the 3 in the order put", announced)
	}
	mu.Unlock()

	ctx := ctxMinute(t)
	list := func(camera string, limit int) string {
		t.Helper()
		clips, err := c.List(ctx, camera, limit)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ci := range clips {
			names = append(names, ci.Name)
		}
		return strings.Join(names, " ")
	}
	for _, tc := range []struct {
		camera string
		limit  int
		want   string
	}{
		{"", 0, "door/c1764600020000.mp4 yard/c1764600010000.mp4 door/c1764600000000.mp4"},
		{"door", 0, "door/c1764600020000.mp4 door/c1764600000000.mp4"},
		{"", 2, "door/c1764600020000.mp4 yard/c1764600010000.mp4"},
		{"yard", -1, "yard/c1764600010000.mp4"},
		{"gate", 0, ""},
	} {
		if got := list(tc.camera, tc.limit); got != tc.want {
			t.Errorf("List(%q, %d) = %q, want %q", tc.camera, tc.limit, got, tc.want)
		}
	}
	clips, _ := c.List(ctx, "yard", 0)
	want := infos[1]
	want.Bytes = int64(len(mp4))
	if len(clips) != 1 || fmt.Sprint(clips[0]) != fmt.Sprint(want) {
		t.Errorf("listed info %+v\nwant %+v", clips, want)
	}

	obs, err := natstest.ConnectJS(t, s.ClientURL()).ObjectStore(ctx, "visiond-lab-clips")
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		data, got, err := readClip(ctx, c, info.Name)
		if err != nil || !bytes.Equal(data, mp4) || got.Name != info.Name || len(got.Objects) != 1 {
			t.Errorf("%s: Open read %d bytes, info %+v (%v); want the %d put", info.Name, len(data), got, err, len(mp4))
		}
		if data, err := obs.GetBytes(ctx, info.Name); err != nil || !bytes.Equal(data, mp4) {
			t.Errorf("%s: another client read %d bytes (%v)", info.Name, len(data), err)
		}
	}
	// A second Open reads the local copy.
	if data, _, err := readClip(ctx, c, infos[0].Name); err != nil || !bytes.Equal(data, mp4) {
		t.Errorf("second Open: %d bytes, %v", len(data), err)
	}
	if _, _, err := c.Open(ctx, ClipName("door", clipAt(9))); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("a clip never stored: %v, want ErrObjectNotFound", err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.(*jetstream.ObjectBucketStatus).StreamInfo().Config
	if cfg.MaxAge != DefaultClipMaxAge || cfg.MaxBytes != DefaultClipMaxBytes {
		t.Errorf("store limits: max age %v, max bytes %d; want %v and %d", cfg.MaxAge, cfg.MaxBytes, DefaultClipMaxAge, DefaultClipMaxBytes)
	}
}

// A full store makes room by deleting the oldest clips, whole: what is left is the newest,
// readable, and the store stays under its size.
func TestClipsSizeLimitOldestGo(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	mp4 := testutil.SampleMP4(t, 1)
	const maxBytes, n = 1 << 20, 10 // room for 5 or 6 of 166 KiB
	c := startClips(t, &Clips{Publisher: p, MaxBytes: maxBytes})
	in := t.TempDir()
	for i := range n {
		if err := c.PutClip(clipInfo("door", clipAt(i)), nil, clipFile(t, in, mp4)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d clips stored", n), func() bool { return c.Stats().Stored == n })
	ctx := ctxMinute(t)
	var kept []int
	for i := range n {
		data, _, err := readClip(ctx, c, ClipName("door", clipAt(i)))
		switch {
		case err == nil:
			if !bytes.Equal(data, mp4) {
				t.Errorf("clip %d read back different", i)
			}
			kept = append(kept, i)
		case !errors.Is(err, jetstream.ErrObjectNotFound):
			t.Errorf("clip %d: %v", i, err)
		}
	}
	if len(kept) < 4 || kept[len(kept)-1] != n-1 || kept[0] != n-len(kept) {
		t.Errorf("kept clips %v of 0..%d: want the newest, at least 4", kept, n-1)
	}
	listed, err := c.List(ctx, "door", 0)
	if err != nil || len(listed) != len(kept) {
		t.Errorf("listed %d clips (%v), want the %d kept", len(listed), err, len(kept))
	}
	if st := c.Stats(); st.Evicted != uint64(n-len(kept)) || st.Failed != 0 || st.Refused != 0 {
		t.Errorf("stats %+v: want %d evicted, none failed or refused", st, n-len(kept))
	}
	obs, err := natstest.ConnectJS(t, s.ClientURL()).ObjectStore(ctx, "visiond-lab-clips")
	if err != nil {
		t.Fatal(err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > maxBytes {
		t.Errorf("store holds %d bytes, over its %d", st.Size(), maxBytes)
	}
	t.Logf("kept %v; store %d bytes of %d", kept, st.Size(), maxBytes)
}

// A store the server holds to less room than the clip store was given (another client
// shrank it) refuses clips even with nothing left to evict: they are counted as refused,
// dropped from the queue, and the writer goes on.
func TestClipsRefusedWhenFull(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	log := &testutil.LogBuffer{}
	c := startClips(t, &Clips{Publisher: p, Logger: log.Logger()})
	ctx := ctxMinute(t)
	js := natstest.ConnectJS(t, s.ClientURL())
	stream, err := js.Stream(ctx, "OBJ_visiond-lab-clips")
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config
	cfg.MaxBytes = 64 << 10
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	mp4 := testutil.SampleMP4(t, 1)
	for i := range 2 {
		if err := c.PutClip(clipInfo("door", clipAt(i)), nil, clipFile(t, t.TempDir(), mp4)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "2 clips refused", func() bool { return c.Stats().Refused == 2 })
	if st := c.Stats(); st.Stored != 0 || st.Pending != 0 {
		t.Errorf("stats %+v: want nothing stored or pending", st)
	}
	if left := queueFiles(t, c); len(left) != 0 {
		t.Errorf("queue folder after the refusals: %v", left)
	}
	if !strings.Contains(log.String(), "the clip store is full") {
		t.Errorf("log says nothing of a full store:\n%s", log)
	}
}

// Clips older than MaxAge are removed by the server.
func TestClipsAgeLimit(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	c := startClips(t, &Clips{Publisher: p, MaxAge: time.Second})
	mp4 := testutil.SampleMP4(t, 1)
	if err := c.PutClip(clipInfo("door", clipAt(0)), nil, clipFile(t, t.TempDir(), mp4)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the clip stored", func() bool { return c.Stats().Stored == 1 })
	ctx := ctxMinute(t)
	testutil.WaitFor(t, time.Minute, "the clip removed by age", func() bool {
		// A list read as the clip expires waits out its timeout (Clips.List): the next
		// one sees the store empty.
		clips, err := c.List(context.Background(), "", 0)
		return err == nil && len(clips) == 0
	})
	if _, _, err := c.Open(ctx, ClipName("door", clipAt(0))); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("Open of an expired clip: %v, want ErrObjectNotFound", err)
	}
	if err := c.PutClip(clipInfo("door", clipAt(1)), nil, clipFile(t, t.TempDir(), mp4)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the second clip stored", func() bool { return c.Stats().Stored == 2 })
}

// While the server is unreachable clips wait on disk, up to QueueBytes; more are dropped and
// counted; nothing taken is lost: the queue is stored when the server returns.
func TestClipsQueueDuringOutage(t *testing.T) {
	dir := t.TempDir()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "ext"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	p := startPublisher(t, &Publisher{URL: s.ClientURL(), JetStream: true, Stream: testStream()})
	mp4 := testutil.SampleMP4(t, 1)
	log := &testutil.LogBuffer{}
	c := startClips(t, &Clips{Publisher: p, QueueBytes: 3 * int64(len(mp4)), Logger: log.Logger()})
	s.Close()
	testutil.WaitFor(t, time.Minute, "publisher to notice the outage", func() bool { return !p.nc.IsConnected() })
	in := t.TempDir()
	var taken []int
	for i := range 5 {
		path := clipFile(t, in, mp4)
		err := c.PutClip(clipInfo("door", clipAt(i)), nil, path)
		switch {
		case errors.Is(err, ErrClipQueueFull):
			if _, serr := os.Stat(path); !errors.Is(serr, os.ErrNotExist) {
				t.Errorf("clip %d dropped, its file left behind", i)
			}
		case err != nil:
			t.Fatal(err)
		default:
			taken = append(taken, i)
		}
	}
	// The writer holds the one it tries to store in the queue: exactly 3 fit.
	if st := c.Stats(); len(taken) != 3 || st.Dropped != 2 || st.Pending != 3 || st.PendingBytes != 3*int64(len(mp4)) {
		t.Errorf("took %v, stats %+v: want 3 taken, 2 dropped", taken, st)
	}
	s2 := &Server{Listen: addr, StoreDir: dir, Domain: "ext"}
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Close)
	testutil.WaitFor(t, 2*time.Minute, "the queue stored", func() bool { return c.Stats().Stored == uint64(len(taken)) })
	ctx := ctxMinute(t)
	for _, i := range taken {
		if data, _, err := readClip(ctx, c, ClipName("door", clipAt(i))); err != nil || !bytes.Equal(data, mp4) {
			t.Errorf("clip %d after the outage: %d bytes, %v", i, len(data), err)
		}
	}
	if left := queueFiles(t, c); len(left) != 0 {
		t.Errorf("queue folder after the outage: %v", left)
	}
	// One warning for the outage however long it lasted, and a line when it ended.
	if n := strings.Count(log.String(), "clip: store failed; clips wait on disk"); n != 1 || !strings.Contains(log.String(), "clip: storing again") {
		t.Errorf("%d warnings of failed stores (want 1) and a line when storing resumed:\n%s", n, log)
	}
}

// Bad names, files that are missing, empty, too large or not MP4s, and a clip already
// queued are refused with errors that say what is wrong, counted, and their files removed;
// what was taken before is still stored. Impossible settings are refused at Start.
func TestClipsBadInput(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	mp4 := testutil.SampleMP4(t, 1)
	c := startClips(t, &Clips{Publisher: p, MaxObjectBytes: int64(len(mp4))})
	in := t.TempDir()
	good := clipInfo("door", clipAt(0))
	if err := c.PutClip(good, nil, clipFile(t, in, mp4)); err != nil {
		t.Fatal(err)
	}
	renamed := clipInfo("door", clipAt(1))
	renamed.Name = "door/clip1.mp4"
	otherCamera := clipInfo("door", clipAt(1))
	otherCamera.Camera = "yard"
	badCamera := clipInfo("front door", clipAt(1))
	noStart := clipInfo("door", clipAt(1))
	noStart.Start = time.Time{}
	big := append(bytes.Clone(mp4), 0)
	for _, tc := range []struct {
		name string
		info ClipInfo
		data []byte // nil: no file
		want string
	}{
		{"name not ClipName", renamed, mp4, `clip "door/clip1.mp4": the name of camera door's clip starting at 2025-12-01T14:40:10Z is "door/c1764600010000.mp4"`},
		{"name of another camera", otherCamera, mp4, `the name of camera yard's clip`},
		{"camera not a token", badCamera, mp4, `camera "front door": want 1 to 64 letters, digits, '_' or '-'`},
		{"no start", noStart, mp4, "no start time"},
		{"missing file", clipInfo("door", clipAt(2)), nil, "no such file or directory"},
		{"empty file", clipInfo("door", clipAt(3)), []byte{}, "is empty"},
		{"too large", clipInfo("door", clipAt(4)), big, fmt.Sprintf("%d bytes, at most %d (the largest clip the store takes", len(big), len(mp4))},
		{"not an MP4", clipInfo("door", clipAt(5)), []byte("\x00\x00\x00\x20moov and then some"), "22 bytes that are not an MP4 (no ftyp box at its start)"},
		{"a JPEG", clipInfo("door", clipAt(6)), fakeJPEG(1000, 1), "1000 bytes that are not an MP4"},
		{"already queued or stored", good, mp4, ""},
	} {
		path := filepath.Join(in, "missing.mp4")
		if tc.data != nil {
			path = clipFile(t, in, tc.data)
		}
		err := c.PutClip(tc.info, nil, path)
		if tc.want == "" { // the same clip again: refused while queued, stored again after
			if err != nil && !strings.Contains(err.Error(), "already queued") {
				t.Errorf("%s: %v", tc.name, err)
			}
			if err == nil {
				testutil.WaitFor(t, time.Minute, "the clip stored again", func() bool { return c.Stats().Pending == 0 })
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the refused file was left behind", tc.name)
		}
	}
	testutil.WaitFor(t, time.Minute, "the good clip stored", func() bool { return c.Stats().Pending == 0 && c.Stats().Stored >= 1 })
	if st := c.Stats(); st.Invalid < 9 || st.Invalid > 10 || st.Dropped != 0 {
		t.Errorf("stats %+v: want 9 invalid (10 if the repeat came while queued)", st)
	}
	ctx := ctxMinute(t)
	if data, _, err := readClip(ctx, c, good.Name); err != nil || !bytes.Equal(data, mp4) {
		t.Errorf("the clip taken before the bad input: %d bytes, %v", len(data), err)
	}
	if clips, err := c.List(ctx, "", 0); err != nil || len(clips) != 1 {
		t.Errorf("store holds %d clips (%v), want the good one", len(clips), err)
	}
	for _, name := range []string{"", "../etc/passwd", "door/c1 .mp4"} {
		if _, _, err := c.Open(ctx, name); err == nil || errors.Is(err, jetstream.ErrObjectNotFound) {
			t.Errorf("Open(%q): %v, want a bad name", name, err)
		}
	}

	for _, tc := range []struct {
		name string
		c    *Clips
		want string
	}{
		{"no publisher", &Clips{Dir: t.TempDir()}, "needs a started publisher with JetStream"},
		{"no dir", &Clips{Publisher: p, Bucket: "other"}, "clip store other: no directory for the clip files (Dir)"},
		{"object over a quarter", &Clips{Publisher: p, Bucket: "other", Dir: t.TempDir(), MaxBytes: 1 << 20, MaxObjectBytes: 1 << 19},
			"a clip of up to 524288 bytes in a store of 1048576: want at most a quarter of the store"},
	} {
		if err := tc.c.Start(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	c.Close(time.Minute)
	path := clipFile(t, in, mp4)
	if err := c.PutClip(clipInfo("door", clipAt(7)), nil, path); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("put after Close: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("put after Close: the file was left behind")
	}
}

// Clips not stored by Close's deadline stay in Dir with their info and the events put or
// joined with them, and the next Start stores them and hands the events to OnStored;
// leftovers that are not whole queued clips are cleared.
func TestClipsRestartStoresWhatWasLeft(t *testing.T) {
	dir := t.TempDir()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "ext"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	p := startPublisher(t, &Publisher{URL: s.ClientURL(), JetStream: true, Stream: testStream()})
	clipDir := t.TempDir()
	log := &testutil.LogBuffer{}
	first := &Clips{Publisher: p, Dir: clipDir, Logger: log.Logger()}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	testutil.WaitFor(t, time.Minute, "publisher to notice the outage", func() bool { return !p.nc.IsConnected() })
	mp4 := testutil.SampleMP4(t, 1)
	for i := range 2 {
		evs := []ObjectEvent{{Camera: "door", Type: ObjectEnd, TrackID: uint64(10 + i), Label: "person"}}
		if err := first.PutClip(clipInfo("door", clipAt(i)), evs, clipFile(t, t.TempDir(), mp4)); err != nil {
			t.Fatal(err)
		}
	}
	if !first.JoinClip(ClipName("door", clipAt(1)), ObjectEvent{Camera: "door", Type: ObjectUpdate, TrackID: 20, Label: "car"}) {
		t.Error("JoinClip of a queued clip: false")
	}
	if first.JoinClip(ClipName("door", clipAt(5)), ObjectEvent{TrackID: 21}) {
		t.Error("JoinClip of a clip never put: true")
	}
	first.Close(100 * time.Millisecond)
	if st := first.Stats(); st.Stored != 0 || st.Pending != 2 {
		t.Fatalf("first run: %+v, want 2 left pending", st)
	}
	if !strings.Contains(log.String(), "left for the next start") {
		t.Errorf("Close did not say clips were left:\n%s", log)
	}
	// What a crash can leave besides: an info file whose clip was stored, a half-written
	// info, a clip file without its info.
	q := filepath.Join(clipDir, "queue")
	testutil.WriteFile(t, filepath.Join(q, "door+c1.mp4.json"), `{"name":"door/c1.mp4"}`)
	testutil.WriteFile(t, filepath.Join(q, "door+c2.mp4.json.tmp"), `{"na`)
	testutil.WriteFile(t, filepath.Join(q, "door+c3.mp4"), "\x00\x00\x00\x20ftypisom")

	s2 := &Server{Listen: addr, StoreDir: dir, Domain: "ext"}
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Close)
	testutil.WaitFor(t, time.Minute, "publisher to reconnect", func() bool { return p.nc.IsConnected() })
	var mu sync.Mutex
	announced := map[string][]uint64{}
	second := startClips(t, &Clips{Publisher: p, Dir: clipDir, OnStored: func(info ClipInfo, evs []ObjectEvent) {
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			announced[info.Name] = append(announced[info.Name], ev.TrackID)
		}
	}})
	testutil.WaitFor(t, time.Minute, "the clips left stored", func() bool { return second.Stats().Stored == 2 })
	mu.Lock()
	if got := fmt.Sprint(announced[ClipName("door", clipAt(0))], announced[ClipName("door", clipAt(1))]); got != "[10] [11 20]" {
		t.Errorf("events handed to OnStored after the restart: %s, want [10] [11 20]", got)
	}
	mu.Unlock()
	ctx := ctxMinute(t)
	for i := range 2 {
		data, info, err := readClip(ctx, second, ClipName("door", clipAt(i)))
		if err != nil || !bytes.Equal(data, mp4) || info.Camera != "door" || len(info.Objects) != 1 || info.Bytes != int64(len(mp4)) {
			t.Errorf("clip %d after the restart: %d bytes, %+v, %v", i, len(data), info, err)
		}
	}
	if left := queueFiles(t, second); len(left) != 0 {
		t.Errorf("queue folder after the restart: %v", left)
	}
}

// Open's reader serves range requests through http.ServeContent, as a browser's video
// element seeks.
func TestClipsServeRange(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	c := startClips(t, &Clips{Publisher: p})
	mp4 := testutil.SampleMP4(t, 3)
	info := clipInfo("door", clipAt(0))
	if err := c.PutClip(info, nil, clipFile(t, t.TempDir(), mp4)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the clip stored", func() bool { return c.Stats().Stored == 1 })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/api/clips/")
		f, ci, err := c.Open(r.Context(), name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		} else if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "video/mp4")
		http.ServeContent(w, r, filepath.Base(name), ci.Start, f)
	}))
	t.Cleanup(srv.Close)
	get := func(path, rng string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	for _, tc := range []struct {
		rng        string
		from, to   int // the bytes wanted: mp4[from:to]
		wantStatus int
	}{
		{"bytes=1000-1999", 1000, 2000, http.StatusPartialContent},
		{fmt.Sprintf("bytes=%d-", len(mp4)-500), len(mp4) - 500, len(mp4), http.StatusPartialContent},
		{"bytes=-100", len(mp4) - 100, len(mp4), http.StatusPartialContent},
		{"", 0, len(mp4), http.StatusOK},
	} {
		resp, body := get("/api/clips/"+info.Name, tc.rng)
		if resp.StatusCode != tc.wantStatus || !bytes.Equal(body, mp4[tc.from:tc.to]) {
			t.Errorf("Range %q: %s, %d bytes; want %d and bytes %d to %d", tc.rng, resp.Status, len(body), tc.wantStatus, tc.from, tc.to)
		}
		if tc.rng != "" && resp.Header.Get("Content-Range") != fmt.Sprintf("bytes %d-%d/%d", tc.from, tc.to-1, len(mp4)) {
			t.Errorf("Range %q: Content-Range %q", tc.rng, resp.Header.Get("Content-Range"))
		}
	}
	if resp, _ := get("/api/clips/"+info.Name, fmt.Sprintf("bytes=%d-", len(mp4)+10)); resp.StatusCode != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("a range past the end: %s, want 416", resp.Status)
	}
	if resp, _ := get("/api/clips/door/c1.mp4", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("an unknown clip: %s, want 404", resp.Status)
	}
}

// The local copies Open reads from are bounded by CacheBytes, the least recently used
// removed; a clip whose copy went is fetched again.
func TestClipsCacheBounded(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	mp4 := testutil.SampleMP4(t, 1)
	c := startClips(t, &Clips{Publisher: p, CacheBytes: 2*int64(len(mp4)) + 10})
	for i := range 4 {
		if err := c.PutClip(clipInfo("door", clipAt(i)), nil, clipFile(t, t.TempDir(), mp4)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "4 clips stored", func() bool { return c.Stats().Stored == 4 })
	ctx := ctxMinute(t)
	cached := func() []string {
		entries, err := os.ReadDir(filepath.Join(c.Dir, "cache"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			name, _, _ := strings.Cut(e.Name(), ".mp4")
			names = append(names, name)
		}
		return names
	}
	for _, i := range []int{0, 1, 0, 2, 3, 0} {
		if data, _, err := readClip(ctx, c, ClipName("door", clipAt(i))); err != nil || !bytes.Equal(data, mp4) {
			t.Fatalf("clip %d: %d bytes, %v", i, len(data), err)
		}
	}
	// 0 read last, 3 before it: the two most recently used are kept.
	if got := strings.Join(cached(), " "); got != "door+c1764600000000 door+c1764600030000" {
		t.Errorf("cache holds %q, want clips 0 and 3", got)
	}
}

// BenchmarkClipsStore stores 10 s clips of the sample camera (H.264 768x576 at 10 fps) into
// the in-process embedded server and waits for each: MB/s is the store's sustained rate,
// ms/clip the time from PutClip to stored, cpu-ms/clip the process's CPU time per clip (the
// queue, nats.go's chunking and the embedded server's file store together).
func BenchmarkClipsStore(b *testing.B) {
	s := &Server{Listen: "127.0.0.1:0", StoreDir: b.TempDir(), Domain: "lab"}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := &Publisher{Server: s, JetStream: true, Stream: StreamConfig{Name: "visiond-lab", MaxAge: time.Hour},
		Prefix: "visiond", Site: "lab", Instance: "bench"}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	defer p.Close(10 * time.Second)
	c := &Clips{Publisher: p, Dir: b.TempDir(), MaxBytes: 256 << 20}
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	defer c.Close(time.Minute)
	mp4 := testutil.SampleMP4(b, 10)
	in := b.TempDir()
	cpu0 := cpuTime(b)
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		path := clipFile(b, in, mp4) // on the same filesystem as Dir: moved, as the daemon's are
		if err := c.PutClip(clipInfo("door", clipAt(i)), nil, path); err != nil {
			b.Fatal(err)
		}
		for c.Stats().Stored < uint64(i+1) {
			time.Sleep(time.Millisecond)
		}
	}
	b.StopTimer()
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)*float64(len(mp4))/1e6/elapsed.Seconds(), "MB/s")
	b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/clip")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Milliseconds())/float64(b.N), "cpu-ms/clip")
	b.ReportMetric(float64(len(mp4))/1e6, "MB/clip")
	if st := c.Stats(); st.Failed != 0 || st.Refused != 0 {
		b.Fatalf("stats %+v", st)
	}
}

// A clip file on another filesystem than Dir (here tmpfs) is copied into the queue and
// removed; Opens of one clip at once, its first among them, all read it whole.
func TestClipsPutAcrossFilesystemsAndOpenAtOnce(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	c := startClips(t, &Clips{Publisher: p})
	shm, err := os.MkdirTemp("/dev/shm", "visiond-clips-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	var a, b syscall.Stat_t
	if err := syscall.Stat(shm, &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(c.Dir, &b); err != nil {
		t.Fatal(err)
	}
	if a.Dev == b.Dev {
		t.Logf("%s and %s are on one filesystem: the clip is moved, not copied", shm, c.Dir)
	}
	mp4 := testutil.SampleMP4(t, 1)
	path := clipFile(t, shm, mp4)
	info := clipInfo("door", clipAt(0))
	if err := c.PutClip(info, nil, path); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file put is still on the other filesystem (%v)", err)
	}
	testutil.WaitFor(t, time.Minute, "the clip stored", func() bool { return c.Stats().Stored == 1 })
	ctx := ctxMinute(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, _, err := readClip(ctx, c, info.Name)
			if err == nil && !bytes.Equal(data, mp4) {
				err = fmt.Errorf("read %d bytes, not the %d stored", len(data), len(mp4))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(c.Dir, "cache"))
	if len(entries) != 1 {
		t.Errorf("cache holds %d files after 4 Opens of one clip, want 1", len(entries))
	}
}

// The store's disk stays near its limit while far more than the limit goes through it:
// evicting a clip leaves no delete marker behind (a marker per clip, kept for MaxAge, would
// fill the store and the server's per-subject index, and pin every block it lands in so that
// evictions punch holes the server reclaims only at its 2-minute sync).
func TestClipsStoreDiskBounded(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	mp4 := testutil.SampleMP4(t, 1)
	const maxBytes = 4 << 20
	n := 12 * maxBytes / len(mp4) // twelve times the store goes through it
	c := startClips(t, &Clips{Publisher: p, MaxBytes: maxBytes})
	in := t.TempDir()
	for i := range n {
		if err := c.PutClip(clipInfo("door", clipAt(i)), nil, clipFile(t, in, mp4)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d clips stored", n), func() bool { st := c.Stats(); return st.Stored+st.Refused+st.Failed == uint64(n) })
	if st := c.Stats(); st.Stored != uint64(n) {
		t.Errorf("stats %+v: want all %d stored", st, n)
	}
	ctx := ctxMinute(t)
	js := natstest.ConnectJS(t, s.ClientURL())
	stream, err := js.Stream(ctx, "OBJ_visiond-lab-clips")
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter("$O.visiond-lab-clips.M.>"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := c.List(ctx, "door", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != len(listed) {
		t.Errorf("%d meta subjects in the store for %d clips listed: deleted clips left markers", len(info.State.Subjects), len(listed))
	}
	// The server writes blocks of 4 MB for a store this size (filestore's dynBlkSize):
	// what is stored plus the block being written plus one being emptied.
	const blk = 4 << 20
	var disk int64
	err = filepath.WalkDir(s.StoreDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, "OBJ_visiond-lab-clips") {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			disk += fi.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if disk > maxBytes+2*blk {
		t.Errorf("the store's files hold %d bytes after %d clips of %d went through a store of %d: want at most %d", disk, n, len(mp4), maxBytes, maxBytes+2*blk)
	}
	t.Logf("%d clips of %d bytes through a %d-byte store: %d kept, %d msgs, files %d bytes", n, len(mp4), maxBytes, len(listed), info.State.Msgs, disk)
}

// A store kept by an earlier version, which deleted with the object store's Delete, loses
// those deletes' markers when the clip store starts; the clips in it stay.
func TestClipsStartRemovesDeleteMarkers(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	ctx := ctxMinute(t)
	js := natstest.ConnectJS(t, s.ClientURL())
	const bucket = "visiond-lab-clips"
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, MaxBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := obs.PutBytes(ctx, ClipName("door", clipAt(i)), testutil.SampleMP4(t, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := obs.Delete(ctx, ClipName("door", clipAt(i))); err != nil {
			t.Fatal(err)
		}
	}
	metas := func() int {
		stream, err := js.Stream(ctx, "OBJ_"+bucket)
		if err != nil {
			t.Fatal(err)
		}
		info, err := stream.Info(ctx, jetstream.WithSubjectFilter("$O."+bucket+".M.>"))
		if err != nil {
			t.Fatal(err)
		}
		return len(info.State.Subjects)
	}
	if n := metas(); n != 3 {
		t.Fatalf("%d meta subjects before the start: want 3 (a clip and two markers)", n)
	}
	startClips(t, &Clips{Publisher: p, MaxBytes: 8 << 20})
	if n := metas(); n != 1 {
		t.Errorf("%d meta subjects after the start: want the clip's alone", n)
	}
	if _, err := obs.GetInfo(ctx, ClipName("door", clipAt(2))); err != nil {
		t.Errorf("the clip kept: %v", err)
	}
}
