package groundtruth

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// CrowdParams are the knobs of Crowd. A zero field takes its default (DefaultCrowd lists
// them), so CrowdParams{} is the scene of BENCHMARKS.md; Seed 0 is a seed like any other.
type CrowdParams struct {
	// People is the number of walkers, occluders and hidden walkers included. Default 24.
	People int
	// Vehicles is the number of vans driving across the plaza along its road. Default 3.
	Vehicles int
	// Occlusions is the number of full occlusions: a small walker passing behind a large
	// person who stands still, hidden for about a second (OcclusionTime). Each takes two of
	// People. Default 4.
	Occlusions int
	// Standers is the number of walkers, besides the occluders, who stop for a while (2 to 6
	// s) on their way, some of them in the zone. Default 4.
	Standers int
	// Duration is the video's length; every path ends a second before it. Default 60 s.
	Duration time.Duration
	// FPS is the video's frame rate (analyse fewer with a replay's rate). Default 10.
	FPS int
	// MinSpeed and MaxSpeed bound a walker's speed, in frame widths a second. Default
	// 0.05 and 0.12 (38 to 92 pixels a second on the 768-pixel plaza).
	MinSpeed, MaxSpeed float64
	// MinScale and MaxScale bound a walker's drawn scale (sprites are 81 to 142 pixels
	// tall at scale 1). Default 0.85 and 1.25.
	MinScale, MaxScale float64
	// MinVehicleSpeed and MaxVehicleSpeed bound a van's speed, frame widths a second.
	// Default 0.15 and 0.25.
	MinVehicleSpeed, MaxVehicleSpeed float64
	// Noise is the per-pixel noise in gray levels (Scenario.Noise). Default 3.
	Noise float64
	// Seed makes the scene: the same parameters and seed give the same scene.
	Seed uint64
}

// DefaultCrowd is the scene that CrowdParams{} gives, its defaults written out.
var DefaultCrowd = CrowdParams{People: 24, Vehicles: 3, Occlusions: 4, Standers: 4, Duration: 60 * time.Second, FPS: 10,
	MinSpeed: 0.05, MaxSpeed: 0.12, MinScale: 0.85, MaxScale: 1.25, MinVehicleSpeed: 0.15, MaxVehicleSpeed: 0.25, Noise: 3}

func (p CrowdParams) withDefaults() CrowdParams {
	d := DefaultCrowd
	p.People = cmp.Or(p.People, d.People)
	p.Vehicles = cmp.Or(p.Vehicles, d.Vehicles)
	p.Occlusions = cmp.Or(p.Occlusions, d.Occlusions)
	p.Standers = cmp.Or(p.Standers, d.Standers)
	p.Duration = cmp.Or(p.Duration, d.Duration)
	p.FPS = cmp.Or(p.FPS, d.FPS)
	p.MinSpeed, p.MaxSpeed = cmp.Or(p.MinSpeed, d.MinSpeed), cmp.Or(p.MaxSpeed, d.MaxSpeed)
	p.MinScale, p.MaxScale = cmp.Or(p.MinScale, d.MinScale), cmp.Or(p.MaxScale, d.MaxScale)
	p.MinVehicleSpeed, p.MaxVehicleSpeed = cmp.Or(p.MinVehicleSpeed, d.MinVehicleSpeed), cmp.Or(p.MaxVehicleSpeed, d.MaxVehicleSpeed)
	p.Noise = cmp.Or(p.Noise, d.Noise)
	return p
}

// String lists the parameters, for a table's caption.
func (p CrowdParams) String() string {
	p = p.withDefaults()
	return fmt.Sprintf("%d people (%d full occlusions, %d standers), %d vans, %v at %d fps, walkers %.2f-%.2f widths/s at scale %.2f-%.2f, vans %.2f-%.2f widths/s, noise %g, seed %d",
		p.People, p.Occlusions, p.Standers, p.Vehicles, p.Duration, p.FPS, p.MinSpeed, p.MaxSpeed, p.MinScale, p.MaxScale,
		p.MinVehicleSpeed, p.MaxVehicleSpeed, p.Noise, p.Seed)
}

