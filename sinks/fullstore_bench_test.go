package sinks

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkFullSnapshotStore puts snapshots into a store that is full, so that each makes
// room by evicting the oldest, and reports the daemon process's Go heap while it does:
// heap-MiB is the highest heap in use sampled (every 50 puts, as the daemon's GC leaves it),
// live-MiB the highest after a forced collection (what stays reachable: caches, buffers).
// The store is 32 MiB; each snapshot 40 KiB (a JPEG at the model's input size).
func BenchmarkFullSnapshotStore(b *testing.B) {
	const maxBytes, size = 32 << 20, 40 << 10
	s := &Server{Listen: "127.0.0.1:0", StoreDir: b.TempDir(), Domain: "lab"}
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := &Publisher{Server: s, JetStream: true, Stream: StreamConfig{Name: "visiond-lab", MaxAge: time.Hour, MaxBytes: 64 << 20,
		Duplicates: 2 * time.Minute}, Prefix: "visiond", Site: "lab", Instance: "bench"}
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	defer p.Close(10 * time.Second)
	sn := &Snapshots{Publisher: p, MaxBytes: maxBytes}
	if err := sn.Start(); err != nil {
		b.Fatal(err)
	}
	defer sn.Close(10 * time.Second)
	put := func(i int) {
		for sn.PutSnapshot(SnapshotName("door", uint64(i+1), time.Unix(int64(i), 0)), fakeJPEG(size, uint64(i))) != nil {
			time.Sleep(time.Millisecond) // the queue is full: wait for the store
		}
	}
	wait := func(n uint64) {
		for sn.Stats().Stored < n {
			time.Sleep(time.Millisecond)
		}
	}
	fill := 2 * maxBytes / size // past full: evictions from here on
	for i := range fill {
		put(i)
	}
	wait(uint64(fill))
	var ms runtime.MemStats
	var heap, live uint64
	b.ResetTimer()
	for i := range b.N {
		put(fill + i)
		if i%50 == 0 {
			runtime.ReadMemStats(&ms)
			heap = max(heap, ms.HeapInuse)
		}
		if i%500 == 0 {
			wait(uint64(fill + i))
			runtime.GC()
			runtime.ReadMemStats(&ms)
			live = max(live, ms.HeapInuse)
		}
	}
	wait(uint64(fill + b.N))
	b.StopTimer()
	st := sn.Stats()
	if st.Evicted == 0 {
		b.Fatalf("no snapshot evicted: %+v", st)
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(live)/(1<<20), "live-MiB")
	b.ReportMetric(float64(st.Evicted)/float64(b.N), "evictions/put")
}
