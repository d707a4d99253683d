package groundtruth

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// Observed is what a run of the analytics over a scene's video reported, in the video's
// time (an event's capture time minus the capture time of the video's first frame): the
// form of the daemon's events that ScoreRun reads, so that this package needs none of
// the daemon's packages.
type Observed struct {
	// Frames are the analysed frames, each with its tracked boxes (a detection event's
	// detections that carry a track id).
	Frames []ObservedFrame
	// Crossings are the line's crossing events.
	Crossings []ObservedCrossing
	// Stays are the zone's visits, one per exit event (from its Since to Since + dwell).
	Stays []ObservedStay
}

// ObservedFrame is one analysed frame: its time in the video and its tracked boxes, their
// Class the model's label.
type ObservedFrame struct {
	T       time.Duration
	Tracked []Tracked
}

// ObservedCrossing is one line event.
type ObservedCrossing struct {
	TrackID   uint64
	Class     string
	Direction Direction
	T         time.Duration
}

// ObservedStay is one visit of the zone, from a zone exit event.
type ObservedStay struct {
	TrackID     uint64
	Class       string
	Enter, Exit time.Duration
}

// ScoreOptions say how to compare a run with the truth.
type ScoreOptions struct {
	// MinIoU and MinVisible are Evaluator's. Defaults 0.5 and 0.5.
	MinIoU, MinVisible float64
	// Ignore are boxes, in pixels, of things on the video that are not in its truth (the
	// parked vehicles of vtest.avi: VTestParked): a tracked box that overlaps one by
	// MinIoU and no truth object is left out, neither a false positive nor anything else.
	Ignore []geom.Box
	// Classes maps the model's labels to the truth's classes where they differ (the van,
	// of class car, is now and then seen as a truck: {"truck": "car"}). Labels that are
	// then no class of the truth are left out: the line and zone count only the truth's
	// classes.
	Classes map[string]string
}

// Figures are the scores of a run on a scene.
type Figures struct {
	Frames int     // analysed frames scored
	Score  Score   // CLEAR-MOT tally (Evaluator)
	MOTA   float64 // Score.MOTA()
	ID     IDScore // identity (IDF1)
	// Tracks is the number of tracks that followed a truth object, Objects the number of
	// truth objects followed by some track.
	Tracks, Objects int
	// Handovers is the number of tracks that followed more than one object (overlapped
	// each on MinHandover frames or more): an identity carried from one object to another,
	// which CLEAR-MOT counts as no switch when the second object had no track before.
	Handovers int

	// Lines are the counts of the line by direction and class, counted and true.
	Lines map[CountKey]LineCount
	// CountAccuracy is 1 - sum |counted - true| / sum true over the line's counters (at
	// most 1; below 0 when it counts more than twice wrong).
	CountAccuracy float64

	// Visits are the zone's true visits, Stays the visits reported (exits).
	Visits, Stays int
	// DwellTrue is the time the truth's objects spent in the zone, DwellCounted the time
	// the reported stays add up to.
	DwellTrue, DwellCounted time.Duration
	// DwellError is the zone's dwell error: the sum over the true visits of |reported -
	// true| over the sum of the true dwells, where a visit's reported dwell is that of the
	// stays given to it (none: 0): a stay goes to the object its track's boxes overlapped
	// on most frames of the stay, and to the visit of that object it overlaps most in time;
	// stays given to no visit add their dwell to the error too.
	DwellError float64
	// MeanDwellError is that sum of errors over the number of true visits.
	MeanDwellError time.Duration
	// Dwells are the true visits' dwells, true and reported, in order of entry.
	Dwells []VisitDwell
	// StrayDwell is the dwell of the stays given to no visit.
	StrayDwell time.Duration
}

// VisitDwell is one true visit's dwell, true and reported.
type VisitDwell struct {
	ObjectID       int
	Enter          time.Duration
	True, Reported time.Duration
}

// MinHandover is how many frames a track must overlap each of two objects on to count as
// a handover (Figures.Handovers): fewer may be a box that overlapped a passer-by.
const MinHandover = 3

// LineCount is one counter of a line.
type LineCount struct{ Counted, True int }