func (p CrowdParams) validate() error {
	var errs []error
	if p.People < 1 || p.People > 200 {
		errs = append(errs, fmt.Errorf("people %d: want 1..200", p.People))
	}
	if p.Vehicles < 0 || p.Vehicles > 50 {
		errs = append(errs, fmt.Errorf("vehicles %d: want 0..50", p.Vehicles))
	}
	if p.Occlusions < 0 || 2*p.Occlusions+p.Standers > p.People {
		errs = append(errs, fmt.Errorf("occlusions %d and standers %d: want 2 x occlusions + standers <= people (%d)", p.Occlusions, p.Standers, p.People))
	}
	if p.Standers < 0 {
		errs = append(errs, fmt.Errorf("standers %d: want >= 0", p.Standers))
	}
	if !(p.MinSpeed > 0 && p.MinSpeed <= p.MaxSpeed && p.MaxSpeed <= 1) {
		errs = append(errs, fmt.Errorf("speeds %v..%v: want 0 < min <= max <= 1 frame width a second", p.MinSpeed, p.MaxSpeed))
	}
	if !(p.MinScale >= 0.5 && p.MinScale <= p.MaxScale && p.MaxScale <= 2) {
		errs = append(errs, fmt.Errorf("scales %v..%v: want 0.5 <= min <= max <= 2", p.MinScale, p.MaxScale))
	}
	if !(p.MinVehicleSpeed > 0 && p.MinVehicleSpeed <= p.MaxVehicleSpeed && p.MaxVehicleSpeed <= 2) {
		errs = append(errs, fmt.Errorf("vehicle speeds %v..%v: want 0 < min <= max <= 2", p.MinVehicleSpeed, p.MaxVehicleSpeed))
	}
	// The longest walk (edge to edge at the lowest speed, a stop, an occlusion's slow
	// stretch) must fit.
	if need := time.Duration((walkSpan/p.MinSpeed + maxStand.Seconds() + 2) * float64(time.Second)); p.Duration < need {
		errs = append(errs, fmt.Errorf("duration %v: want at least %v for a walk across at %v widths a second", p.Duration, need.Round(time.Second), p.MinSpeed))
	}
	return errors.Join(errs...)
}

// CrowdScene is a crowded scenario with its counting line and zone, and the occlusions it
// was made to have.
type CrowdScene struct {
	Params   CrowdParams // with the defaults filled in
	Scenario Scenario
	Line     Line // CrowdLine
	Zone     Zone // CrowdZone
	// Occlusions are the planned full occlusions: Hidden passes behind Front, which stands
	// still, and is mostly covered around T (Scene.Truth's Visible says how much).
	Occlusions []Occlusion
	// Standers are the ids of the objects that stop for a while (the occluders included).
	Standers []int
}

// Occlusion is a planned passing of one object behind another.
type Occlusion struct {
	Hidden, Front int
	T             time.Duration // when Hidden's anchor is right behind Front's
}

// CrowdLine is Crowd's counting line: vertical at 0.45 of the width, drawn top to bottom
// (walking left to right is In), from the far side of the road to near the bottom.
func CrowdLine() Line { return Line{Point{0.45, 0.22}, Point{0.45, 0.96}} }

// CrowdZone is Crowd's zone: a rectangle on the grass, lower left.
func CrowdZone() Zone { return Zone{{0.08, 0.62}, {0.36, 0.62}, {0.36, 0.90}, {0.08, 0.90}} }

// Layout of the walks, in normalized coordinates.
const (
	walkFrom = -0.07 // a walker starts beyond the left edge (or ends there)...
	walkTo   = 1.07  // ...and walks to beyond the right one: wholly off the frame at both ends
	walkSpan = walkTo - walkFrom
	// Walkers keep to anchors between laneTop and laneBottom (below the far side of the road,
	// above the bottom edge) and out of the bands, zoneMargin wide, around the zone's top and
	// bottom edges, where a walk along the edge would graze it.
	laneTop, laneBottom = 0.30, 0.92
	zoneMargin          = 0.03
	// A stop is at least stopClear from the line and the zone's sides.
	stopClear = 0.07
	// Vans drive along the road: anchors (the bottom of the wheels) between roadTop and
	// roadBottom, from beyond one edge to beyond the other.
	roadTop, roadBottom = 0.42, 0.52
	vanFrom, vanTo      = -0.12, 1.12
	// Occluders are walker-640 at occluderScale, standing with their anchor between
	// occluderTop and occluderBottom on the right of the line; the hidden walker is
	// walker-100 at hiddenScale, its anchor hiddenRise above the occluder's (its body
	// level with the occluder's coat), walking at hiddenSpeed while behind it: hidden
	// (less than a quarter showing) for 1.2 s.
	occluderScale, hiddenScale  = 1.3, 0.75
	occluderTop, occluderBottom = 0.74, 0.85
	hiddenRise                  = 0.085
	hiddenSpeed                 = 0.05
	hiddenSlow                  = 0.12 // the stretch on either side of the occluder walked at hiddenSpeed
	occluderStand               = 2500 * time.Millisecond
)

