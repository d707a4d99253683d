package sources

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/testutil"
)

// gated makes a test camera open its (CPU) decoder through g, as a camera on the GPU does.
func gated(g *DecoderGate, stall time.Duration) func(*Camera) {
	return func(c *Camera) {
		c.DecoderGate, c.gateCPU, c.StallTimeout = g, true, stall
	}
}

// A camera waiting for a slot of a full DecoderGate is not cut by its stall watchdog, however
// long the wait: it stays connecting with no reconnect, and comes online once a slot frees,
// still without one. The 150 cameras on NVDEC were cut as stalled while their
// decoders waited in the driver.
func TestDecoderGateHoldsOffStallWatchdog(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs)
	g := NewDecoderGate(1, 1)
	g.opens <- struct{}{} // another camera is opening its decoder
	// Long enough for the session's first keyframe (the sample's GOP is 1 s) to reach the
	// gate on a loaded machine.
	const stall = 4 * time.Second
	cam, rec := testCamera(t, srv.URL("cam"), &logs, gated(g, stall))

	testutil.WaitFor(t, time.Minute, "the camera waiting at the gate", func() bool { return cam.gateWaits.Load() > 0 })
	// Past the stall timeout from the session's start, and past the watchdog's next tick
	// (every stall/4): without the hold-off it would have cut the session by now.
	wait := stall + stall/2
	time.Sleep(wait)
	if st := cam.Status(); st.Reconnects != 0 || st.Frames != 0 || st.State != StateConnecting {
		t.Fatalf("after %v at a full gate: %+v, want connecting with no frame and no reconnect\nlogs:\n%s", wait, st, logs.String())
	}
	g.leave()
	rec.next(t, StateOnline, time.Minute, &logs)
	if st := cam.Status(); st.Reconnects != 0 {
		t.Fatalf("online after the wait with %d reconnects, want none\nlogs:\n%s", st.Reconnects, logs.String())
	}
	// The slot is given back right after the decode that brought the camera online.
	testutil.WaitFor(t, time.Minute, "the slot given back", func() bool { return len(g.opens) == 0 })
}

// Close ends a camera waiting at the gate (the test's own timeout catches a hang), and the
// camera takes no slot on the way out.
func TestDecoderGateCloseWhileWaiting(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs)
	g := NewDecoderGate(1, 1)
	g.opens <- struct{}{}
	cam, _ := testCamera(t, srv.URL("cam"), &logs, gated(g, time.Minute))
	testutil.WaitFor(t, time.Minute, "the camera waiting at the gate", func() bool { return cam.gateWaits.Load() > 0 })
	cam.Close()
	if n, k := len(g.opens), len(g.calls); n != 1 || k != 0 {
		t.Fatalf("%d open and %d call slots taken after Close, want only the test's open slot", n, k)
	}
	if st := cam.Status(); st.Frames != 0 || st.Reconnects != 0 {
		t.Fatalf("status after Close %+v, want no frame and no reconnect", st)
	}
}

// Cameras starting together through a gate of one open and one call slot all come online,
// none reconnects, and every slot is given back.
func TestDecoderGateManyCameras(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs)
	g := NewDecoderGate(1, 1)
	const n = 6
	cams := make([]*Camera, n)
	for i := range cams {
		cams[i], _ = testCamera(t, srv.URL("cam"), &logs, gated(g, 2*time.Second), func(c *Camera) { c.ID = fmt.Sprintf("cam%d", i) })
	}
	testutil.WaitFor(t, 2*time.Minute, "every camera online", func() bool {
		for _, c := range cams {
			if c.Status().State != StateOnline {
				return false
			}
		}
		return true
	})
	var waits uint64
	for _, c := range cams {
		if st := c.Status(); st.Reconnects != 0 {
			t.Errorf("camera %s: %d reconnects, want none\nlogs:\n%s", c.ID, st.Reconnects, logs.String())
		}
		waits += c.gateWaits.Load()
	}
	t.Logf("%d cameras online through one slot, %d waits for it", n, waits)
	for _, c := range cams {
		c.Close()
	}
	if n, k := len(g.opens), len(g.calls); n != 0 || k != 0 {
		t.Fatalf("%d open and %d call slots taken with every camera closed, want none", n, k)
	}
}