// Accuracy is 1 - |counted - true| / true; 1 when both are 0, 0 when the truth is 0.
func (c LineCount) Accuracy() float64 {
	if c.True == 0 {
		if c.Counted == 0 {
			return 1
		}
		return 0
	}
	return 1 - math.Abs(float64(c.Counted-c.True))/float64(c.True)
}

// ScoreRun compares a run's events (obs) over sc's video with its truth: every analysed
// frame's tracked boxes with the truth at that time (Evaluator: CLEAR-MOT and IDF1), the
// crossings of line with the truth's, and the stays in zone with the truth's visits.
func ScoreRun(sc *Scene, line Line, zone Zone, obs Observed, opt ScoreOptions) (Figures, error) {
	s := sc.Scenario()
	crossings, err := s.Crossings(line)
	if err != nil {
		return Figures{}, fmt.Errorf("line: %w", err)
	}
	visits, err := s.Visits(zone)
	if err != nil {
		return Figures{}, fmt.Errorf("zone: %w", err)
	}
	minIoU := cmp.Or(opt.MinIoU, 0.5)
	classes := map[string]bool{}
	for _, o := range s.Objects {
		classes[o.class()] = true
	}
	// class is the truth's class of a label, "" for none.
	class := func(label string) string {
		if c, ok := opt.Classes[label]; ok {
			label = c
		}
		if !classes[label] {
			return ""
		}
		return label
	}

	ev := Evaluator{MinIoU: opt.MinIoU, MinVisible: opt.MinVisible}
	seen := map[uint64][]sighting{} // per track, the objects its boxes overlapped most, in time order
	frames := slices.SortedFunc(slices.Values(obs.Frames), func(a, b ObservedFrame) int { return cmp.Compare(a.T, b.T) })
	for _, f := range frames {
		if f.T < 0 || f.T >= s.Duration {
			return Figures{}, fmt.Errorf("an analysed frame at %v of a %v video", f.T, s.Duration)
		}
		truth := sc.At(f.T)
		var got []Tracked
		for _, g := range f.Tracked {
			if g.Class = class(g.Class); g.Class == "" || g.TrackID == 0 || ignored(g, truth, opt.Ignore, minIoU) {
				continue
			}
			got = append(got, g)
			if obj := bestObject(g, truth, minIoU); obj != 0 {
				seen[g.TrackID] = append(seen[g.TrackID], sighting{f.T, obj})
			}
		}
		ev.Add(truth, got)
	}
	fig := Figures{Frames: len(frames), Score: ev.Score(), ID: ev.IDScore()}
	fig.MOTA = fig.Score.MOTA()
	for _, ids := range fig.Score.Tracks {
		fig.Tracks += len(ids)
		fig.Objects++
	}
	objs := map[uint64]int{}
	for p, n := range ev.ids.overlap {
		if n >= MinHandover {
			objs[p.track]++
		}
	}
	for _, n := range objs {
		if n > 1 {
			fig.Handovers++
		}
	}

	fig.Lines = map[CountKey]LineCount{}
	for k, n := range Count(crossings) {
		fig.Lines[k] = LineCount{True: n}
	}
	for _, c := range obs.Crossings {
		if cl := class(c.Class); cl != "" {
			k := CountKey{Direction: c.Direction, Class: cl}
			n := fig.Lines[k]
			n.Counted++
			fig.Lines[k] = n
		}
	}
	wrong, all := 0, 0
	for _, n := range fig.Lines {
		wrong += max(n.Counted-n.True, n.True-n.Counted)
		all += n.True
	}
	fig.CountAccuracy = 1 - float64(wrong)/float64(max(all, 1))

	fig.scoreZone(visits, obs.Stays, stayOwner(seen), class)
	return fig, nil
}

// sighting is a tracked box on an object at a time of the video.
type sighting struct {
	t   time.Duration
	obj int
}

// bestObject returns the id of the truth object of g's class that g overlaps most, by
// minIoU at least; 0 for none.
func bestObject(g Tracked, truth []Truth, minIoU float64) int {
	best, most := 0, minIoU
	for _, tr := range truth {
		if v := IoU(tr.Box, g.Box); (g.Class == "" || g.Class == tr.Class) && v >= most {
			best, most = tr.ID, v
		}
	}
	return best
}

