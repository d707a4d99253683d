package analytics

import (
	"fmt"
	"maps"
	"time"

	"github.com/visiond/visiond/internal/geom"
)

// ZoneEventType is what a ZoneEvent says happened.
type ZoneEventType string

// Zone event types.
const (
	ZoneEnter  ZoneEventType = "enter"
	ZoneExit   ZoneEventType = "exit"
	ZoneLoiter ZoneEventType = "loiter"
)

// ZoneEvent is an object entering, leaving or loitering in a zone.
type ZoneEvent struct {
	Type    ZoneEventType
	Zone    string // the zone's id
	TrackID uint64
	Label   string
	// Time is the capture time of the frame that decided the event.
	Time time.Time
	// Since is when the visit began: the first frame that saw the object inside.
	Since time.Time
	// Dwell is the time inside: for an exit, the whole visit (from Since to the first frame
	// seen outside, or to the last frame seen inside when the track ended); for a loiter,
	// the visit so far; 0 for an enter.
	Dwell time.Duration
	// Ended says that an exit is due to the track's end.
	Ended bool
}

// Occupancy is how many objects are in a zone, in all and by class.
type Occupancy struct {
	Zone    string
	Total   int
	ByClass map[string]int // classes with at least one object
}

// Presence is a track's record in one zone it has entered, for object events.
type Presence struct {
	Zone   string
	Inside bool
	// Since is when the current visit began (zero when not inside).
	Since time.Time
	// Total is the time spent inside over all its visits, the current one up to the last
	// frame that saw it inside.
	Total time.Duration
}

// ZoneSet follows the tracks of one camera through its zones. Create it with NewZoneSet and
// feed it every analysed frame with Update; see the package documentation. Not safe for
// concurrent use.
type ZoneSet struct {
	zones  []*zoneState
	events []ZoneEvent
	last   time.Time // time of the last frame, to find stale tracks
}

type zoneState struct {
	def       Zone
	key       string
	polygon   geom.Polygon
	lo, hi    geom.Point      // the polygon's bounding box, to skip most objects cheaply
	classes   map[string]bool // nil: all
	debounce  time.Duration
	loiter    time.Duration // 0: off
	anchor    Anchor
	tracks    map[uint64]*visitor
	occupancy map[string]int // members by class
}

// visitor is a track's state in one zone: present while it is inside, a member, or has a
// record of time spent there.
type visitor struct {
	label    string
	member   bool      // it has entered and not left
	runStart time.Time // first frame of the current run of frames against member; zero if none
	since    time.Time // member: the first frame of this visit
	lastIn   time.Time // member: the last frame that saw it inside
	lastSeen time.Time
	loitered bool
	total    time.Duration // finished visits
}

// NewZoneSet returns a ZoneSet of zones, or a Problems error if they are bad (classes are not
// checked: Config.Check does that with the model's labels).
func NewZoneSet(zones []Zone) (*ZoneSet, error) {
	s := &ZoneSet{}
	if err := s.Apply(zones); err != nil {
		return nil, err
	}
	return s, nil
}

// Apply replaces the set's zones by zones, for a hot reload. A zone whose definition is
// unchanged (same id and Equal) keeps its members, occupancy and records; a new or changed
// zone starts empty (objects in it enter again after its debounce; no exit is reported for a
// changed zone); a removed zone is dropped. Occupancy afterwards shows that: publish it
// again. If zones are bad, Apply returns a Problems error and keeps the zones it had.
func (s *ZoneSet) Apply(zones []Zone) error {
	var ps problems
	checkZones(&ps, zones)
	if err := ps.err(); err != nil {
		return err
	}
	old := make(map[string]*zoneState, len(s.zones))
	for _, z := range s.zones {
		old[z.key] = z
	}
	next := make([]*zoneState, len(zones))
	for i, z := range zones {
		key := z.key()
		if st, ok := old[key]; ok {
			next[i] = st
			continue
		}
		pg := toPolygon(z.Polygon)
		lo, hi := pg[0], pg[0]
		for _, p := range pg {
			lo = geom.Point{X: min(lo.X, p.X), Y: min(lo.Y, p.Y)}
			hi = geom.Point{X: max(hi.X, p.X), Y: max(hi.Y, p.Y)}
		}
		next[i] = &zoneState{
			def:       z,
			key:       key,
			polygon:   pg,
			lo:        lo,
			hi:        hi,
			classes:   classSet(z.Classes),
			debounce:  z.Debounce(),
			loiter:    seconds(z.LoiterSeconds),
			anchor:    anchorOr(z.Anchor),
			tracks:    map[uint64]*visitor{},
			occupancy: map[string]int{},
		}
	}
	s.zones = next
	return nil
}

// Zones returns the set's zone definitions, in order.
func (s *ZoneSet) Zones() []Zone {
	out := make([]Zone, len(s.zones))
	for i, z := range s.zones {
		out[i] = z.def
	}
	return out
}

