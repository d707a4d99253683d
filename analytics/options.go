package analytics

import (
	"fmt"
	"hash/fnv"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// The option types below are the YAML leaves of a camera's analytics settings: config embeds
// them as they are. They hold plain slices, numbers and strings (no maps, no custom
// unmarshalers), so config's schema walker checks their keys and types like any other
// section. A field left at its zero value takes the default its comment names.

// Defaults of the fields left at their zero value.
const (
	// DefaultMinSeconds is a zone's debounce (Zone.MinSeconds): how long an object must be
	// seen inside before it enters, and outside before it leaves.
	DefaultMinSeconds = 1.0
	// DefaultAnchor is the point of a box tested against masks, zones and lines.
	DefaultAnchor = AnchorBottomCenter
	// DefaultBand is a line's hysteresis (Line.Band), a fraction of the frame's diagonal.
	DefaultBand = 0.02
)

// Points is a list of points in normalized frame coordinates, [x, y] each, 0..1 from the
// frame's left and top edges: `[[0.1, 0.5], [0.9, 0.5], [0.5, 1]]`. Normalized, they mean the
// same place when the camera's resolution changes. A mask is a Points of at least 3.
type Points [][]float64

// Anchor is the point of an object's box that is tested against masks, zones and lines.
type Anchor string

// Anchors.
const (
	// AnchorBottomCenter is the middle of the box's bottom edge: where a person or a car
	// touches the ground, the right point for floor zones and lines on the ground.
	AnchorBottomCenter Anchor = "bottom_center"
	// AnchorCenter is the middle of the box.
	AnchorCenter Anchor = "center"
)

// Anchors returns the anchors, the default first.
func Anchors() []Anchor { return []Anchor{AnchorBottomCenter, AnchorCenter} }

// Point returns the anchor point of box b, in b's units; "" is DefaultAnchor.
func (a Anchor) Point(b geom.Box) geom.Point {
	if a == AnchorCenter {
		return geom.Point{X: b.X + b.W/2, Y: b.Y + b.H/2}
	}
	return geom.Point{X: b.X + b.W/2, Y: b.Y + b.H}
}

// Zone is a region of the frame whose visitors are followed: `{id, polygon, classes,
// min_seconds, loiter_seconds, anchor}`.
type Zone struct {
	// ID names the zone in events, counts and metrics. Required, unique among the camera's
	// zones; letters, digits, '_' and '-', at most 64 characters.
	ID string `yaml:"id"`
	// Polygon is the zone's outline, at least 3 points, coordinates 0..1, its edges not
	// crossing. A point on the outline counts as inside.
	Polygon Points `yaml:"polygon"`
	// Classes are the labels the zone follows. Default: all the tracked classes.
	Classes []string `yaml:"classes,omitempty"`
	// MinSeconds is the debounce, >= 0: an object enters once it has been seen inside for
	// this long, and leaves once seen outside for this long (0: at the first frame). nil is
	// DefaultMinSeconds (1 s).
	MinSeconds *float64 `yaml:"min_seconds,omitempty"`
	// LoiterSeconds, >= 0: an object inside for longer than this loiters (one event per
	// visit). Default 0: off.
	LoiterSeconds float64 `yaml:"loiter_seconds,omitempty"`
	// Anchor is the point of a box tested against the polygon. Default DefaultAnchor
	// (bottom_center).
	Anchor Anchor `yaml:"anchor,omitempty"`
}

// Debounce returns the zone's MinSeconds as a duration, DefaultMinSeconds when unset.
func (z Zone) Debounce() time.Duration {
	if z.MinSeconds == nil {
		return seconds(DefaultMinSeconds)
	}
	return seconds(*z.MinSeconds)
}

// Equal says whether z and o define the same zone: same id, outline, debounce, loitering,
// anchor and classes (in any order), defaults resolved. A ZoneSet keeps the state of a zone
// across Apply only when its old and new definitions are Equal.
func (z Zone) Equal(o Zone) bool { return z.key() == o.key() }

func (z Zone) key() string {
	return fmt.Sprintf("%q %v %v %d %d %s", z.ID, z.Polygon, classKey(z.Classes),
		z.Debounce(), seconds(z.LoiterSeconds), anchorOr(z.Anchor))
}

// Line is a segment that objects are counted crossing: `{id, points: [[x1, y1], [x2, y2]],
// classes, band, anchor}`. Its direction comes from the order of its points: see the package
// documentation.
type Line struct {
	// ID names the line in events, counts and metrics. Required, unique among the camera's
	// lines; letters, digits, '_' and '-', at most 64 characters.
	ID string `yaml:"id"`
	// Points are the segment's two ends, P1 then P2, distinct, coordinates 0..1.
	Points Points `yaml:"points"`
	// Classes are the labels counted. Default: all the tracked classes.
	Classes []string `yaml:"classes,omitempty"`
	// Band is the hysteresis against jitter, a fraction of the frame's diagonal, 0..0.5: an
	// anchor must get this far past the line on the other side for a crossing to count.
	// Default 0: DefaultBand (0.02).
	Band float64 `yaml:"band,omitempty"`
	// Anchor is the point of a box that crosses. Default DefaultAnchor (bottom_center).
	Anchor Anchor `yaml:"anchor,omitempty"`
}

// Fingerprint is a short digest of the line's definition (defaults resolved, classes in any
// order): stored with saved counts so that they are restored only into the same line.
func (l Line) Fingerprint() string {
	h := fnv.New64a()
	h.Write([]byte(l.key()))
	return fmt.Sprintf("%016x", h.Sum64())
}

// Equal says whether l and o define the same line. A LineSet keeps a line's counts across
// Apply only when its old and new definitions are Equal.
func (l Line) Equal(o Line) bool { return l.key() == o.key() }

func (l Line) key() string {
	return fmt.Sprintf("%q %v %v %g %s", l.ID, l.Points, classKey(l.Classes), l.band(), anchorOr(l.Anchor))
}

func (l Line) band() float64 {
	if l.Band == 0 {
		return DefaultBand
	}
	return l.Band
}

// Objects is a camera's `objects:` section: which detections are kept before tracking.
type Objects struct {
	// Track lists the labels to track. Default: every class of the model.
	Track []string `yaml:"track,omitempty"`
	// Filters holds thresholds per class, at most one per class. Default: none (every
	// detection of a tracked class is kept, however small or unsure).
	Filters []ClassFilter `yaml:"filters,omitempty"`
	// Anchor is the point of a box tested against the camera's masks. Default DefaultAnchor
	// (bottom_center).
	Anchor Anchor `yaml:"anchor,omitempty"`
	// UpdateInterval is the longest a followed object goes without an object event: an
	// `update` with why `interval` when nothing else happened to it. Default
	// DefaultUpdateInterval; at least a second.
	UpdateInterval time.Duration `yaml:"update_interval,omitempty"`
	// ClassGroups are sets of classes the model confuses with each other: a detection may
	// continue the track of an object of another class of its group (a car seen as a truck
	// every few frames stays one object), whose label is the class it was seen as most. A
	// class is in one group at most, each group of at least two. Default (nil)
	// DefaultClassGroups; an empty list (`class_groups: []`) groups nothing.
	ClassGroups [][]string `yaml:"class_groups,omitempty"`
}

// DefaultClassGroups returns Objects.ClassGroups' default: the COCO models' vehicles.
func DefaultClassGroups() [][]string {
	return [][]string{{"car", "truck", "bus", "motorcycle"}}
}

// Groups is o's ClassGroups, or its default.
func (o Objects) Groups() [][]string {
	if o.ClassGroups == nil {
		return DefaultClassGroups()
	}
	return o.ClassGroups
}

// DefaultUpdateInterval is Objects.UpdateInterval's default.
const DefaultUpdateInterval = 30 * time.Second

// Interval is o's UpdateInterval, or its default.
func (o Objects) Interval() time.Duration {
	if o.UpdateInterval == 0 {
		return DefaultUpdateInterval
	}
	return o.UpdateInterval
}

// ClassFilter holds the thresholds of one class: `{class, min_score, min_area, max_area}`.
// Areas are of the box, as fractions of the frame's area, so they survive a resolution change.
type ClassFilter struct {
	// Class is the label filtered. Required.
	Class string `yaml:"class"`
	// MinScore drops detections scoring below it, 0..1. Default 0: none.
	MinScore float64 `yaml:"min_score,omitempty"`
	// MinArea drops boxes smaller than this fraction of the frame, 0..1. Default 0: none.
	MinArea float64 `yaml:"min_area,omitempty"`
	// MaxArea drops boxes larger than this fraction of the frame, 0..1, >= MinArea.
	// Default 0: none.
	MaxArea float64 `yaml:"max_area,omitempty"`
}

// Config gathers a camera's analytics settings, as its YAML keys `objects`, `masks`,
// `zones` and `lines`.
type Config struct {
	Objects Objects  `yaml:"objects"`
	Masks   []Points `yaml:"masks,omitempty"`
	Zones   []Zone   `yaml:"zones,omitempty"`
	Lines   []Line   `yaml:"lines,omitempty"`
	// FrameInterval is the time between the camera's analysed frames (1/fps; not a key of
	// its own): the tracker's times that stand for frames stretch with it
	// (track.Config.FrameInterval). 0: not known.
	FrameInterval time.Duration `yaml:"-"`
}

// Problem is one thing wrong in analytics settings. Elem is the element at fault, as a path
// relative to the camera ("zones[1]", "objects.filters[0]", "masks[2]"), ID its id when it
// has one, Key the key within it ("polygon") or "". Its Error reads like
// `zones[1] (door): polygon self-intersects at edges 0 and 2`.
type Problem struct {
	Elem string
	ID   string
	Key  string
	Msg  string
}

// Field returns the path of the key at fault, e.g. "zones[1].polygon", for config to prefix
// with the camera's path and find its line.
func (p Problem) Field() string {
	if p.Key == "" {
		return p.Elem
	}
	return p.Elem + "." + p.Key
}

func (p Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Elem)
	if p.ID != "" {
		fmt.Fprintf(&b, " (%s)", p.ID)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + " ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is the error of a Check: every problem found, in the order of the settings.
type Problems []Problem

func (ps Problems) Error() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Error()
	}
	return strings.Join(s, "\n")
}