// OcclusionTime is how long the hidden walker of an occlusion is hidden (its Visible under
// 0.25) in CrowdParams' defaults, about; TestCrowdTruth measures it on each occlusion.
const OcclusionTime = time.Second

const maxStand = 6 * time.Second

// Crowd makes a crowded scene on vtest.avi's plaza (768x576), the same for the same media
// and parameters: p.People walkers of all the sprites in m, at scales and speeds drawn
// from the parameters' ranges, walking in from one side edge and out at the other
// (crossing CrowdLine once each, and the lanes of CrowdZone's rows through it, passing
// one another), of which p.Standers stop on the way for 2 to 6 s, and p.Occlusions pairs
// in which a small walker passes behind a large person standing still (hidden about
// OcclusionTime); and p.Vehicles vans (class car, m.Vehicles[0]) driving along the road
// across the line. The truth is the scenario's: Crossings(CrowdLine()),
// Visits(CrowdZone()), Scene.Truth.
func Crowd(m *Media, p CrowdParams) (CrowdScene, error) {
	p = p.withDefaults()
	if err := p.validate(); err != nil {
		return CrowdScene{}, fmt.Errorf("crowd: %w", err)
	}
	if len(m.People) == 0 || (p.Vehicles > 0 && len(m.Vehicles) == 0) {
		return CrowdScene{}, fmt.Errorf("crowd: the media have %d people and %d vehicles", len(m.People), len(m.Vehicles))
	}
	occluder, hidden := m.Person("walker-640"), m.Person("walker-100")
	if p.Occlusions > 0 && (occluder == nil || hidden == nil) {
		return CrowdScene{}, errors.New(`crowd: occlusions need the sprites "walker-640" and "walker-100"`)
	}
	g := &crowdGen{p: p, r: rand.New(rand.NewPCG(p.Seed, 0x63726f7764)), end: p.Duration - time.Second}
	cs := CrowdScene{Params: p, Line: CrowdLine(), Zone: CrowdZone()}
	s := Scenario{W: vtestW, H: vtestH, FPS: p.FPS, Duration: p.Duration, Background: m.Background, Noise: p.Noise, Seed: p.Seed}
	id := 0
	add := func(o Object) {
		id++
		o.ID = id
		s.Objects = append(s.Objects, o)
	}

	// The occlusions, spread over the video: occluder k stands at its place around T_k.
	for k := range p.Occlusions {
		tc := time.Duration(float64(g.end) * (float64(k) + 1) / (float64(p.Occlusions) + 1))
		x0 := g.uniform(0.58, 0.86)
		y0 := g.uniform(occluderTop, occluderBottom)
		front, back := g.occlusion(tc, x0, y0)
		front.Sprite, front.Scale = occluder, occluderScale
		back.Sprite, back.Scale = hidden, hiddenScale
		add(back)
		add(front)
		cs.Occlusions = append(cs.Occlusions, Occlusion{Hidden: id - 1, Front: id, T: tc})
		cs.Standers = append(cs.Standers, id)
	}
	for k := range p.People - 2*p.Occlusions {
		o := g.walker(k < p.Standers)
		o.Sprite = m.People[g.r.IntN(len(m.People))]
		o.Scale = g.uniform(p.MinScale, p.MaxScale)
		add(o)
		if k < p.Standers {
			cs.Standers = append(cs.Standers, id)
		}
	}
	for k := range p.Vehicles {
		// Spread over the video, as the occlusions.
		t0 := time.Duration(float64(g.end) * (float64(k) + g.uniform(0.1, 0.7)) / float64(p.Vehicles))
		add(g.van(t0, m.Vehicles[0]))
	}
	cs.Scenario = s
	if err := s.Validate(); err != nil {
		return CrowdScene{}, fmt.Errorf("crowd: %w", err)
	}
	return cs, nil
}

// crowdGen draws a crowd's walks from its random source.
type crowdGen struct {
	p   CrowdParams
	r   *rand.Rand
	end time.Duration // every path ends by then
}

func (g *crowdGen) uniform(a, b float64) float64 { return a + (b-a)*g.r.Float64() }

