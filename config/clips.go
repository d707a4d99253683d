package config

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/visiond/visiond/sources"
)

// Event clips (issue 23): a camera with clips on keeps the last seconds of its encoded video
// and writes an MP4 of the seconds before, during and after its objects (package clips),
// stored in the site's clip store (clip_store, a JetStream object store). clips may be set in
// camera_defaults and per camera; a camera that sets one of its keys replaces the default's
// value of that key, whole, as objects does. clips.zones names zones of the camera, so it is
// set per camera only. Every clips key applies on reload without restarting the camera.

// The defaults and limits of Clips.
const (
	DefaultClipPreCapture  = 5 * time.Second
	DefaultClipPostCapture = 5 * time.Second
	DefaultClipMaxLength   = 2 * time.Minute

	// MaxClipCapture bounds pre_capture and post_capture: the ring of a camera holds
	// pre_capture of its stream in memory (at 4 Mbit/s, a minute is 30 MiB).
	MaxClipCapture = time.Minute
	// MinClipMaxLength and MaxClipMaxLength bound max_length: a clip shorter than 10 s is
	// mostly its pre and post capture, one longer than 30 min an MP4 too large to fetch
	// over a thin link.
	MinClipMaxLength = 10 * time.Second
	MaxClipMaxLength = 30 * time.Minute

	// DefaultClipStoreMaxBytesMiB and DefaultClipStoreMaxAge bound the clip store.
	DefaultClipStoreMaxBytesMiB = 2048
	DefaultClipStoreMaxAge      = 7 * 24 * time.Hour
	// MaxClipStoreMiB bounds max_bytes_mib (1 PiB): far past any disk, and in bytes
	// within an int64.
	MaxClipStoreMiB = 1 << 30
)

// Clips says whether and how a camera's objects make clips. A camera's clip runs from the
// last keyframe at or before PreCapture before its first object was first seen to
// PostCapture after its last object was last seen; objects whose clips overlap share one.
type Clips struct {
	// Enabled turns clips on. It needs nats.jetstream (the clip store is a JetStream
	// object store), and a camera of kind rtsp, or of kind file with an MPEG-TS or MP4
	// file of H.264 or H.265 video (a gstreamer camera hands over decoded frames only). Default
	// false.
	Enabled bool `yaml:"enabled"`
	// PreCapture is how much video before an object was first seen a clip holds, from the
	// last keyframe at or before it, 0..60s. Default DefaultClipPreCapture (5s).
	PreCapture time.Duration `yaml:"pre_capture"`
	// PostCapture is how much video after the last object ends a clip holds, 0..60s.
	// Default DefaultClipPostCapture (5s).
	PostCapture time.Duration `yaml:"post_capture"`
	// MaxLength caps a clip, 10s..30m and more than PreCapture + PostCapture; a longer
	// event goes on in a next clip. Default DefaultClipMaxLength (2m). 0 (a Config built
	// in Go) means the default: see Length.
	MaxLength time.Duration `yaml:"max_length"`
	// Classes are the classes whose objects make clips, each a class of the model and
	// tracked by the camera (objects.track). Default: none listed, every class the camera
	// tracks.
	Classes []string `yaml:"classes"`
	// Zones, when set, limit clips to objects that enter one of these zones of the camera
	// (zone ids); per camera only. Default: none listed, any object.
	Zones []string `yaml:"zones"`
}

// DefaultClips returns the clips settings of a camera that sets none: off, with the default
// durations.
func DefaultClips() Clips {
	return Clips{PreCapture: DefaultClipPreCapture, PostCapture: DefaultClipPostCapture, MaxLength: DefaultClipMaxLength}
}

// KeyframeWarning says what a camera's keyframe interval gop does to its clips when it is
// longer than pre_capture; "" when it is not, or clips are off.
func (c Clips) KeyframeWarning(gop time.Duration) string {
	if !c.Enabled || gop <= c.PreCapture || gop <= 0 {
		return ""
	}
	return fmt.Sprintf("keyframe interval %.1f s is longer than clips' pre_capture %.1f s: a clip starts at the keyframe before, up to %.1f s before its object, and the camera's ring holds that much video; set the camera's keyframe (I-frame, GOP) interval to pre_capture or less",
		gop.Seconds(), c.PreCapture.Seconds(), gop.Seconds())
}

