package analytics

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

var labels = []string{"person", "bicycle", "car", "dog"}

func square(x0, y0, x1, y1 float64) Points {
	return Points{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}}
}

func ptr[T any](v T) *T { return &v }

func TestConfigYAML(t *testing.T) {
	// The form config's users write, decoded strictly as config decodes it.
	src := `
objects:
  track: [person, car]
  anchor: center
  class_groups: [[car, bicycle]]
  filters:
    - {class: person, min_score: 0.5, min_area: 0.001}
    - {class: car, max_area: 0.5}
masks:
  - [[0, 0], [0.2, 0], [0.2, 0.1]]
zones:
  - id: door
    polygon: [[0.1, 0.5], [0.5, 0.5], [0.5, 1], [0.1, 1]]
    classes: [person]
    min_seconds: 0
    loiter_seconds: 30
lines:
  - id: gate
    points: [[0.5, 0], [0.5, 1]]
    band: 0.03
`
	var c Config
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(labels); err != nil {
		t.Fatalf("Check: %v", err)
	}
	z := c.Zones[0]
	if z.ID != "door" || len(z.Polygon) != 4 || z.Polygon[2][1] != 1 || z.Debounce() != 0 || z.LoiterSeconds != 30 {
		t.Errorf("zone %+v", z)
	}
	if l := c.Lines[0]; l.ID != "gate" || l.Points[1][1] != 1 || l.Band != 0.03 {
		t.Errorf("line %+v", l)
	}
	if g := c.Objects.Groups(); len(g) != 1 || len(g[0]) != 2 || g[0][1] != "bicycle" {
		t.Errorf("class groups %v", g)
	}
	if g := (Objects{}).Groups(); len(g) != 1 || len(g[0]) != 4 {
		t.Errorf("default class groups %v, want car, truck, bus, motorcycle", g)
	}
	if o := c.Objects; o.Anchor != AnchorCenter || o.Filters[1].MaxArea != 0.5 || len(o.Track) != 2 {
		t.Errorf("objects %+v", o)
	}
	if len(c.Masks) != 1 || len(c.Masks[0]) != 3 {
		t.Errorf("masks %v", c.Masks)
	}
}

func TestZoneDefaults(t *testing.T) {
	if d := (Zone{}).Debounce(); d != time.Second {
		t.Errorf("default debounce %v, want 1s", d)
	}
	if d := (Zone{MinSeconds: ptr(2.5)}).Debounce(); d != 2500*time.Millisecond {
		t.Errorf("debounce %v, want 2.5s", d)
	}
	if d := (Zone{MinSeconds: ptr(0.0)}).Debounce(); d != 0 {
		t.Errorf("debounce %v, want 0", d)
	}
}

func TestEqualAndFingerprint(t *testing.T) {
	z := Zone{ID: "a", Polygon: square(0, 0, 1, 1), Classes: []string{"person", "car"}}
	for _, tc := range []struct {
		name string
		o    Zone
		want bool
	}{
		{"same", z, true},
		{"classes reordered", Zone{ID: "a", Polygon: square(0, 0, 1, 1), Classes: []string{"car", "person"}}, true},
		{"default debounce spelled out", Zone{ID: "a", Polygon: square(0, 0, 1, 1), Classes: []string{"car", "person"}, MinSeconds: ptr(1.0)}, true},
		{"default anchor spelled out", Zone{ID: "a", Polygon: square(0, 0, 1, 1), Classes: []string{"car", "person"}, Anchor: AnchorBottomCenter}, true},
		{"other id", Zone{ID: "b", Polygon: square(0, 0, 1, 1), Classes: []string{"person", "car"}}, false},
		{"moved corner", Zone{ID: "a", Polygon: square(0, 0, 1, 0.9), Classes: []string{"person", "car"}}, false},
		{"fewer classes", Zone{ID: "a", Polygon: square(0, 0, 1, 1), Classes: []string{"person"}}, false},
		{"debounce", Zone{ID: "a", Polygon: square(0, 0, 1, 1), Classes: []string{"person", "car"}, MinSeconds: ptr(2.0)}, false},
		{"loiter", Zone{ID: "a", Polygon: square(0, 0, 1, 1), Classes: []string{"person", "car"}, LoiterSeconds: 3}, false},
		{"anchor", Zone{ID: "a", Polygon: square(0, 0, 1, 1), Classes: []string{"person", "car"}, Anchor: AnchorCenter}, false},
	} {
		if got := z.Equal(tc.o); got != tc.want {
			t.Errorf("zone %s: Equal %v, want %v", tc.name, got, tc.want)
		}
	}

	l := Line{ID: "g", Points: Points{{0.5, 0}, {0.5, 1}}}
	for _, tc := range []struct {
		name string
		o    Line
		want bool
	}{
		{"same", Line{ID: "g", Points: Points{{0.5, 0}, {0.5, 1}}}, true},
		{"default band spelled out", Line{ID: "g", Points: Points{{0.5, 0}, {0.5, 1}}, Band: DefaultBand}, true},
		{"reversed", Line{ID: "g", Points: Points{{0.5, 1}, {0.5, 0}}}, false},
		{"band", Line{ID: "g", Points: Points{{0.5, 0}, {0.5, 1}}, Band: 0.05}, false},
		{"classes", Line{ID: "g", Points: Points{{0.5, 0}, {0.5, 1}}, Classes: []string{"car"}}, false},
	} {
		if got := l.Equal(tc.o); got != tc.want {
			t.Errorf("line %s: Equal %v, want %v", tc.name, got, tc.want)
		}
		if got := l.Fingerprint() == tc.o.Fingerprint(); got != tc.want {
			t.Errorf("line %s: same fingerprint %v, want %v", tc.name, got, tc.want)
		}
	}
	if fp := l.Fingerprint(); len(fp) != 16 {
		t.Errorf("fingerprint %q", fp)
	}
}