// Update takes one frame and returns the events it decided: for each zone in order, enters,
// loiters and exits of the frame's objects in their order, then the exits of ended tracks.
// The slice is reused by the next Update. It fails only on a frame without a size.
func (s *ZoneSet) Update(f Frame) ([]ZoneEvent, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	s.events = s.events[:0]
	t := f.Time
	for _, z := range s.zones {
		for _, o := range f.Objects {
			if z.classes != nil && !z.classes[o.Label] {
				continue
			}
			inside := z.contains(f.normalized(z.anchor, o.Box))
			v := z.tracks[o.TrackID]
			if v == nil {
				if !inside {
					continue
				}
				v = &visitor{label: o.Label}
				z.tracks[o.TrackID] = v
			}
			v.lastSeen = t
			s.observe(z, o.TrackID, v, inside, t)
		}
		for _, id := range f.Ended {
			v := z.tracks[id]
			if v == nil {
				continue
			}
			if v.member {
				s.exit(z, id, v, t, v.lastIn, true)
			}
			delete(z.tracks, id)
		}
	}
	s.forgetStale(t)
	return s.events, nil
}

// contains says whether p is in the zone's polygon (or on its outline).
func (z *zoneState) contains(p geom.Point) bool {
	const tol = 1e-9 // the polygon's edges are within geom's tolerance of the box
	if p.X < z.lo.X-tol || p.X > z.hi.X+tol || p.Y < z.lo.Y-tol || p.Y > z.hi.Y+tol {
		return false
	}
	return z.polygon.Contains(p)
}

// observe moves a visitor seen inside or outside at time t.
func (s *ZoneSet) observe(z *zoneState, id uint64, v *visitor, inside bool, t time.Time) {
	if inside {
		if v.member {
			v.lastIn = t
		}
	}
	if inside == v.member {
		v.runStart = time.Time{} // seen where it belongs: any run against it is over
	} else {
		if v.runStart.IsZero() {
			v.runStart = t
		}
		if since(t, v.runStart) >= z.debounce {
			if inside {
				v.member, v.since, v.lastIn, v.loitered = true, v.runStart, t, false
				v.runStart = time.Time{}
				z.occupancy[v.label]++
				s.events = append(s.events, ZoneEvent{Type: ZoneEnter, Zone: z.def.ID, TrackID: id,
					Label: v.label, Time: t, Since: v.since})
			} else {
				left := v.runStart
				s.exit(z, id, v, t, left, false)
				if v.total == 0 {
					delete(z.tracks, id) // nothing left to remember; not reachable with dwell > 0
				}
				return
			}
		}
	}
	if inside && v.member && !v.loitered && z.loiter > 0 && since(t, v.since) >= z.loiter {
		v.loitered = true
		s.events = append(s.events, ZoneEvent{Type: ZoneLoiter, Zone: z.def.ID, TrackID: id,
			Label: v.label, Time: t, Since: v.since, Dwell: since(t, v.since)})
	}
	if !v.member && !inside && v.total == 0 {
		delete(z.tracks, id) // outside, never entered: nothing to remember
	}
}

// exit ends v's visit at time left and reports it at time t.
func (s *ZoneSet) exit(z *zoneState, id uint64, v *visitor, t, left time.Time, ended bool) {
	dwell := since(left, v.since)
	v.total += dwell
	s.events = append(s.events, ZoneEvent{Type: ZoneExit, Zone: z.def.ID, TrackID: id,
		Label: v.label, Time: t, Since: v.since, Dwell: dwell, Ended: ended})
	v.member, v.runStart, v.since, v.lastIn, v.loitered = false, time.Time{}, time.Time{}, time.Time{}, false
	if z.occupancy[v.label]--; z.occupancy[v.label] <= 0 {
		delete(z.occupancy, v.label)
	}
}

// forgetStale drops the tracks not seen for StaleAfter, so that state stays bounded when an
// end is missed. A member among them leaves with an exit (Ended), which lowers occupancy.
func (s *ZoneSet) forgetStale(t time.Time) {
	if since(t, s.last) < StaleAfter/10 && !s.last.IsZero() {
		return // look a few times per StaleAfter, not every frame
	}
	s.last = t
	for _, z := range s.zones {
		for id, v := range z.tracks {
			if since(t, v.lastSeen) > StaleAfter {
				if v.member { // its exit, as for an ended track: occupancy never falls unsaid
					s.exit(z, id, v, t, v.lastIn, true)
				}
				delete(z.tracks, id)
			}
		}
	}
}

// Occupancy returns the number of objects in each zone, in all and by class, in the zones'
// order. The maps are the caller's.
func (s *ZoneSet) Occupancy() []Occupancy {
	out := make([]Occupancy, len(s.zones))
	for i, z := range s.zones {
		o := Occupancy{Zone: z.def.ID, ByClass: maps.Clone(z.occupancy)}
		if o.ByClass == nil {
			o.ByClass = map[string]int{}
		}
		for _, n := range z.occupancy {
			o.Total += n
		}
		out[i] = o
	}
	return out
}

// Presence appends to dst the zones that track id has entered (is in, or was in while
// followed), in the zones' order, and returns it.
func (s *ZoneSet) Presence(id uint64, dst []Presence) []Presence {
	for _, z := range s.zones {
		v := z.tracks[id]
		if v == nil || (!v.member && v.total == 0) {
			continue
		}
		p := Presence{Zone: z.def.ID, Inside: v.member, Total: v.total}
		if v.member {
			p.Since = v.since
			p.Total += since(v.lastIn, v.since)
		}
		dst = append(dst, p)
	}
	return dst
}

// String describes the set briefly, for logs.
func (s *ZoneSet) String() string {
	n := 0
	for _, z := range s.zones {
		n += len(z.tracks)
	}
	return fmt.Sprintf("%d zones, %d tracks followed", len(s.zones), n)
}
