package sinks

import (
	"strings"
	"time"

	"github.com/visiond/visiond/clips"
)

// Event clips (issue 23): the encoded video of the seconds before, during and after a camera's
// objects, as an MP4 file written from the packets the camera sent (package clips), stored in
// the site's clip store (Clips) under ClipName, and named in the object events of the objects
// it shows once stored (ObjectClip events, ObjectEvent.Clip).

// Why a clip ended (ClipInfo.Closed): clips.CloseReason on the wire (NewClipInfo).
const (
	ClipClosedEnd       = "end"            // post_capture after its last object ended
	ClipClosedMaxLength = "max_length"     // it reached max_length: the next clip goes on from here
	ClipClosedOffline   = "camera_offline" // the camera's stream ended (the session failed or was closed)
	ClipClosedChanged   = "stream_changed" // the stream's codec or resolution changed: the next clip has the new one
	ClipClosedStopped   = "camera_stopped" // the camera was removed, disabled or restarted by a reload, or clips were turned off
	ClipClosedShutdown  = "shutdown"       // the daemon stopped
)

// ClipInfo describes a stored clip: what the clip store keeps with it, what the API lists and
// what an ObjectClip event carries (as ClipRef).
type ClipInfo struct {
	Name   string `json:"name"` // ClipName(Camera, Start)
	Camera string `json:"camera"`
	// Start is the capture time of its first frame (a keyframe); End that of its last frame
	// plus the frame's duration. Duration is End - Start in seconds, as the MP4 says.
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	DurationS float64   `json:"duration_s"`
	Codec     string    `json:"codec"` // "h264" or "h265"
	Width     int       `json:"width"`
	Height    int       `json:"height"`
	Frames    int       `json:"frames"`
	Bytes     int64     `json:"bytes"` // the MP4 file's size
	// Closed says why the clip ended (ClipClosed* constants).
	Closed string `json:"closed"`
	// Objects are the objects it shows, in the order they came.
	Objects []ClipObject `json:"objects"`
	// Notes say where the clip is not what was asked: it starts later than pre_capture before
	// its first object (no keyframe in what the camera's ring held), packets were lost in it
	// (the frames until the next keyframe are left out), its timestamps jumped.
	Notes []string `json:"notes,omitempty"`
	ClipPreRoll
}

// ClipPreRoll is what a clip has before its first object: pre_capture asked, the pre-roll it
// got (its first object's first sighting, or entry into a clip zone, less its start) and why
// that is shorter (ClipShort*, clips.Short*). A clip that goes on from another (max_length, a
// new codec or size) names it in Continues and has no pre-roll of its own (PreRollS nil).
// All absent from a clip stored by a version before these.
type ClipPreRoll struct {
	PreCaptureS float64  `json:"pre_capture_s,omitempty"`
	PreRollS    *float64 `json:"pre_roll_s,omitempty"`
	Short       string   `json:"pre_roll_short,omitempty"`
	Continues   string   `json:"continues,omitempty"`
}

// Why a clip's pre-roll is shorter than its pre_capture (ClipPreRoll.Short): clips.Short*.
const (
	ClipShortStreamStart   = clips.ShortStreamStart   // the camera's video begins later: its stream started or reconnected, or clips were turned on
	ClipShortNoKeyframe    = clips.ShortNoKeyframe    // no keyframe as early in the ring (a stream joined between keyframes)
	ClipShortRingBytes     = clips.ShortRingBytes     // the ring's byte bound pushed that video out
	ClipShortConfirmedLate = clips.ShortConfirmedLate // the object was confirmed later than the ring keeps video for
	ClipShortPreviousClip  = clips.ShortPreviousClip  // the video before is in the previous clip, which starts at the same keyframe
)

// ClipObject is an object a clip shows.
type ClipObject struct {
	TrackID   uint64    `json:"track_id"`
	Label     string    `json:"label"`
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// ClipRef is a clip as an object event names it (ObjectEvent.Clip).
type ClipRef struct {
	Name      string    `json:"name"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	DurationS float64   `json:"duration_s"`
	ClipPreRoll
}

// Ref is the clip as an object event names it.
func (c ClipInfo) Ref() ClipRef {
	return ClipRef{Name: c.Name, Start: c.Start, End: c.End, DurationS: c.DurationS, ClipPreRoll: c.ClipPreRoll}
}

// ClipBucket is the default name of the site's clip store: <prefix>-<site>-clips, with the
// dots of a prefix of several tokens as '-'.
func ClipBucket(prefix, site string) string {
	return strings.ReplaceAll(prefix, ".", "-") + "-" + site + "-clips"
}

// ClipName is the object name of camera's clip that starts at start, in the clip store:
// clips.Name, <camera>/c<start, unix ms>.mp4.
func ClipName(camera string, start time.Time) string { return clips.Name(camera, start) }
