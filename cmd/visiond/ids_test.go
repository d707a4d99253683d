package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
)

// Issue 22, "Done when": visiond killed with SIGKILL at random points, five times, while its
// camera sees people walk by, never gives one track id to two objects. Every run restarts on
// the same JetStream store on disk, the sample video from its start (the same people again,
// new objects); the object events of all runs are read back from the stream at the end, and
// each track id must belong to one object: one run (the instance of its events' ids) and one
// first_seen.
func TestKilledDaemonNeverReusesTrackIDs(t *testing.T) {
	const kills = 5
	natsAddr := testutil.FreeAddr(t) // the same address every run, to reach each one
	path := writeConfig(t, demoConfigWith(t, testutil.FreeAddr(t), t.TempDir(), fmt.Sprintf("{listen: %q}", natsAddr)))
	rng := rand.New(rand.NewPCG(22, 3)) // seeded: the same kill points every time
	subject := "visiond.demo.sample.objects"
	connect := func() *nats.Conn {
		t.Helper()
		nc, err := nats.Connect("nats://" + natsAddr)
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	for run := range kills {
		cmd, logs := startCommand(t, exec.Command(os.Args[0], "run", "-config", path))
		logs.wait(t, `msg="visiond running"`)
		nc := connect()
		objects := make(chan *nats.Msg, 1024)
		if _, err := nc.ChanSubscribe(subject, objects); err != nil {
			t.Fatal(err)
		}
		// The first object confirmed, then a random point within the next few seconds: in
		// the middle of objects' lives, of a block of ids, of the next block's reservation.
		// (Not at once: the embedded server writes what it acknowledged to its files within
		// milliseconds, and a run killed before that leaves no events to check.)
		select {
		case <-objects:
		case <-time.After(2 * time.Minute):
			t.Fatalf("run %d: no object event in 2 minutes:\n%s", run, logs.all.String())
		}
		<-time.After(200*time.Millisecond + time.Duration(rng.Int64N(int64(5*time.Second)))) // the kill point, not a wait for a condition
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		nc.Close()
	}

	// A last run, stopped cleanly, and the stream read back.
	cmd, logs := startCommand(t, exec.Command(os.Args[0], "run", "-config", path))
	logs.wait(t, `msg="visiond running"`)
	events := natstest.ReadStream[sinks.ObjectEvent](t, "nats://"+natsAddr, "visiond-demo", subject) // only the killed runs' events: the last run's go on arriving
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	type object struct {
		instance  string
		firstSeen time.Time
	}
	owners := map[uint64]map[object]bool{}
	runs := map[string]bool{}
	for _, o := range events {
		instance, _, _ := strings.Cut(o.ID, ".")
		runs[instance] = true
		if owners[o.TrackID] == nil {
			owners[o.TrackID] = map[object]bool{}
		}
		owners[o.TrackID][object{instance, o.FirstSeen}] = true
	}
	if len(runs) < 3 {
		t.Fatalf("object events from %d runs, want most of the %d killed", len(runs), kills)
	}
	for id, objs := range owners {
		if len(objs) > 1 {
			t.Errorf("track id %d was given to %d objects: %v", id, len(objs), objs)
		}
	}
	t.Logf("%d object events of %d track ids from %d runs, each id one object", len(events), len(owners), len(runs))
}
