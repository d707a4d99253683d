package groundtruth

import (
	"fmt"
	"time"
)

// Person returns the person sprite called name ("walker-640"), or nil.
func (m *Media) Person(name string) *Sprite {
	for _, p := range m.People {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// PlazaLine is the counting line of Plaza: vertical through the middle of the picture,
// drawn top to bottom, so walking from the left half to the right half is In.
func PlazaLine() Line { return Line{Point{0.5, 0.05}, Point{0.5, 0.95}} }

// PlazaZone is the zone of Plaza: a rectangle in the lower left of the picture, on the grass.
func PlazaZone() Zone { return Zone{{0.06, 0.60}, {0.36, 0.60}, {0.36, 0.92}, {0.06, 0.92}} }

// PlazaDuration is the length of Plaza's video; every path ends at least a second before.
const PlazaDuration = 12 * time.Second

// Plaza is a ready-made scenario on vtest.avi's empty plaza (768x576, fps frames a second,
// PlazaDuration long, noise of 3 gray levels) with four people:
//
//  1. walks left to right across PlazaLine (In), above PlazaZone;
//  2. walks in from the right, stands still for 2 s, then walks right to left across the
//     line (Out), passing in front of 1 (a partial occlusion);
//  3. walks in from the left edge into PlazaZone, lingers there, leaves it to the right and
//     walks off up the picture, its anchor coming to within 2% of the frame's width of the
//     line without crossing it;
//  4. small and far: crosses the line (In) and comes back (Out).
//
// The truth comes from the scenario's Crossings(PlazaLine()) and Visits(PlazaZone()): 4
// crossings (2 In, 2 Out) and one visit of about 6.6 s.
func Plaza(m *Media, fps int) (Scenario, error) {
	sec := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	type walk struct {
		id     int
		sprite string
		path   []float64 // (seconds, x, y) triples
	}
	walks := []walk{
		{1, "walker-220", []float64{0.5, 0.10, 0.45, 8.5, 0.90, 0.45}},
		{2, "walker-400", []float64{1, 0.92, 0.55, 4, 0.62, 0.55, 6, 0.62, 0.55, 11, 0.08, 0.55}},
		{3, "walker-640", []float64{0.5, -0.02, 0.80, 2.5, 0.20, 0.80, 6.5, 0.22, 0.82, 9, 0.48, 0.82, 11, 0.45, 0.62}},
		{4, "walker-140", []float64{2, 0.35, 0.30, 6, 0.65, 0.30, 10, 0.40, 0.28}},
	}
	s := Scenario{W: vtestW, H: vtestH, FPS: fps, Duration: PlazaDuration, Background: m.Background, Noise: 3, Seed: 14}
	for _, w := range walks {
		sp := m.Person(w.sprite)
		if sp == nil {
			return Scenario{}, fmt.Errorf("plaza: no sprite %q in the media", w.sprite)
		}
		o := Object{ID: w.id, Sprite: sp}
		for i := 0; i+2 < len(w.path); i += 3 {
			o.Path = append(o.Path, Waypoint{T: sec(w.path[i]), X: w.path[i+1], Y: w.path[i+2]})
		}
		s.Objects = append(s.Objects, o)
	}
	return s, s.Validate()
}
