package groundtruth

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"gopkg.in/yaml.v3"
)

// RecordedTruth is a ground truth annotated by hand for a real recording (not rendered by
// this package): its lines and zones, the people seen, every crossing of each line and
// every visit of each zone, in the recording's time. LoadVTestTruth reads the one of
// vtest.avi (testdata/vtest-truth.yaml; testdata/vtest-truth.md says how it was made).
// It has no boxes: score a replay of the recording by its events (ScoreCrossings,
// ScoreStays with a nil owner), not by its tracks.
type RecordedTruth struct {
	Video     string           // the recording's file name
	FPS       float64          // its frame rate
	Frames    int              // its number of frames; frame i is at i/FPS
	Lines     map[string]Line  // by name
	Zones     map[string]Zone  // by name
	People    []RecordedPerson // by id
	Crossings []RecordedCrossing
	Visits    []RecordedVisit
}

// RecordedPerson is one person of a RecordedTruth: an id and how to recognize them.
type RecordedPerson struct {
	ID   int
	Desc string
}

// RecordedCrossing is one crossing of a line by a person's (or vehicle's) anchor.
type RecordedCrossing struct {
	Line      string
	Person    int
	Class     string
	Direction Direction
	T         time.Duration // when the anchor passed the line, from the recording's start
	Frame     int           // the frame nearest T: round(T*FPS)
	Note      string
}

// RecordedVisit is one stay of a person's anchor in a zone, from Enter to Exit. OpenStart:
// already inside on the first frame (Enter is 0); OpenEnd: still inside on the last (Exit
// is the recording's duration).
type RecordedVisit struct {
	Zone               string
	Person             int
	Class              string
	Enter, Exit        time.Duration
	OpenStart, OpenEnd bool
	Note               string
}

// Duration is the recording's length, Frames/FPS.
func (rt RecordedTruth) Duration() time.Duration {
	return time.Duration(float64(rt.Frames) / rt.FPS * float64(time.Second))
}

// LineCrossings returns the crossings of the named line as the package's Crossing (ObjectID
// is the person's id; At is not recorded), in time order: the truth ScoreCrossings takes.
func (rt RecordedTruth) LineCrossings(line string) []Crossing {
	var out []Crossing
	for _, c := range rt.Crossings {
		if c.Line == line {
			out = append(out, Crossing{ObjectID: c.Person, Class: c.Class, Direction: c.Direction, T: c.T})
		}
	}
	slices.SortStableFunc(out, func(a, b Crossing) int { return cmp.Compare(a.T, b.T) })
	return out
}

// ZoneVisits returns the visits of the named zone as the package's Visit (Open is OpenEnd,
// as a Scenario's visit whose path ends inside), in order of entry: the truth ScoreStays
// takes.
func (rt RecordedTruth) ZoneVisits(zone string) []Visit {
	var out []Visit
	for _, v := range rt.Visits {
		if v.Zone == zone {
			out = append(out, Visit{ObjectID: v.Person, Class: v.Class, Enter: v.Enter, Exit: v.Exit, Open: v.OpenEnd})
		}
	}
	slices.SortStableFunc(out, func(a, b Visit) int { return cmp.Compare(a.Enter, b.Enter) })
	return out
}

// The file's shape (see testdata/vtest-truth.yaml).
type truthFile struct {
	Video     string              `yaml:"video"`
	FPS       float64             `yaml:"fps"`
	Frames    int                 `yaml:"frames"`
	Lines     map[string]lineFile `yaml:"lines"`
	Zones     map[string][]xyFile `yaml:"zones"`
	People    []personFile        `yaml:"people"`
	Crossings []crossingFile      `yaml:"crossings"`
	Visits    []visitFile         `yaml:"visits"`
}

type xyFile []float64

type lineFile struct {
	P1 xyFile `yaml:"p1"`
	P2 xyFile `yaml:"p2"`
}

type personFile struct {
	ID   int    `yaml:"id"`
	Desc string `yaml:"desc"`
}

