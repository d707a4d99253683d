package main

import (
	"bytes"
	"encoding/binary"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStats(t *testing.T) {
	if got := jain([]float64{5, 5, 5, 5}); got != 1 {
		t.Errorf("jain of equal shares = %v, want 1", got)
	}
	if got := jain([]float64{10, 0, 0, 0}); got != 0.25 {
		t.Errorf("jain of one taking all = %v, want 1/4", got)
	}
	if got := pct([]float64{5, 1, 4, 2, 3}, 0.5); got != 3 {
		t.Errorf("p50 = %v, want 3", got)
	}
	if got := pct([]float64{1, 2, 3, 4, 100}, 0.99); got != 100 {
		t.Errorf("p99 = %v, want 100", got)
	}
	if got := slope([]float64{0, 1, 2}, []float64{1, 3, 5}); math.Abs(got-2) > 1e-9 {
		t.Errorf("slope = %v, want 2", got)
	}
	if pct(nil, .5) != 0 || jain(nil) != 0 || slope(nil, nil) != 0 {
		t.Error("empty inputs must give 0, not NaN (JSON cannot hold NaN)")
	}
}

func TestSummariseAndCriterion(t *testing.T) {
	t0 := time.Now()
	var evs []event
	for i := range 50 {
		evs = append(evs, event{cam: "cam000", at: t0, total: float64(100 + i), age: 10, dets: 2})
		if i < 40 {
			evs = append(evs, event{cam: "cam001", at: t0, total: 400, age: 20})
		}
	}
	evs = append(evs, event{cam: "removed", at: t0, total: 9999})
	w := summarise(evs, 10, []string{"cam000", "cam001", "cam002"})
	if w.Events != 90 || w.PerCamera["cam000"] != 5 || w.PerCamera["cam001"] != 4 || w.MinCamera != 0 {
		t.Fatalf("summary %+v", w)
	}
	if w.DetsPerSec != 10 {
		t.Errorf("detections/s = %v, want 10", w.DetsPerSec)
	}
	c := criterion{FPS: 5, P99MS: 300, MinShare: 0.9, Total: 0.95}
	if ok, why := c.check(w); ok || !strings.Contains(why, "events/s") {
		t.Errorf("check = %v %q, want a failure on the total", ok, why)
	}
	w2 := summarise(evs[:50], 10, []string{"cam000"}) // every other event is cam001's: 25 of cam000
	if ok, _ := c.check(w2); ok {
		t.Error("2.5/s of 5 passed")
	}
	var good []event
	for i := range 50 {
		good = append(good, event{cam: "cam000", at: t0, total: float64(50 + i)})
	}
	if ok, why := c.check(summarise(good, 10, []string{"cam000"})); !ok {
		t.Errorf("5/s at p99 99 ms failed: %s", why)
	}
}

func TestParseBench(t *testing.T) {
	text := `goos: linux
BenchmarkDecodeVsFFmpeg/H264-720p-2         	       3	 210163493 ns/op	         2.975 ffmpeg-ms-cpu/frame	         3.504 ms-cpu/frame	         1.178 ratio
provider=cuda workers=2 cameras=48: BenchmarkThroughputVsBareLoop-16    	       1	56259171202 ns/op	      1098 MiB-gpu/worker	       238.8 bare-runs/s	       250.9 daemon-events/s	         1.050 ratio
PASS`
	bs := parseBench(text)
	if len(bs) != 2 {
		t.Fatalf("%d lines, want 2: %+v", len(bs), bs)
	}
	if bs[0].name != "BenchmarkDecodeVsFFmpeg/H264-720p" || bs[0].metrics["ratio"] != 1.178 || bs[0].metrics["ms-cpu/frame"] != 3.504 {
		t.Errorf("decode line: %+v", bs[0])
	}
	if bs[1].prefix["workers"] != "2" || bs[1].prefix["provider"] != "cuda" || bs[1].metrics["daemon-events/s"] != 250.9 {
		t.Errorf("pipeline line: %+v", bs[1])
	}
}

func TestWriteNPY(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.npy")
	if err := writeNPY(p, "<f4", []int{1, 2, 3}, []float32{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x93NUMPY\x01\x00")) {
		t.Fatalf("magic: %q", data[:8])
	}
	hl := int(binary.LittleEndian.Uint16(data[8:10]))
	if (10+hl)%64 != 0 {
		t.Errorf("header ends at %d, not on 64 bytes", 10+hl)
	}
	header := string(data[10 : 10+hl])
	if !strings.Contains(header, "'shape': (1, 2, 3)") || !strings.HasSuffix(header, "\n") {
		t.Errorf("header %q", header)
	}
	if len(data) != 10+hl+24 {
		t.Errorf("%d bytes, want %d", len(data), 10+hl+24)
	}
}

func TestPlotSoak(t *testing.T) {
	r := soakResult{Daemon: daemonFlags{FPS: 5, Workers: 2, Provider: "cpu"}, DurationS: 120, EditEveryS: 60, Base: 2, Churn: 2}
	for i := range 12 {
		r.Samples = append(r.Samples, soakSample{T: float64(10 * (i + 1)), DaemonMiB: 150 + float64(i), WorkerMiB: []float64{250, 260},
			WorkerGPU: []float64{0, 0}, WorkerPIDs: []int{1, 2}, EventsPS: 10, P50: 80, P99: 200 + float64(i), Online: 2 + i%2*2})
	}
	r.Edits = []soakEdit{{T: 60}}
	p := filepath.Join(t.TempDir(), "soak.png")
	if err := plotSoak(p, "", r); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != plotW || b.Dy() != titleH+4*panelH { // memory, latency, load, what the daemon holds
		t.Errorf("size %v", b)
	}
}

func TestSourceCounts(t *testing.T) {
	cam := func(id string, decoded, dropped, calls uint64, busy float64) camStatus {
		c := camStatus{ID: id, Decoded: decoded}
		c.Drops.Source = dropped
		c.Decode.Calls, c.Decode.Busy, c.Decode.Wait = calls, busy, busy/2
		c.Decode.Scaled, c.Decode.Copy, c.Decode.Scale = calls/2, busy/4, busy/8
		return c
	}
	then := []camStatus{cam("a", 100, 1, 100, 1), cam("b", 100, 0, 100, 1), cam("restarted", 500, 9, 500, 9), cam("removed", 10, 0, 10, 0)}
	now := []camStatus{cam("a", 200, 4, 200, 2), cam("b", 150, 0, 200, 4), cam("restarted", 20, 0, 20, 1), cam("added", 30, 5, 30, 1)}
	w := sourceCounts(then, now, 10)
	if w.DecodedMin != 5 || w.DecodedMean != 7.5 || w.SourceDrops != 3 {
		t.Errorf("sourceCounts = %v/s slowest, %v/s mean, %d drops; want 5, 7.5, 3 (a and b only)", w.DecodedMin, w.DecodedMean, w.SourceDrops)
	}
	// a and b: 200 calls in 10 s taking 4 s (20 ms each) and waiting 2 s; 100 frames scaled
	// with 1 s of copies and 0.5 s of scaling.
	want := decodeSteps{CallsPerSec: 20, WaitMS: 10, BusyMS: 20, ScaledPerSec: 10, CopyMS: 10, ScaleMS: 5}
	if w.Decode == nil || *w.Decode != want {
		t.Errorf("decode steps %v, want %v", w.Decode, &want)
	}
	if w := sourceCounts(nil, now, 10); w.DecodedMin != 0 || w.DecodedMean != 0 || w.SourceDrops != 0 || w.Decode != nil {
		t.Errorf("no earlier reading: %+v, want zeros", w)
	}
}
