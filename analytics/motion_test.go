package analytics

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

func newMotion(t *testing.T) *Motion {
	t.Helper()
	m, err := NewMotion(0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func motionEvs(events []MotionEvent) []string {
	var out []string
	for _, e := range events {
		state := "moving"
		if e.Stationary {
			state = "stationary"
		}
		out = append(out, fmt.Sprintf("%d %s %s @%d since %d", e.TrackID, e.Label, state, e.Time.Sub(t0).Milliseconds(), e.Since.Sub(t0).Milliseconds()))
	}
	return out
}

func TestMotionParkedWithJitter(t *testing.T) {
	// A parked car whose box jitters by up to ±6 px each way for an hour at 5 fps: stationary
	// after the window, and never moving again. Radius: 2% of the 1118 px diagonal = 22 px.
	m := newMotion(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var got []string
	for ms := 0; ms <= 3600_000; ms += 200 {
		b := geom.Box{X: 300 + rng.Float64()*12 - 6, Y: 200 + rng.Float64()*12 - 6, W: 120 + rng.Float64()*8 - 4, H: 60 + rng.Float64()*8 - 4}
		e, err := m.Update(Frame{Time: at(ms), W: frameW, H: frameH, Objects: []Object{{TrackID: 5, Label: "car", Box: b}}})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, motionEvs(e)...)
	}
	if want := []string{"5 car stationary @5000 since 0"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if !m.Stationary(5) || m.Stationary(6) {
		t.Error("Stationary")
	}
}

func TestMotionWalkStopWalk(t *testing.T) {
	m := newMotion(t)
	var got []string
	step := func(ms int, x float64) {
		e, err := m.Update(frame(ms, obj(1, "person", x, 0.5)))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, motionEvs(e)...)
	}
	// Walking at 0.05 of the width (50 px) a second for 10 s: never stationary.
	for ms := 0; ms <= 10_000; ms += 200 {
		step(ms, 0.1+0.05*float64(ms)/1000)
	}
	if len(got) != 0 || m.Stationary(1) {
		t.Fatalf("walking: %v", got)
	}
	// Stops at x = 0.6 for 8 s: stationary 5 s after it settled within the radius of the
	// place where it stopped, which its last steps (x 0.58 at 9600, 20 px away) already were.
	for ms := 10_200; ms <= 18_000; ms += 200 {
		step(ms, 0.6)
	}
	// Moves 30 px (beyond the 22 px radius): moving again at once.
	step(18_200, 0.63)
	// A slow drift of 2 px a frame is also a move once it has added up.
	for i := 1; i <= 20; i++ {
		step(18_200+200*i, 0.63+0.002*float64(i))
	}
	want := []string{
		"1 person stationary @14600 since 9600",
		"1 person moving @18200 since 18200",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events\n got %v\nwant %v", got, want)
	}
	if m.Stationary(1) {
		t.Error("still stationary while drifting")
	}
	// An ended track is forgotten.
	m.Update(ended(30_000, 1))
	if _, ok := m.tracks[1]; ok {
		t.Error("ended track remembered")
	}
}

func TestMotionAtLowFPS(t *testing.T) {
	// The window is time, not frames: at 1 fps stationary after 5 s as at 5 fps.
	m := newMotion(t)
	var got []string
	for ms := 0; ms <= 8000; ms += 1000 {
		e, _ := m.Update(frame(ms, obj(1, "person", 0.4, 0.4)))
		got = append(got, motionEvs(e)...)
	}
	if want := []string{"1 person stationary @5000 since 0"}; !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	// A stale track is forgotten.
	m.Update(frame(8000 + int(StaleAfter.Milliseconds()) + 1000))
	if m.Stationary(1) {
		t.Error("stale track remembered")
	}
}

func TestNewMotionBad(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		radius float64
		anchor Anchor
		want   string
	}{
		{-time.Second, 0, "", "analytics: stationary window -1s is negative"},
		{0, 1.5, "", "analytics: stationary radius 1.5 is outside 0..1 (a fraction of the frame's diagonal)"},
		{0, -0.1, "", "analytics: stationary radius -0.1 is outside 0..1"},
		{0, 0, "top", `analytics: unknown anchor "top" (want bottom_center or center)`},
	} {
		_, err := NewMotion(tc.window, tc.radius, tc.anchor)
		if err == nil || len(err.Error()) < len(tc.want) || err.Error()[:len(tc.want)] != tc.want {
			t.Errorf("NewMotion(%v, %v, %q): %v, want %q", tc.window, tc.radius, tc.anchor, err, tc.want)
		}
	}
	m := newMotion(t)
	if _, err := m.Update(Frame{}); err == nil {
		t.Error("Update accepted a frame without a size")
	}
}

// A reload's new anchor (Motion.SetAnchor) is tested from the next frame: the change itself
// moves no one, and then a box whose bottom edge stays put while it grows upwards (someone
// standing up) moves by its centre, where by its feet it did not.
func TestMotionSetAnchor(t *testing.T) {
	m := newMotion(t)
	step := func(ms int, b geom.Box) []string {
		t.Helper()
		evs, err := m.Update(Frame{Time: t0.Add(time.Duration(ms) * time.Millisecond), W: 1000, H: 500,
			Objects: []Object{{TrackID: 1, Label: "person", Box: b}}})
		if err != nil {
			t.Fatal(err)
		}
		return motionEvs(evs)
	}
	low := geom.Box{X: 500, Y: 300, W: 40, H: 60} // feet at y 360
	var got []string
	ms := 0
	for ; ms <= 6000; ms += 200 {
		got = append(got, step(ms, low)...)
	}
	if !slices.Equal(got, []string{"1 person stationary @5000 since 0"}) {
		t.Fatalf("before the reload: %v, want stationary after the window", got)
	}
	if err := m.SetAnchor(AnchorCenter); err != nil {
		t.Fatal(err)
	}
	if err := m.SetAnchor("top"); err == nil || !m.Stationary(1) {
		t.Fatalf("anchor top: %v, stationary %v; want an error and the state kept", err, m.Stationary(1))
	}
	got = nil
	for ; ms <= 9000; ms += 200 { // the same box: its centre is 30 px above its feet
		got = append(got, step(ms, low)...)
	}
	if len(got) != 0 || !m.Stationary(1) {
		t.Fatalf("the anchor changed, the box did not: %v, stationary %v; want no event", got, m.Stationary(1))
	}
	tall := geom.Box{X: 500, Y: 160, W: 40, H: 200} // the same feet, the centre 70 px higher
	if got := step(ms, tall); !slices.Equal(got, []string{fmt.Sprintf("1 person moving @%d since %d", ms, ms)}) {
		t.Fatalf("grown upwards, tested by its centre: %v, want it moving", got)
	}
}
