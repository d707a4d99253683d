package sinks

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkPublish publishes detection events (one person box each, ~450 bytes of JSON) to the
// in-process embedded server and waits until every one is acknowledged: events/s is the
// sustained rate with acknowledgements, cpu-us/event the process's CPU time per event (the
// encoding, the publisher, nats.go and the embedded server with its file store together), as
// the daemon pays it.
func BenchmarkPublish(b *testing.B) {
	for _, mode := range []struct {
		name      string
		jetstream bool
	}{{"jetstream", true}, {"core", false}} {
		b.Run(mode.name, func(b *testing.B) {
			s := &Server{Listen: "127.0.0.1:0", StoreDir: b.TempDir(), Domain: "lab"}
			if err := s.Start(); err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			p := &Publisher{Server: s, JetStream: mode.jetstream, Stream: StreamConfig{Name: "visiond-lab",
				MaxAge: time.Hour, MaxBytes: 1 << 30, Duplicates: 2 * time.Minute}, Prefix: "visiond", Site: "lab", Instance: "bench"}
			if err := p.Start(); err != nil {
				b.Fatal(err)
			}
			defer p.Close(10 * time.Second)
			ev := detection("door", 0)
			ev.Detections = []Detection{{Label: "person", ClassID: 0, Score: 0.87,
				Box: Box{X: 412.5, Y: 120, W: 60.2, H: 170.9}, BoxNorm: Box{X: 0.537, Y: 0.208, W: 0.078, H: 0.297}}}
			cpu0 := cpuTime(b)
			start := time.Now()
			b.ResetTimer()
			for i := range b.N {
				ev.Frame.Seq = uint64(i)
				if err := p.PublishDetections(ev); err != nil {
					b.Fatal(err)
				}
				// Stay within the outbox, as the pipeline does at any sustainable rate.
				for p.out.len() > 50000 {
					time.Sleep(time.Millisecond)
				}
			}
			for p.Stats().Published < uint64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/event")
			if st := p.Stats(); st.Dropped != 0 || st.Retried != 0 {
				b.Fatalf("stats %+v", st)
			}
		})
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
