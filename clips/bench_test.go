package clips

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// BenchmarkRingPush is the cost of the per-packet path clips add to a camera's RTP callback:
// one access unit of the sample stream copied into a ring that keeps 8 s (so evicting as it
// goes). Reports bytes per op as the units' mean size.
func BenchmarkRingPush(b *testing.B) {
	pkts := packets(b, testutil.Media(b, "vtest.h264.ts"), 1, base)
	r := NewRing(8*time.Second, 64<<20)
	var bytes int64
	for i := range pkts {
		for _, n := range pkts[i].NALUs {
			bytes += int64(len(n))
		}
	}
	b.SetBytes(bytes / int64(len(pkts)))
	b.ReportAllocs()
	b.ResetTimer()
	loop := pkts[len(pkts)-1].At.Sub(pkts[0].At) + 100*time.Millisecond
	for i := 0; i < b.N; i++ {
		// Each loop of the file is a next session, its capture times going on.
		k := i / len(pkts)
		p := pkts[i%len(pkts)]
		p.Session, p.At = uint64(k+1), p.At.Add(time.Duration(k)*loop)
		r.Push(&p)
	}
}

// BenchmarkMP4Write is the recorder's cost per access unit of a clip: the unit added to the
// spool (decoding time worked out) and, once per 200 units (20 s at 10 fps), the MP4 written.
func BenchmarkMP4Write(b *testing.B) {
	pkts := packets(b, testutil.Media(b, "vtest.h264.ts"), 1, base)
	r := NewRing(time.Hour, 1<<30)
	for i := range pkts {
		r.Push(&pkts[i])
	}
	units, _, _, _ := r.read(0, nil, nil)
	dir := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	var w *mp4Writer
	for i := 0; i < b.N; i++ {
		u := &units[i%200]
		if i%200 == 0 {
			if w != nil {
				if _, err := w.finish(filepath.Join(dir, "clip.mp4")); err != nil {
					b.Fatal(err)
				}
			}
			var err error
			if w, err = newMP4Writer(dir, "clip", u); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.add(u); err != nil {
			b.Fatal(err)
		}
	}
	if w != nil {
		w.abort()
	}
}
