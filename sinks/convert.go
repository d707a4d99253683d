package sinks

import (
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/visiond/visiond/analytics"
	"github.com/visiond/visiond/clips"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
	"github.com/visiond/visiond/sources"
)

// This file is where the daemon's results become events: the one place that knows both the
// wire format and the kinds of package analytics (its changes, reasons, zone event types and
// directions), which it maps to the wire's strings here and nowhere else, and the one
// constructor of each event kind: those made from a result (detections, objects, zones,
// lines) and those of the daemon's own life (a camera's status, a reload's outcome, health,
// and the gaps the Publisher reports). Constructors fill what the event says; the Publisher
// stamps version, site and id (and a health event's instance and publisher counts).

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

// NewClipInfo is clip c as the clip store keeps it and events name it. Its objects are
// named from what the recorder observed last of them.
func NewClipInfo(c clips.Info) ClipInfo {
	info := ClipInfo{Name: c.Name, Camera: c.Camera, Start: c.Start, End: c.End, DurationS: c.Duration.Seconds(),
		Codec: clipCodec(c.Codec), Width: c.Width, Height: c.Height, Frames: c.Frames, Bytes: c.Bytes,
		Closed: clipClosed(c.Closed), Notes: c.Notes, Objects: make([]ClipObject, 0, len(c.Objects)),
		ClipPreRoll: ClipPreRoll{PreCaptureS: c.PreCapture.Seconds(), Short: c.Short, Continues: c.Continues}}
	if c.Continues == "" {
		pre := math.Round(c.PreRoll.Seconds()*1000) / 1000
		info.PreRollS = &pre
	}
	for _, o := range c.Objects {
		info.Objects = append(info.Objects, ClipObject{TrackID: o.TrackID, Label: o.Label, FirstSeen: o.FirstSeen, LastSeen: o.LastSeen})
	}
	return info
}

// clipCodec is the wire name of a clip's codec (a sources.Codec* value).
func clipCodec(c string) string {
	if c == sources.CodecH265 {
		return "h265"
	}
	return "h264"
}

// clipClosed is the wire string of why a clip ended.
func clipClosed(r clips.CloseReason) string {
	switch r {
	case clips.ClosedMaxLength:
		return ClipClosedMaxLength
	case clips.ClosedOffline:
		return ClipClosedOffline
	case clips.ClosedChanged:
		return ClipClosedChanged
	case clips.ClosedStopped:
		return ClipClosedStopped
	case clips.ClosedShutdown:
		return ClipClosedShutdown
	}
	return ClipClosedEnd
}

// NewClipEvent is the ObjectClip event of the object whose latest event is ev: ev, naming
// clip, the stored clip that shows the object.
func NewClipEvent(ev ObjectEvent, clip ClipRef) *ObjectEvent {
	ev.Type, ev.Why, ev.Reason, ev.Clip, ev.Seq = ObjectClip, nil, "", &clip, 0
	return &ev
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

// NewStatusEvent is the event of camera's change to state from previous ("" when the camera
// starts) at at, with reason, why it went offline (never a credential; "" when online), and
// gap, when it comes back online, how long it delivered no frame (0 the first time).
func NewStatusEvent(camera, state, previous, reason string, at time.Time, gap time.Duration) *StatusEvent {
	return &StatusEvent{Camera: camera, State: state, Previous: previous, Reason: reason, At: at.UTC(), GapMS: millis(gap)}
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Results of a config event.
const (
	ConfigApplied  = "applied"
	ConfigRejected = "rejected"
)

// ConfigChanges are what a reload changed, as its config event names them.
type ConfigChanges struct {
	Added, Removed, Restarted, Updated []string // camera ids: started, stopped, source changed, fps or analytics changed
	WorkersReplaced                    bool
	NeedsRestart                       []string // changed sections that apply at the next start
}

// NewConfigEvent is the event of a reload at at: applied, with what it changed, or rejected
// with err (the running config stays) when err is not nil.
func NewConfigEvent(at time.Time, ch ConfigChanges, err error) *ConfigEvent {
	ev := &ConfigEvent{Result: ConfigApplied, At: at.UTC(),
		Added: ch.Added, Removed: ch.Removed, Restarted: ch.Restarted, Updated: ch.Updated,
		WorkersReplaced: ch.WorkersReplaced, NeedsRestart: ch.NeedsRestart}
	if err != nil {
		ev.Result, ev.Error = ConfigRejected, err.Error()
	}
	return ev
}

// NewHealthEvent is the health event at at of a daemon up for uptime, over the interval
// before at: cameras hold each camera's counts of the interval (their FPSAchieved is made
// here from Analysed), workers the worker processes ready. The Publisher adds its own counts.
func NewHealthEvent(at time.Time, interval, uptime time.Duration, cameras []CameraHealth, workers int) *HealthEvent {
	ev := &HealthEvent{At: at.UTC(), Interval: interval.Seconds(), UptimeS: uptime.Seconds(),
		Cameras: make([]CameraHealth, 0, len(cameras)), Workers: workers}
	for _, c := range cameras {
		c.FPSAchieved = 0
		if interval > 0 {
			c.FPSAchieved = float64(c.Analysed) / interval.Seconds()
		}
		ev.Cameras = append(ev.Cameras, c)
	}
	return ev
}

// Reasons of a gap event.
const (
	GapOutboxFull = "outbox_full" // dropped from the daemon's outbox, full while the server was unreachable
	GapStoreFull  = "store_full"  // removed from the site's stream by its size limit before their age limit
)

// NewGapEvent is the event, at at, of n events lost for reason (GapOutboxFull or
// GapStoreFull), the first of them made (outbox) or stored (stream) at from and the last at
// to; first and last are the stream sequence numbers removed (GapStoreFull), or 0.
func NewGapEvent(reason string, n uint64, from, to time.Time, first, last uint64, at time.Time) *GapEvent {
	return &GapEvent{Reason: reason, Events: n, From: from.UTC(), To: to.UTC(), FirstSeq: first, LastSeq: last, At: at.UTC()}
}
