package groundtruth

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// CrowdParams are the knobs of Crowd. A zero field takes its default (DefaultCrowd lists
// them), so CrowdParams{} is the scene of BENCHMARKS.md; Seed 0 is a seed like any other.
type CrowdParams struct {
	// People is the number of people, occluders, hidden walkers and groups included.
	// Default 28.
	People int
	// Vehicles is the number of vans: Parked of them drive in, park a while and drive on,
	// the others drive across the plaza along its road. Default 4.
	Vehicles int
	// Parked is the number of vans that park (10 to 20 s) on the paving. Default 1.
	Parked int
	// Occlusions is the number of planned occlusions, of three kinds in turn: a walker
	// passing behind a person who stands still (each takes two of People), behind a
	// pillar (one of People and one of Props), and behind a van driving past the other
	// way (one of People and one of the vans that do not park). Default 6.
	Occlusions int
	// Standers is the number of walkers, besides the occluders, who stop for a while (2 to 6
	// s) on their way, some of them in the zone. Default 4.
	Standers int
	// Groups is the number of groups of two or three people walking side by side (their
	// members are of People). Default 3.
	Groups int
	// Props is the number of static things on the plaza (pillars and signs), the pillars
	// of the planned occlusions included: they hide what passes behind them and are no
	// objects of the truth. Default 4.
	Props int
	// Duration is the video's length; every path ends a second before it. Default 60 s.
	Duration time.Duration
	// FPS is the video's frame rate (analyse fewer with a replay's rate). Default 10.
	FPS int
	// MinSpeed and MaxSpeed bound a walker's cruising speed, in frame widths a second; a
	// walker changes speed on the way by up to 45% either side. Default 0.05 and 0.12 (38
	// to 92 pixels a second on the 768-pixel plaza).
	MinSpeed, MaxSpeed float64
	// MinScale and MaxScale bound a person's drawn size relative to the size the sprite's
	// person had in vtest.avi at the same depth (Crowd draws by perspective). Default 0.9
	// and 1.1.
	MinScale, MaxScale float64
	// MinVehicleSpeed and MaxVehicleSpeed bound a van's speed, frame widths a second.
	// Default 0.15 and 0.25.
	MinVehicleSpeed, MaxVehicleSpeed float64
	// Noise is the per-pixel noise in gray levels (Scenario.Noise). Default 3.
	Noise float64
	// Light is how far the exposure drifts and steps: gains within 1 ± Light, offsets
	// within ± 60 Light gray levels (Scenario.Light). Default 0.2.
	Light float64
	// Seed makes the scene: the same parameters and seed give the same scene.
	Seed uint64
}

// DefaultCrowd is the scene that CrowdParams{} gives, its defaults written out.
var DefaultCrowd = CrowdParams{People: 28, Vehicles: 4, Parked: 1, Occlusions: 6, Standers: 4, Groups: 3, Props: 4,
	Duration: 60 * time.Second, FPS: 10, MinSpeed: 0.05, MaxSpeed: 0.12, MinScale: 0.9, MaxScale: 1.1,
	MinVehicleSpeed: 0.15, MaxVehicleSpeed: 0.25, Noise: 3, Light: 0.2}

func (p CrowdParams) withDefaults() CrowdParams {
	d := DefaultCrowd
	p.People = cmp.Or(p.People, d.People)
	p.Vehicles = cmp.Or(p.Vehicles, d.Vehicles)
	p.Parked = cmp.Or(p.Parked, d.Parked)
	p.Occlusions = cmp.Or(p.Occlusions, d.Occlusions)
	p.Standers = cmp.Or(p.Standers, d.Standers)
	p.Groups = cmp.Or(p.Groups, d.Groups)
	p.Props = cmp.Or(p.Props, d.Props)
	p.Duration = cmp.Or(p.Duration, d.Duration)
	p.FPS = cmp.Or(p.FPS, d.FPS)
	p.MinSpeed, p.MaxSpeed = cmp.Or(p.MinSpeed, d.MinSpeed), cmp.Or(p.MaxSpeed, d.MaxSpeed)
	p.MinScale, p.MaxScale = cmp.Or(p.MinScale, d.MinScale), cmp.Or(p.MaxScale, d.MaxScale)
	p.MinVehicleSpeed, p.MaxVehicleSpeed = cmp.Or(p.MinVehicleSpeed, d.MinVehicleSpeed), cmp.Or(p.MaxVehicleSpeed, d.MaxVehicleSpeed)
	p.Noise = cmp.Or(p.Noise, d.Noise)
	p.Light = cmp.Or(p.Light, d.Light)
	return p
}

// String lists the parameters, for a table's caption.
func (p CrowdParams) String() string {
	p = p.withDefaults()
	return fmt.Sprintf("%d people (%d groups, %d planned occlusions, %d standers), %d vans (%d parking), %d props, %v at %d fps, "+
		"walkers %.2f-%.2f widths/s at %.2f-%.2f of their size by perspective, vans %.2f-%.2f widths/s, noise %g, light ±%g, seed %d",
		p.People, p.Groups, p.Occlusions, p.Standers, p.Vehicles, p.Parked, p.Props, p.Duration, p.FPS, p.MinSpeed, p.MaxSpeed,
		p.MinScale, p.MaxScale, p.MinVehicleSpeed, p.MaxVehicleSpeed, p.Noise, p.Light, p.Seed)
}

// occlusionKinds is the order in which Crowd plans its occlusions.
var occlusionKinds = [...]string{OccludedByPerson, OccludedByProp, OccludedByVehicle}

// occlusionsOf counts the planned occlusions of each kind.
func (p CrowdParams) occlusionsOf(kind string) int {
	n := 0
	for k := range p.Occlusions {
		if occlusionKinds[k%len(occlusionKinds)] == kind {
			n++
		}
	}
	return n
}

