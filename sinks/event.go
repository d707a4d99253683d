// Package sinks delivers visiond's events and keeps its stores: every event is published to
// NATS as JSON by the Publisher (core NATS, or JetStream with an outbox, acknowledgements and
// retries), the analytics' state, the objects' evidence and the clips are kept in JetStream
// stores on the box, and Server is the embedded NATS server that the daemon starts when no
// external server is configured.
//
// The events are documented in docs/events.md; their JSON field names are part of the public
// interface and change only with a new Version. Each kind has one constructor (convert.go)
// that fills what the event says; the Publisher stamps every event's version, site and id
// (ids.go says how ids are made).
//
// # Tracked objects
//
// Besides detections, a camera with tracking publishes three kinds of events through the same
// Publisher (its outbox, acknowledgements, retries and counters), and keeps its stores on the
// box, in the box's JetStream domain so that a hub reaches them over the leaf link:
//
//	p.PublishObject(sinks.NewObjectEvent(cam, report, w, h)) // .objects, from an analytics.ObjectReport
//	p.PublishZone(sinks.NewZoneEvent(cam, zoneEvent, occupancy)) // .zones
//	p.PublishLine(sinks.NewLineEvent(cam, lineEvent, counts))    // .lines
//
//	state := &sinks.State{Publisher: p}            // key-value bucket <prefix>-<site>-state
//	state.Start()
//	first, _ := state.ReserveTrackIDs(ctx, cam, 0, n) // a block of ids, acknowledged before use
//	counts, _ := state.LineCounts(ctx, cam)         // at start: analytics.LineSet.Restore
//	state.PutOccupancy(cam, zone, byClass)          // when a zone event changed it
//	state.PutLineCounts(cam, counts)                // when a line event changed them
//	state.DeleteZone(cam, zone); state.DeleteLine(cam, line) // removed by a reload
//	state.ForgetCamera(ctx, cam)                    // a camera removed by a reload
//
//	snaps := &sinks.Snapshots{Publisher: p}         // object store <prefix>-<site>-snapshots
//	snaps.Start()
//	snaps.PutSnapshot(sinks.SnapshotName(cam, track, firstSeen), jpeg) // then name it in the object event
//
//	clips := &sinks.Clips{Publisher: p, Dir: dir}   // object store <prefix>-<site>-clips
//	clips.Start()
//	clips.PutClip(NewClipInfo(clip.Info), events, mp4File) // OnStored then hands back the events once it is stored
//
// Close them (State, Snapshots, Clips) before the Publisher. Put*, PutSnapshot and PutClip
// never block on the network: they check what they are given (camera, zone and line ids are
// tokens, as config requires; a bad one is an error naming it), queue it, and one goroutine of
// each store writes (a queueWriter, writer.go); the state coalesces (the latest value per key
// wins), the snapshot queue is bounded by bytes and the clip queue by the bytes of its files on
// disk, and both drop (counted) when full.
//
// convert.go is the one place where sinks meets packages infer and analytics: it maps
// analytics' kinds (changes, reasons, zone event types, directions) to the wire's strings and
// holds the constructor of each event: those made from a result (NewDetectionEvent,
// NewObjectEvent, NewZoneEvent, NewLineEvent) and those of the daemon's own life
// (NewStatusEvent, NewConfigEvent, NewHealthEvent, NewGapEvent). Package analytics does not
// import sinks.
package sinks

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Version is the version of the event schema carried in every event's "version" field.
const Version = 1

// DetectionEvent is published once per analysed frame on
// <prefix>.<site>.<camera>.detections, with an empty Detections list when the frame held
// nothing, so subscribers can tell "nothing seen" from "camera not analysed".
type DetectionEvent struct {
	Version     int         `json:"version"`
	ID          string      `json:"id"` // stamped by the Publisher: <instance>.<camera>.<frame seq>
	Site        string      `json:"site"`
	Camera      string      `json:"camera"`
	CapturedAt  time.Time   `json:"captured_at"`
	PublishedAt time.Time   `json:"published_at"`
	Frame       FrameInfo   `json:"frame"`
	Model       string      `json:"model"`
	Detections  []Detection `json:"detections"`
	LatencyMS   Latency     `json:"latency_ms"`
}

// FrameInfo identifies the analysed frame.
type FrameInfo struct {
	Seq    uint64 `json:"seq"`    // per-camera sequence number of the decoded frame
	Width  int    `json:"width"`  // source frame width in pixels
	Height int    `json:"height"` // source frame height in pixels
}