func secs(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// lane returns a walker's y: in the lanes, out of the bands along the zone's top and
// bottom edges.
func (g *crowdGen) lane() float64 {
	z := CrowdZone()
	top, bottom := z[0].Y, z[2].Y
	for {
		y := g.uniform(laneTop, laneBottom)
		if math.Abs(y-top) > zoneMargin && math.Abs(y-bottom) > zoneMargin {
			return y
		}
	}
}

// stopX returns where a stander stops: clear of the line and of the zone's sides.
func (g *crowdGen) stopX() float64 {
	z, l := CrowdZone(), CrowdLine()
	for {
		x := g.uniform(0.1, 0.9)
		if math.Abs(x-l.P1.X) > stopClear && math.Abs(x-z[0].X) > stopClear/2 && math.Abs(x-z[1].X) > stopClear/2 {
			return x
		}
	}
}

// walker is a walk across, left to right or right to left, at one speed on a level lane
// (or, above the zone's rows, a slanting one), starting at a random time; a stander stops
// at a random place on the way.
func (g *crowdGen) walker(stands bool) Object {
	v := g.uniform(g.p.MinSpeed, g.p.MaxSpeed)
	y0 := g.lane()
	y1 := y0
	if y0 < CrowdZone()[0].Y-zoneMargin { // above the zone: it may slant, staying above it
		y1 = min(CrowdZone()[0].Y-zoneMargin, max(laneTop, y0+g.uniform(-0.08, 0.08)))
	}
	x0, x1 := walkFrom, walkTo
	if g.r.IntN(2) == 1 {
		x0, x1 = x1, x0
	}
	var stand time.Duration
	if stands {
		stand = secs(g.uniform(2, maxStand.Seconds()))
	}
	walk := secs(walkSpan / v)
	start := secs(g.uniform(0, (g.end - walk - stand).Seconds()))
	path := []Waypoint{{start, x0, y0}}
	if stands {
		xs := g.stopX()
		u := (xs - x0) / (x1 - x0)
		ys := y0 + u*(y1-y0)
		at := start + time.Duration(u*float64(walk))
		path = append(path, Waypoint{at, xs, ys}, Waypoint{at + stand, xs, ys})
	}
	path = append(path, Waypoint{start + walk + stand, x1, y1})
	return Object{Path: path}
}

// occlusion returns the occluder (front) and the hidden walker (back) of an occlusion at
// time tc with the occluder's anchor at (x0, y0): the occluder walks in from the left edge
// (across the line, faster where it would not be there in time), stands at (x0, y0)
// occluderStand either side of tc, and walks on to the right edge (faster where it would
// not be off by the end of the video); the hidden walker comes from the right edge,
// hiddenRise above, slows to hiddenSpeed from hiddenSlow before the occluder to hiddenSlow
// after it, passing right behind it at tc, and walks on to the left edge. So they part
// after the occlusion, each going its own way: the hidden walker is hidden once.
func (g *crowdGen) occlusion(tc time.Duration, x0, y0 float64) (front, back Object) {
	v := g.uniform(g.p.MinSpeed, g.p.MaxSpeed)
	arrive := tc - occluderStand
	in := min(secs((x0-walkFrom)/v), arrive)
	front.Path = []Waypoint{
		{arrive - in, walkFrom, y0},
		{arrive, x0, y0},
		{tc + occluderStand, x0, y0},
		{tc + occluderStand + g.onTime(tc+occluderStand, walkTo-x0, v), walkTo, y0},
	}
	yb := y0 - hiddenRise
	vb := g.uniform(g.p.MinSpeed, g.p.MaxSpeed)
	slow := secs(hiddenSlow / hiddenSpeed)
	a, b := x0+hiddenSlow, x0-hiddenSlow
	back.Path = []Waypoint{
		{tc - slow - min(secs((walkTo-a)/vb), tc-slow), walkTo, yb},
		{tc - slow, a, yb},
		{tc + slow, b, yb},
		{tc + slow + g.onTime(tc+slow, b-walkFrom, vb), walkFrom, yb},
	}
	return front, back
}

// onTime is how long a walk of dist from t at speed v takes, walked faster where needed
// to end by g.end.
func (g *crowdGen) onTime(t time.Duration, dist, v float64) time.Duration {
	return min(secs(dist/v), g.end-t)
}

// van drives sp along the road from t0, from one side to the other.
func (g *crowdGen) van(t0 time.Duration, sp *Sprite) Object {
	v := g.uniform(g.p.MinVehicleSpeed, g.p.MaxVehicleSpeed)
	y := g.uniform(roadTop, roadBottom)
	x0, x1 := vanFrom, vanTo
	if g.r.IntN(2) == 1 {
		x0, x1 = x1, x0
	}
	d := secs((vanTo - vanFrom) / v)
	if t0+d > g.end {
		t0 = g.end - d
	}
	return Object{Sprite: sp, Scale: g.uniform(vanMinScale, vanMaxScale), Path: []Waypoint{{t0, x0, y}, {t0 + d, x1, y}}}
}