type crossingFile struct {
	Line      string   `yaml:"line"`
	Person    int      `yaml:"person"`
	Class     string   `yaml:"class"`
	Direction string   `yaml:"direction"`
	T         *float64 `yaml:"t"`
	Frame     *int     `yaml:"frame"`
	Note      string   `yaml:"note"`
}

type visitFile struct {
	Zone   string   `yaml:"zone"`
	Person int      `yaml:"person"`
	Class  string   `yaml:"class"`
	Enter  *float64 `yaml:"enter"`
	Exit   *float64 `yaml:"exit"`
	Open   string   `yaml:"open"` // "", "start", "end" or "both"
	Note   string   `yaml:"note"`
}

// LoadVTestTruth reads a hand-made truth in the shape of testdata/vtest-truth.yaml and
// validates it: unknown keys, a line or zone that is not a valid shape, a crossing or visit
// of an unknown line, zone or person, a direction other than in/out, a class missing, a
// time outside the recording, a frame that is not round(t*fps), a visit that ends before it
// begins or whose open ends do not sit at the recording's ends are errors that name the
// entry.
func LoadVTestTruth(path string) (RecordedTruth, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return RecordedTruth{}, err
	}
	rt, err := parseRecordedTruth(b)
	if err != nil {
		return RecordedTruth{}, fmt.Errorf("%s: %w", path, err)
	}
	return rt, nil
}

