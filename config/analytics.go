package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/infer"
)

// A camera's analytics settings (issue 14) are the keys objects, masks, zones, lines and
// events. objects and events may also be set in camera_defaults; a camera that sets one of
// their keys (objects.track, objects.filters, objects.anchor, objects.update_interval,
// objects.class_groups, events.detections) replaces the default's value of that key, whole. Masks, zones and lines belong to one camera's
// view and are set per camera only. The leaf types are package analytics' (its doc says
// what they mean); Validate runs analytics.Config.Check on every resolved camera and
// reports its problems at the camera's path ("cameras[2].zones[1].polygon") and line.
//
// Class names cannot be checked at parse time: the model's labels are known only once it
// is loaded. CheckClasses checks them against a list of labels; `visiond check` calls it
// with the workers.labels file (CheckFiles), `visiond check -load` and the daemon (at start
// and on each reload) with the classes of the model the workers loaded.

// DetectionEvents says which per-frame detection events a camera publishes on
// <prefix>.<site>.<camera>.detections (events.detections).
type DetectionEvents string

// Detection event modes.
const (
	// DetectionsAll publishes an event per analysed frame with every detection (as
	// before tracking existed).
	DetectionsAll DetectionEvents = "all"
	// DetectionsTracked publishes per-frame events with only the detections of confirmed
	// tracks, each with its track_id.
	DetectionsTracked DetectionEvents = "tracked"
	// DetectionsOff publishes no detection events: the object, zone and line events
	// remain.
	DetectionsOff DetectionEvents = "off"
)

// DefaultDetectionEvents is events.detections when neither the camera nor camera_defaults
// sets it.
const DefaultDetectionEvents = DetectionsAll

// DetectionEventModes returns the modes of events.detections, the default first.
func DetectionEventModes() []DetectionEvents {
	return []DetectionEvents{DetectionsAll, DetectionsTracked, DetectionsOff}
}

// ParseDetectionEvents returns the mode named s, or an error like
// `unknown events.detections mode "some" (want all, tracked or off)`.
func ParseDetectionEvents(s string) (DetectionEvents, error) {
	if i := slices.Index(DetectionEventModes(), DetectionEvents(s)); i >= 0 {
		return DetectionEventModes()[i], nil
	}
	return "", fmt.Errorf("unknown events.detections mode %s (want all, tracked or off)", quoteOrEmpty(s))
}

// Events says which events a camera publishes.
type Events struct {
	// Detections is all, tracked or off: see DetectionEvents. Default
	// DefaultDetectionEvents (all); Parse resolves it, and "" (a Config built
	// in Go) means the default too: see DetectionMode.
	Detections DetectionEvents `yaml:"detections"`
}

// DetectionMode returns Detections, DefaultDetectionEvents when it is "".
func (e Events) DetectionMode() DetectionEvents {
	if e.Detections == "" {
		return DefaultDetectionEvents
	}
	return e.Detections
}

// Analytics returns the camera's analytics settings (objects, masks, zones, lines) as
// package analytics takes them.
func (c Camera) Analytics() analytics.Config {
	a := analytics.Config{Objects: c.Objects, Masks: c.Masks, Zones: c.Zones, Lines: c.Lines}
	if c.FPS > 0 {
		a.FrameInterval = time.Duration(float64(time.Second) / c.FPS)
	}
	return a
}

// rawObjects and rawEvents are a camera's objects and events as written: a nil field takes
// the value of camera_defaults.
type rawObjects struct {
	Track   *[]string                `yaml:"track"`
	Filters *[]analytics.ClassFilter `yaml:"filters"`
	Anchor  *analytics.Anchor        `yaml:"anchor"`
	// UpdateInterval is analytics.Objects.UpdateInterval.
	UpdateInterval *time.Duration `yaml:"update_interval"`
	// ClassGroups is analytics.Objects.ClassGroups.
	ClassGroups *[][]string `yaml:"class_groups"`
}

type rawEvents struct {
	Detections *DetectionEvents `yaml:"detections"`
}

func (r *rawObjects) resolve(d analytics.Objects) analytics.Objects {
	if r == nil {
		return d
	}
	return analytics.Objects{Track: or(r.Track, d.Track), Filters: or(r.Filters, d.Filters), Anchor: or(r.Anchor, d.Anchor),
		UpdateInterval: or(r.UpdateInterval, d.UpdateInterval), ClassGroups: groupsOr(r.ClassGroups, d.ClassGroups)}
}

// groupsOr is or for class_groups, whose empty list (groups nothing) is not its unset value
// (the default groups): a camera's `class_groups: []` stays an empty list, not nil.
func groupsOr(p *[][]string, d [][]string) [][]string {
	if p == nil {
		return d
	}
	if *p == nil {
		return [][]string{}
	}
	return *p
}

func (r *rawEvents) resolve(d Events) Events {
	if r == nil {
		return d
	}
	return Events{Detections: or(r.Detections, d.Detections)}
}

