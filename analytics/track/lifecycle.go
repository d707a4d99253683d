package track

import (
	"math"
	"time"

	"github.com/visiond/visiond/infer"
)

// start begins a tentative track at detection d, of index i.
func (t *Tracker) start(d infer.Detection, at time.Time, i int) {
	var tr *track
	if n := len(t.free); n > 0 {
		tr, t.free = t.free[n-1], t.free[:n-1]
		classes, path := tr.classes[:0], tr.path[:0]
		*tr = track{classes: classes, path: path} // their arrays are reused
	} else {
		tr = new(track)
	}
	b := d.Box
	tr.ClassID, tr.Label = d.ClassID, d.Label
	tr.key = t.keys[i]
	tr.State = Tentative
	tr.FirstSeen = at
	mw, mh := t.cfg.MeasureNoise*b.W, t.cfg.MeasureNoise*b.H
	vw := t.cfg.InitVelocity * math.Sqrt(b.W*b.H)
	vh := vw
	// Position variance: twice the measurement's standard deviation, as ByteTrack.
	tr.cx.init(b.X+b.W/2, 4*mw*mw, vw*vw)
	tr.cy.init(b.Y+b.H/2, 4*mh*mh, vh*vh)
	tr.cw.init(b.W, 4*mw*mw, vw*vw)
	tr.ch.init(b.H, 4*mh*mh, vh*vh)
	t.tracks = append(t.tracks, tr)
	t.hit(tr, d, at, i, true)
}

// hit records detection d, of index i, as matched by tr in the frame at at; fresh when the
// track was just started from it (the filter holds it already).
func (t *Tracker) hit(tr *track, d infer.Detection, at time.Time, i int, fresh bool) {
	b := d.Box
	if !fresh {
		b = t.measured(tr, i, d.Box)
		t.update(tr, b)
	}
	sz := &tr.sizes[tr.Hits%sizeRing]
	sz.w, sz.h = t.uncut(b)
	if t.clean(i) {
		tr.looks[tr.nlooks%lookRing] = d.Appearance
		tr.nlooks++
	}
	tr.Hits++
	tr.det = i
	tr.Matched = true
	tr.Box = d.Box
	tr.seen = d.Box
	tr.Score = d.Score
	tr.LastSeen = at
	tr.VX, tr.VY = tr.cx.v, tr.cy.v
	if d.Score > tr.BestScore {
		tr.BestScore, tr.BestBox, tr.BestAt = d.Score, d.Box, at
	}
	if tr.State == Tentative {
		if len(tr.path) == MaxPath {
			tr.path = append(tr.path[:0], tr.path[1:]...)
		}
		tr.path = append(tr.path, Sighting{At: at, Box: d.Box})
	}
	tr.count(d)
}

// count adds d's class to the track's, and labels it with the class it was seen as most
// (the earlier to get there on a tie, so that a label does not flap).
func (tr *track) count(d infer.Detection) {
	j := -1
	for k := range tr.classes {
		if c := &tr.classes[k]; c.id == d.ClassID && c.label == d.Label {
			c.n++
			j = k
			break
		}
	}
	if j < 0 {
		tr.classes = append(tr.classes, classCount{id: d.ClassID, label: d.Label, n: 1})
		j = len(tr.classes) - 1
	}
	if c := tr.classes[j]; c.id != tr.ClassID || c.label != tr.Label {
		for _, o := range tr.classes {
			if o.id == tr.ClassID && o.label == tr.Label && o.n >= c.n {
				return
			}
		}
		tr.ClassID, tr.Label = c.id, c.label
	}
}

// settle moves every track to its state after the frame at at (confirmed, lost, ended) and
// writes the frame's news and ids into t.res.
func (t *Tracker) settle(at time.Time) {
	live := t.tracks[:0]
	for _, tr := range t.tracks {
		switch {
		case tr.Matched && tr.State == Tentative && tr.Hits >= t.cfg.ConfirmHits:
			tr.State = Confirmed
			tr.ID = t.nextID
			t.nextID++
			t.res.New = append(t.res.New, tr.Track)
			t.res.Paths = append(t.res.Paths, tr.path[:len(tr.path)-1])
		case tr.Matched && tr.State != Tentative:
			tr.State = Confirmed
		case !tr.Matched && tr.State == Confirmed:
			tr.State = Lost
			tr.cw.stopRate()
			tr.ch.stopRate()
			// It keeps the size it was seen with, not the filter's latest, which a box cut
			// by an occluder or the frame's edge may have shrunk.
			if w, h := tr.size(); w > 0 && h > 0 {
				tr.cw.p, tr.ch.p = w, h
				tr.Box = tr.predicted()
			}
		}
		if tr.State == Lost && (at.Sub(tr.LastSeen) > t.times.lostTimeout || t.outside(tr.Box)) {
			tr.State = Ended
			t.res.Ended = append(t.res.Ended, tr.Track)
			t.free = append(t.free, tr)
			continue
		}
		live = append(live, tr)
		t.res.Tracks = append(t.res.Tracks, tr.Track)
	}
	clear(t.tracks[len(live):])
	t.tracks = live
	for _, tr := range t.tracks {
		if tr.Matched && tr.ID != 0 {
			t.res.IDs[tr.det] = tr.ID
		}
	}
}
