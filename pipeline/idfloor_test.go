package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
)

// Issue 39, item 5: a block of track ids reserved just before a power cut is not given again
// after it, though the cut lost the bucket's write of it (the embedded server syncs its files
// every sync interval): the block's end was on the disk, in the camera's floor file, before
// any of its ids was used. The cut is played by writing the bucket back to what it held
// before the reservation, as a lost write leaves it.
func TestTrackIDsSurvivePowerCut(t *testing.T) {
	srv := &sinks.Server{Listen: "127.0.0.1:0", StoreDir: t.TempDir()}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	_, st := startState(t, srv.ClientURL(), 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), idFloorDir)
	js := natstest.ConnectJS(t, srv.ClientURL())
	kv, err := js.KeyValue(ctx, sinks.StateBucket("visiond", "lab"))
	if err != nil {
		t.Fatal(err)
	}
	loseWrites := func(next uint64) { // straight into the bucket: what the disk held before the reservation
		t.Helper()
		data, _ := json.Marshal(sinks.TrackerState{Camera: "door", NextID: next, At: time.Now()})
		if _, err := kv.Put(ctx, "tracks.door", data); err != nil {
			t.Fatal(err)
		}
	}

	before := &floorIDs{store: st, dir: dir}
	first, err := before.ReserveTrackIDs(ctx, "door", 0, idBlock)
	if err != nil {
		t.Fatal(err)
	}
	if first != 1 {
		t.Fatalf("first block from %d, want 1", first)
	}
	data, err := os.ReadFile(filepath.Join(dir, "door"))
	if err != nil || strings.TrimSpace(string(data)) != "1025" {
		t.Fatalf("the floor file: %q, %v; want 1025, the block's end", data, err)
	}

	// The cut: the bucket lost the reservation. The store alone would give the block again;
	// the restarted daemon, with the floor, starts past it.
	loseWrites(1)
	after := &floorIDs{store: st, dir: dir}
	again, err := after.ReserveTrackIDs(ctx, "door", 0, idBlock)
	if err != nil {
		t.Fatal(err)
	}
	if again < first+idBlock {
		t.Fatalf("after the cut the block starts at %d: ids %d-%d are given twice", again, again, first+idBlock-1)
	}
	loseWrites(1)
	if bare, err := st.ReserveTrackIDs(ctx, "door", 0, idBlock); err != nil || bare != 1 {
		t.Fatalf("the bucket alone after the cut: block from %d (%v); the cut was not played (want 1)", bare, err)
	}

	// A floor file that is not a number: no block from the bucket (the camera then takes ids
	// from the clock), and the error names the file.
	if err := os.WriteFile(filepath.Join(dir, "door"), []byte("garbage\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := after.ReserveTrackIDs(ctx, "door", 0, idBlock); err == nil || !strings.Contains(err.Error(), "door") {
		t.Fatalf("a floor file of garbage: %v; want an error naming it", err)
	}
	// A floor directory that cannot be written: the same.
	blocked := &floorIDs{store: st, dir: filepath.Join(dir, "door", "sub")}
	if _, err := blocked.ReserveTrackIDs(ctx, "gate", 0, idBlock); err == nil {
		t.Fatal("a floor that cannot be written: a block was handed out")
	}
}
