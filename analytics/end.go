package analytics

import (
	"slices"
	"time"
)

// The reasons for an ObjectEnd: its report's Why holds exactly one of them. An object ends
// when its track is lost for longer than the tracker's buffer (WhyLost), or when its
// camera's life ends it: the scene is told why (Scene.End).
const (
	WhyLost           Why = iota + 101 // unmatched past the tracker's lost buffer, or gone out of the frame
	WhyCameraOffline                   // no frame of its camera analysed for the lost buffer
	WhyCameraRemoved                   // its camera was removed from the config
	WhyCameraDisabled                  // its camera was disabled (enabled: false)
	WhySourceChanged                   // its camera restarted on another source (url, kind...)
	WhyShutdown                        // the daemon stopped
	WhyClockBack                       // its camera's capture clock went back more than timeSlack: a new stream
	WhyVideoEnd                        // the recording a replay analyses ended (visiond replay)
)

// endName is the name of an end's reason w, as String gives it; false for another Why.
func endName(w Why) (string, bool) {
	switch w {
	case WhyLost:
		return "lost", true
	case WhyCameraOffline:
		return "camera_offline", true
	case WhyCameraRemoved:
		return "camera_removed", true
	case WhyCameraDisabled:
		return "camera_disabled", true
	case WhySourceChanged:
		return "source_changed", true
	case WhyShutdown:
		return "shutdown", true
	case WhyClockBack:
		return "clock_back", true
	case WhyVideoEnd:
		return "video_end", true
	}
	return "", false
}

// IsEnd reports whether w is the reason of an end (ObjectEnd), not of an update.
func (w Why) IsEnd() bool { _, ok := endName(w); return ok }

// End ends every followed object of the scene, for why (a reason of an end other than
// WhyLost: the camera went offline, was removed or restarted, the daemon stops): their end
// reports and the zone exits of the members of its zones, whose occupancy falls to zero.
// The scene goes on: a later Step starts new tracks, with new ids. A scene that never saw a
// frame has nothing to end.
func (s *Scene) End(why Why) StepResult {
	var res StepResult
	if s.frame.W <= 0 || s.frame.H <= 0 {
		return res
	}
	res.Objects, res.Zones = s.endAll(s.frame.W, s.frame.H, why, nil)
	s.tracks = s.tracks[:0] // Live lists none
	return res
}

// endAll ends every track, for why, and returns their end reports appended to out and the
// zone exits of those that were in a zone (the caller's slice).
func (s *Scene) endAll(w, h int, why Why, out []ObjectReport) ([]ObjectReport, []ZoneEvent) {
	ended := s.tracker.EndAll()
	ids := make([]uint64, 0, len(ended))
	for _, t := range ended {
		ids = append(ids, t.ID)
	}
	f := Frame{Time: s.last, W: w, H: h, Ended: ids}
	zs, _ := s.zones.Update(f) // the size is positive: only a bad size fails
	zones := slices.Clone(zs)  // the set's slice, which its next Update reuses
	s.lines.Update(f)          //nolint:errcheck
	s.motion.Update(f)         //nolint:errcheck
	for _, t := range ended {
		if s.objects[t.ID] != nil {
			out = s.report(out, ObjectEnd, []Why{why}, t, w, h)
			delete(s.objects, t.ID)
		}
	}
	return out, zones
}

// Reconfigure is Apply for a running camera (a hot reload): a zone removed or changed
// (its polygon, classes, timing) gives each of its members a zone exit, and their objects
// an update saying so, so that occupancy never falls without one; the changed zone then
// starts empty and its objects enter it again. It returns those reports. On bad settings
// it changes nothing and returns Apply's error.
func (s *Scene) Reconfigure(settings Config) (StepResult, error) {
	keep := map[string]bool{}
	for _, z := range settings.Zones {
		keep[z.key()] = true
	}
	var leaving []*zoneState
	for _, z := range s.zones.zones {
		if !keep[z.key] {
			leaving = append(leaving, z)
		}
	}
	if err := s.Apply(settings); err != nil {
		return StepResult{}, err
	}
	var res StepResult
	if len(leaving) == 0 || s.last.IsZero() {
		return res, nil
	}
	res.Zones = s.zones.leave(leaving, s.last)
	why := map[uint64]bool{}
	for _, z := range res.Zones {
		why[z.TrackID] = true
	}
	for _, t := range s.tracks {
		if why[t.ID] && s.objects[t.ID] != nil {
			res.Objects = s.report(res.Objects, ObjectUpdate, []Why{WhyZoneExit}, t, s.frame.W, s.frame.H)
		}
	}
	return res, nil
}

// leave gives the members of zones, no longer the set's, their exits at time t, and returns
// them (the caller's slice).
func (s *ZoneSet) leave(zones []*zoneState, t time.Time) []ZoneEvent {
	s.events = s.events[:0]
	for _, z := range zones {
		ids := make([]uint64, 0, len(z.tracks))
		for id := range z.tracks {
			ids = append(ids, id)
		}
		slices.Sort(ids) // in track order, not the map's
		for _, id := range ids {
			if v := z.tracks[id]; v.member {
				s.exit(z, id, v, t, v.lastIn, false)
			}
		}
	}
	return slices.Clone(s.events)
}

// Objects is the number of objects the scene follows (confirmed tracks, seen or lost).
func (s *Scene) Objects() int { return len(s.objects) }

// LostAfter is how long the scene's tracker keeps an unmatched track (track.Tracker's
// LostAfter): a camera that gives no frame for longer has its objects ended by its caller
// (End with WhyCameraOffline), since without frames the tracker's clock stands still.
func (s *Scene) LostAfter() time.Duration { return s.tracker.LostAfter() }

// SetNextID makes id the next confirmed track's id when it is above NextID: a new block of
// ids (track.Tracker.SetNextID).
func (s *Scene) SetNextID(id uint64) { s.tracker.SetNextID(id) }