// stayOwner returns the function that says whose stay a track's stay from enter to exit
// was: the object its boxes overlapped on the most frames of the stay (a track can follow
// one object and then another, after a swap), ties to the earliest; 0 for none.
func stayOwner(seen map[uint64][]sighting) func(track uint64, enter, exit time.Duration) int {
	return func(track uint64, enter, exit time.Duration) int {
		n := map[int]int{}
		best := 0
		for _, sg := range seen[track] {
			if sg.t < enter || sg.t > exit {
				continue
			}
			if n[sg.obj]++; best == 0 || n[sg.obj] > n[best] {
				best = sg.obj
			}
		}
		return best
	}
}

// ignored says whether a tracked box is on an ignored thing: it overlaps an Ignore box
// by minIoU and no truth object.
func ignored(g Tracked, truth []Truth, ignore []geom.Box, minIoU float64) bool {
	for _, tr := range truth {
		if IoU(tr.Box, g.Box) >= minIoU {
			return false
		}
	}
	for _, b := range ignore {
		if IoU(b, g.Box) >= minIoU {
			return true
		}
	}
	return false
}

// scoreZone fills the zone's figures: each stay goes to the visit of its object (owner)
// that it overlaps most in time.
func (fig *Figures) scoreZone(visits []Visit, stays []ObservedStay, owner func(track uint64, enter, exit time.Duration) int, class func(string) string) {
	fig.Visits = len(visits)
	got := make([]time.Duration, len(visits))
	var stray time.Duration // dwell of stays given to no visit
	for _, st := range stays {
		if class(st.Class) == "" {
			continue
		}
		fig.Stays++
		d := st.Exit - st.Enter
		fig.DwellCounted += d
		best, most := -1, time.Duration(0)
		obj := owner(st.TrackID, st.Enter, st.Exit)
		for i, v := range visits {
			if obj == 0 || v.ObjectID != obj {
				continue
			}
			if o := min(v.Exit, st.Exit) - max(v.Enter, st.Enter); o > most {
				best, most = i, o
			}
		}
		if best < 0 {
			stray += d
			continue
		}
		got[best] += d
	}
	errSum := stray
	fig.StrayDwell = stray
	for i, v := range visits {
		fig.DwellTrue += v.Dwell()
		errSum += (got[i] - v.Dwell()).Abs()
		fig.Dwells = append(fig.Dwells, VisitDwell{ObjectID: v.ObjectID, Enter: v.Enter, True: v.Dwell(), Reported: got[i]})
	}
	if fig.DwellTrue > 0 {
		fig.DwellError = errSum.Seconds() / fig.DwellTrue.Seconds()
	}
	if len(visits) > 0 {
		fig.MeanDwellError = errSum / time.Duration(len(visits))
	}
}

// Keys returns the line's counters in order: direction, then class.
func (fig Figures) Keys() []CountKey {
	return slices.SortedFunc(maps.Keys(fig.Lines), func(a, b CountKey) int {
		return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Class, b.Class))
	})
}

// String is the figures on one line, for a test's log.
func (fig Figures) String() string {
	lines := ""
	for _, k := range fig.Keys() {
		n := fig.Lines[k]
		lines += fmt.Sprintf(" %s %s %d/%d;", k.Class, k.Direction, n.Counted, n.True)
	}
	return fmt.Sprintf("%d frames: IDF1 %.3f (IDP %.3f, IDR %.3f), MOTA %.3f (%d object-frames required, %d missed, %d false positives), %d identity switches, %d fragmentations, %d tracks for %d objects, %d of them handed over; "+
		"line:%s count accuracy %.3f; zone: %d stays for %d visits, dwell %.1f s for %.1f s true, dwell error %.3f (mean %.2f s a visit)",
		fig.Frames, fig.ID.IDF1, fig.ID.IDP, fig.ID.IDR, fig.MOTA, fig.Score.Required, fig.Score.Missed, fig.Score.FalsePositives, fig.Score.IDSwitches, fig.Score.Fragmentations, fig.Tracks, fig.Objects, fig.Handovers,
		lines, fig.CountAccuracy, fig.Stays, fig.Visits, fig.DwellCounted.Seconds(), fig.DwellTrue.Seconds(), fig.DwellError, fig.MeanDwellError.Seconds())
}