// Detection is one detected object. Its JSON carries the precision the model has and no more
// (see MarshalJSON): a float64 written in full takes 17 digits.
type Detection struct {
	Label   string  `json:"label"`
	ClassID int     `json:"class_id"`
	Score   float32 `json:"score"`
	Box     Box     `json:"box"`      // source-frame pixels
	BoxNorm Box     `json:"box_norm"` // the same box as fractions of the frame size, 0..1
	// TrackID is the id of the confirmed track the detection belongs to (ObjectEvent's
	// track_id); 0, and absent from the JSON, when it belongs to none or tracking is off.
	TrackID uint64 `json:"track_id,omitempty"`
}

// Precision of a Detection's numbers in JSON, as the number of decimals kept. A box from a
// 640x640 model input is not exact to a tenth of a source pixel; 4 decimals of a fraction are
// a tenth of a pixel of a 1000-pixel frame; a score's third decimal is already noise.
const (
	pixelDecimals = 1 // Detection.Box
	normDecimals  = 4 // Detection.BoxNorm
	scoreDecimals = 3 // Detection.Score
)

// MarshalJSON writes d with its box in pixels rounded to pixelDecimals (its corners: a width
// can be off by twice that), its normalized box to normDecimals and its score to
// scoreDecimals: "x":619.4 where the float64 would give
// "x":619.3779785156249, a third of a detection event's bytes.
func (d Detection) MarshalJSON() ([]byte, error) {
	type plain Detection // without this method
	p := plain(d)
	p.Score = float32(round(float64(d.Score), scoreDecimals))
	p.Box = d.Box.rounded(pixelDecimals)
	p.BoxNorm = d.BoxNorm.rounded(normDecimals)
	return json.Marshal(p)
}

// rounded is b with its corners rounded to decimals, so that a box inside the frame stays
// inside (rounding x and w each could push x+w past the edge).
func (b Box) rounded(decimals int) Box {
	x, y := round(b.X, decimals), round(b.Y, decimals)
	return Box{X: x, Y: y,
		W: round(round(b.X+b.W, decimals)-x, decimals), // again: the difference is not exact
		H: round(round(b.Y+b.H, decimals)-y, decimals)}
}

// round rounds x to decimals (at most 4, so x*10^decimals stays exact enough), half away from
// zero; the result is the float64 nearest that decimal, which JSON writes with no more digits.
func round(x float64, decimals int) float64 {
	scale := [...]float64{1, 10, 100, 1000, 10000}[decimals]
	r := math.Round(x*scale) / scale
	if r == 0 {
		return 0 // not -0
	}
	return r
}

// Box is a rectangle: top-left corner, width and height.
type Box struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
	W float64 `json:"w"`
	H float64 `json:"h"`
}

// Latency is the time spent in each stage, in milliseconds.
type Latency struct {
	Queue float64 `json:"queue"` // capture to dispatch: decode, scaling, waiting for a slice and a worker
	Pre   float64 `json:"pre"`   // tensor preparation in the worker
	Infer float64 `json:"infer"` // session run
	Post  float64 `json:"post"`  // output decoding and NMS
	Total float64 `json:"total"` // capture to publish
}

// StatusEvent is published on <prefix>.<site>.<camera>.status whenever a camera changes
// state: connecting, online, offline or unauthorized.
type StatusEvent struct {
	Version  int       `json:"version"`
	ID       string    `json:"id"` // stamped by the Publisher: <instance>.<camera>.status.<n>
	Site     string    `json:"site"`
	Camera   string    `json:"camera"`
	State    string    `json:"state"`
	Previous string    `json:"previous"`         // the state before; "" when the camera starts
	Reason   string    `json:"reason,omitempty"` // why it went offline (no credentials ever)
	At       time.Time `json:"at"`
	// GapMS, when the camera comes back online, is how long it delivered no frame: the hole
	// in its coverage, in milliseconds. Absent the first time a camera comes online.
	GapMS float64 `json:"gap_ms,omitempty"`
}