func (p CrowdParams) validate() error {
	var errs []error
	if p.People < 1 || p.People > 200 {
		errs = append(errs, fmt.Errorf("people %d: want 1..200", p.People))
	}
	if p.Vehicles < 0 || p.Vehicles > 50 || p.Parked < 0 || p.Parked > p.Vehicles {
		errs = append(errs, fmt.Errorf("vehicles %d, parked %d: want 0..50 vehicles, parked <= vehicles", p.Vehicles, p.Parked))
	}
	if p.Occlusions < 0 || p.Standers < 0 || p.Groups < 0 || p.Props < 0 {
		errs = append(errs, fmt.Errorf("occlusions %d, standers %d, groups %d, props %d: want >= 0", p.Occlusions, p.Standers, p.Groups, p.Props))
	}
	byPerson, byProp, byVehicle := p.occlusionsOf(OccludedByPerson), p.occlusionsOf(OccludedByProp), p.occlusionsOf(OccludedByVehicle)
	if need := 2*byPerson + byProp + byVehicle + p.Standers + 3*p.Groups; need > p.People {
		errs = append(errs, fmt.Errorf("occlusions %d, standers %d and groups %d take up to %d people: want at most people (%d)",
			p.Occlusions, p.Standers, p.Groups, need, p.People))
	}
	if byProp > p.Props {
		errs = append(errs, fmt.Errorf("occlusions %d take %d pillars: want props (%d) >= that", p.Occlusions, byProp, p.Props))
	}
	if byVehicle > p.Vehicles-p.Parked {
		errs = append(errs, fmt.Errorf("occlusions %d take %d passing vans: want vehicles - parked (%d) >= that", p.Occlusions, byVehicle, p.Vehicles-p.Parked))
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
	if !(p.Noise >= 0 && p.Noise <= 64) || !(p.Light >= 0 && p.Light <= 0.5) {
		errs = append(errs, fmt.Errorf("noise %v, light %v: want 0..64 gray levels and 0..0.5", p.Noise, p.Light))
	}
	// The longest walk (edge to edge at the lowest speed, slowed on the way, a stop) must fit.
	if need := time.Duration((1.3/p.MinSpeed + maxStand.Seconds() + 2) * float64(time.Second)); p.Duration < need {
		errs = append(errs, fmt.Errorf("duration %v: want at least %v for a walk across at %v widths a second", p.Duration, need.Round(time.Second), p.MinSpeed))
	}
	return errors.Join(errs...)
}

// CrowdScene is a crowded scenario with its counting line and zone, and what it was made
// to have.
type CrowdScene struct {
	Params   CrowdParams // with the defaults filled in
	Scenario Scenario
	Line     Line // CrowdLine
	Zone     Zone // CrowdZone
	// Occlusions are the planned occlusions: Hidden passes behind Front (an object, or a
	// pillar of the scenario's Props) and is mostly or wholly covered around T (Scene.Truth's
	// Visible says how much). Other objects hide one another as they pass, unplanned.
	Occlusions []Occlusion
	// Standers are the ids of the objects that stop for 2 s or more (the person occluders
	// included; the parked vans not).
	Standers []int
	// Groups are the ids of the people of each group walking side by side.
	Groups [][]int
	// Parked are the ids of the vans that park a while.
	Parked []int
}

// The kinds of Occlusion.
const (
	OccludedByPerson  = "person"  // Front is a person standing still
	OccludedByProp    = "prop"    // Prop is the index of a pillar in Scenario.Props; Front is 0
	OccludedByVehicle = "vehicle" // Front is a van driving past the other way
)

// Occlusion is a planned passing of one object behind another object or a prop.
type Occlusion struct {
	Kind          string // OccludedByPerson, OccludedByProp or OccludedByVehicle
	Hidden, Front int    // object ids; Front 0 for a prop
	Prop          int    // the prop's index in Scenario.Props, for OccludedByProp; -1 for the others
	T             time.Duration
}

// CrowdLine is Crowd's counting line: vertical at 0.45 of the width, drawn top to bottom
// (walking left to right is In), from the far side of the road to near the bottom.
func CrowdLine() Line { return Line{Point{0.45, 0.22}, Point{0.45, 0.96}} }

// CrowdZone is Crowd's zone: a rectangle on the grass, lower left.
func CrowdZone() Zone { return Zone{{0.08, 0.62}, {0.36, 0.62}, {0.36, 0.90}, {0.08, 0.90}} }

// VTestPerspective is how people's sizes follow their depth on vtest.avi's plaza, measured
// on the video itself: yolov8n's person boxes on every fifth frame (835 confident ones,
// wholly inside the frame), their heights against their bottom rows y, fitted by least
// squares with outliers beyond two deviations left out, give a person's height as 0.2351 y
// + 0.0295 frame heights (135 px x (y + 0.125)), a deviation of 4.7 px: 44 px at the far
// side of the road (y 0.2), 85 px at mid-picture, 152 px at the bottom edge. Sizes grow
// linearly down the picture from a horizon 0.1255 of a frame height above it.
func VTestPerspective() Perspective { return Perspective{Horizon: -0.1255, Ref: 0.5} }

// Layout of the scene, in normalized coordinates (rows are anchors' y).
const (
	// Walkers keep to rows between laneTop and laneBottom; far walks keep to the top road
	// and footpaths, farTop to farBottom.
	laneTop, laneBottom = 0.30, 0.92
	farTop, farBottom   = 0.20, 0.28
	// A stop is at least stopClear from the line and the zone's sides; a pause (a walker
	// who halts a moment), pauseClear.
	stopClear, pauseClear = 0.07, 0.04
	// A path keeps at least endClear from the line's ends and the zone's corners.
	endClear = 0.03
	// Vans drive along the road, which slopes down to the right: their anchor (the bottom
	// of the wheels) is at roadLeft + roadSlope x, give or take roadSpread.
	roadLeft, roadSlope, roadSpread = 0.415, 0.08, 0.02
	// A van parks on the paving at rows parkTop to parkBottom, right of the line.
	parkTop, parkBottom = 0.50, 0.56
	// The person occlusions: the occluder stands with its anchor between occluderTop and
	// occluderBottom, the hidden walker hiddenRise above it, walking at hiddenSpeed while
	// within hiddenSlow of it; occluderStand either side of the time.
	occluderTop, occluderBottom = 0.66, 0.86
	hiddenRise                  = 0.02
	hiddenSpeed                 = 0.04
	hiddenSlow                  = 0.1
	occluderStand               = 2500 * time.Millisecond
)

// maxStand is the longest stop of a stander.
const maxStand = 6 * time.Second

// Crowd makes a crowded scene on vtest.avi's plaza (768x576), the same for the same media
// and parameters, drawn by perspective (VTestPerspective: each person at the size its
// sprite's person had in vtest.avi at the same depth, within MinScale..MaxScale), with
// every sprite of m, mirrored to face the way it walks:
//
//   - walkers entering and leaving at every edge (left, right, bottom, and the far side
//     along the top road), some level, some slanting, some up or down the picture,
//     crossing CrowdLine at shallow angles; each changes speed on the way, some pause a
//     moment, p.Standers stop for 2 to 6 s;
//   - p.Groups groups of two or three walking side by side;
//   - p.Occlusions planned occlusions, each hidden for about 0.5 to 2 s: behind a person
//     standing still, behind a pillar, behind a van passing the other way;
//   - p.Props pillars and signs (Scenario.Props) standing on the plaza;
//   - p.Vehicles vans (class car, m.Vehicles[0]): p.Parked drive in and park 10 to 20 s
//     on the paving, the others drive along the road;
//   - the light drifting and stepping (Scenario.Light), and per-pixel noise.
//
// The truth is the scenario's: Crossings(CrowdLine()), Visits(CrowdZone()), Scene.Truth.
func Crowd(m *Media, p CrowdParams) (CrowdScene, error) {
	p = p.withDefaults()
	if err := p.validate(); err != nil {
		return CrowdScene{}, fmt.Errorf("crowd: %w", err)
	}
	if len(m.People) == 0 || (p.Vehicles > 0 && len(m.Vehicles) == 0) {
		return CrowdScene{}, fmt.Errorf("crowd: the media have %d people and %d vehicles", len(m.People), len(m.Vehicles))
	}
	persp := VTestPerspective()
	g := &crowdGen{p: p, m: m, r: rand.New(rand.NewPCG(p.Seed, 0x63726f7764)), end: p.Duration - time.Second, persp: persp}
	cs := CrowdScene{Params: p, Line: CrowdLine(), Zone: CrowdZone()}
	s := Scenario{W: vtestW, H: vtestH, FPS: p.FPS, Duration: p.Duration, Background: m.Background, Noise: p.Noise, Seed: p.Seed,
		Perspective: &persp}
	redo := map[int]redraw{} // how to draw each free walker, group member and planned hidden walker again
	id := 0
	add := func(o Object) int {
		id++
		o.ID = id
		s.Objects = append(s.Objects, o)
		return id
	}
	people := p.People

	// The planned occlusions, spread over the video.
	for k := range p.Occlusions {
		tc := time.Duration(float64(g.end) * (0.1 + 0.8*(float64(k)+g.uniform(0.3, 0.7))/float64(p.Occlusions)))
		oc := Occlusion{Kind: occlusionKinds[k%len(occlusionKinds)], T: tc, Prop: -1}
		draw := func() ([]Object, *Prop) { return g.occlusion(oc.Kind, tc) }
		objs, prop := draw()
		oc.Hidden = add(objs[0])
		if len(objs) > 1 {
			oc.Front = add(objs[1])
		}
		if prop != nil {
			oc.Prop = len(s.Props)
			s.Props = append(s.Props, *prop)
		}
		ids := []int{oc.Hidden}
		if oc.Front != 0 {
			ids = append(ids, oc.Front)
		}
		for _, i := range ids {
			redo[i] = redraw{ids, oc.Prop, draw}
		}
		if oc.Kind == OccludedByPerson {
			cs.Standers = append(cs.Standers, oc.Front)
		}
		people -= map[string]int{OccludedByPerson: 2, OccludedByProp: 1, OccludedByVehicle: 1}[oc.Kind]
		cs.Occlusions = append(cs.Occlusions, oc)
	}
	passing := p.Vehicles - p.Parked - p.occlusionsOf(OccludedByVehicle) // vans free to drive past
	for range p.Groups {
		var ids []int
		for _, o := range g.group(min(people, 2+g.r.IntN(2))) {
			ids = append(ids, add(o))
			people--
		}
		for _, i := range ids {
			redo[i] = redraw{ids, -1, func() ([]Object, *Prop) { return g.group(len(ids)), nil }}
		}
		cs.Groups = append(cs.Groups, ids)
	}
	for k := range people {
		stands, back := k < p.Standers, k%2 == 1
		i := add(g.walker(stands, back))
		redo[i] = redraw{[]int{i}, -1, func() ([]Object, *Prop) { return []Object{g.walker(stands, back)}, nil }}
		if stands {
			cs.Standers = append(cs.Standers, i)
		}
	}
	for range p.Parked {
		cs.Parked = append(cs.Parked, add(g.parkedVan()))
	}
	for k := range passing {
		// Spread over the video, as the occlusions.
		t0 := time.Duration(float64(g.end) * (float64(k) + g.uniform(0.1, 0.7)) / float64(passing))
		add(g.van(t0))
	}
	for len(s.Props) < p.Props {
		s.Props = append(s.Props, g.sign())
	}
	s.Light = g.light()
	if err := s.Validate(); err != nil {
		return CrowdScene{}, fmt.Errorf("crowd: %w", err)
	}
	g.untangle(&s, redo)
	cs.Scenario = s
	return cs, nil
}

// maxHidden is the longest a person may be wholly hidden while inside the frame: Crowd
// re-times free walkers and groups hidden longer (behind a parked van, a pillar or one
// another), so that a good tracker can keep them.
const maxHidden = 2 * time.Second

// redraw draws the objects ids (a free walker, a group, a planned occlusion's hidden
// walker and what hides it) again, and the prop of index prop when it is not -1.
type redraw struct {
	ids  []int
	prop int
	draw func() ([]Object, *Prop)
}

// occlusion draws a planned occlusion of kind at tc: the hidden walker, then the object
// that hides it or the pillar.
func (g *crowdGen) occlusion(kind string, tc time.Duration) ([]Object, *Prop) {
	switch kind {
	case OccludedByPerson:
		front, back := g.personOcclusion(tc)
		return []Object{back, front}, nil
	case OccludedByProp:
		back, prop := g.propOcclusion(tc)
		return []Object{back}, &prop
	default:
		van, back := g.vehicleOcclusion(tc)
		return []Object{back, van}, nil
	}
}

// untangle draws again the free walkers, groups and occlusions (redo, by object id) that are wholly
// hidden for longer than maxHidden while inside the frame, until none is or ten rounds
// have passed.
func (g *crowdGen) untangle(s *Scenario, redo map[int]redraw) {
	for range 10 {
		sc, err := NewScene(*s)
		if err != nil {
			return
		}
		done := map[int]bool{}
		for _, id := range longHidden(sc, maxHidden) {
			r, ok := redo[id]
			if !ok || done[id] {
				continue
			}
			objs, prop := r.draw()
			for k, o := range objs {
				i := r.ids[k]
				o.ID = i
				s.Objects[i-1] = o
				done[i] = true
			}
			if prop != nil {
				s.Props[r.prop] = *prop
			}
		}
		if len(done) == 0 {
			return
		}
	}
}

// longHidden returns the ids of the objects of sc wholly hidden (Visible 0, the box clear
// of the frame's edges) for longer than d, in order of id, looking every tenth of d.
func longHidden(sc *Scene, d time.Duration) []int {
	s := sc.Scenario()
	step := d / 10
	since := map[int]time.Duration{}
	long := map[int]bool{}
	for t := time.Duration(0); t < s.Duration; t += step {
		for _, o := range sc.At(t) {
			b := o.Box
			if o.Visible > 0 || b.X <= 0 || b.Y <= 0 || b.X+b.W >= float64(s.W) || b.Y+b.H >= float64(s.H) {
				delete(since, o.ID)
				continue
			}
			if from, ok := since[o.ID]; !ok {
				since[o.ID] = t
			} else if t-from >= d {
				long[o.ID] = true
			}
		}
	}
	ids := slices.Sorted(maps.Keys(long))
	return ids
}

// crowdGen draws a crowd's walks from its random source.
type crowdGen struct {
	p     CrowdParams
	m     *Media
	r     *rand.Rand
	end   time.Duration // every path ends by then
	persp Perspective
}

func (g *crowdGen) uniform(a, b float64) float64 { return a + (b-a)*g.r.Float64() }

func secs(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// person returns a random person sprite and its Scale: the size its person had in
// vtest.avi at the same depth, times a factor of MinScale..MaxScale.
func (g *crowdGen) person() (*Sprite, float64) {
	sp := g.m.People[g.r.IntN(len(g.m.People))]
	return sp, g.uniform(g.p.MinScale, g.p.MaxScale) * g.native(sp)
}

// native is the Scale that draws sp at its size in the picture it was cut from, at the
// same depth (1 when its source is unknown).
func (g *crowdGen) native(sp *Sprite) float64 {
	if sp.Source.Empty() {
		return 1
	}
	return 1 / g.persp.Factor(float64(sp.Source.Max.Y)/vtestH)
}

// size is the drawn width and height, normalized, of sp at scale with its anchor at row y.
func (g *crowdGen) size(sp *Sprite, scale, y float64) (w, h float64) {
	f := scale * g.persp.Factor(y)
	return float64(sp.Image.Rect.Dx()) * f / vtestW, float64(sp.Image.Rect.Dy()) * f / vtestH
}

// offX is the x beyond the left edge (side < 0) or the right one where sp at scale at
// row y is wholly off the frame, with a margin.
func (g *crowdGen) offX(sp *Sprite, scale, y float64, side int) float64 {
	w, _ := g.size(sp, scale, y)
	if side < 0 {
		return -w/2 - 0.03
	}
	return 1 + w/2 + 0.03
}

// offBottom is the row below the bottom edge where sp at scale is wholly off the frame.
func (g *crowdGen) offBottom(sp *Sprite, scale float64) float64 {
	y := 1.0
	for {
		if _, h := g.size(sp, scale, y); y-h >= 1.01 {
			return y
		}
		y += 0.01
	}
}

// facing returns whether to mirror sp for a walk of direction dx (+ to the right): to
// face its way when it is seen in profile, at random when from the front or the back.
func (g *crowdGen) mirror(sp *Sprite, dx float64) bool {
	if sp.Facing == 0 || dx == 0 {
		return g.r.IntN(2) == 1
	}
	return (dx > 0) != (sp.Facing > 0)
}

// clearSpot says whether a walker may stand at p (margin from the line and the zone's
// sides and edges).
func clearSpot(p Point, margin float64) bool {
	l, z := CrowdLine(), CrowdZone()
	if math.Abs(p.X-l.P1.X) < margin && p.Y > l.P1.Y-margin && p.Y < l.P2.Y+margin {
		return false
	}
	inRows := p.Y > z[0].Y-margin && p.Y < z[2].Y+margin
	inCols := p.X > z[0].X-margin && p.X < z[1].X+margin
	nearX := math.Abs(p.X-z[0].X) < margin || math.Abs(p.X-z[1].X) < margin
	nearY := math.Abs(p.Y-z[0].Y) < margin || math.Abs(p.Y-z[2].Y) < margin
	return !(inRows && nearX) && !(inCols && nearY)
}

// clearPath says whether a route keeps endClear from the line's ends and the zone's
// corners, so that whether it crosses or enters is never a matter of a pixel.
func clearPath(route []Point) bool {
	l := CrowdLine()
	marks := append([]Point{l.P1, l.P2}, CrowdZone()...)
	for i := 1; i < len(route); i++ {
		for _, c := range marks {
			if segDist(route[i-1], route[i], c) < endClear {
				return false
			}
		}
	}
	return true
}

// segDist is the distance from c to the segment ab.
func segDist(a, b, c Point) float64 {
	dx, dy := b.X-a.X, b.Y-a.Y
	u := 0.0
	if d := dx*dx + dy*dy; d > 0 {
		u = max(0, min(1, ((c.X-a.X)*dx+(c.Y-a.Y)*dy)/d))
	}
	return math.Hypot(a.X+u*dx-c.X, a.Y+u*dy-c.Y)
}

// lane returns a row for a walker, between laneTop and laneBottom.
func (g *crowdGen) lane() float64 { return g.uniform(laneTop, laneBottom) }

// route draws a walker's way across the plaza for sp at scale: from one edge to another
// (left, right, bottom or the far side), its points clear of the line's ends and the
// zone's corners, left to right or up the picture (the other way when back). Half the
// walks are across, a third up or down the picture, most of those across the line at a
// shallow angle.
func (g *crowdGen) route(sp *Sprite, scale float64, back bool) []Point {
	for try := 0; ; try++ {
		var r []Point
		switch k := g.r.IntN(12); {
		case k < 6: // across, level or slanting, maybe bending once
			y0, y1 := g.lane(), g.lane()
			if g.r.IntN(2) == 0 {
				y1 = max(laneTop, min(laneBottom, y0+g.uniform(-0.1, 0.1)))
			}
			a, b := Point{g.offX(sp, scale, y0, -1), y0}, Point{g.offX(sp, scale, y1, 1), y1}
			r = []Point{a, b}
			if g.r.IntN(3) == 0 {
				x := g.uniform(0.2, 0.8)
				r = []Point{a, {x, max(laneTop, min(laneBottom, y0+(x-a.X)*(y1-y0)+g.uniform(-0.08, 0.08)))}, b}
			}
		case k < 8: // along the far side, the top road and footpaths
			y0, y1 := g.uniform(farTop, farBottom), g.uniform(farTop, farBottom)
			r = []Point{{g.offX(sp, scale, y0, -1), y0}, {g.offX(sp, scale, y1, 1), y1}}
		default: // up the picture from the bottom edge to the far side, off at a side
			l := CrowdLine().P1.X
			var xb, xt float64
			if g.r.IntN(4) > 0 { // across the line at a shallow angle, in its upper part
				side := float64(1 - 2*g.r.IntN(2))
				d2 := g.uniform(0.04, 0.12)
				xb, xt = l-side*d2*g.uniform(0.7, 2.5), l+side*d2
			} else {
				xb = g.uniform(0.15, 0.8)
				xt = max(0.1, min(0.9, xb+g.uniform(0.08, 0.25)*float64(1-2*g.r.IntN(2))))
			}
			yt := g.uniform(0.3, 0.4)
			side := 1
			if xt < l {
				side = -1
			}
			ye := max(farTop, min(laneTop+0.05, yt-g.uniform(0, 0.1)))
			r = []Point{{xb, g.offBottom(sp, scale)}, {xt, yt}, {g.offX(sp, scale, ye, side), ye}}
		}
		if back {
			slices.Reverse(r)
		}
		if clearPath(r) || try > 50 {
			return r
		}
	}
}

// timed returns the waypoints of a walk along route from time 0 at cruising speed v,
// changing speed (by up to 45% either side) at two to four places on the way when vary,
// pausing there a moment now and then, and standing still for stand at fraction at of the
// way (when stand > 0), and the time (from 0) when it is at fraction mark of the way.
func (g *crowdGen) timed(route []Point, v float64, vary bool, stand time.Duration, at, mark float64) ([]Waypoint, time.Duration) {
	// Lengths along the route.
	cum := []float64{0}
	for i := 1; i < len(route); i++ {
		cum = append(cum, cum[i-1]+math.Hypot(route[i].X-route[i-1].X, route[i].Y-route[i-1].Y))
	}
	total := cum[len(cum)-1]
	pointAt := func(d float64) Point {
		for i := 1; i < len(cum); i++ {
			if d <= cum[i] || i == len(cum)-1 {
				u := (d - cum[i-1]) / max(1e-12, cum[i]-cum[i-1])
				return Point{route[i-1].X + u*(route[i].X-route[i-1].X), route[i-1].Y + u*(route[i].Y-route[i-1].Y)}
			}
		}
		return route[len(route)-1]
	}
	// Where the speed changes; a stop, the mark and the route's corners are breaks too.
	type brk struct {
		d     float64
		speed bool // a change of speed here
		pause time.Duration
	}
	var breaks []brk
	for i := 1; i+1 < len(route); i++ {
		breaks = append(breaks, brk{d: cum[i]})
	}
	if vary {
		for range 2 + g.r.IntN(3) {
			b := brk{d: total * g.uniform(0.15, 0.85), speed: true}
			if p := pointAt(b.d); g.r.IntN(5) == 0 && inside(p) && clearSpot(p, pauseClear) && (mark == 0 || math.Abs(b.d-total*mark) > 0.15) {
				b.pause = secs(g.uniform(0.5, 1.5))
			}
			breaks = append(breaks, b)
		}
	}
	breaks = append(breaks, brk{d: total * mark}) // before a stand at the same place: the arrival
	if stand > 0 {
		breaks = append(breaks, brk{d: total * at, pause: stand})
	}
	slices.SortStableFunc(breaks, func(a, b brk) int { return cmp.Compare(a.d, b.d) })

	wps := []Waypoint{{0, route[0].X, route[0].Y}}
	var markT time.Duration
	d, t, speed := 0.0, time.Duration(0), v
	for _, b := range append(breaks, brk{d: total}) {
		if b.d > d+1e-6 {
			t += secs((b.d - d) / speed)
			p := pointAt(b.d)
			wps = append(wps, Waypoint{t, p.X, p.Y})
			d = b.d
		}
		if b.d == total*mark && markT == 0 {
			markT = t
		}
		if b.pause > 0 {
			t += b.pause
			p := pointAt(d)
			wps = append(wps, Waypoint{t, p.X, p.Y})
		}
		if b.speed {
			speed = max(0.6*g.p.MinSpeed, min(1.3*g.p.MaxSpeed, v*g.uniform(0.55, 1.45)))
		}
	}
	return wps, markT
}

// schedule shifts a walk's waypoints (times from 0) so that its own time mark falls at
// tc, squeezing the stretches before and after where the walk would not fit in 0..end.
func (g *crowdGen) schedule(wps []Waypoint, mark, tc time.Duration) []Waypoint {
	last := wps[len(wps)-1].T
	before, after := 1.0, 1.0
	if mark > tc {
		before = float64(tc) / float64(mark)
	}
	if rest := last - mark; rest > 0 && tc+rest > g.end {
		after = float64(g.end-tc) / float64(rest)
	}
	out := make([]Waypoint, len(wps))
	for i, w := range wps {
		if w.T <= mark {
			w.T = tc - time.Duration(before*float64(mark-w.T))
		} else {
			w.T = tc + time.Duration(after*float64(w.T-mark))
		}
		out[i] = w
	}
	return out
}

// startAnywhere shifts a walk (times from 0) to start at a random time, ending by g.end;
// a walk longer than that is sped up.
func (g *crowdGen) startAnywhere(wps []Waypoint) []Waypoint {
	last := wps[len(wps)-1].T
	if last > g.end {
		return g.schedule(wps, 0, 0) // squeezed to fit
	}
	start := secs(g.uniform(0, (g.end - last).Seconds()))
	for i := range wps {
		wps[i].T += start
	}
	return wps
}

// speed draws a walker's cruising speed.
func (g *crowdGen) speed() float64 { return g.uniform(g.p.MinSpeed, g.p.MaxSpeed) }

// walker is a walk from edge to edge (route, back or not), changing speed on the way; a
// stander stops for 2 to maxStand at a random place clear of the line and the zone's edges.
func (g *crowdGen) walker(stands, back bool) Object {
	sp, scale := g.person()
	r := g.route(sp, scale, back)
	for try := 0; try < 50 && !g.sharp(sp, scale, r); try++ { // another person on the same way
		sp, scale = g.person()
		r = g.refit(r, sp, scale)
	}
	var stand time.Duration
	at := 0.5
	if stands {
		stand = secs(g.uniform(2, maxStand.Seconds()))
		for range 100 {
			if at = g.uniform(0.2, 0.8); clearSpot(pointAlong(r, at), stopClear) && inside(pointAlong(r, at)) {
				break
			}
		}
	}
	wps, _ := g.timed(r, g.speed(), true, stand, at, 0)
	return Object{Sprite: sp, Scale: scale, Mirror: g.mirror(sp, r[len(r)-1].X-r[0].X), Path: g.startAnywhere(wps)}
}

// refit moves the ends of route, off the frame, to where sp at scale is wholly off it.
func (g *crowdGen) refit(route []Point, sp *Sprite, scale float64) []Point {
	r := slices.Clone(route)
	for _, j := range []int{0, len(r) - 1} {
		switch p := &r[j]; {
		case p.X < 0:
			p.X = g.offX(sp, scale, p.Y, -1)
		case p.X > 1:
			p.X = g.offX(sp, scale, p.Y, 1)
		case p.Y > 1:
			p.Y = g.offBottom(sp, scale)
		}
	}
	return r
}

// maxUpscale is the most a person's sprite is enlarged (a person cut out far away and
// drawn near the camera is blurred): Crowd gives such a walk to another sprite.
const maxUpscale = 1.8

// sharp says whether sp at scale stays within maxUpscale of its pixels along route (on
// the frame).
func (g *crowdGen) sharp(sp *Sprite, scale float64, route []Point) bool {
	low := 0.0
	for _, p := range route {
		low = max(low, min(1, p.Y))
	}
	return scale*g.persp.Factor(low) <= maxUpscale
}

// inside says whether p is on the picture, away from its edges.
func inside(p Point) bool { return p.X > 0.08 && p.X < 0.92 && p.Y > 0.15 && p.Y < 0.92 }

// pointAlong is the point at fraction u of the way along route.
func pointAlong(route []Point, u float64) Point {
	total := 0.0
	for i := 1; i < len(route); i++ {
		total += math.Hypot(route[i].X-route[i-1].X, route[i].Y-route[i-1].Y)
	}
	d := u * total
	for i := 1; i < len(route); i++ {
		l := math.Hypot(route[i].X-route[i-1].X, route[i].Y-route[i-1].Y)
		if d <= l || i == len(route)-1 {
			v := d / max(l, 1e-12)
			return Point{route[i-1].X + v*(route[i].X-route[i-1].X), route[i-1].Y + v*(route[i].Y-route[i-1].Y)}
		}
		d -= l
	}
	return route[len(route)-1]
}

// group is n people walking side by side: the same walk (speed changes included), each
// beside the other: across the picture a little nearer or farther (a row apart), up or
// down it a little to the side.
func (g *crowdGen) group(n int) []Object {
	sps := make([]*Sprite, n)
	scales := make([]float64, n)
	for i := range n {
		sps[i], scales[i] = g.person()
	}
	big := slices.MaxFunc(sps, func(a, b *Sprite) int { return cmp.Compare(a.Image.Rect.Dx(), b.Image.Rect.Dx()) })
	bigScale := slices.Max(scales)
	var r []Point
	var offs []Point
	for try := range 100 {
		r = g.route(big, bigScale*1.1, g.r.IntN(2) == 0)
		if try < 20 && slices.ContainsFunc(sps, func(sp *Sprite) bool { return !g.sharp(sp, bigScale, r) }) {
			continue
		}
		across := math.Abs(r[len(r)-1].X-r[0].X) > math.Abs(r[len(r)-1].Y-r[0].Y)
		offs = offs[:0]
		ok := true
		for i := range n {
			var o Point
			// Side by side, one a little ahead: across the picture the nearer one would
			// hide most of the farther one if they were level.
			ahead := float64(1-2*(i%2)) * g.uniform(0.025, 0.04) * min(1, float64(i))
			if across {
				o = Point{ahead, float64(i) * g.uniform(0.035, 0.05)}
			} else {
				o = Point{float64(i) * g.uniform(0.05, 0.065), ahead / 2}
			}
			offs = append(offs, o)
			moved := make([]Point, len(r))
			for j, p := range r {
				moved[j] = Point{p.X + o.X, p.Y + o.Y}
			}
			ok = ok && clearPath(moved)
		}
		if ok {
			break
		}
	}
	wps, _ := g.timed(r, g.speed(), true, 0, 0, 0)
	wps = g.startAnywhere(wps)
	out := make([]Object, n)
	for i := range n {
		path := make([]Waypoint, len(wps))
		for j, w := range wps {
			path[j] = Waypoint{w.T, w.X + offs[i].X, w.Y + offs[i].Y}
		}
		// Each member wholly off the frame at both ends, beyond the edge of the route's.
		for _, j := range []int{0, len(path) - 1} {
			w, e := &path[j], wps[j]
			switch {
			case e.X < 0:
				w.X = min(w.X, g.offX(sps[i], scales[i], w.Y, -1))
			case e.X > 1:
				w.X = max(w.X, g.offX(sps[i], scales[i], w.Y, 1))
			default:
				w.Y = max(w.Y, g.offBottom(sps[i], scales[i]))
			}
		}
		out[i] = Object{Sprite: sps[i], Scale: scales[i], Mirror: g.mirror(sps[i], r[len(r)-1].X-r[0].X), Path: path}
	}
	return out
}

// personOcclusion returns the occluder (front) and the hidden walker (back) of an
// occlusion at tc: the occluder, a wide person drawn large, walks in from one side,
// stands at its place occluderStand either side of tc, and walks on out the other side;
// the hidden walker, a small person, comes the other way hiddenRise above it, slows to
// hiddenSpeed within hiddenSlow of it, passing right behind it at tc, and walks on.
func (g *crowdGen) personOcclusion(tc time.Duration) (front, back Object) {
	wide := slices.Clone(g.m.People)
	slices.SortFunc(wide, func(a, b *Sprite) int {
		return cmp.Compare(float64(b.Image.Rect.Dx())/float64(b.Image.Rect.Dy()), float64(a.Image.Rect.Dx())/float64(a.Image.Rect.Dy()))
	})
	fs := wide[g.r.IntN(max(1, len(wide)/3))]
	fscale := g.p.MaxScale * g.native(fs)
	narrow := wide[len(wide)-max(1, len(wide)/3):]
	bs := narrow[g.r.IntN(len(narrow))]
	bscale := g.p.MinScale * g.native(bs)
	var x0, y0 float64
	for range 100 {
		x0, y0 = g.uniform(0.12, 0.88), g.uniform(occluderTop, occluderBottom)
		if clearSpot(Point{x0, y0}, stopClear) && clearSpot(Point{x0 + hiddenSlow, y0 - hiddenRise}, pauseClear) &&
			clearSpot(Point{x0 - hiddenSlow, y0 - hiddenRise}, pauseClear) {
			break
		}
	}
	side := 1 - 2*g.r.IntN(2) // the occluder comes from this side's opposite
	fr := []Point{{g.offX(fs, fscale, y0, -side), y0}, {x0, y0}, {g.offX(fs, fscale, y0, side), y0}}
	f := (x0 - fr[0].X) / (fr[2].X - fr[0].X)
	fw, fmark := g.timed(fr, g.speed(), false, 2*occluderStand, f, f)
	front = Object{Sprite: fs, Scale: fscale, Mirror: g.mirror(fs, float64(side)), Path: g.schedule(fw, fmark+occluderStand, tc)}

	// Slow enough behind the occluder to be hidden about a second and a bit (wholly
	// behind it over the difference of their widths), on a stretch a little wider than it.
	yb := y0 - hiddenRise
	wf, _ := g.size(fs, fscale, y0)
	wb, _ := g.size(bs, bscale, yb)
	vs := max(hiddenSpeed, (wf-wb)/1.2)
	half := max(hiddenSlow, wf/2+wb)
	a, b := Point{x0 + float64(side)*half, yb}, Point{x0 - float64(side)*half, yb}
	in, out := Point{g.offX(bs, bscale, yb, side), yb}, Point{g.offX(bs, bscale, yb, -side), yb}
	v := g.speed()
	slow := secs(2 * half / vs)
	tIn := secs(math.Abs(a.X-in.X) / v)
	tOut := secs(math.Abs(out.X-b.X) / v)
	bw := []Waypoint{{0, in.X, in.Y}, {tIn, a.X, a.Y}, {tIn + slow, b.X, b.Y}, {tIn + slow + tOut, out.X, out.Y}}
	back = Object{Sprite: bs, Scale: bscale, Mirror: g.mirror(bs, float64(-side)), Path: g.schedule(bw, tIn+slow/2, tc)}
	return front, back
}

// propOcclusion returns a walker passing behind a pillar at tc, and the pillar (an
// advertising column): wide enough to hide it wholly for a while, 1.3 to 1.7 a person's
// height tall, standing just in front of the walker's way, clear of the line and the zone.
func (g *crowdGen) propOcclusion(tc time.Duration) (Object, Prop) {
	sp, scale := g.person()
	var y, x0 float64
	var r []Point
	for range 100 {
		y = g.uniform(laneTop+0.05, 0.78)
		x0 = g.uniform(0.12, 0.88)
		y1 := max(laneTop, min(laneBottom, y+g.uniform(-0.06, 0.06)))
		r = []Point{{g.offX(sp, scale, y, -1), y}, {x0, y}, {g.offX(sp, scale, y1, 1), y1}}
		if g.r.IntN(2) == 0 {
			slices.Reverse(r)
		}
		if clearSpot(Point{x0, y + 0.015}, 0.08) && clearPath(r) {
			break
		}
	}
	f := math.Hypot(r[1].X-r[0].X, r[1].Y-r[0].Y) / (math.Hypot(r[1].X-r[0].X, r[1].Y-r[0].Y) + math.Hypot(r[2].X-r[1].X, r[2].Y-r[1].Y))
	// Not the fastest walker, and a pillar wide enough to hide it wholly for about half a
	// second to a second at its cruising speed (the pillar's width less its own, over its
	// speed), but no wider than a person is tall.
	v := g.uniform(g.p.MinSpeed, (g.p.MinSpeed+g.p.MaxSpeed)/2)
	wps, mark := g.timed(r, v, true, 0, 0, f)
	o := Object{Sprite: sp, Scale: scale, Mirror: g.mirror(sp, r[2].X-r[0].X), Path: g.schedule(wps, mark, tc)}
	at := Point{x0, y + g.uniform(0.01, 0.02)}
	ph := (0.2351*at.Y + 0.0295) * vtestH // a person's height there, pixels
	ww, _ := g.size(sp, scale, y)
	pw := min(ph, (ww+v*g.uniform(0.6, 1.2))*vtestW)
	pillar := pillarSprite(g.r, int(pw), int(ph*g.uniform(1.3, 1.7)))
	return o, Prop{Sprite: pillar, At: at, Scale: 1 / g.persp.Factor(at.Y)}
}

// sign returns a signpost standing somewhere on the plaza, clear of the line and the zone:
// its panel, at the height of a person's chest to above the head, hides the upper body of
// whoever passes behind it.
func (g *crowdGen) sign() Prop {
	var at Point
	for range 100 {
		at = Point{g.uniform(0.08, 0.92), g.uniform(laneTop, 0.8)}
		if clearSpot(at, 0.08) {
			break
		}
	}
	ph := (0.2351*at.Y + 0.0295) * vtestH
	sp := signSprite(g.r, int(ph*g.uniform(0.6, 1.0)), int(ph*g.uniform(1.1, 1.4)))
	return Prop{Sprite: sp, At: at, Scale: 1 / g.persp.Factor(at.Y)}
}

// road is the row of the road's middle at x.
func road(x float64) float64 { return roadLeft + roadSlope*x }

// vanScale draws a van's Scale: its size at its depth by perspective, as parked in
// vtest.avi, give or take 5%.
func (g *crowdGen) vanScale() float64 { return g.uniform(0.95, 1.05) * g.native(g.m.Vehicles[0]) }

// van drives along the road from t0, from one side to the other.
func (g *crowdGen) van(t0 time.Duration) Object {
	sp, scale := g.m.Vehicles[0], g.vanScale()
	v := g.uniform(g.p.MinVehicleSpeed, g.p.MaxVehicleSpeed)
	dy := g.uniform(-roadSpread, roadSpread)
	side := 1 - 2*g.r.IntN(2)
	a, b := g.roadEnd(sp, scale, dy, -side), g.roadEnd(sp, scale, dy, side)
	d := secs(math.Hypot(b.X-a.X, b.Y-a.Y) / v)
	t0 = min(t0, g.end-d)
	return Object{Sprite: sp, Scale: scale, Path: []Waypoint{{t0, a.X, a.Y}, {t0 + d, b.X, b.Y}}}
}

// roadEnd is where the road leaves the picture on side (dy off its middle), for a van
// wholly off it.
func (g *crowdGen) roadEnd(sp *Sprite, scale, dy float64, side int) Point {
	x := 0.0
	if side > 0 {
		x = 1
	}
	y := road(x) + dy
	return Point{g.offX(sp, scale, y, side), y}
}

// vehicleOcclusion returns a van driving along the road and a walker walking along the
// far side of it the other way, who meet at tc: the van hides the walker as it passes.
func (g *crowdGen) vehicleOcclusion(tc time.Duration) (van, walker Object) {
	// Not the fastest van nor walker: the walker is hidden for (the van's width less its
	// own) over the sum of their speeds.
	sp, scale := g.m.Vehicles[0], g.vanScale()
	v := g.uniform(g.p.MinVehicleSpeed, (g.p.MinVehicleSpeed+g.p.MaxVehicleSpeed)/2)
	dy := g.uniform(-roadSpread/2, roadSpread/2)
	side := 1 - 2*g.r.IntN(2)
	var x0 float64
	for range 100 {
		if x0 = g.uniform(0.2, 0.8); math.Abs(x0-CrowdLine().P1.X) > 0.08 {
			break
		}
	}
	a, b := g.roadEnd(sp, scale, dy, -side), g.roadEnd(sp, scale, dy, side)
	ta := secs(math.Abs(x0-a.X) / v * math.Hypot(1, roadSlope))
	d := secs(math.Hypot(b.X-a.X, b.Y-a.Y) / v)
	van = Object{Sprite: sp, Scale: scale, Path: g.schedule([]Waypoint{{0, a.X, a.Y}, {d, b.X, b.Y}}, ta, tc)}

	// The walker a little behind the van, short enough to be hidden under its roof.
	rise := g.uniform(0.015, 0.03)
	yv := road(x0) + dy
	_, vh := g.size(sp, scale, yv)
	ps, pscale := g.person()
	for try := 0; try < 50; try++ {
		if _, h := g.size(ps, pscale, yv-rise); h+rise < 0.9*vh {
			break
		}
		ps, pscale = g.person()
	}
	in, out := road(0)+dy-rise, road(1)+dy-rise
	r := []Point{{g.offX(ps, pscale, in, -1), in}, {g.offX(ps, pscale, out, 1), out}}
	if side > 0 { // the van goes right: the walker left
		slices.Reverse(r)
	}
	f := math.Abs(x0-r[0].X) / math.Abs(r[1].X-r[0].X)
	wps, mark := g.timed(r, g.uniform(g.p.MinSpeed, (g.p.MinSpeed+g.p.MaxSpeed)/2), false, 0, 0, f)
	walker = Object{Sprite: ps, Scale: pscale, Mirror: g.mirror(ps, r[1].X-r[0].X), Path: g.schedule(wps, mark, tc)}
	return van, walker
}

// parkedVan drives in along the road from one side, turns onto the paving right of the
// line, parks there 10 to 20 s, and drives on out at the side it came from or the other.
func (g *crowdGen) parkedVan() Object {
	sp, scale := g.m.Vehicles[0], g.vanScale()
	v := g.uniform(g.p.MinVehicleSpeed, g.p.MaxVehicleSpeed)
	park := Point{g.uniform(0.66, 0.84), g.uniform(parkTop, parkBottom)}
	in := g.roadEnd(sp, scale, g.uniform(-roadSpread, roadSpread), 1-2*g.r.IntN(2))
	out := g.roadEnd(sp, scale, g.uniform(-roadSpread, roadSpread), 1-2*g.r.IntN(2))
	near := func(e Point) Point { return Point{(e.X + park.X) / 2, road((e.X+park.X)/2) + 0.01} }
	route := []Point{in, near(in), park, near(out), out}
	var wps []Waypoint
	t := time.Duration(0)
	for i, p := range route {
		if i > 0 {
			q := route[i-1]
			sp := v
			if i == 2 || i == 3 { // slow onto and off the paving
				sp = v / 2
			}
			t += secs(math.Hypot(p.X-q.X, p.Y-q.Y) / sp)
		}
		wps = append(wps, Waypoint{t, p.X, p.Y})
		if i == 2 {
			t += secs(g.uniform(10, 20))
			wps = append(wps, Waypoint{t, p.X, p.Y})
		}
	}
	return Object{Sprite: sp, Scale: scale, Path: g.startAnywhere(wps)}
}

// light is the exposure over the video: from a start near 1, every 6 to 14 s a new gain
// and offset (within p.Light), reached by a drift of 2 to 6 s (a cloud) or a step of a
// tenth of a second (the camera's gain).
func (g *crowdGen) light() []Light {
	l := g.p.Light
	pick := func() (float64, float64) { return 1 + g.uniform(-l, l), g.uniform(-60*l, 60*l) }
	gain, off := pick()
	ls := []Light{{0, gain, off}}
	next := func() (float64, float64) { // a change of a fifth of the range at least
		for {
			if g2, o2 := pick(); math.Abs(g2-gain) >= 0.4*l {
				return g2, o2
			}
		}
	}
	t := time.Duration(0)
	for {
		t += secs(g.uniform(6, 14))
		ramp := secs(g.uniform(2, 6))
		if g.r.IntN(3) == 0 {
			ramp = 100 * time.Millisecond
		}
		if t+ramp > g.p.Duration {
			return ls
		}
		ls = append(ls, Light{t, gain, off})
		gain, off = next()
		t += ramp
		ls = append(ls, Light{t, gain, off})
	}
}