// problems collects Problems.
type problems struct {
	list   Problems
	labels []string
}

func (ps *problems) add(elem, id, key, format string, args ...any) {
	ps.list = append(ps.list, Problem{Elem: elem, ID: id, Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	return ps.list
}

// Check reports every problem of c as a Problems error, nil if none: the checks of
// Objects.Check, CheckMasks, CheckZones and CheckLines. labels are the model's class names;
// nil skips the class checks (the model is not known).
func (c Config) Check(labels []string) error {
	ps := problems{labels: labels}
	c.Objects.check(&ps)
	checkMasks(&ps, c.Masks)
	checkZones(&ps, c.Zones)
	checkLines(&ps, c.Lines)
	return ps.err()
}

// Check reports what is wrong with o as a Problems error, nil if none: unknown classes (when
// labels is not nil), a class filtered twice or filtered but not tracked, thresholds outside
// 0..1, max_area below min_area, an unknown anchor, a class group of fewer than two classes
// or a class in two groups.
func (o Objects) Check(labels []string) error {
	ps := problems{labels: labels}
	o.check(&ps)
	return ps.err()
}

func (o Objects) check(ps *problems) {
	ps.classes("objects", "", "track", o.Track)
	ps.anchor("objects", "", o.Anchor)
	if o.UpdateInterval != 0 && o.UpdateInterval < time.Second {
		ps.add("objects", "", "update_interval", "%v is under a second", o.UpdateInterval)
	}
	grouped := map[string]int{}
	for i, g := range o.ClassGroups {
		elem := fmt.Sprintf("objects.class_groups[%d]", i)
		if len(g) < 2 {
			ps.add(elem, "", "", "has %d classes: a group needs at least two", len(g))
		}
		ps.classes(elem, "", "", g)
		for _, c := range g {
			if j, dup := grouped[c]; dup && j != i && c != "" {
				ps.add(elem, "", "", "%q is in objects.class_groups[%d] too: a class is in one group at most", c, j)
			}
			if _, dup := grouped[c]; !dup {
				grouped[c] = i
			}
		}
	}
	seen := map[string]int{}
	for i, f := range o.Filters {
		elem := fmt.Sprintf("objects.filters[%d]", i)
		switch {
		case f.Class == "":
			ps.add(elem, "", "class", "is required")
		case !ps.known(f.Class):
			ps.add(elem, f.Class, "class", "%q is not a class of the model", f.Class)
		case len(o.Track) > 0 && !slices.Contains(o.Track, f.Class):
			ps.add(elem, f.Class, "class", "%q is not tracked (objects.track: %s)", f.Class, strings.Join(o.Track, ", "))
		}
		if j, dup := seen[f.Class]; dup && f.Class != "" {
			ps.add(elem, f.Class, "class", "repeats objects.filters[%d]", j)
		}
		seen[f.Class] = i
		ps.fraction(elem, f.Class, "min_score", f.MinScore)
		ps.fraction(elem, f.Class, "min_area", f.MinArea)
		ps.fraction(elem, f.Class, "max_area", f.MaxArea)
		if f.MaxArea > 0 && f.MaxArea < f.MinArea {
			ps.add(elem, f.Class, "max_area", "%g is below min_area %g", f.MaxArea, f.MinArea)
		}
	}
}

// CheckMasks reports what is wrong with masks as a Problems error, nil if none: each a
// polygon of at least 3 points in 0..1 whose edges do not cross.
func CheckMasks(masks []Points) error {
	var ps problems
	checkMasks(&ps, masks)
	return ps.err()
}

func checkMasks(ps *problems, masks []Points) {
	for i, m := range masks {
		ps.polygon(fmt.Sprintf("masks[%d]", i), "", "", m)
	}
}

// CheckZones reports what is wrong with zones as a Problems error, nil if none: ids missing,
// malformed or repeated; polygons of fewer than 3 points, outside 0..1 or self-intersecting;
// unknown classes (when labels is not nil); negative or non-finite seconds; an unknown anchor.
func CheckZones(zones []Zone, labels []string) error {
	ps := problems{labels: labels}
	checkZones(&ps, zones)
	return ps.err()
}

func checkZones(ps *problems, zones []Zone) {
	seen := map[string]int{}
	for i, z := range zones {
		elem := fmt.Sprintf("zones[%d]", i)
		ps.id(elem, z.ID, seen, i, "zones")
		ps.polygon(elem, z.ID, "polygon", z.Polygon)
		ps.classes(elem, z.ID, "classes", z.Classes)
		if z.MinSeconds != nil {
			ps.seconds(elem, z.ID, "min_seconds", *z.MinSeconds)
		}
		ps.seconds(elem, z.ID, "loiter_seconds", z.LoiterSeconds)
		ps.anchor(elem, z.ID, z.Anchor)
	}
}

// CheckLines reports what is wrong with lines as a Problems error, nil if none: ids missing,
// malformed or repeated; not exactly two distinct points in 0..1; unknown classes (when labels
// is not nil); a band outside 0..0.5; an unknown anchor.
func CheckLines(lines []Line, labels []string) error {
	ps := problems{labels: labels}
	checkLines(&ps, lines)
	return ps.err()
}

func checkLines(ps *problems, lines []Line) {
	seen := map[string]int{}
	for i, l := range lines {
		elem := fmt.Sprintf("lines[%d]", i)
		ps.id(elem, l.ID, seen, i, "lines")
		if len(l.Points) != 2 {
			ps.add(elem, l.ID, "points", "has %d points, want 2: [[x1, y1], [x2, y2]]", len(l.Points))
		} else if ps.points(elem, l.ID, "points", l.Points) {
			if slices.Equal(l.Points[0], l.Points[1]) {
				ps.add(elem, l.ID, "points", "are the same point: a line needs two distinct ends")
			}
		}
		ps.classes(elem, l.ID, "classes", l.Classes)
		if !(l.Band >= 0 && l.Band <= 0.5) {
			ps.add(elem, l.ID, "band", "%g is outside 0..0.5 (a fraction of the frame's diagonal)", l.Band)
		}
		ps.anchor(elem, l.ID, l.Anchor)
	}
}

// idPattern is what a zone or line id may hold: it names them in key-value keys and metrics.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func (ps *problems) id(elem, id string, seen map[string]int, i int, list string) {
	switch {
	case id == "":
		ps.add(elem, "", "id", "is required")
		return
	case !idPattern.MatchString(id):
		ps.add(elem, "", "id", "%q: want letters, digits, '_' and '-' only, at most 64", id)
	}
	if j, dup := seen[id]; dup {
		ps.add(elem, id, "id", "repeats %s[%d]", list, j)
		return
	}
	seen[id] = i
}

// points checks that every point of pts is [x, y] in 0..1, and says whether all are.
func (ps *problems) points(elem, id, key string, pts Points) bool {
	ok := true
	for i, p := range pts {
		switch {
		case len(p) != 2:
			ps.add(elem, id, key, "point %d has %d numbers, want [x, y]", i, len(p))
			ok = false
		case !(p[0] >= 0 && p[0] <= 1 && p[1] >= 0 && p[1] <= 1):
			ps.add(elem, id, key, "point %d [%g, %g] is outside the frame: coordinates are fractions 0..1", i, p[0], p[1])
			ok = false
		}
	}
	return ok
}

func (ps *problems) polygon(elem, id, key string, pts Points) {
	if !ps.points(elem, id, key, pts) {
		return
	}
	if err := toPolygon(pts).Check(); err != nil {
		if key == "" {
			key = "polygon"
		}
		ps.add(elem, id, key, "%v", err)
	}
}

func (ps *problems) classes(elem, id, key string, classes []string) {
	seen := map[string]bool{}
	for _, c := range classes {
		switch {
		case c == "":
			ps.add(elem, id, key, "has an empty class name")
		case seen[c]:
			ps.add(elem, id, key, "names %q twice", c)
		case !ps.known(c):
			ps.add(elem, id, key, "%q is not a class of the model", c)
		}
		seen[c] = true
	}
}

func (ps *problems) known(class string) bool {
	return ps.labels == nil || slices.Contains(ps.labels, class)
}

func (ps *problems) fraction(elem, id, key string, v float64) {
	if !(v >= 0 && v <= 1) {
		ps.add(elem, id, key, "%g is outside 0..1", v)
	}
}

func (ps *problems) seconds(elem, id, key string, v float64) {
	if !(v >= 0) || math.IsInf(v, 0) || v > maxSeconds {
		ps.add(elem, id, key, "%g is not a number of seconds in 0..%d", v, maxSeconds)
	}
}

// maxSeconds bounds durations (a day), far inside time.Duration's range.
const maxSeconds = 86400

func (ps *problems) anchor(elem, id string, a Anchor) {
	if a != "" && !slices.Contains(Anchors(), a) {
		ps.add(elem, id, "anchor", "unknown anchor %q (want bottom_center or center)", a)
	}
}

// toPolygon converts checked points.
func toPolygon(pts Points) geom.Polygon {
	pg := make(geom.Polygon, len(pts))
	for i, p := range pts {
		pg[i] = geom.Point{X: p[0], Y: p[1]}
	}
	return pg
}

func anchorOr(a Anchor) Anchor {
	if a == "" {
		return DefaultAnchor
	}
	return a
}

// classKey returns classes sorted, for comparing definitions; nil and empty are the same.
func classKey(classes []string) []string {
	s := slices.Clone(classes)
	slices.Sort(s)
	return s
}

// classSet returns classes as a set, nil for all.
func classSet(classes []string) map[string]bool {
	if len(classes) == 0 {
		return nil
	}
	m := make(map[string]bool, len(classes))
	for _, c := range classes {
		m[c] = true
	}
	return m
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
