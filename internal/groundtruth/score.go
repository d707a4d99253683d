package groundtruth

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// MinIoU is Evaluator's. Default 0.5.
	MinIoU float64
	// Ignore are boxes, in pixels, of things on the video that are not in its truth (the
	// parked vehicles of vtest.avi: VTestParked): Evaluator's distractors.
	Ignore []geom.Box
	// Classes maps the model's labels to the truth's classes where they differ (the van,
	// of class car, is now and then seen as a truck: {"truck": "car"}). Labels that are
	// then no class of the truth are left out: the line and zone count only the truth's
	// classes.
	Classes map[string]string
	// Interval is the analysed frames' interval: a reported crossing matches a true one
	// within max(1 s, Interval) (CrossingTolerance).
	Interval time.Duration
}

// Tracking are the tracking figures of a run against one truth, as TrackEval scores them.
type Tracking struct {
	CLEAR CLEAR
	ID    IDScore
	HOTA  HOTA
}

// Figures are the scores of a run on a scene.
type Figures struct {
	Frames int // analysed frames scored
	// Tracking is scored against every object that shows (Visible > 0, MOTChallenge's
	// truth): the headline. Half is the variant whose truth is the objects at least half
	// visible (the less visible ones distractors, as Evaluator says), reported beside it.
	Tracking, Half Tracking
	// Tracks is the number of tracks that followed a truth object, Objects the number of
	// truth objects followed by some track (Tracking.CLEAR.Tracks).
	Tracks, Objects int
	// Handovers is the number of tracks that followed more than one object (overlapped
	// each on MinHandover frames or more): an identity carried from one object to another,
	// which CLEAR counts as no switch when the second object had no track before.
	Handovers int

	// Crossings scores the line's crossing events one by one against the truth's.
	Crossings CrossingScore

	// Zone scores the zone's stays against the truth's visits.
	Zone ZoneScore
}

// MinHandover is how many frames a track must overlap each of two objects on to count as
// a handover (Figures.Handovers): fewer may be a box that overlapped a passer-by.
const MinHandover = 3

// ScoreRun compares a run's events (obs) over sc's video with its truth: every analysed
// frame's tracked boxes with the truth at that time (Evaluator: CLEAR, IDF1, HOTA, against
// every object showing and against the half-visible ones), the crossings of line with the
// truth's (ScoreCrossings), and the stays in zone with the truth's visits (ScoreStays).
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
	var classes []string
	for _, o := range s.Objects {
		classes = append(classes, o.class())
	}
	class := classMap(classes, opt.Classes)

	all := Evaluator{MinIoU: minIoU, Ignore: opt.Ignore}
	half := Evaluator{MinIoU: minIoU, MinVisible: 0.5, Ignore: opt.Ignore}
	seen := map[uint64][]sighting{} // per track, the objects its boxes overlapped most, in time order
	frames := slices.SortedFunc(slices.Values(obs.Frames), func(a, b ObservedFrame) int { return cmp.Compare(a.T, b.T) })
	for _, f := range frames {
		if f.T < 0 || f.T >= s.Duration {
			return Figures{}, fmt.Errorf("an analysed frame at %v of a %v video", f.T, s.Duration)
		}
		truth := sc.At(f.T)
		var got []Tracked
		for _, g := range f.Tracked {
			if g.Class = class(g.Class); g.Class == "" || g.TrackID == 0 {
				continue
			}
			got = append(got, g)
			if obj := bestObject(g, truth, minIoU); obj != 0 {
				seen[g.TrackID] = append(seen[g.TrackID], sighting{f.T, obj})
			}
		}
		all.Add(truth, got)
		half.Add(truth, got)
	}
	fig := Figures{Frames: len(frames),
		Tracking: Tracking{CLEAR: all.CLEAR(), ID: all.Identity(), HOTA: all.HOTA()},
		Half:     Tracking{CLEAR: half.CLEAR(), ID: half.Identity(), HOTA: half.HOTA()}}
	for _, ids := range fig.Tracking.CLEAR.Tracks {
		fig.Tracks += len(ids)
		fig.Objects++
	}
	fig.Handovers = all.handovers(minIoU, MinHandover)
	fig.Crossings = ScoreCrossings(crossings, obs.Crossings, CrossingTolerance(opt.Interval), class)
	fig.Zone = ScoreStays(visits, obs.Stays, stayOwner(seen), class)
	return fig, nil
}