func parseRecordedTruth(b []byte) (RecordedTruth, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f truthFile
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return RecordedTruth{}, errors.New("empty file")
		}
		return RecordedTruth{}, err
	}
	rt := RecordedTruth{Video: f.Video, FPS: f.FPS, Frames: f.Frames, Lines: map[string]Line{}, Zones: map[string]Zone{}}
	if f.Video == "" {
		return rt, errors.New("video: missing")
	}
	if !(f.FPS > 0) || math.IsInf(f.FPS, 0) {
		return rt, fmt.Errorf("fps: %v is not a positive frame rate", f.FPS)
	}
	if f.Frames <= 0 {
		return rt, fmt.Errorf("frames: %d is not a positive number of frames", f.Frames)
	}
	dur := float64(f.Frames) / f.FPS
	for name, l := range f.Lines {
		p1, err := l.P1.point()
		if err != nil {
			return rt, fmt.Errorf("line %q p1: %w", name, err)
		}
		p2, err := l.P2.point()
		if err != nil {
			return rt, fmt.Errorf("line %q p2: %w", name, err)
		}
		line := Line{p1, p2}
		if err := line.Validate(); err != nil {
			return rt, fmt.Errorf("line %q: %w", name, err)
		}
		rt.Lines[name] = line
	}
	for name, ps := range f.Zones {
		var z Zone
		for i, xy := range ps {
			p, err := xy.point()
			if err != nil {
				return rt, fmt.Errorf("zone %q point %d: %w", name, i+1, err)
			}
			z = append(z, p)
		}
		if err := z.Validate(); err != nil {
			return rt, fmt.Errorf("zone %q: %w", name, err)
		}
		rt.Zones[name] = z
	}
	people := map[int]bool{}
	for i, p := range f.People {
		if p.ID <= 0 {
			return rt, fmt.Errorf("people[%d]: id %d is not a positive id", i, p.ID)
		}
		if people[p.ID] {
			return rt, fmt.Errorf("people[%d]: id %d given twice", i, p.ID)
		}
		people[p.ID] = true
		rt.People = append(rt.People, RecordedPerson(p))
	}
	slices.SortFunc(rt.People, func(a, b RecordedPerson) int { return a.ID - b.ID })
	inVideo := func(what string, t *float64) (time.Duration, error) {
		if t == nil {
			return 0, fmt.Errorf("%s: missing", what)
		}
		if math.IsNaN(*t) || *t < 0 || *t > dur {
			return 0, fmt.Errorf("%s: %v s is outside the video (0 to %v s)", what, *t, dur)
		}
		return time.Duration(math.Round(*t * float64(time.Second))), nil
	}
	for i, c := range f.Crossings {
		at := fmt.Sprintf("crossings[%d] (line %q, person %d, t %s)", i, c.Line, c.Person, fmtT(c.T))
		if _, ok := rt.Lines[c.Line]; !ok {
			return rt, fmt.Errorf("%s: unknown line %q", at, c.Line)
		}
		if !people[c.Person] {
			return rt, fmt.Errorf("%s: unknown person %d", at, c.Person)
		}
		if c.Class == "" {
			return rt, fmt.Errorf("%s: class missing", at)
		}
		dir := Direction(c.Direction)
		if dir != In && dir != Out {
			return rt, fmt.Errorf("%s: direction %q is neither %q nor %q", at, c.Direction, In, Out)
		}
		t, err := inVideo(at+": t", c.T)
		if err != nil {
			return rt, err
		}
		if c.Frame == nil {
			return rt, fmt.Errorf("%s: frame missing", at)
		}
		if want := int(math.Round(*c.T * f.FPS)); *c.Frame != want {
			return rt, fmt.Errorf("%s: frame %d does not match t*fps = %v (frame %d)", at, *c.Frame, *c.T*f.FPS, want)
		}
		if *c.Frame >= f.Frames {
			return rt, fmt.Errorf("%s: frame %d is past the last frame %d", at, *c.Frame, f.Frames-1)
		}
		rt.Crossings = append(rt.Crossings, RecordedCrossing{Line: c.Line, Person: c.Person, Class: c.Class, Direction: dir, T: t, Frame: *c.Frame, Note: c.Note})
	}
	for i, v := range f.Visits {
		at := fmt.Sprintf("visits[%d] (zone %q, person %d, enter %s)", i, v.Zone, v.Person, fmtT(v.Enter))
		if _, ok := rt.Zones[v.Zone]; !ok {
			return rt, fmt.Errorf("%s: unknown zone %q", at, v.Zone)
		}
		if !people[v.Person] {
			return rt, fmt.Errorf("%s: unknown person %d", at, v.Person)
		}
		if v.Class == "" {
			return rt, fmt.Errorf("%s: class missing", at)
		}
		enter, err := inVideo(at+": enter", v.Enter)
		if err != nil {
			return rt, err
		}
		exit, err := inVideo(at+": exit", v.Exit)
		if err != nil {
			return rt, err
		}
		if exit < enter {
			return rt, fmt.Errorf("%s: exit %v s is before enter %v s", at, *v.Exit, *v.Enter)
		}
		rv := RecordedVisit{Zone: v.Zone, Person: v.Person, Class: v.Class, Enter: enter, Exit: exit, Note: v.Note}
		switch v.Open {
		case "":
		case "start":
			rv.OpenStart = true
		case "end":
			rv.OpenEnd = true
		case "both":
			rv.OpenStart, rv.OpenEnd = true, true
		default:
			return rt, fmt.Errorf("%s: open %q is none of start, end, both", at, v.Open)
		}
		if rv.OpenStart && *v.Enter != 0 {
			return rt, fmt.Errorf("%s: open at the start but enter is %v s, not 0", at, *v.Enter)
		}
		if rv.OpenEnd && *v.Exit != dur {
			return rt, fmt.Errorf("%s: open at the end but exit is %v s, not the video's end %v s", at, *v.Exit, dur)
		}
		rt.Visits = append(rt.Visits, rv)
	}
	return rt, nil
}

func (xy xyFile) point() (Point, error) {
	if len(xy) != 2 {
		return Point{}, fmt.Errorf("%v is not an [x, y] pair", []float64(xy))
	}
	p := Point{xy[0], xy[1]}
	if !finite(p.X) || !finite(p.Y) || p.X < 0 || p.X > 1 || p.Y < 0 || p.Y > 1 {
		return Point{}, fmt.Errorf("(%v, %v) is not inside the frame (0..1)", p.X, p.Y)
	}
	return p, nil
}

func fmtT(t *float64) string {
	if t == nil {
		return "missing"
	}
	return fmt.Sprintf("%v s", *t)
}
