package offheap

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestReuseBeforeMaking(t *testing.T) {
	p := New[int](1<<20, time.Hour)
	defer p.Close()
	a, err := p.Get()
	if err != nil {
		t.Fatal(err)
	}
	if len(a.B) != 1<<20 || a.B[0] != 0 || a.B[len(a.B)-1] != 0 || a.Note != 0 {
		t.Fatalf("a new buffer: %d bytes, first %d last %d, note %d; want 1 MiB of zeros, note 0", len(a.B), a.B[0], a.B[len(a.B)-1], a.Note)
	}
	a.B[0], a.Note = 7, 9
	b, _ := p.Get()
	if st := p.Stats(); st.InUse != 2 || st.Free != 0 || st.Made != 2 || st.Bytes() != 2<<20 {
		t.Fatalf("two lent: %+v", st)
	}
	p.Put(a)
	c, _ := p.Get()
	if c.B[0] != 7 || c.Note != 9 {
		t.Fatalf("the free buffer was not lent again as it was left: its first byte is %d and note %d, want 7 and 9", c.B[0], c.Note)
	}
	if st := p.Stats(); st.Made != 2 || st.InUse != 2 {
		t.Fatalf("after reuse: %+v; want 2 made, 2 in use", st)
	}
	p.Put(b)
	p.Put(c)
	if st := p.Stats(); st.InUse != 0 || st.Free != 2 {
		t.Fatalf("all put back: %+v", st)
	}
}

func TestIdleBuffersAreUnmapped(t *testing.T) {
	p := New[int](4096, 50*time.Millisecond)
	defer p.Close()
	var bufs []*Buffer[int]
	for range 4 {
		b, err := p.Get()
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		p.Put(b)
	}
	time.Sleep(100 * time.Millisecond)
	// One is in use again: the others lay free past the idle time; the put trims them,
	// keeping the one just put.
	b, _ := p.Get()
	p.Put(b)
	if st := p.Stats(); st.Free != 1 || st.InUse != 0 {
		t.Fatalf("after a put past the idle time: %+v; want the one just put, alone", st)
	}
	time.Sleep(100 * time.Millisecond)
	p.Trim()
	if st := p.Stats(); st.Free != 0 || st.Bytes() != 0 {
		t.Fatalf("after Trim past the idle time: %+v; want nothing held", st)
	}
	b, _ = p.Get() // a fresh mapping works after trimming
	b.B[len(b.B)-1] = 1
	p.Put(b)
}

func TestNotInTheGoHeap(t *testing.T) {
	p := New[int](64<<20, time.Hour)
	defer p.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b, err := p.Get()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b.B); i += 4096 {
		b.B[i] = 1
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapSys) - int64(before.HeapSys); grew > 16<<20 {
		t.Fatalf("the Go heap grew by %d MiB for a 64 MiB buffer", grew>>20)
	}
	p.Put(b)
}

func TestWrongSizePanics(t *testing.T) {
	p := New[int](4096, 0)
	defer p.Close()
	defer func() {
		if recover() == nil {
			t.Fatal("putting a buffer of another size did not panic")
		}
	}()
	p.Put(&Buffer[int]{B: make([]byte, 100)})
}

func TestCloseUnmapsFreeAndLaterPuts(t *testing.T) {
	p := New[int](4096, time.Hour)
	a, _ := p.Get()
	b, _ := p.Get()
	p.Put(a)
	p.Close()
	if st := p.Stats(); st.Free != 0 || st.InUse != 1 {
		t.Fatalf("after Close: %+v; want the lent one alone", st)
	}
	p.Put(b)
	if st := p.Stats(); st.Free != 0 || st.InUse != 0 {
		t.Fatalf("a put after Close: %+v; want nothing held", st)
	}
	p.Close()
}

func TestConcurrentUse(t *testing.T) {
	p := New[int](8192, time.Millisecond)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				b, err := p.Get()
				if err != nil {
					t.Error(err)
					return
				}
				b.B[0], b.B[len(b.B)-1] = byte(g), byte(i)
				if b.B[0] != byte(g) || b.B[len(b.B)-1] != byte(i) {
					t.Error("a lent buffer changed under its borrower")
				}
				p.Put(b)
			}
		})
	}
	wg.Wait()
	if st := p.Stats(); st.InUse != 0 || st.Free > 8 {
		t.Fatalf("after the borrowers: %+v; want none in use and at most 8 free", st)
	}
}

// BenchmarkGetPut is a frame's round trip through the pool on the per-frame path: a free
// buffer lent and put back (no mapping once warm).
func BenchmarkGetPut(b *testing.B) {
	p := New[int](640*640*3+64, time.Hour)
	defer p.Close()
	for b.Loop() {
		buf, err := p.Get()
		if err != nil {
			b.Fatal(err)
		}
		p.Put(buf)
	}
}