// Length returns MaxLength, DefaultClipMaxLength when it is 0.
func (c Clips) Length() time.Duration {
	if c.MaxLength == 0 {
		return DefaultClipMaxLength
	}
	return c.MaxLength
}

// ClipStore bounds the site's clip store, the JetStream object store that holds the clips
// (sinks.ClipBucket names it): when full, the oldest clips are removed whole.
type ClipStore struct {
	// MaxBytesMiB bounds the store's size, 1..MaxClipStoreMiB. Default
	// DefaultClipStoreMaxBytesMiB (2048). The store's bucket reserves it in the JetStream
	// server's storage at start.
	MaxBytesMiB int `yaml:"max_bytes_mib"`
	// MaxAge removes clips older than this, > 0. Default DefaultClipStoreMaxAge (168h,
	// 7 days).
	MaxAge time.Duration `yaml:"max_age"`
	// Dir is where clips are written before they are stored (and kept while the store is
	// unreachable). Default "": <state dir>/clips; see Config.ClipDir.
	Dir string `yaml:"dir"`
}

// ClipDir is the directory clips are written to before they are stored: clip_store.dir, or
// clips in the state directory (StatePath).
func (c *Config) ClipDir() (string, error) {
	if c.ClipStore.Dir != "" {
		return c.ClipStore.Dir, nil
	}
	state, err := c.StatePath()
	if err != nil {
		return "", fmt.Errorf("clip_store.dir: not set, and %w", err)
	}
	return filepath.Join(state, "clips"), nil
}

// ClipsEnabled reports whether an enabled camera has clips on.
func (c *Config) ClipsEnabled() bool {
	return slices.ContainsFunc(c.Cameras, func(cam Camera) bool { return cam.Enabled && cam.Clips.Enabled })
}

// rawClips is a camera's clips as written: a nil field takes the value of camera_defaults.
type rawClips struct {
	Enabled     *bool          `yaml:"enabled"`
	PreCapture  *time.Duration `yaml:"pre_capture"`
	PostCapture *time.Duration `yaml:"post_capture"`
	MaxLength   *time.Duration `yaml:"max_length"`
	Classes     *[]string      `yaml:"classes"`
	Zones       *[]string      `yaml:"zones"`
}

func (r *rawClips) resolve(d Clips) Clips {
	if r == nil {
		return d
	}
	return Clips{Enabled: or(r.Enabled, d.Enabled), PreCapture: or(r.PreCapture, d.PreCapture),
		PostCapture: or(r.PostCapture, d.PostCapture), MaxLength: or(r.MaxLength, d.MaxLength),
		Classes: or(r.Classes, d.Classes), Zones: or(r.Zones, d.Zones)}
}

// clipProblem is a problem of a Clips: its key ("pre_capture") and message.
type clipProblem struct{ key, msg string }