// classMap returns the function that gives a label its class of the truth (classes), after
// renaming by rename; "" for a label that is no class of the truth.
func classMap(classes []string, rename map[string]string) func(string) string {
	return func(label string) string {
		if c, ok := rename[label]; ok {
			label = c
		}
		if !slices.Contains(classes, label) {
			return ""
		}
		return label
	}
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

// CrossingTolerance is how far in time a reported crossing may be from the true one it
// matches: a second, or the analysed interval where that is longer (a crossing is seen on
// the first analysed frame past the line).
func CrossingTolerance(interval time.Duration) time.Duration { return max(time.Second, interval) }

// CrossingScore scores a line's crossing events one by one: each reported crossing is
// matched to at most one true crossing of the same direction and class within the
// tolerance, and each true one to at most one reported, the most matches there can be
// (ties to the least time apart). Nothing is netted: a missed crossing and a crossing
// counted twice are one false negative and one false positive, not a right count.
type CrossingScore struct {
	Tolerance time.Duration
	// True, Reported and Matched count the true crossings, the reported ones and the pairs.
	True, Reported, Matched int
	// Precision = Matched / Reported, Recall = Matched / True (1 where nothing was
	// reported, or nothing was to be).
	Precision, Recall float64
	// Counters are the same per direction and class.
	Counters map[CountKey]CrossingCount
	// Missed are the true crossings no report matched, Extra the reports that matched none.
	Missed []Crossing
	Extra  []ObservedCrossing
	// Offsets are the matched reports' times less the true ones', in the truth's order.
	Offsets []time.Duration
}

// CrossingCount is one counter (direction and class) of a line.
type CrossingCount struct{ True, Reported, Matched int }

// ScoreCrossings matches reported crossings (got) to true ones (CrossingScore says how);
// class gives a report's label its class in the truth ("" leaves the report out: a class
// the truth does not count).
func ScoreCrossings(truth []Crossing, got []ObservedCrossing, tol time.Duration, class func(string) string) CrossingScore {
	cs := CrossingScore{Tolerance: tol, Counters: map[CountKey]CrossingCount{}}
	var reports []ObservedCrossing
	for _, c := range got {
		if c.Class = class(c.Class); c.Class != "" {
			reports = append(reports, c)
		}
	}
	cs.True, cs.Reported = len(truth), len(reports)
	for _, c := range truth {
		k := CountKey{Direction: c.Direction, Class: c.Class}
		n := cs.Counters[k]
		n.True++
		cs.Counters[k] = n
	}
	for _, c := range reports {
		k := CountKey{Direction: c.Direction, Class: c.Class}
		n := cs.Counters[k]
		n.Reported++
		cs.Counters[k] = n
	}
	// A pair's weight is 1 plus less than 1/(n+1) for how close it is in time, so that the
	// assignment with the most weight has the most pairs first.
	n := float64(max(len(truth), len(reports)) + 1)
	w := make([][]float64, len(truth))
	for i, tc := range truth {
		w[i] = make([]float64, len(reports))
		for j, rc := range reports {
			d := (rc.T - tc.T).Abs()
			if rc.Direction == tc.Direction && rc.Class == tc.Class && d <= tol {
				w[i][j] = 1 + (1-float64(d)/float64(tol+1))/n
			}
		}
	}
	matched := make([]bool, len(reports))
	pairs := maxAssignment(w)
	for i, tc := range truth {
		j := -1
		if i < len(pairs) {
			j = pairs[i]
		}
		if j < 0 || w[i][j] == 0 {
			cs.Missed = append(cs.Missed, tc)
			continue
		}
		matched[j] = true
		cs.Matched++
		cs.Offsets = append(cs.Offsets, reports[j].T-tc.T)
		k := CountKey{Direction: tc.Direction, Class: tc.Class}
		c := cs.Counters[k]
		c.Matched++
		cs.Counters[k] = c
	}
	for j, m := range matched {
		if !m {
			cs.Extra = append(cs.Extra, reports[j])
		}
	}
	cs.Precision = ratio(cs.Matched, cs.Reported)
	cs.Recall = ratio(cs.Matched, cs.True)
	return cs
}

// Keys returns the counters in order: direction, then class.
func (cs CrossingScore) Keys() []CountKey {
	return slices.SortedFunc(maps.Keys(cs.Counters), func(a, b CountKey) int {
		return cmp.Or(cmp.Compare(a.Direction, b.Direction), cmp.Compare(a.Class, b.Class))
	})
}

// ZoneScore scores a zone's stays (exit events) against the truth's visits.
type ZoneScore struct {
	// Visits are the zone's true visits, Stays the visits reported (exits).
	Visits, Stays int
	// DwellTrue is the time the truth's objects spent in the zone, DwellReported the time
	// the reported stays add up to.
	DwellTrue, DwellReported time.Duration
	// Dwells are the true visits, each with the dwell reported for it: the stays given to
	// it (none: 0), in order of entry.
	Dwells []VisitDwell
	// StrayDwell is the dwell of the stays given to no visit.
	StrayDwell time.Duration
	// MeanDwellError is the mean over the true visits of |reported - true| dwell, the
	// stays given to no visit adding their dwell (a visit that never was).
	MeanDwellError time.Duration
	// DwellError is that sum of errors over the sum of the true dwells.
	DwellError float64
	// Found is the number of true visits given a stay.
	Found int
}

// VisitDwell is one true visit's dwell, true and reported.
type VisitDwell struct {
	ObjectID       int
	Enter          time.Duration
	True, Reported time.Duration
}

// ScoreStays gives each reported stay to a true visit and scores the dwells: a stay goes to
// the visit of its object (owner: the object its track followed during the stay; nil when
// the run's boxes are not scored, as on a recording whose truth has no boxes) that it
// overlaps most in time, or with no owner to the visit of its class it overlaps most;
// class is as ScoreCrossings'.
func ScoreStays(visits []Visit, stays []ObservedStay, owner func(track uint64, enter, exit time.Duration) int, class func(string) string) ZoneScore {
	z := ZoneScore{Visits: len(visits)}
	got := make([]time.Duration, len(visits))
	given := make([]bool, len(visits))
	for _, st := range stays {
		cl := class(st.Class)
		if cl == "" {
			continue
		}
		z.Stays++
		d := st.Exit - st.Enter
		z.DwellReported += d
		best, most := -1, time.Duration(0)
		obj := 0
		if owner != nil {
			obj = owner(st.TrackID, st.Enter, st.Exit)
		}
		for i, v := range visits {
			if owner != nil && (obj == 0 || v.ObjectID != obj) || owner == nil && v.Class != cl {
				continue
			}
			if o := min(v.Exit, st.Exit) - max(v.Enter, st.Enter); o > most {
				best, most = i, o
			}
		}
		if best < 0 {
			z.StrayDwell += d
			continue
		}
		got[best] += d
		given[best] = true
	}
	errSum := z.StrayDwell
	for i, v := range visits {
		z.DwellTrue += v.Dwell()
		errSum += (got[i] - v.Dwell()).Abs()
		z.Dwells = append(z.Dwells, VisitDwell{ObjectID: v.ObjectID, Enter: v.Enter, True: v.Dwell(), Reported: got[i]})
		if given[i] {
			z.Found++
		}
	}
	if z.DwellTrue > 0 {
		z.DwellError = errSum.Seconds() / z.DwellTrue.Seconds()
	}
	if len(visits) > 0 {
		z.MeanDwellError = errSum / time.Duration(len(visits))
	}
	return z
}

// String is the figures on one line, for a test's log.
func (fig Figures) String() string {
	t, h, c, z := fig.Tracking, fig.Half, fig.Crossings, fig.Zone
	var lines []string
	for _, k := range c.Keys() {
		n := c.Counters[k]
		lines = append(lines, fmt.Sprintf("%s %s %d of %d true, %d reported", k.Class, k.Direction, n.Matched, n.True, n.Reported))
	}
	return fmt.Sprintf("%d frames: HOTA %.3f (DetA %.3f, AssA %.3f), IDF1 %.3f (IDP %.3f, IDR %.3f), MOTA %.3f (TP %d, FN %d, FP %d, IDSW %d, Frag %d, MT/PT/ML %d/%d/%d), "+
		"at least half visible: HOTA %.3f IDF1 %.3f MOTA %.3f; %d tracks for %d objects, %d of them handed over; "+
		"crossings: precision %.3f recall %.3f (%d matched, %d true, %d reported: %s); "+
		"zone: %d stays for %d visits (%d found), dwell %.1f s for %.1f s true, dwell error %.3f (mean %.2f s a visit)",
		fig.Frames, t.HOTA.HOTA, t.HOTA.DetA, t.HOTA.AssA, t.ID.IDF1, t.ID.IDP, t.ID.IDR, t.CLEAR.MOTA, t.CLEAR.TP, t.CLEAR.FN, t.CLEAR.FP, t.CLEAR.IDSW, t.CLEAR.Frag, t.CLEAR.MT, t.CLEAR.PT, t.CLEAR.ML,
		h.HOTA.HOTA, h.ID.IDF1, h.CLEAR.MOTA, fig.Tracks, fig.Objects, fig.Handovers,
		c.Precision, c.Recall, c.Matched, c.True, c.Reported, strings.Join(lines, "; "),
		z.Stays, z.Visits, z.Found, z.DwellReported.Seconds(), z.DwellTrue.Seconds(), z.DwellError, z.MeanDwellError.Seconds())
}
