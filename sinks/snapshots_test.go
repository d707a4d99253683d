package sinks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// seen is the first-seen time of the tracks whose snapshots the tests store.
var seen = time.UnixMilli(1764600000000)

func startSnapshots(t *testing.T, sn *Snapshots) *Snapshots {
	t.Helper()
	if err := sn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sn.Close(5 * time.Second) })
	return sn
}

// fakeJPEG is n bytes that start like a JPEG, the rest random (incompressible, as JPEG data
// is).
func fakeJPEG(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	copy(b, []byte{0xFF, 0xD8, 0xFF, 0xE0})
	return b
}

// realJPEG encodes a w x h picture with a box drawn, as the daemon's snapshots are.
func realJPEG(t *testing.T, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	for x := w / 4; x < w/2; x++ {
		img.Set(x, h/4, color.RGBA{0, 255, 0, 255})
		img.Set(x, h/2, color.RGBA{0, 255, 0, 255})
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Snapshots are stored under their names and read back whole, by the daemon and by another
// client of the box; the store has the configured limits.
func TestSnapshotsPutAndRead(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	sn := startSnapshots(t, &Snapshots{Publisher: p})
	pics := map[string][]byte{
		SnapshotName("door", 1042, seen): realJPEG(t, 768, 576),
		SnapshotName("door", 1043, seen): fakeJPEG(300<<10, 1), // several chunks
		SnapshotName("yard", 7, seen):    fakeJPEG(1000, 2),
	}
	for name, data := range pics {
		if err := sn.PutSnapshot(name, data); err != nil {
			t.Fatal(err)
		}
	}
	// The same name again before or after it is stored: the newest wins.
	newer := fakeJPEG(2000, 3)
	if err := sn.PutSnapshot("yard/t7.jpg", newer); err != nil {
		t.Fatal(err)
	}
	pics["yard/t7.jpg"] = newer
	testutil.WaitFor(t, time.Minute, "the snapshots stored", func() bool { return sn.Stats().Pending == 0 && sn.Stats().Stored >= 3 })

	ctx := ctxMinute(t)
	obs, err := natstest.ConnectJS(t, s.ClientURL()).ObjectStore(ctx, "visiond-lab-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range pics {
		for who, get := range map[string]func() ([]byte, error){
			"Get":          func() ([]byte, error) { return sn.Get(ctx, name) },
			"other client": func() ([]byte, error) { return obs.GetBytes(ctx, name) },
		} {
			got, err := get()
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: %s read %d bytes (%v), want the %d put", name, who, len(got), err, len(want))
			}
		}
	}
	if _, err := jpeg.Decode(bytes.NewReader(pics[SnapshotName("door", 1042, seen)])); err != nil {
		t.Errorf("the real JPEG: %v", err)
	}
	if _, err := sn.Get(ctx, "door/t9.jpg"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("a snapshot never stored: %v, want ErrObjectNotFound", err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.(*jetstream.ObjectBucketStatus).StreamInfo().Config
	if cfg.MaxAge != DefaultSnapshotMaxAge || cfg.MaxBytes != DefaultSnapshotMaxBytes {
		t.Errorf("store limits: max age %v, max bytes %d; want %v and %d", cfg.MaxAge, cfg.MaxBytes, DefaultSnapshotMaxAge, DefaultSnapshotMaxBytes)
	}
}

// A full store makes room by deleting the oldest snapshots, whole: what is left is the
// newest, readable, and the store stays under its size.
func TestSnapshotsSizeLimitOldestGo(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	const maxBytes, size, n = 1 << 20, 150 << 10, 12 // room for 6
	sn := startSnapshots(t, &Snapshots{Publisher: p, MaxBytes: maxBytes, MaxObjectBytes: 200 << 10})
	for i := range n {
		if err := sn.PutSnapshot(SnapshotName("door", uint64(i+1), seen), fakeJPEG(size, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 2*time.Minute, fmt.Sprintf("%d snapshots stored", n), func() bool { return sn.Stats().Stored == n })
	ctx := ctxMinute(t)
	var kept []int
	for i := range n {
		data, err := sn.Get(ctx, SnapshotName("door", uint64(i+1), seen))
		switch {
		case err == nil:
			if !bytes.Equal(data, fakeJPEG(size, uint64(i))) {
				t.Errorf("snapshot %d read back different", i+1)
			}
			kept = append(kept, i+1)
		case !errors.Is(err, jetstream.ErrObjectNotFound):
			t.Errorf("snapshot %d: %v", i+1, err)
		}
	}
	// The newest are kept, as many as fit; none older than a deleted one.
	if len(kept) < 4 || kept[len(kept)-1] != n || kept[0] != n-len(kept)+1 {
		t.Errorf("kept snapshots %v of 1..%d: want the newest, at least 4", kept, n)
	}
	if st := sn.Stats(); st.Evicted != uint64(n-len(kept)) || st.Failed != 0 {
		t.Errorf("stats %+v: want %d evicted, none failed", st, n-len(kept))
	}
	obs, err := natstest.ConnectJS(t, s.ClientURL()).ObjectStore(ctx, "visiond-lab-snapshots")
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

// Snapshots older than MaxAge are removed by the server.
func TestSnapshotsAgeLimit(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	sn := startSnapshots(t, &Snapshots{Publisher: p, MaxAge: time.Second})
	if err := sn.PutSnapshot("door/t1.jpg", fakeJPEG(5000, 1)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the snapshot stored", func() bool { return sn.Stats().Stored == 1 })
	ctx := ctxMinute(t)
	testutil.WaitFor(t, time.Minute, "the snapshot removed by age", func() bool {
		// Its data expires a moment before its entry: a read in between waits for Get's
		// timeout, so each read gets its own short one.
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := sn.Get(ctx, "door/t1.jpg")
		return errors.Is(err, jetstream.ErrObjectNotFound)
	})
	// And the store takes new ones after.
	if err := sn.PutSnapshot("door/t2.jpg", fakeJPEG(5000, 2)); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, time.Minute, "the second snapshot stored", func() bool { return sn.Stats().Stored == 2 })
}

// While the server is unreachable snapshots queue, up to QueueBytes; more are dropped and
// counted; the queue is stored when it returns.
func TestSnapshotsQueueDuringOutage(t *testing.T) {
	dir := t.TempDir()
	s := &Server{Listen: "127.0.0.1:0", StoreDir: dir, Domain: "ext"}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	p := startPublisher(t, &Publisher{URL: s.ClientURL(), JetStream: true, Stream: testStream()})
	sn := startSnapshots(t, &Snapshots{Publisher: p, QueueBytes: 3 * 10000})
	s.Close()
	testutil.WaitFor(t, time.Minute, "publisher to notice the outage", func() bool { return !p.nc.IsConnected() })
	var full int
	var taken []int // which were queued: the writer takes from the queue meanwhile, so a
	// later one may find room that an earlier one did not
	for i := range 5 {
		err := sn.PutSnapshot(SnapshotName("door", uint64(i+1), seen), fakeJPEG(10000, uint64(i)))
		switch {
		case errors.Is(err, ErrSnapshotQueueFull):
			full++
		case err != nil:
			t.Fatal(err)
		default:
			taken = append(taken, i)
		}
	}
	// The writer may hold one it is trying to store: 3 or 4 taken, the rest dropped.
	if st := sn.Stats(); full < 1 || st.Dropped != uint64(full) {
		t.Errorf("%d refused as full, stats %+v", full, st)
	}
	s2 := &Server{Listen: addr, StoreDir: dir, Domain: "ext"}
	if err := s2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Close)
	testutil.WaitFor(t, time.Minute, "the queue stored", func() bool { return sn.Stats().Stored == uint64(len(taken)) })
	ctx := ctxMinute(t)
	for _, i := range taken {
		if data, err := sn.Get(ctx, SnapshotName("door", uint64(i+1), seen)); err != nil || !bytes.Equal(data, fakeJPEG(10000, uint64(i))) {
			t.Errorf("snapshot %d after the outage: %d bytes, %v", i+1, len(data), err)
		}
	}
}

// Bad names, data that is not a JPEG and oversized snapshots are refused with errors that
// say what is wrong, and so are impossible limits.
func TestSnapshotsBadInput(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	sn := startSnapshots(t, &Snapshots{Publisher: p, MaxObjectBytes: 100 << 10})
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"empty name", sn.PutSnapshot("", fakeJPEG(100, 1)), "snapshot name is empty"},
		{"space", sn.PutSnapshot("front door/t1.jpg", fakeJPEG(100, 1)), `snapshot name "front door/t1.jpg": ' ' is not allowed`},
		{"dot dot", sn.PutSnapshot("door/../t1.jpg", fakeJPEG(100, 1)), "no leading '/' or '..'"},
		{"leading slash", sn.PutSnapshot("/door/t1.jpg", fakeJPEG(100, 1)), "no leading '/' or '..'"},
		{"long", sn.PutSnapshot(strings.Repeat("x", 256), fakeJPEG(100, 1)), "256 characters, at most 255"},
		{"oversized", sn.PutSnapshot("door/t1.jpg", fakeJPEG(100<<10+1, 1)), "snapshot door/t1.jpg: 102401 bytes, at most 102400"},
		{"not a JPEG", sn.PutSnapshot("door/t1.jpg", []byte("\x89PNG\r\n\x1a\n")), "8 bytes that are not a JPEG"},
		{"empty", sn.PutSnapshot("door/t1.jpg", nil), "0 bytes that are not a JPEG"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, tc.err, tc.want)
		}
	}
	if st := sn.Stats(); st.Pending != 0 || st.Stored != 0 || st.Dropped != 0 {
		t.Errorf("after bad input: %+v, want nothing queued", st)
	}
	bad := &Snapshots{Publisher: p, Bucket: "other", MaxBytes: 1 << 20, MaxObjectBytes: 1 << 20}
	if err := bad.Start(); err == nil || !strings.Contains(err.Error(), "a snapshot of up to 1048576 bytes in a store of 1048576") {
		t.Errorf("object limit over the store's: %v", err)
	}
	if err := (&Snapshots{}).Start(); err == nil || !strings.Contains(err.Error(), "needs a started publisher with JetStream") {
		t.Errorf("snapshots without a publisher: %v", err)
	}
	sn.Close(time.Second)
	if err := sn.PutSnapshot("door/t1.jpg", fakeJPEG(100, 1)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("put after Close: %v", err)
	}
}

// After a restart the store still makes room oldest first: what it holds is read at Start.
func TestSnapshotsSizeLimitAfterRestart(t *testing.T) {
	s := startServer(t)
	p := startPublisher(t, &Publisher{Server: s, JetStream: true, Stream: testStream()})
	const maxBytes, size = 1 << 20, 150 << 10 // room for 6
	first := &Snapshots{Publisher: p, MaxBytes: maxBytes, MaxObjectBytes: 200 << 10}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := first.PutSnapshot(SnapshotName("door", uint64(i+1), seen), fakeJPEG(size, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	first.Close(time.Minute)
	if st := first.Stats(); st.Stored != 5 {
		t.Fatalf("first run stored %d, want 5", st.Stored)
	}
	second := startSnapshots(t, &Snapshots{Publisher: p, MaxBytes: maxBytes, MaxObjectBytes: 200 << 10})
	for i := 5; i < 8; i++ {
		if err := second.PutSnapshot(SnapshotName("door", uint64(i+1), seen), fakeJPEG(size, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, time.Minute, "3 more stored", func() bool { return second.Stats().Stored == 3 })
	ctx := ctxMinute(t)
	var kept []int
	for i := range 8 {
		if _, err := second.Get(ctx, SnapshotName("door", uint64(i+1), seen)); err == nil {
			kept = append(kept, i+1)
		}
	}
	if len(kept) < 4 || kept[0] != 9-len(kept) || kept[len(kept)-1] != 8 {
		t.Errorf("kept %v of 1..8 across a restart: want the newest", kept)
	}
	if st := second.Stats(); st.Evicted != uint64(8-len(kept)) {
		t.Errorf("second run evicted %d, want %d", st.Evicted, 8-len(kept))
	}
}
