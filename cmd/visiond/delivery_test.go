package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// A daemon killed with SIGKILL while its uplink is down, holding events the hub has not
// received: the restarted daemon's embedded server recovers them from the state directory and
// delivers them when the uplink returns, each exactly once.
func TestKilledDaemonDeliversAfterRestart(t *testing.T) {
	hub := natstest.StartHub(t, t.TempDir())
	link := natstest.StartProxy(t, strings.TrimPrefix(hub.LeafURL, "nats-leaf://"))
	link.Cut() // the uplink is down from the start

	natsAddr, stateDir := testutil.FreeAddr(t), t.TempDir()
	path := writeConfig(t, demoConfigWith(t, testutil.FreeAddr(t), stateDir,
		fmt.Sprintf(`{listen: %q, leaf: {url: "nats-leaf://%s"}}`, natsAddr, link.Addr)))

	start := func() (*exec.Cmd, *logLines) {
		cmd, logs := startCommand(t, exec.Command(os.Args[0], "run", "-config", path))
		logs.wait(t, `msg="visiond running"`)
		go func() {
			for range logs.lines {
			}
		}()
		return cmd, logs
	}

	first, _ := start()
	js := natstest.ConnectJS(t, "nats://"+natsAddr, nats.MaxReconnects(0))
	// The events the box stores in 20 s from its first (or the first 20), however many that is
	// on a machine as busy as this one.
	var stored []string
	testutil.WaitFor(t, 2*time.Minute, "the box to store a detection event", func() bool {
		stored = detectionIDs(t, js, "visiond-demo")
		return len(stored) > 0
	})
	for end := time.Now().Add(20 * time.Second); len(stored) < 20 && time.Now().Before(end); {
		time.Sleep(500 * time.Millisecond)
		stored = detectionIDs(t, js, "visiond-demo")
	}
	// SIGKILL loses what the server holds but has not yet written to its files (it writes
	// them within milliseconds, later on a loaded machine): wait until they hold every event
	// stored, each record with its Nats-Msg-Id header.
	testutil.WaitFor(t, time.Minute, "the stored events in the store's files", func() bool {
		return inStoreFiles(t, filepath.Join(stateDir, "jetstream"), stored)
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	start()
	link.Restore()
	hubJS := hub.Connect(t)
	hub.SourceStream(t, "ALL", "demo", "visiond-demo")
	var seen map[string]int
	missing := -1
	testutil.WaitFor(t, 2*time.Minute, "the events stored before the kill at the hub", func() bool {
		seen = map[string]int{}
		for _, id := range detectionIDs(t, hubJS, "ALL") {
			seen[id]++
		}
		was := missing
		missing = 0
		for _, id := range stored {
			if seen[id] == 0 {
				missing++
			}
		}
		if missing > 0 {
			if missing != was {
				t.Logf("%d of the %d events stored before the kill not at the hub yet", missing, len(stored))
			}
			time.Sleep(time.Second)
		}
		return missing == 0
	})
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s is %d times in the hub's stream", id, n)
		}
	}
	t.Logf("%d events stored before SIGKILL, all delivered once after the restart (%d in the hub now)", len(stored), len(seen))
}

// inStoreFiles says whether the message block files of the JetStream store in dir hold a
// record of each of the events ids (by its Nats-Msg-Id header).
func inStoreFiles(t *testing.T, dir string, ids []string) bool {
	t.Helper()
	var blocks []byte
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".blk" {
			return err
		}
		b, err := os.ReadFile(p)
		blocks = append(blocks, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if !bytes.Contains(blocks, []byte("Nats-Msg-Id: "+id+"\r\n")) {
			return false
		}
	}
	return true
}

// detectionIDs returns the ids of the detection events in stream name, in order.
func detectionIDs(t *testing.T, js jetstream.JetStream, name string) []string {
	t.Helper()
	var ids []string
	for _, m := range natstest.StreamMsgs(t, js, name) {
		if strings.HasSuffix(m.Subject, ".detections") {
			ids = append(ids, m.Header.Get(jetstream.MsgIDHeader))
		}
	}
	return ids
}
