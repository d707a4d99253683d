package main

import (
	"fmt"
	"os"
	"os/exec"
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

	natsAddr := testutil.FreeAddr(t)
	path := writeConfig(t, demoConfigWith(t, testutil.FreeAddr(t), t.TempDir(),
		fmt.Sprintf(`{listen: %q, leaf: {url: "nats-leaf://%s"}}`, natsAddr, link.Addr)))

	start := func() (*exec.Cmd, *logLines) {
		cmd := exec.Command(os.Args[0], "run", "-config", path)
		cmd.Env = append(os.Environ(), "VISIOND_CMD_TEST_MAIN=1")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		logs := followLog(t, stderr)
		logs.wait(t, `msg="visiond running"`)
		go func() {
			for range logs.lines {
			}
		}()
		return cmd, logs
	}

	first, _ := start()
	js := natstest.ConnectJS(t, "nats://"+natsAddr, nats.MaxReconnects(0))
	var stored []string
	deadline := time.Now().Add(90 * time.Second)
	for len(stored) < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("the box stored %d detection events in 90 s, want 20", len(stored))
		}
		time.Sleep(500 * time.Millisecond)
		stored = detectionIDs(t, js, "visiond-demo")
	}
	// What the stream held 100 ms ago has been written to the store's files by now.
	time.Sleep(100 * time.Millisecond)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()

	start()
	link.Restore()
	hubJS := hub.Connect(t)
	hub.SourceStream(t, "ALL", "demo", "visiond-demo")
	var seen map[string]int
	deadline = time.Now().Add(90 * time.Second)
	for {
		seen = map[string]int{}
		for _, id := range detectionIDs(t, hubJS, "ALL") {
			seen[id]++
		}
		missing := 0
		for _, id := range stored {
			if seen[id] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d events stored before the kill never reached the hub", missing, len(stored))
		}
		time.Sleep(time.Second)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("event %s is %d times in the hub's stream", id, n)
		}
	}
	t.Logf("%d events stored before SIGKILL, all delivered once after the restart (%d in the hub now)", len(stored), len(seen))
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