// ConfigEvent is published on <prefix>.<site>.config after every attempt to reload the
// configuration: applied (with what changed) or rejected (with why; the running config
// stays in force).
type ConfigEvent struct {
	Version         int       `json:"version"`
	ID              string    `json:"id"` // stamped by the Publisher: <instance>.config.<n>
	Site            string    `json:"site"`
	Result          string    `json:"result"` // "applied" or "rejected"
	Error           string    `json:"error,omitempty"`
	At              time.Time `json:"at"`
	Added           []string  `json:"added,omitempty"`     // cameras started
	Removed         []string  `json:"removed,omitempty"`   // cameras stopped
	Restarted       []string  `json:"restarted,omitempty"` // cameras whose source changed
	Updated         []string  `json:"updated,omitempty"`   // cameras whose fps or weight changed, session kept
	WorkersReplaced bool      `json:"workers_replaced,omitempty"`
	NeedsRestart    []string  `json:"needs_restart,omitempty"` // changed sections that apply at the next start
}

// HealthEvent is published on <prefix>.<site>.health every health interval: what each camera
// delivered and what was analysed in the interval, so that consumers know the coverage behind
// the detections they received (and notice a silent box by the absence of this event).
type HealthEvent struct {
	Version   int            `json:"version"`
	ID        string         `json:"id"` // stamped by the Publisher: <instance>.health.<n>
	Site      string         `json:"site"`
	Instance  string         `json:"instance"` // this daemon run (Publisher.Instance), stamped by the Publisher
	At        time.Time      `json:"at"`
	Interval  float64        `json:"interval_s"` // seconds covered by the counts below
	UptimeS   float64        `json:"uptime_s"`
	Cameras   []CameraHealth `json:"cameras"`
	Workers   int            `json:"workers"`   // worker processes ready
	Publisher PublishHealth  `json:"publisher"` // the publisher's totals since start
}

// CameraHealth is one camera's part of a health event; counts cover the interval.
type CameraHealth struct {
	Camera      string  `json:"camera"`
	State       string  `json:"state"`
	FPS         float64 `json:"fps"`          // configured
	FPSAchieved float64 `json:"fps_achieved"` // analysed frames per second over the interval
	Decoded     uint64  `json:"frames_decoded"`
	Analysed    uint64  `json:"frames_analysed"`
	Dropped     uint64  `json:"frames_dropped"` // lost: too old, dropped by the source, or a failed job (not frames skipped for the fps)
}

// PublishHealth counts the publisher's events since the daemon started.
type PublishHealth struct {
	Published uint64 `json:"published"` // acknowledged by the server (JetStream), or sent (core NATS)
	Retried   uint64 `json:"retried"`   // sent again after an error or a missing acknowledgement
	Dropped   uint64 `json:"dropped"`   // dropped from the outbox, full while the server was unreachable
	Pending   int    `json:"pending"`   // waiting in the outbox or for an acknowledgement
}

// GapEvent is published on <prefix>.<site>.gaps when events were lost before a subscriber
// could have them: dropped from the daemon's outbox (full while the server was unreachable),
// or removed from the site's stream by its size limit before their age limit (the store was
// full; a hub that was linked when they were published may have them).
type GapEvent struct {
	Version int       `json:"version"`
	ID      string    `json:"id"` // stamped by the Publisher: <instance>.gap.<n>
	Site    string    `json:"site"`
	Reason  string    `json:"reason"` // "outbox_full" or "store_full"
	Events  uint64    `json:"events"` // how many
	From    time.Time `json:"from"`   // when the first of them was made (outbox) or stored (stream)
	To      time.Time `json:"to"`     // when the last of them was
	// FirstSeq and LastSeq are the stream sequence numbers removed (store_full only).
	FirstSeq uint64    `json:"first_seq,omitempty"`
	LastSeq  uint64    `json:"last_seq,omitempty"`
	At       time.Time `json:"at"`
}

// HealthSubject is the subject of health events.
func HealthSubject(prefix, site string) string { return fmt.Sprintf("%s.%s.health", prefix, site) }

// GapSubject is the subject of gap events.
func GapSubject(prefix, site string) string { return fmt.Sprintf("%s.%s.gaps", prefix, site) }

// StreamSubjects is the subject filter of the site's stream: every event of the site.
func StreamSubjects(prefix, site string) string { return fmt.Sprintf("%s.%s.>", prefix, site) }

// ConfigSubject is the subject of config events.
func ConfigSubject(prefix, site string) string { return fmt.Sprintf("%s.%s.config", prefix, site) }

// StatusSubject is the subject that carries a camera's status events.
func StatusSubject(prefix, site, camera string) string {
	return fmt.Sprintf("%s.%s.%s.status", prefix, site, camera)
}

// DetectionSubject is the subject that carries a camera's detection events.
func DetectionSubject(prefix, site, camera string) string {
	return fmt.Sprintf("%s.%s.%s.detections", prefix, site, camera)
}