// clipProblems returns what is wrong with c: durations out of range, class names empty,
// repeated, untracked (track: the camera's objects.track, nil for any) or not in labels
// (nil: not checked), zones that are not among zones, the camera's zone ids, or any zones at
// all where they are not allowed (camera_defaults: perCamera false).
func clipProblems(c Clips, track, labels, zones []string, perCamera bool) []clipProblem {
	var ps []clipProblem
	add := func(key, format string, args ...any) { ps = append(ps, clipProblem{key, fmt.Sprintf(format, args...)}) }
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"pre_capture", c.PreCapture}, {"post_capture", c.PostCapture}} {
		if d.v < 0 || d.v > MaxClipCapture {
			add(d.key, "%v is outside 0s..60s", d.v)
		}
	}
	switch length := c.Length(); {
	case length < MinClipMaxLength || length > MaxClipMaxLength:
		add("max_length", "%v is outside 10s..30m", length)
	case length <= c.PreCapture+c.PostCapture:
		add("max_length", "%v is not more than pre_capture + post_capture (%v + %v): a clip would be all capture", length, c.PreCapture, c.PostCapture)
	}
	seen := map[string]bool{}
	for _, class := range c.Classes {
		switch {
		case class == "":
			add("classes", "has an empty class name")
		case seen[class]:
			add("classes", "names %q twice", class)
		case labels != nil && !slices.Contains(labels, class):
			add("classes", "%q is not a class of the model", class)
		case len(track) > 0 && !slices.Contains(track, class):
			add("classes", "%q is not tracked (objects.track: %s)", class, strings.Join(track, ", "))
		}
		seen[class] = true
	}
	if !perCamera && len(c.Zones) > 0 {
		add("zones", "zones are a camera's own: set clips.zones per camera")
		return ps
	}
	seen = map[string]bool{}
	for _, z := range c.Zones {
		switch {
		case z == "":
			add("zones", "has an empty zone id")
		case seen[z]:
			add("zones", "names %q twice", z)
		case !slices.Contains(zones, z):
			add("zones", "%q is not a zone of the camera (zones: %s)", z, listOrNone(zones))
		}
		seen[z] = true
	}
	return ps
}

// listOrNone joins list with ", ", or says "none".
func listOrNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// clips checks clip_store, and the clips of camera_defaults and of every camera against
// labels (nil: class names are not checked). A camera's problem that it inherits from
// camera_defaults (the same problem, of a key the camera does not set) is reported once, at
// camera_defaults; one that the camera's own keys cause in an inherited key says where the
// value comes from.
func (v *validator) clips(c *Config, labels []string) {
	if n := c.ClipStore.MaxBytesMiB; n < 1 || n > MaxClipStoreMiB {
		v.add("clip_store.max_bytes_mib", "must be in 1..%d (1 PiB), got %d", MaxClipStoreMiB, n)
	}
	if c.ClipStore.MaxAge <= 0 {
		v.add("clip_store.max_age", "must be > 0, got %s", c.ClipStore.MaxAge)
	}

	d := c.CameraDefaults.Clips
	defaults := clipProblems(d, c.CameraDefaults.Objects.Track, labels, nil, false)
	for _, p := range defaults {
		v.add("camera_defaults.clips."+p.key, "%s", p.msg)
	}
	jetStream := "nats.jetstream is false"
	if line := v.line("nats.jetstream"); line > 0 {
		jetStream += fmt.Sprintf(" (line %d)", line)
	}
	defaultsNeedJS := false
	for i, cam := range c.Cameras {
		p := fmt.Sprintf("cameras[%d].clips", i)
		zones := make([]string, 0, len(cam.Zones))
		for _, z := range cam.Zones {
			zones = append(zones, z.ID)
		}
		for _, cp := range clipProblems(cam.Clips, cam.Objects.Track, labels, zones, true) {
			from := ""
			if !v.sets(c, i, "clips", cp.key) {
				if slices.Contains(defaults, cp) {
					continue // reported at camera_defaults
				}
				from = "clips." + cp.key + " from camera_defaults"
			}
			msg := cp.msg + fmt.Sprintf(" (camera %q", cam.ID)
			if from != "" {
				msg += ", " + from
			}
			v.add(p+"."+cp.key, "%s)", msg)
		}
		if !cam.Enabled || !cam.Clips.Enabled {
			continue
		}
		own := v.sets(c, i, "clips", "enabled")
		switch {
		case cam.Kind == sources.KindGStreamer && own:
			v.add(p+".enabled", "a camera of kind gstreamer makes no clips: it hands over decoded frames, and a clip is the stream's encoded video (camera %q)", cam.ID)
		}
		if !c.NATS.JetStream {
			if own {
				v.add(p+".enabled", "clips need nats.jetstream: true (the clip store is a JetStream object store); %s (camera %q)", jetStream, cam.ID)
			} else {
				defaultsNeedJS = true
			}
		}
	}
	if defaultsNeedJS {
		v.add("camera_defaults.clips.enabled", "clips need nats.jetstream: true (the clip store is a JetStream object store); %s", jetStream)
	}
}