func TestCheckGood(t *testing.T) {
	c := Config{
		Objects: Objects{Track: []string{"person"}, Filters: []ClassFilter{{Class: "person", MinScore: 1, MinArea: 0.1, MaxArea: 0.1}}},
		Masks:   []Points{square(0, 0, 1, 0.1)},
		Zones: []Zone{
			{ID: "a", Polygon: square(0, 0, 1, 1), MinSeconds: ptr(0.0)},
			{ID: "B-2_x", Polygon: Points{{0, 0}, {1, 1}, {0, 1}}, Classes: []string{"dog"}, Anchor: AnchorCenter},
		},
		Lines: []Line{{ID: "a", Points: Points{{0, 0}, {1, 1}}, Band: 0.5}}, // ids are per list
	}
	if err := c.Check(labels); err != nil {
		t.Error(err)
	}
	// Without labels, the classes are not checked.
	c.Zones[1].Classes = []string{"unicorn"}
	if err := c.Check(nil); err != nil {
		t.Error(err)
	}
	if err := c.Check(labels); err == nil {
		t.Error("unknown class accepted with labels")
	}
}

func TestCheckBad(t *testing.T) {
	zone := func(z Zone) Config { return Config{Zones: []Zone{{ID: "ok", Polygon: square(0, 0, 1, 1)}, z}} }
	line := func(l Line) Config { return Config{Lines: []Line{l}} }
	for _, tc := range []struct {
		name string
		c    Config
		want []string // each problem's Error, in order
	}{
		{"bow tie zone", zone(Zone{ID: "door", Polygon: Points{{0, 0}, {1, 1}, {1, 0}, {0, 1}}}),
			[]string{"zones[1] (door): polygon self-intersects at edges 0 and 2"}},
		{"two-point zone", zone(Zone{ID: "door", Polygon: Points{{0, 0}, {1, 1}}}),
			[]string{"zones[1] (door): polygon has 2 points, want at least 3"}},
		{"no polygon", zone(Zone{ID: "door"}),
			[]string{"zones[1] (door): polygon has 0 points, want at least 3"}},
		{"outside the frame", zone(Zone{ID: "door", Polygon: Points{{0, 0}, {1.2, 0}, {0, 1}}}),
			[]string{"zones[1] (door): polygon point 1 [1.2, 0] is outside the frame: coordinates are fractions 0..1"}},
		{"negative coordinate", zone(Zone{ID: "door", Polygon: Points{{0, -0.1}, {1, 0}, {0, 1}}}),
			[]string{"zones[1] (door): polygon point 0 [0, -0.1] is outside the frame"}},
		{"NaN coordinate", zone(Zone{ID: "door", Polygon: Points{{0, math.NaN()}, {1, 0}, {0, 1}}}),
			[]string{"zones[1] (door): polygon point 0 [0, NaN] is outside the frame"}},
		{"three numbers", zone(Zone{ID: "door", Polygon: Points{{0, 0, 0}, {1, 0}, {0}}}),
			[]string{"zones[1] (door): polygon point 0 has 3 numbers, want [x, y]", "zones[1] (door): polygon point 2 has 1 numbers, want [x, y]"}},
		{"repeated point", zone(Zone{ID: "door", Polygon: Points{{0, 0}, {1, 0}, {0, 0}, {0, 1}}}),
			[]string{"zones[1] (door): polygon points 0 and 2 are the same (0, 0)"}},
		{"repeated id", zone(Zone{ID: "ok", Polygon: square(0, 0, 1, 1)}),
			[]string{"zones[1] (ok): id repeats zones[0]"}},
		{"no id", zone(Zone{Polygon: square(0, 0, 1, 1)}),
			[]string{"zones[1]: id is required"}},
		{"bad id", zone(Zone{ID: "front door", Polygon: square(0, 0, 1, 1)}),
			[]string{`zones[1]: id "front door": want letters, digits, '_' and '-' only, at most 64`}},
		{"long id", zone(Zone{ID: strings.Repeat("z", 65), Polygon: square(0, 0, 1, 1)}),
			[]string{"zones[1]: id \"zzz"}},
		{"unknown class", zone(Zone{ID: "door", Polygon: square(0, 0, 1, 1), Classes: []string{"person", "cat"}}),
			[]string{`zones[1] (door): classes "cat" is not a class of the model`}},
		{"class twice", zone(Zone{ID: "door", Polygon: square(0, 0, 1, 1), Classes: []string{"person", "person"}}),
			[]string{`zones[1] (door): classes names "person" twice`}},
		{"empty class", zone(Zone{ID: "door", Polygon: square(0, 0, 1, 1), Classes: []string{""}}),
			[]string{`zones[1] (door): classes has an empty class name`}},
		{"negative debounce", zone(Zone{ID: "door", Polygon: square(0, 0, 1, 1), MinSeconds: ptr(-1.0)}),
			[]string{"zones[1] (door): min_seconds -1 is not a number of seconds in 0..86400"}},
		{"infinite loiter", zone(Zone{ID: "door", Polygon: square(0, 0, 1, 1), LoiterSeconds: math.Inf(1)}),
			[]string{"zones[1] (door): loiter_seconds +Inf is not a number of seconds"}},
		{"unknown anchor", zone(Zone{ID: "door", Polygon: square(0, 0, 1, 1), Anchor: "top"}),
			[]string{`zones[1] (door): anchor unknown anchor "top" (want bottom_center or center)`}},

		{"one-point line", line(Line{ID: "gate", Points: Points{{0.5, 0}}}),
			[]string{"lines[0] (gate): points has 1 points, want 2: [[x1, y1], [x2, y2]]"}},
		{"three-point line", line(Line{ID: "gate", Points: Points{{0, 0}, {0.5, 0}, {1, 0}}}),
			[]string{"lines[0] (gate): points has 3 points, want 2"}},
		{"same points", line(Line{ID: "gate", Points: Points{{0.5, 0.5}, {0.5, 0.5}}}),
			[]string{"lines[0] (gate): points are the same point: a line needs two distinct ends"}},
		{"line outside", line(Line{ID: "gate", Points: Points{{0.5, 0.5}, {0.5, 2}}}),
			[]string{"lines[0] (gate): points point 1 [0.5, 2] is outside the frame"}},
		{"band", line(Line{ID: "gate", Points: Points{{0, 0}, {1, 1}}, Band: 0.6}),
			[]string{"lines[0] (gate): band 0.6 is outside 0..0.5"}},
		{"negative band", line(Line{ID: "gate", Points: Points{{0, 0}, {1, 1}}, Band: -0.01}),
			[]string{"lines[0] (gate): band -0.01 is outside 0..0.5"}},
		{"line class", line(Line{ID: "gate", Points: Points{{0, 0}, {1, 1}}, Classes: []string{"truck"}}),
			[]string{`lines[0] (gate): classes "truck" is not a class of the model`}},
		{"repeated line id", Config{Lines: []Line{{ID: "g", Points: Points{{0, 0}, {1, 1}}}, {ID: "h", Points: Points{{0, 0}, {1, 1}}}, {ID: "g", Points: Points{{0, 0}, {1, 1}}}}},
			[]string{"lines[2] (g): id repeats lines[0]"}},

		{"mask", Config{Masks: []Points{square(0, 0, 1, 1), {{0, 0}, {1, 1}, {1, 0}, {0, 1}}}},
			[]string{"masks[1]: polygon self-intersects at edges 0 and 2"}},
		{"mask of two", Config{Masks: []Points{{{0, 0}, {1, 1}}}},
			[]string{"masks[0]: polygon has 2 points"}},

		{"track unknown", Config{Objects: Objects{Track: []string{"person", "horse"}}},
			[]string{`objects: track "horse" is not a class of the model`}},
		{"mask anchor", Config{Objects: Objects{Anchor: "feet"}},
			[]string{`objects: anchor unknown anchor "feet"`}},
		{"filter without class", Config{Objects: Objects{Filters: []ClassFilter{{MinScore: 0.5}}}},
			[]string{"objects.filters[0]: class is required"}},
		{"filter unknown class", Config{Objects: Objects{Filters: []ClassFilter{{Class: "cat"}}}},
			[]string{`objects.filters[0] (cat): class "cat" is not a class of the model`}},
		{"filter not tracked", Config{Objects: Objects{Track: []string{"person"}, Filters: []ClassFilter{{Class: "car"}}}},
			[]string{`objects.filters[0] (car): class "car" is not tracked (objects.track: person)`}},
		{"filter twice", Config{Objects: Objects{Filters: []ClassFilter{{Class: "car"}, {Class: "dog"}, {Class: "car"}}}},
			[]string{"objects.filters[2] (car): class repeats objects.filters[0]"}},
		{"filter ranges", Config{Objects: Objects{Filters: []ClassFilter{{Class: "car", MinScore: 1.5, MinArea: -0.1, MaxArea: math.NaN()}}}},
			[]string{"objects.filters[0] (car): min_score 1.5 is outside 0..1", "objects.filters[0] (car): min_area -0.1 is outside 0..1", "objects.filters[0] (car): max_area NaN is outside 0..1"}},
		{"max below min", Config{Objects: Objects{Filters: []ClassFilter{{Class: "car", MinArea: 0.2, MaxArea: 0.1}}}},
			[]string{"objects.filters[0] (car): max_area 0.1 is below min_area 0.2"}},

		{"class group of one", Config{Objects: Objects{ClassGroups: [][]string{{"car"}}}},
			[]string{"objects.class_groups[0]: has 1 classes: a group needs at least two"}},
		{"class in two groups", Config{Objects: Objects{ClassGroups: [][]string{{"car", "dog"}, {"dog", "person"}}}},
			[]string{`objects.class_groups[1]: "dog" is in objects.class_groups[0] too: a class is in one group at most`}},
		{"class group unknown class", Config{Objects: Objects{ClassGroups: [][]string{{"car", "truck"}}}},
			[]string{`objects.class_groups[0]: "truck" is not a class of the model`}},
		{"class twice in a group", Config{Objects: Objects{ClassGroups: [][]string{{"car", "car"}}}},
			[]string{`objects.class_groups[0]: names "car" twice`}},

		{"several at once", Config{
			Zones: []Zone{{ID: "a", Polygon: Points{{0, 0}}}},
			Lines: []Line{{ID: "a b", Points: Points{{0, 0}, {0, 0}}}},
		}, []string{
			"zones[0] (a): polygon has 1 points, want at least 3",
			`lines[0]: id "a b": want`,
			"lines[0] (a b): points are the same point",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Check(labels)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("err %v (%T), want Problems", err, err)
			}
			if len(ps) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(ps), len(tc.want), err)
			}
			for i, p := range ps {
				if !strings.HasPrefix(p.Error(), tc.want[i]) {
					t.Errorf("problem %d:\n got %q\nwant %q...", i, p.Error(), tc.want[i])
				}
			}
		})
	}
}

func TestProblemField(t *testing.T) {
	err := CheckZones([]Zone{{ID: "door", Polygon: Points{{0, 0}, {1, 1}, {1, 0}, {0, 1}}}}, nil)
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 {
		t.Fatalf("err %v", err)
	}
	if p := ps[0]; p.Field() != "zones[0].polygon" || p.Elem != "zones[0]" || p.ID != "door" || p.Key != "polygon" {
		t.Errorf("problem %+v, field %q", p, p.Field())
	}
	if err := CheckLines([]Line{{ID: "x", Points: Points{{0, 0}, {1, 0}}}}, labels); err != nil {
		t.Error(err)
	}
	if err := CheckMasks([]Points{{{0, 0}}}); err == nil || err.Error() != "masks[0]: polygon has 1 points, want at least 3" {
		t.Errorf("masks: %v", err)
	}
	if err := (Objects{Track: []string{"zebra"}}).Check(labels); err == nil {
		t.Error("Objects.Check accepted an unknown class")
	}
}
