// Package sinks delivers visiond's events: detection events published to NATS as JSON, and the
// embedded NATS server that the daemon starts when no external server is configured.
//
// The events are documented in docs/events.md; their JSON field names are part of the public
// interface and change only with a new Version.
package sinks

import (
	"fmt"
	"time"
)

// Version is the version of the event schema carried in every event's "version" field.
const Version = 1

// DetectionEvent is published once per analysed frame on
// <prefix>.<site>.<camera>.detections, with an empty Detections list when the frame held
// nothing, so subscribers can tell "nothing seen" from "camera not analysed".
type DetectionEvent struct {
	Version     int         `json:"version"`
	ID          string      `json:"id"` // <instance>.<camera>.<seq>: stable for one frame of one daemon run
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

// Detection is one detected object.
type Detection struct {
	Label   string  `json:"label"`
	ClassID int     `json:"class_id"`
	Score   float32 `json:"score"`
	Box     Box     `json:"box"`      // source-frame pixels
	BoxNorm Box     `json:"box_norm"` // the same box as fractions of the frame size, 0..1
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

// EventID is the id of the event for frame seq of camera, in the daemon run named instance.
func EventID(instance, camera string, seq uint64) string {
	return fmt.Sprintf("%s.%s.%d", instance, camera, seq)
}
