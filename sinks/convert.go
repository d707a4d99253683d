package sinks

import (
	"fmt"
	"maps"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// This file is where the daemon's results become events: the one place that knows both the
// wire format and the kinds of package analytics (its changes, reasons, zone event types and
// directions), which it maps to the wire's strings here and nowhere else, and the one
// constructor of each event kind made from a result (detections, objects, zones, lines).
// Constructors fill what the result says; the Publisher stamps version, site and id.

// objectType is the wire type of an object change.
func objectType(c analytics.Change) string {
	switch c {
	case analytics.ObjectNew:
		return ObjectNew
	case analytics.ObjectUpdate:
		return ObjectUpdate
	case analytics.ObjectEnd:
		return ObjectEnd
	}
	panic(fmt.Sprintf("sinks: object change %v has no wire type", c))
}

// endReason is the wire name of an end's reason.
func endReason(w analytics.Why) string {
	switch w {
	case analytics.WhyLost:
		return EndLost
	case analytics.WhyCameraOffline:
		return EndCameraOffline
	case analytics.WhyCameraRemoved:
		return EndCameraRemoved
	case analytics.WhyCameraDisabled:
		return EndCameraDisabled
	case analytics.WhySourceChanged:
		return EndSourceChanged
	case analytics.WhyShutdown:
		return EndShutdown
	case analytics.WhyClockBack:
		return EndClockBack
	case analytics.WhyVideoEnd:
		return EndVideoEnd
	}
	panic(fmt.Sprintf("sinks: end reason %v has no wire name", w))
}

// whyOf is the wire form of an update's reasons; nil for none.
func whyOf(why []analytics.Why) []string {
	if len(why) == 0 {
		return nil
	}
	out := make([]string, len(why))
	for i, w := range why {
		switch w {
		case analytics.WhyZoneEnter:
			out[i] = WhyZoneEnter
		case analytics.WhyZoneExit:
			out[i] = WhyZoneExit
		case analytics.WhyStationary:
			out[i] = WhyStationary
		case analytics.WhyMoving:
			out[i] = WhyMoving
		case analytics.WhyInterval:
			out[i] = WhyInterval
		default:
			panic(fmt.Sprintf("sinks: update reason %v has no wire name", w))
		}
	}
	return out
}

// zoneType is the wire type of a zone event.
func zoneType(t analytics.ZoneEventType) string {
	switch t {
	case analytics.ZoneEnter:
		return ZoneEnter
	case analytics.ZoneExit:
		return ZoneExit
	case analytics.ZoneLoiter:
		return ZoneLoiter
	}
	panic(fmt.Sprintf("sinks: zone event type %q has no wire type", t))
}

// direction is the wire name of a crossing's direction, and false for none.
func direction(d analytics.Direction) (string, bool) {
	switch d {
	case analytics.In:
		return DirectionIn, true
	case analytics.Out:
		return DirectionOut, true
	}
	return "", false
}

// fromDirection is the direction of a wire name, and false for none.
func fromDirection(s string) (analytics.Direction, bool) {
	switch s {
	case DirectionIn:
		return analytics.In, true
	case DirectionOut:
		return analytics.Out, true
	}
	return "", false
}

// PixelBox is b as events carry it, in source-frame pixels.
func PixelBox(b geom.Box) Box { return Box{X: b.X, Y: b.Y, W: b.W, H: b.H} }

// NormBox is b as a fraction of a w x h frame.
func NormBox(b geom.Box, w, h int) Box {
	fw, fh := float64(w), float64(h)
	return Box{X: b.X / fw, Y: b.Y / fh, W: b.W / fw, H: b.H / fh}
}

// NewDetectionEvent is the event of a job's result r on camera, analysed by model, with
// the detections dets (the result's, or those the camera's filter kept) in source pixels and
// normalized to the frame; ids[i] is the track id of dets[i] (0: none; ids may be shorter).
// published and lat are measured by the caller on this host's clock.
func NewDetectionEvent(camera, model string, r infer.Result, dets []infer.Detection, ids []uint64, published time.Time, lat Latency) *DetectionEvent {
	w, h := r.Job.Letterbox.SrcW, r.Job.Letterbox.SrcH
	ev := &DetectionEvent{
		Camera:      camera,
		CapturedAt:  r.Job.Captured.UTC(),
		PublishedAt: published.UTC(),
		Frame:       FrameInfo{Seq: r.Job.Seq, Width: w, Height: h},
		Model:       model,
		Detections:  make([]Detection, 0, len(dets)),
		LatencyMS:   lat,
	}
	for i, det := range dets {
		d := Detection{Label: det.Label, ClassID: det.ClassID, Score: det.Score, Box: PixelBox(det.Box), BoxNorm: NormBox(det.Box, w, h)}
		if i < len(ids) {
			d.TrackID = ids[i]
		}
		ev.Detections = append(ev.Detections, d)
	}
	return ev
}

// NewObjectEvent is the object event of report r on camera, for frames of w x h pixels.
func NewObjectEvent(camera string, r analytics.ObjectReport, w, h int) *ObjectEvent {
	t := r.Track
	ev := &ObjectEvent{
		Camera:    camera,
		Type:      objectType(r.Change),
		TrackID:   t.ID,
		Label:     t.Label,
		ClassID:   t.ClassID,
		FirstSeen: t.FirstSeen,
		LastSeen:  t.LastSeen,
		Box:       PixelBox(r.Box),
		BoxNorm:   NormBox(r.Box, w, h),
		Score:     t.Score,
		Best: Best{
			Box: PixelBox(t.BestBox), BoxNorm: NormBox(t.BestBox, w, h), Score: t.BestScore, At: t.BestAt,
		},
		Zones:      []string{},
		Stationary: r.Stationary,
		Path:       NewPath(Point{X: r.Start.X, Y: r.Start.Y}, Point{X: r.End.X, Y: r.End.Y}, w, h),
		Snapshot:   r.Evidence,
		Seq:        r.Seq,
	}
	if r.Change == analytics.ObjectEnd {
		ev.Reason = EndLost // a report of the tracker's own end
		if len(r.Why) > 0 {
			ev.Reason = endReason(r.Why[0])
		}
	} else {
		ev.Why = whyOf(r.Why)
	}
	for _, p := range r.Zones {
		if p.Inside {
			ev.Zones = append(ev.Zones, p.Zone)
		}
		if p.Total > 0 {
			if ev.ZoneSeconds == nil {
				ev.ZoneSeconds = map[string]float64{}
			}
			ev.ZoneSeconds[p.Zone] = p.Total.Seconds()
		}
	}
	return ev
}

// NewZoneEvent is the zone event of z on camera; occupancy is its zone's occupancy by class
// after it (nil: empty).
func NewZoneEvent(camera string, z analytics.ZoneEvent, occupancy map[string]int) *ZoneEvent {
	occ := maps.Clone(occupancy)
	if occ == nil {
		occ = map[string]int{}
	}
	return &ZoneEvent{
		Camera: camera, Type: zoneType(z.Type), Zone: z.Zone, TrackID: z.TrackID, Label: z.Label,
		At: z.Time, Since: z.Since, DwellS: z.Dwell.Seconds(), Ended: z.Ended, Occupancy: occ,
	}
}

// NewLineEvent is the line event of crossing l on camera; counts are the camera's line
// counts after it (the line's own are taken).
func NewLineEvent(camera string, l analytics.LineEvent, counts []analytics.Count) *LineEvent {
	dir, _ := direction(l.Direction)
	return &LineEvent{
		Camera: camera, Line: l.Line, TrackID: l.TrackID, Label: l.Label, Direction: dir, At: l.Time, CrossedAt: l.Crossed,
		Point: Point{X: l.At.X, Y: l.At.Y}, Counts: lineCounts(l.Line, counts),
	}
}

// lineCounts are line's counts among counts, as events and the state bucket carry them:
// direction to class to crossings; never nil.
func lineCounts(line string, counts []analytics.Count) map[string]map[string]uint64 {
	out := map[string]map[string]uint64{}
	for _, n := range counts {
		dir, ok := direction(n.Direction)
		if n.Line != line || !ok {
			continue
		}
		if out[dir] == nil {
			out[dir] = map[string]uint64{}
		}
		out[dir][n.Class] += n.N
	}
	return out
}
