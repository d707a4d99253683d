package track

import "time"

// SetNextID makes id the id of the next confirmed track, when it is above NextID (ids never
// go back): the caller hands the tracker a new block of ids reserved elsewhere (a state
// bucket, a clock-derived floor; pipeline's trackIDs), which need not follow the last one.
func (t *Tracker) SetNextID(id uint64) {
	if id > t.nextID {
		t.nextID = id
	}
}

// LostAfter is how long a confirmed track goes unmatched before it ends: LostTimeout,
// stretched to the frame interval. A caller that stops feeding frames (a camera offline)
// ends the tracks itself after it (EndAll).
func (t *Tracker) LostAfter() time.Duration { return t.times.lostTimeout }
