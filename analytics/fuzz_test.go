package analytics

import (
	"testing"

	"gopkg.in/yaml.v3"
)

// FuzzConfig decodes analytics settings as a camera's YAML holds them, checks them, and when
// they pass, builds the camera's Filter, ZoneSet and LineSet and runs frames through them:
// nothing may panic, and settings that pass Check must be accepted by the constructors.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(`
objects: {track: [person], filters: [{class: person, min_score: 0.5, max_area: 0.4}]}
masks: [[[0, 0], [0.2, 0], [0.2, 0.1]]]
zones: [{id: door, polygon: [[0.1, 0.5], [0.5, 0.5], [0.5, 1], [0.1, 1]], loiter_seconds: 1}]
lines: [{id: gate, points: [[0.5, 0], [0.5, 1]]}]
`))
	f.Add([]byte(`zones: [{id: u, polygon: [[0, 0], [0.3, 0], [0.3, 0.6], [0.7, 0.6], [0.7, 0], [1, 0], [1, 1], [0, 1]], min_seconds: 0}]`))
	f.Add([]byte(`zones: [{id: x, polygon: [[0, 0], [1, 1], [1, 0], [0, 1]]}]`))
	f.Add([]byte(`lines: [{id: d, points: [[0.1, 0.1], [0.9, 0.9]], band: 0.5, anchor: center}]`))
	f.Add([]byte(`masks: [[[0, 0], [1, 0], [1, 0]]]`))
	f.Fuzz(func(t *testing.T, src []byte) {
		var c Config
		if yaml.Unmarshal(src, &c) != nil {
			return
		}
		if c.Check(labels) != nil {
			return
		}
		filter, err := NewFilter(c.Objects, c.Masks)
		if err != nil {
			t.Fatalf("NewFilter refused settings that pass Check: %v", err)
		}
		zs, err := NewZoneSet(c.Zones)
		if err != nil {
			t.Fatalf("NewZoneSet refused settings that pass Check: %v", err)
		}
		ls, err := NewLineSet(c.Lines)
		if err != nil {
			t.Fatalf("NewLineSet refused settings that pass Check: %v", err)
		}
		for i := range 20 {
			x := float64(i) / 19
			o := obj(1, "person", x, 1-x)
			filter.Test(o.Label, 0.5, o.Box, frameW, frameH)
			f := frame(i*250, o, obj(2, "car", 1-x, x))
			if _, err := zs.Update(f); err != nil {
				t.Fatal(err)
			}
			if _, err := ls.Update(f); err != nil {
				t.Fatal(err)
			}
		}
		zs.Occupancy()
		ls.Restore(ls.Counts())
	})
}