// Every decode of a gated camera takes a call slot: while the test holds the only one, the
// camera's frames stop; given back, they come again, and the camera's DecodeTimes count the
// wait.
func TestDecoderGateCallSlots(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs)
	g := NewDecoderGate(1, 1)
	cam, rec := testCamera(t, srv.URL("cam"), &logs, gated(g, time.Minute))
	rec.next(t, StateOnline, time.Minute, &logs)
	g.calls <- struct{}{} // waits for the camera's decode under way, if any, to end
	held := cam.Status().Frames
	time.Sleep(time.Second) // 10 frames of the sample's stream
	if n := cam.Status().Frames; n != held {
		t.Fatalf("%d frames decoded while the test held the only call slot, want none", n-held)
	}
	waited := cam.Status().Decode.Wait
	<-g.calls
	testutil.WaitFor(t, time.Minute, "frames again", func() bool { return cam.Status().Frames > held })
	// The decode call that waited for the slot counts its wait once it returns: most of
	// the second held (the camera's next access unit came up to a frame or two after the
	// test took the slot).
	testutil.WaitFor(t, time.Minute, "the wait counted", func() bool { return cam.Status().Decode.Wait-waited >= time.Second/2 })
}

// A camera whose GPU decoder will not open (the GPU refuses one more: past 285 decoders in
// one process on the H200, every open failed with AVERROR_INVALIDDATA) decodes on the CPU
// after fallbackAfter failed opens, without going offline, and says so; every gpuRetry it
// tries the GPU again, at once back on the CPU while the GPU refuses, and on the GPU for good
// once it opens. Before, its session retried at each keyframe until its stall watchdog cut
// it, and the cameras past the GPU's limit took turns failing (issue 39, item 6). Here the
// CPU's decoder plays the GPU's (gateCPU), its opens refused by openErr.
func TestDecoderFallsBackToCPU(t *testing.T) {
	var logs testutil.LogBuffer
	srv := startSample(t, "127.0.0.1:0", &logs)
	g := NewDecoderGate(4, 4)
	var refuse atomic.Bool
	var refused atomic.Int32
	refuse.Store(true)
	cam, rec := testCamera(t, srv.URL("cam"), &logs, gated(g, 20*time.Second), func(c *Camera) {
		c.gpuRetry = 3 * time.Second
		c.openErr = func() error {
			if !refuse.Load() {
				return nil
			}
			refused.Add(1)
			return errors.New("test: no more decoders")
		}
	})
	// The first fallback takes fallbackAfter refused opens; each retry refused, one more.
	opensFit := func(st Status) bool { return int(refused.Load()) == fallbackAfter+int(st.DecoderFallbacks)-1 }
	rec.next(t, StateOnline, time.Minute, &logs)
	st := cam.Status()
	if st.DecoderFallbacks < 1 || !strings.Contains(st.DecoderFallback, "test: no more decoders") || !opensFit(st) || st.Frames == 0 {
		t.Fatalf("online with status %+v after %d refused opens: want frames decoded on the CPU after %d, the fallback saying why",
			st, refused.Load(), fallbackAfter)
	}
	// The retry, refused: back on the CPU at once, the keyframe decoded there.
	testutil.WaitFor(t, time.Minute, "a retry of the GPU refused", func() bool { return cam.Status().DecoderFallbacks >= 2 })
	if st := cam.Status(); !opensFit(st) {
		t.Errorf("%d opens refused in %d fallbacks, want %d for the first and one a retry", refused.Load(), st.DecoderFallbacks, fallbackAfter)
	}
	// The GPU opens again: the next retry stays on it.
	refuse.Store(false)
	testutil.WaitFor(t, time.Minute, "back on the GPU decoder", func() bool {
		st := cam.Status()
		return st.DecoderFallback == "" && strings.Contains(logs.String(), "the GPU decoder opened")
	})
	frames := cam.Status().Frames
	testutil.WaitFor(t, time.Minute, "frames on the GPU decoder", func() bool { return cam.Status().Frames > frames+5 })
	if st := cam.Status(); st.State != StateOnline || st.Reconnects != 0 || !opensFit(st) {
		t.Errorf("status %+v: want online throughout, without a reconnect, and no open refused since", st)
	}
	cam.Close()
	if n, k := len(g.opens), len(g.calls); n != 0 || k != 0 {
		t.Fatalf("%d open and %d call slots taken after Close, want none", n, k)
	}
}

// A stall's reason names the session's last decode error while no frame has been decoded
// since it, and is the plain stall otherwise.
func TestStallError(t *testing.T) {
	msg := "avcodec_send_packet: Invalid data found when processing input"
	if got, want := stallError(10*time.Second, &msg).Error(), "stalled: no frame for 10s; the last decode failed: "+msg; got != want {
		t.Errorf("stallError with a decode error = %q, want %q", got, want)
	}
	if got, want := stallError(10400*time.Millisecond, nil).Error(), "stalled: no frame for 10s"; got != want {
		t.Errorf("stallError = %q, want %q", got, want)
	}
	if !errors.Is(stallError(time.Second, &msg), errStalled) {
		t.Error("stallError is not errStalled")
	}
}
