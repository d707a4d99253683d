package sinks

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
)

// Event ids: one rule for every kind, applied by the Publisher alone (Publisher.message).
//
// An event's id is <instance>.<key>. The instance names the daemon run (Publisher.Instance,
// random per start), so ids never repeat across runs; the key names the event within the run.
// Where the event's own fields identify it, the key is made of them, so the same event made
// again (a retry, or again after a reconnect) has the same id, and JetStream, which has it as
// the Nats-Msg-Id, keeps one copy:
//
//	detection  <camera>.<frame seq>
//	object     <camera>.t<track>.<n>          n: ObjectEvent.Seq, the track's event number from 1
//	clip       <camera>.t<track>.clip.<clip start, Unix ms>   an ObjectClip event (no Seq)
//	zone       <camera>.<zone>.t<track>.<type>.<since, Unix ms>
//	line       <camera>.<line>.t<track>.<at, Unix ms>
//
// The others take the next number of one counter of the Publisher's when they are published
// (a retry sends the message already made, id and all):
//
//	status     <camera>.status.<n>
//	config     config.<n>
//	health     health.<n>
//	gap        gap.<n>
//
// The Publisher stamps the id, the version and the site on every event, whatever the caller
// put there.

// event is an event of any kind, as the Publisher publishes it.
type event interface {
	// key names the event within the daemon run; counted kinds take the next value of n.
	key(n *atomic.Uint64) string
	// stamp sets the fields the Publisher stamps on every event.
	stamp(o origin)
}

// origin is what the Publisher stamps on an event, besides Version.
type origin struct {
	site     string
	instance string
	id       string
}

// eventID is the id of the event named key in the daemon run named instance.
func eventID(instance, key string) string { return instance + "." + key }

func (e *DetectionEvent) key(*atomic.Uint64) string {
	return fmt.Sprintf("%s.%d", e.Camera, e.Frame.Seq)
}

func (e *ObjectEvent) key(*atomic.Uint64) string {
	if e.Type == ObjectClip && e.Clip != nil {
		return fmt.Sprintf("%s.t%d.clip.%d", e.Camera, e.TrackID, e.Clip.Start.UnixMilli())
	}
	return fmt.Sprintf("%s.t%d.%d", e.Camera, e.TrackID, e.Seq)
}

func (e *ZoneEvent) key(*atomic.Uint64) string {
	return fmt.Sprintf("%s.%s.t%d.%s.%d", e.Camera, e.Zone, e.TrackID, e.Type, e.Since.UnixMilli())
}

func (e *LineEvent) key(*atomic.Uint64) string {
	return fmt.Sprintf("%s.%s.t%d.%d", e.Camera, e.Line, e.TrackID, e.At.UnixMilli())
}

func (e *StatusEvent) key(n *atomic.Uint64) string {
	return fmt.Sprintf("%s.status.%d", e.Camera, n.Add(1))
}

func (e *ConfigEvent) key(n *atomic.Uint64) string { return fmt.Sprintf("config.%d", n.Add(1)) }
func (e *HealthEvent) key(n *atomic.Uint64) string { return fmt.Sprintf("health.%d", n.Add(1)) }
func (e *GapEvent) key(n *atomic.Uint64) string    { return fmt.Sprintf("gap.%d", n.Add(1)) }

func (e *DetectionEvent) stamp(o origin) { e.Version, e.Site, e.ID = Version, o.site, o.id }
func (e *ObjectEvent) stamp(o origin)    { e.Version, e.Site, e.ID = Version, o.site, o.id }
func (e *ZoneEvent) stamp(o origin)      { e.Version, e.Site, e.ID = Version, o.site, o.id }
func (e *LineEvent) stamp(o origin)      { e.Version, e.Site, e.ID = Version, o.site, o.id }
func (e *StatusEvent) stamp(o origin)    { e.Version, e.Site, e.ID = Version, o.site, o.id }
func (e *ConfigEvent) stamp(o origin)    { e.Version, e.Site, e.ID = Version, o.site, o.id }
func (e *GapEvent) stamp(o origin)       { e.Version, e.Site, e.ID = Version, o.site, o.id }
func (e *HealthEvent) stamp(o origin) {
	e.Version, e.Site, e.ID, e.Instance = Version, o.site, o.id, o.instance
}

// newInstance is a random name for a daemon run: 8 hex digits.
func newInstance() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
