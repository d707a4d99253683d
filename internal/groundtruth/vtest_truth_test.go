package groundtruth

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// vtestTruthFile is the hand-made truth of vtest.avi, relative to this package's directory
// (where go test runs).
var vtestTruthFile = filepath.Join("testdata", "vtest-truth.yaml")

// TestVTestTruthLoads loads the real file and checks that its counts are the ones its
// write-up (testdata/vtest-truth.md) states, and that it holds together: every person
// crosses the full-height line middle alternately in and out, one person's visits of a zone
// do not overlap, and every person listed is in some event or says why not.
func TestVTestTruthLoads(t *testing.T) {
	rt, err := LoadVTestTruth(vtestTruthFile)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Video != "vtest.avi" || rt.FPS != 10 || rt.Frames != 795 || rt.Duration() != 79500*time.Millisecond {
		t.Fatalf("video %q fps %v frames %d duration %v, want vtest.avi at 10 fps, 795 frames, 79.5 s", rt.Video, rt.FPS, rt.Frames, rt.Duration())
	}
	for _, name := range []string{"middle", "second"} {
		if _, ok := rt.Lines[name]; !ok {
			t.Errorf("line %q missing", name)
		}
	}
	if got, want := rt.Lines["middle"], (Line{Point{0.5, 0}, Point{0.5, 1}}); got != want {
		t.Errorf("middle is %v, want the daemon's demo line %v", got, want)
	}
	if _, ok := rt.Zones["square"]; !ok {
		t.Fatal("zone square missing")
	}

	md, err := os.ReadFile(filepath.Join("testdata", "vtest-truth.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Counts: middle (\d+) in, (\d+) out; second (\d+) in, (\d+) out; square (\d+) visits, total dwell ([0-9.]+) s`).FindSubmatch(md)
	if m == nil {
		t.Fatal("vtest-truth.md has no line \"Counts: middle N in, N out; second N in, N out; square N visits, total dwell X s\"")
	}
	num := func(i int) int { n, _ := strconv.Atoi(string(m[i])); return n }
	for i, line := range []string{"middle", "second"} {
		c := Count(rt.LineCrossings(line))
		if got, want := c[CountKey{In, "person"}], num(1+2*i); got != want {
			t.Errorf("%s: %d person crossings in, the .md says %d", line, got, want)
		}
		if got, want := c[CountKey{Out, "person"}], num(2+2*i); got != want {
			t.Errorf("%s: %d person crossings out, the .md says %d", line, got, want)
		}
	}
	visits := rt.ZoneVisits("square")
	if got, want := len(visits), num(5); got != want {
		t.Errorf("square: %d visits, the .md says %d", got, want)
	}
	var dwell time.Duration
	for _, v := range visits {
		dwell += v.Dwell()
	}
	wantDwell, _ := strconv.ParseFloat(string(m[6]), 64)
	if math.Abs(dwell.Seconds()-wantDwell) > 0.05 {
		t.Errorf("square: total dwell %.1f s, the .md says %.1f s", dwell.Seconds(), wantDwell)
	}
	if len(visits) < 8 {
		t.Errorf("square has %d visits, the zone was chosen for at least 8", len(visits))
	}

	// middle runs from the top edge to the bottom edge: nobody can go round it, so each
	// person's crossings alternate.
	last := map[int]Direction{}
	for _, c := range rt.LineCrossings("middle") {
		if last[c.ObjectID] == c.Direction {
			t.Errorf("middle: person %d crosses %s at %v after crossing %s before, with no crossing back", c.ObjectID, c.Direction, c.T, c.Direction)
		}
		last[c.ObjectID] = c.Direction
	}
	type pz struct {
		person int
		zone   string
	}
	lastExit := map[pz]time.Duration{}
	seen := map[pz]bool{}
	for _, v := range rt.Visits {
		k := pz{v.Person, v.Zone}
		if seen[k] && v.Enter < lastExit[k] {
			t.Errorf("%s: person %d enters at %v before leaving the previous visit at %v", v.Zone, v.Person, v.Enter, lastExit[k])
		}
		seen[k], lastExit[k] = true, v.Exit
	}
	used := map[int]bool{}
	for _, c := range rt.Crossings {
		used[c.Person] = true
	}
	for _, v := range rt.Visits {
		used[v.Person] = true
	}
	for _, p := range rt.People {
		if p.Desc == "" {
			t.Errorf("person %d has no description", p.ID)
		}
		if !used[p.ID] && !strings.Contains(p.Desc, "crosses nothing") {
			t.Errorf("person %d is in no crossing or visit and its description does not say it crosses nothing", p.ID)
		}
	}
	t.Logf("%d people, %d crossings, %d visits, total dwell %.1f s", len(rt.People), len(rt.Crossings), len(visits), dwell.Seconds())
}

// TestVTestTruthErrors checks that bad files give errors that name what is wrong.
func TestVTestTruthErrors(t *testing.T) {
	const good = `video: vtest.avi
fps: 10
frames: 795
lines:
  middle: {p1: [0.5, 0.0], p2: [0.5, 1.0]}
zones:
  square: [[0.2, 0.2], [0.4, 0.2], [0.4, 0.5], [0.2, 0.5]]
people:
  - {id: 1, desc: "man in a black jacket"}
crossings:
  - {line: middle, person: 1, class: person, direction: in, t: 12.3, frame: 123}
visits:
  - {zone: square, person: 1, class: person, enter: 10.0, exit: 14.5}
  - {zone: square, person: 1, class: person, enter: 70.0, exit: 79.5, open: end}
`
	if _, err := parseRecordedTruth([]byte(good)); err != nil {
		t.Fatalf("the good file: %v", err)
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown key", "video: vtest.avi", "video: vtest.avi\ncamera: plaza", "field camera not found"},
		{"unknown key in a crossing", "frame: 123}", "frame: 123, speed: 3}", "field speed not found"},
		{"unknown line", "{line: middle, person: 1", "{line: diagonal, person: 1", `crossings[0] (line "diagonal", person 1, t 12.3 s): unknown line "diagonal"`},
		{"unknown person in a crossing", "{line: middle, person: 1", "{line: middle, person: 7", `crossings[0] (line "middle", person 7, t 12.3 s): unknown person 7`},
		{"bad direction", "direction: in", "direction: left", `direction "left" is neither "in" nor "out"`},
		{"time past the end", "t: 12.3, frame: 123", "t: 80.0, frame: 800", "t: 80 s is outside the video (0 to 79.5 s)"},
		{"negative time", "t: 12.3, frame: 123", "t: -1.0, frame: -10", "t: -1 s is outside the video"},
		{"frame not t*fps", "frame: 123", "frame: 124", "frame 124 does not match t*fps = 123 (frame 123)"},
		{"frame missing", ", frame: 123}", "}", "frame missing"},
		{"class missing", "class: person, direction", "direction", "class missing"},
		{"exit before enter", "enter: 10.0, exit: 14.5", "enter: 10.0, exit: 9.5", `visits[0] (zone "square", person 1, enter 10 s): exit 9.5 s is before enter 10 s`},
		{"unknown zone", "{zone: square, person: 1, class: person, enter: 10.0", "{zone: lawn, person: 1, class: person, enter: 10.0", `unknown zone "lawn"`},
		{"unknown person in a visit", "{zone: square, person: 1, class: person, enter: 10.0", "{zone: square, person: 2, class: person, enter: 10.0", "unknown person 2"},
		{"visit past the end", "exit: 14.5", "exit: 90", "exit: 90 s is outside the video"},
		{"open end not at the end", "enter: 70.0, exit: 79.5", "enter: 70.0, exit: 75.0", "open at the end but exit is 75 s, not the video's end 79.5 s"},
		{"bad open", "open: end", "open: yes", `open "yes" is none of start, end, both`},
		{"zone of two points", "[[0.2, 0.2], [0.4, 0.2], [0.4, 0.5], [0.2, 0.5]]", "[[0.2, 0.2], [0.4, 0.2]]", `zone "square": zone has 2 points, a polygon needs at least 3`},
		{"zone point outside the frame", "[0.4, 0.5], [0.2, 0.5]]", "[1.4, 0.5], [0.2, 0.5]]", `zone "square" point 3: (1.4, 0.5) is not inside the frame`},
		{"line of one point", "p2: [0.5, 1.0]", "p2: [0.5, 0.0]", `line "middle": line points are the same`},
		{"line point not a pair", "p1: [0.5, 0.0]", "p1: [0.5]", `line "middle" p1: [0.5] is not an [x, y] pair`},
		{"person twice", `  - {id: 1, desc: "man in a black jacket"}`, "  - {id: 1, desc: \"a\"}\n  - {id: 1, desc: \"b\"}", "people[1]: id 1 given twice"},
		{"no fps", "fps: 10", "fps: 0", "fps: 0 is not a positive frame rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("test bug: %q not in the good file", tc.old)
			}
			file := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(file, []byte(strings.Replace(good, tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadVTestTruth(file)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
				t.Fatalf("error %q, want one naming the file and containing %q", err, tc.want)
			}
		})
	}
	if _, err := LoadVTestTruth(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("a missing file loads")
	}
}
