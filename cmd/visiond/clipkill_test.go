package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
)

// Issue 38, item 2: a clip's object events wait with the clip in the store's queue on disk,
// so a daemon killed with SIGKILL between a clip's close and its storing loses none. The clip
// store's bucket is deleted under the first run (its puts fail: clips wait in the queue with
// their events beside them); once a queued clip holds events, the daemon is killed; the next
// run (which makes the bucket again) stores the clip and publishes the ObjectClip event of
// each of those events.
func TestKilledDaemonKeepsClipEvents(t *testing.T) {
	natsAddr, stateDir := testutil.FreeAddr(t), t.TempDir()
	cfg := demoConfigWith(t, testutil.FreeAddr(t), stateDir, fmt.Sprintf("{listen: %q, jetstream: true}", natsAddr))
	cfg = strings.Replace(cfg, "- {id: sample,", "- {id: sample, clips: {enabled: true, pre_capture: 2s, post_capture: 2s, max_length: 10s},", 1)
	path := writeConfig(t, cfg)
	url := "nats://" + natsAddr
	start := func() *exec.Cmd {
		cmd, logs := startCommand(t, exec.Command(os.Args[0], "run", "-config", path))
		logs.wait(t, `msg="visiond running"`)
		go func() {
			for range logs.lines {
			}
		}()
		return cmd
	}

	first := start()
	js := natstest.ConnectJS(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bucket := sinks.ClipBucket("visiond", "demo")
	if err := js.DeleteObjectStore(ctx, bucket); err != nil {
		t.Fatalf("delete the clip store %s: %v", bucket, err)
	}
	// A clip queued with the events of its objects.
	queue := filepath.Join(stateDir, "clips", "queue")
	type record struct {
		Name   string              `json:"name"`
		Events []sinks.ObjectEvent `json:"events"`
	}
	var queued record
	testutil.WaitFor(t, 3*time.Minute, "a clip queued with its objects' events", func() bool {
		files, _ := filepath.Glob(filepath.Join(queue, "*.mp4.json"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil || json.Unmarshal(data, &queued) != nil {
				continue
			}
			if _, err := os.Stat(strings.TrimSuffix(f, ".json")); err == nil && len(queued.Events) > 0 {
				return true // its info and events first, then the MP4 moved in beside them
			}
		}
		return false
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if _, err := os.Stat(filepath.Join(queue, strings.ReplaceAll(queued.Name, "/", "+"))); err != nil {
		t.Fatalf("the clip %s is not in the queue after the kill: %v", queued.Name, err)
	}

	second := start()
	defer func() {
		_ = second.Process.Signal(syscall.SIGTERM)
		_ = second.Wait()
	}()
	want := map[uint64]bool{}
	for _, ev := range queued.Events {
		want[ev.TrackID] = true
	}
	got := map[uint64]bool{}
	testutil.WaitFor(t, 2*time.Minute, fmt.Sprintf("the clip events of %s's %d objects after the restart", queued.Name, len(want)), func() bool {
		for _, ev := range natstest.ReadStream[sinks.ObjectEvent](t, url, "visiond-demo", "visiond.demo.sample.objects") {
			if ev.Type == sinks.ObjectClip && ev.Clip != nil && ev.Clip.Name == queued.Name {
				got[ev.TrackID] = true
			}
		}
		return len(got) >= len(want)
	})
	for id := range want {
		if !got[id] {
			t.Errorf("track %d: no clip event of %s after the restart", id, queued.Name)
		}
	}
	t.Logf("clip %s queued with %d objects' events at the kill: all published after the restart", queued.Name, len(want))
}