// CheckClasses checks the class names of every camera's analytics settings (and of
// camera_defaults.objects) against labels, the model's class names, and returns nil or an
// *Error naming each camera's element, its line and the class, like
// `line 14: cameras[0].zones[1].classes: "forklift" is not a class of the model (zone
// "dock")`. An empty labels checks nothing (a model without class names). c should be
// valid: its other problems are Validate's, and not reported again.
func (c *Config) CheckClasses(labels []string) error {
	if len(labels) == 0 {
		return nil
	}
	without := validator{lines: c.lines}
	without.analytics(c, nil)
	with := validator{lines: c.lines}
	with.analytics(c, labels)
	var problems []Problem
	for _, p := range with.problems {
		if !slices.Contains(without.problems, p) {
			problems = append(problems, p)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return newError(problems)
}

// analytics checks the analytics settings of camera_defaults and of every camera, against
// labels (nil: class names are not checked). A camera's objects problem that it inherits
// from camera_defaults (the same problem, on a key the camera does not set) is reported
// once, at camera_defaults.
func (v *validator) analytics(c *Config, labels []string) {
	v.detectionEvents("camera_defaults.events.detections", c.CameraDefaults.Events)
	v.clips(c, labels) // clips.go
	defaults := v.analyticsProblems("camera_defaults", analytics.Config{Objects: c.CameraDefaults.Objects}, labels)
	for i, cam := range c.Cameras {
		p := fmt.Sprintf("cameras[%d]", i)
		v.detectionEvents(p+".events.detections", cam.Events)
		for _, ap := range analyticsProblems(cam.Analytics(), labels) {
			field, from := ap.Field(), ""
			if sub, ok := objectsKey(field); ok && !v.sets(c, i, "objects", sub) {
				if slices.ContainsFunc(defaults, func(d analytics.Problem) bool { return d == ap }) {
					continue // reported at camera_defaults
				}
				from = "objects." + sub + " from camera_defaults"
			}
			v.add(p+"."+field, "%s", problemMsg(ap, cam.ID, from))
		}
	}
}

// detectionEvents checks events.detections; "" is the default, unless the file says "".
func (v *validator) detectionEvents(field string, e Events) {
	mode := e.DetectionMode()
	if _, written := v.lines[field]; written && e.Detections == "" {
		mode = ""
	}
	oneOfValues(v, field, mode, DetectionEventModes())
}

// analyticsProblems adds the problems of a (at prefix) and returns them.
func (v *validator) analyticsProblems(prefix string, a analytics.Config, labels []string) []analytics.Problem {
	ps := analyticsProblems(a, labels)
	for _, p := range ps {
		v.add(prefix+"."+p.Field(), "%s", problemMsg(p, "", ""))
	}
	return ps
}

func analyticsProblems(a analytics.Config, labels []string) analytics.Problems {
	err := a.Check(labels)
	if err == nil {
		return nil
	}
	ps, ok := err.(analytics.Problems)
	if !ok { // not what Check promises; report it whole
		return analytics.Problems{{Elem: "objects", Msg: err.Error()}}
	}
	return ps
}

// problemMsg is a Problem's message for a config problem, whose field already names the
// element by its index: the element's id and the camera's, when there are, go after it
// (`(zone "door", camera "gate")`), and where the value comes from when not from the camera.
func problemMsg(p analytics.Problem, camera, from string) string {
	var ids []string
	if p.ID != "" {
		ids = append(ids, fmt.Sprintf("%s %q", elemKind(p.Elem), p.ID))
	}
	if camera != "" {
		ids = append(ids, fmt.Sprintf("camera %q", camera))
	}
	if from != "" {
		ids = append(ids, from)
	}
	if len(ids) == 0 {
		return p.Msg
	}
	return fmt.Sprintf("%s (%s)", p.Msg, strings.Join(ids, ", "))
}

// elemKind names the kind of an element with an id.
func elemKind(elem string) string {
	kind := "id"
	switch {
	case strings.HasPrefix(elem, "zones"):
		kind = "zone"
	case strings.HasPrefix(elem, "lines"):
		kind = "line"
	case strings.HasPrefix(elem, "objects.filters"):
		kind = "filter of"
	}
	return kind
}

// objectsKey returns the key of objects that field ("objects.filters[0].class") is under:
// "filters".
func objectsKey(field string) (string, bool) {
	rest, ok := strings.CutPrefix(field, "objects.")
	if !ok {
		return "", false
	}
	if i := strings.IndexAny(rest, ".["); i >= 0 {
		rest = rest[:i]
	}
	return rest, true
}

// sets reports whether camera i sets <section>.<key> itself (section "objects" or "clips",
// resolved key by key from camera_defaults). For a Config built in Go, which has no lines, a
// camera sets it when its value differs from camera_defaults'.
func (v *validator) sets(c *Config, i int, section, key string) bool {
	if v.lines != nil {
		_, ok := v.lines[fmt.Sprintf("cameras[%d].%s.%s", i, section, key)]
		return ok
	}
	cam := yamlField(yamlField(reflect.ValueOf(c.Cameras[i]), section), key)
	d := yamlField(yamlField(reflect.ValueOf(c.CameraDefaults), section), key)
	if !cam.IsValid() || !d.IsValid() {
		return true
	}
	return !reflect.DeepEqual(cam.Interface(), d.Interface())
}

// yamlField is the field of struct s whose YAML name is name; the zero Value when s is not a
// struct or has none.
func yamlField(s reflect.Value, name string) reflect.Value {
	if s.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	for j := range s.NumField() {
		if n, _, _ := strings.Cut(s.Type().Field(j).Tag.Get("yaml"), ","); n == name {
			return s.Field(j)
		}
	}
	return reflect.Value{}
}

// ReadLabels reads a labels file (workers.labels) as the workers do: one class name per
// line, class 0 first; surrounding spaces and a final newline are ignored, an empty line
// within the names is an error.
func ReadLabels(path string) ([]string, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return infer.ParseLabels(path, data)
}
