package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/analytics"
)

// DefaultStateKeys bounds the keys waiting to be written to the state bucket: State.MaxPending.
const DefaultStateKeys = 4096

// State keeps the present state of a site's analytics in a JetStream key-value bucket on the
// box (StateBucket: <prefix>-<site>-state), one value per key (history 1, no TTL), so a
// dashboard reads it without replaying events and a restarted daemon finds its counts:
//
//	occupancy.<camera>.<zone>  {"camera","zone","total","by_class":{"person":2},"at"}   Occupancy
//	lines.<camera>.<line>      {"camera","line","fingerprint","counts":{"in":{"car":3}},"at"} LineState
//	tracks.<camera>            {"camera","next_id","at"}                                TrackerState
//
// Camera, zone and line ids are tokens (letters, digits, '_' and '-', as config requires),
// all allowed in keys as they are; class names (which may hold spaces: "traffic light") are
// only in values. A watcher of "occupancy.>" or "lines.<camera>.>" sees every change.
//
// Writes never block the caller: Put* validate the names, encode the value and leave it in
// a map of pending keys, where a later value of the same key replaces an earlier one not yet
// written (the latest wins), and one goroutine writes them. While the server is unreachable
// they wait there (at most MaxPending keys; past it a new key is dropped and counted) and are
// written when it returns. Track ids are the exception: ReserveTrackIDs writes tracks.<camera>
// at once, with a compare-and-set, and returns only once the server has it, since ids must
// never be given twice (ForgetCamera deletes it at once too).
//
// The bucket is a stream (KV_<bucket>) in the box's JetStream domain: a hub reads it over the
// leaf link as it reads the event stream (docs/delivery.md).
//
// The lifecycle is Start (after the Publisher's), Put* and reads from any goroutine, then
// Close, which writes what is pending.
type State struct {
	// Publisher is the started JetStream publisher whose connection the bucket uses.
	// Required.
	Publisher *Publisher
	// Bucket names the bucket. Default StateBucket(Publisher.Prefix, Publisher.Site).
	Bucket string
	// MaxPending bounds the keys waiting to be written. Default DefaultStateKeys.
	MaxPending int
	// Logger receives the state's log lines. Default: none are written.
	Logger *slog.Logger

	kv     jetstream.KeyValue
	log    *slog.Logger
	writer queueWriter

	mu      sync.Mutex
	pending map[string][]byte // key -> value to write; nil: delete the key
	closed  bool

	written, dropped, failed atomic.Uint64
}

// Occupancy is a zone's occupancy, the value of key occupancy.<camera>.<zone>.
type Occupancy struct {
	Camera  string         `json:"camera"`
	Zone    string         `json:"zone"`
	Total   int            `json:"total"`
	ByClass map[string]int `json:"by_class"` // classes with at least one object
	At      time.Time      `json:"at"`       // when it was put
}

// LineState is a line's counts, the value of key lines.<camera>.<line>.
type LineState struct {
	Camera      string                       `json:"camera"`
	Line        string                       `json:"line"`
	Fingerprint string                       `json:"fingerprint"`
	Counts      map[string]map[string]uint64 `json:"counts"` // direction -> class -> crossings
	At          time.Time                    `json:"at"`
}

// TrackerState is what a camera's tracker needs after a restart, the value of key
// tracks.<camera>.
type TrackerState struct {
	Camera string    `json:"camera"`
	NextID uint64    `json:"next_id"` // the first id not reserved (ReserveTrackIDs): no track has it or a later one
	At     time.Time `json:"at"`
}

// StateStats are the state's counters since Start.
type StateStats struct {
	Written uint64 // values written (and keys deleted)
	Dropped uint64 // new keys dropped: MaxPending keys were waiting
	Failed  uint64 // writes that failed and were tried again
	Pending int    // keys waiting to be written
}

// StateBucket is the default name of the site's state bucket: <prefix>-<site>-state, with
// the dots of a prefix of several tokens as '-'.
func StateBucket(prefix, site string) string {
	return strings.ReplaceAll(prefix, ".", "-") + "-" + site + "-state"
}

// Start creates the bucket, or updates it to its settings, and starts the writer.
func (s *State) Start() error {
	p := s.Publisher
	if p == nil || p.js == nil {
		return errors.New("state bucket: needs a started publisher with JetStream (nats.jetstream: true)")
	}
	if s.Bucket == "" {
		s.Bucket = StateBucket(p.Prefix, p.Site)
	}
	if s.MaxPending <= 0 {
		s.MaxPending = DefaultStateKeys
	}
	s.log = s.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := p.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      s.Bucket,
		Description: "visiond present state of site " + p.Site + ": zone occupancy, line counts, tracker ids",
		History:     1,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("state bucket %s: %w", s.Bucket, err)
	}
	s.kv = kv
	s.pending = map[string][]byte{}
	s.writer.start(s.write)
	return nil
}

// checkToken says whether id can be a token of a key: what config allows for camera, zone
// and line ids.
func checkToken(what, id string) error {
	if id == "" {
		return fmt.Errorf("%s id is empty", what)
	}
	if len(id) > maxTokenLen {
		return fmt.Errorf("%s id %q: %d characters, at most %d", what, id, len(id), maxTokenLen)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("%s id %q: %q is not allowed; want letters, digits, '_' or '-'", what, id, r)
		}
	}
	return nil
}

// maxTokenLen is the longest camera, zone or line id (config's limit).
const maxTokenLen = 64

func occupancyKey(camera, zone string) string { return "occupancy." + camera + "." + zone }
func lineKey(camera, line string) string      { return "lines." + camera + "." + line }
func trackerKey(camera string) string         { return "tracks." + camera }

// PutOccupancy stores the occupancy of zone on camera: objects by class (classes with none
// are left out).
func (s *State) PutOccupancy(camera, zone string, byClass map[string]int) error {
	if err := errors.Join(checkToken("camera", camera), checkToken("zone", zone)); err != nil {
		return fmt.Errorf("state: occupancy: %w", err)
	}
	o := Occupancy{Camera: camera, Zone: zone, ByClass: map[string]int{}, At: ms(time.Now())}
	for c, n := range byClass {
		if n > 0 {
			o.ByClass[c] = n
			o.Total += n
		}
	}
	return s.put(occupancyKey(camera, zone), o)
}

// PutLineCounts stores the counts of camera's lines (analytics.LineSet.Counts): one value per
// line named in counts, replacing that line's stored counts (lines not named keep theirs;
// DeleteLine removes one).
func (s *State) PutLineCounts(camera string, counts []analytics.Count) error {
	if err := checkToken("camera", camera); err != nil {
		return fmt.Errorf("state: line counts: %w", err)
	}
	byLine := map[string]*LineState{}
	var order []string
	for i, c := range counts {
		if err := checkToken("line", c.Line); err != nil {
			return fmt.Errorf("state: line counts[%d]: %w", i, err)
		}
		if _, ok := direction(c.Direction); !ok {
			return fmt.Errorf("state: line counts[%d] (line %s): direction %q, want %q or %q", i, c.Line, c.Direction, DirectionIn, DirectionOut)
		}
		if c.Class == "" {
			return fmt.Errorf("state: line counts[%d] (line %s): no class", i, c.Line)
		}
		if ls := byLine[c.Line]; ls == nil {
			byLine[c.Line] = &LineState{Camera: camera, Line: c.Line, Fingerprint: c.Fingerprint}
			order = append(order, c.Line)
		} else if ls.Fingerprint != c.Fingerprint {
			return fmt.Errorf("state: line counts[%d] (line %s): fingerprint %q, but %q before it", i, c.Line, c.Fingerprint, ls.Fingerprint)
		}
	}
	now := ms(time.Now())
	for _, line := range order {
		ls := byLine[line]
		ls.Counts, ls.At = lineCounts(line, counts), now
		if err := s.put(lineKey(camera, line), ls); err != nil {
			return err
		}
	}
	return nil
}

// PutNextTrackID queues next as the first id not reserved for camera's tracks, written
// later like every Put: it reserves nothing, and a crash may lose it. The daemon reserves its
// ids with ReserveTrackIDs and never calls this; it is here for tools that seed a bucket.
func (s *State) PutNextTrackID(camera string, next uint64) error {
	if err := checkToken("camera", camera); err != nil {
		return fmt.Errorf("state: next track id: %w", err)
	}
	return s.put(trackerKey(camera), TrackerState{Camera: camera, NextID: next, At: ms(time.Now())})
}

// ReserveTrackIDs reserves n track ids of camera in the bucket and returns the first: the
// block [first, first+n) is the caller's alone once it returns, and no later reservation (by
// this daemon or the next one on the same bucket) gives any of it again. first is the
// stored next id, or atLeast when that is higher (ids used that the bucket has not seen:
// a block taken while it was unreachable), and at least 1. The write is synchronous, a
// compare-and-set of tracks.<camera> (TrackerState.NextID: first+n), tried again when
// another write came between the read and it; it bypasses the pending keys, so the id is
// acknowledged by the server before any of the block is used. It fails when the bucket does
// not answer within ctx.
func (s *State) ReserveTrackIDs(ctx context.Context, camera string, atLeast, n uint64) (first uint64, err error) {
	if err := checkToken("camera", camera); err != nil {
		return 0, fmt.Errorf("state: reserve track ids: %w", err)
	}
	if n == 0 {
		return 0, errors.New("state: reserve track ids: a block of 0")
	}
	key := trackerKey(camera)
	for range 8 { // a conflict means another write came between: read again
		var stored, rev uint64
		e, err := s.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound): // none, or deleted: Create takes it
		case err != nil:
			return 0, fmt.Errorf("state: reserve track ids: read %s: %w", key, err)
		default:
			var ts TrackerState
			if err := json.Unmarshal(e.Value(), &ts); err != nil {
				return 0, fmt.Errorf("state: reserve track ids: %s: %w", key, err)
			}
			stored, rev = ts.NextID, e.Revision()
		}
		first = max(stored, atLeast, 1)
		data, err := json.Marshal(TrackerState{Camera: camera, NextID: first + n, At: ms(time.Now())})
		if err != nil {
			return 0, fmt.Errorf("state: reserve track ids: %w", err)
		}
		if rev == 0 {
			_, err = s.kv.Create(ctx, key, data)
		} else {
			_, err = s.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return first, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return 0, fmt.Errorf("state: reserve track ids: write %s: %w", key, err)
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("state: reserve track ids: %w", ctx.Err())
		}
	}
	return 0, fmt.Errorf("state: reserve track ids: %s kept changing under the compare-and-set", key)
}

// isWrongSequence says whether err is the server's refusal of a compare-and-set whose
// revision is no longer the key's last.
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}

// DeleteZone removes the occupancy of a zone no longer configured.
func (s *State) DeleteZone(camera, zone string) error {
	if err := errors.Join(checkToken("camera", camera), checkToken("zone", zone)); err != nil {
		return fmt.Errorf("state: delete zone: %w", err)
	}
	return s.queue(occupancyKey(camera, zone), nil)
}

// DeleteLine removes the counts of a line no longer configured.
func (s *State) DeleteLine(camera, line string) error {
	if err := errors.Join(checkToken("camera", camera), checkToken("line", line)); err != nil {
		return fmt.Errorf("state: delete line: %w", err)
	}
	return s.queue(lineKey(camera, line), nil)
}

// ForgetCamera removes every key of a camera no longer configured: its zones' occupancy,
// its lines' counts and its next track id (written at once, not queued: a later
// ReserveTrackIDs of a camera added again under the id must not be undone by a delete still
// pending). A camera added again starts its ids at 1; its old objects' evidence names hold
// their first_seen, so they are not overwritten (SnapshotName).
func (s *State) ForgetCamera(ctx context.Context, camera string) error {
	if err := checkToken("camera", camera); err != nil {
		return fmt.Errorf("state: forget camera: %w", err)
	}
	for _, prefix := range []string{"occupancy." + camera + ".", "lines." + camera + "."} {
		keys, err := s.keys(ctx, prefix)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := s.queue(k, nil); err != nil {
				return err
			}
		}
	}
	if err := s.kv.Delete(ctx, trackerKey(camera)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("state: forget camera: delete %s: %w", trackerKey(camera), err)
	}
	return nil
}

func (s *State) put(key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("state: %s: %w", key, err)
	}
	return s.queue(key, data)
}

// errDropped is put's error when MaxPending keys are waiting.
var errDropped = errors.New("dropped: too many keys waiting to be written (is the server reachable?)")

func (s *State) queue(key string, data []byte) error {
	s.mu.Lock()
	if s.closed || s.pending == nil {
		s.mu.Unlock()
		return fmt.Errorf("state: %s: the state bucket is closed", key)
	}
	if _, ok := s.pending[key]; !ok && len(s.pending) >= s.MaxPending {
		s.mu.Unlock()
		s.dropped.Add(1)
		return fmt.Errorf("state: %s: %w", key, errDropped)
	}
	s.pending[key] = data
	s.mu.Unlock()
	s.writer.wakeUp()
	return nil
}

// pendingValue is the value waiting for key: ok when one is, data nil for a delete.
func (s *State) pendingValue(key string) (data []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok = s.pending[key]
	return data, ok
}

// write writes the pending keys, in order; the writer's (queueWriter).
func (s *State) write(ctx context.Context) (bool, error) {
	s.mu.Lock()
	batch := s.pending
	s.pending = make(map[string][]byte, len(batch))
	s.mu.Unlock()
	if len(batch) == 0 {
		return false, nil
	}
	keys := make([]string, 0, len(batch))
	for k := range batch {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if err := s.writeKey(ctx, k, batch[k]); err != nil {
			s.failed.Add(1)
			s.log.Debug("state: write failed; trying again", "key", k, "error", err)
			// Put back what is not written, unless a newer value came meanwhile.
			s.mu.Lock()
			for _, k := range keys[i:] {
				if _, newer := s.pending[k]; !newer {
					s.pending[k] = batch[k]
				}
			}
			s.mu.Unlock()
			return true, err
		}
		s.written.Add(1)
	}
	return true, nil
}

// writeKey writes data under key, or deletes key when data is nil.
func (s *State) writeKey(ctx context.Context, key string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if data == nil {
		err := s.kv.Delete(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		return err
	}
	_, err := s.kv.Put(ctx, key, data)
	return err
}

// Stats returns the state's counters.
func (s *State) Stats() StateStats {
	s.mu.Lock()
	n := len(s.pending)
	s.mu.Unlock()
	return StateStats{Written: s.written.Load(), Dropped: s.dropped.Load(), Failed: s.failed.Load(), Pending: n}
}

// Close stops taking values, writes what is pending within timeout, and stops the writer.
// Safe to call twice.
func (s *State) Close(timeout time.Duration) {
	s.writer.close(timeout, func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	}, func() {
		s.log.Warn("state: values not written before the shutdown deadline", "keys", s.Stats().Pending)
	})
}

// get reads key: the value waiting to be written if there is one, else the bucket's; nil
// when there is none.
func (s *State) get(ctx context.Context, key string) ([]byte, error) {
	if data, ok := s.pendingValue(key); ok {
		return data, nil
	}
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: read %s: %w", key, err)
	}
	return e.Value(), nil
}

// keys lists the bucket's keys under prefix (e.g. "lines.door."), and the pending ones.
func (s *State) keys(ctx context.Context, prefix string) ([]string, error) {
	seen := map[string]bool{}
	lister, err := s.kv.ListKeysFiltered(ctx, prefix+"*")
	if err != nil {
		return nil, fmt.Errorf("state: list %s*: %w", prefix, err)
	}
	for k := range lister.Keys() {
		seen[k] = true
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("state: list %s*: %w", prefix, err)
	}
	s.mu.Lock()
	for k := range s.pending {
		if strings.HasPrefix(k, prefix) && !strings.Contains(k[len(prefix):], ".") {
			seen[k] = true
		}
	}
	s.mu.Unlock()
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// LineCounts reads camera's stored line counts, to restore them at start
// (analytics.LineSet.Restore), sorted by line, direction and class.
func (s *State) LineCounts(ctx context.Context, camera string) ([]analytics.Count, error) {
	if err := checkToken("camera", camera); err != nil {
		return nil, fmt.Errorf("state: line counts: %w", err)
	}
	keys, err := s.keys(ctx, "lines."+camera+".")
	if err != nil {
		return nil, err
	}
	var out []analytics.Count
	for _, k := range keys {
		data, err := s.get(ctx, k)
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue // deleted
		}
		var ls LineState
		if err := json.Unmarshal(data, &ls); err != nil {
			return nil, fmt.Errorf("state: %s: %w", k, err)
		}
		for dir, byClass := range ls.Counts {
			d, ok := fromDirection(dir)
			if !ok {
				return nil, fmt.Errorf("state: %s: direction %q, want %q or %q", k, dir, DirectionIn, DirectionOut)
			}
			for class, n := range byClass {
				out = append(out, analytics.Count{Line: ls.Line, Fingerprint: ls.Fingerprint, Direction: d, Class: class, N: n})
			}
		}
	}
	slices.SortFunc(out, func(a, b analytics.Count) int {
		return strings.Compare(a.Line+"\x00"+string(a.Direction)+"\x00"+a.Class, b.Line+"\x00"+string(b.Direction)+"\x00"+b.Class)
	})
	return out, nil
}

// Occupancy reads camera's stored zone occupancy, by zone.
func (s *State) Occupancy(ctx context.Context, camera string) (map[string]Occupancy, error) {
	if err := checkToken("camera", camera); err != nil {
		return nil, fmt.Errorf("state: occupancy: %w", err)
	}
	keys, err := s.keys(ctx, "occupancy."+camera+".")
	if err != nil {
		return nil, err
	}
	out := map[string]Occupancy{}
	for _, k := range keys {
		data, err := s.get(ctx, k)
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue
		}
		var o Occupancy
		if err := json.Unmarshal(data, &o); err != nil {
			return nil, fmt.Errorf("state: %s: %w", k, err)
		}
		out[o.Zone] = o
	}
	return out, nil
}

// NextTrackID reads the first id not reserved for camera's tracks (ReserveTrackIDs): 0
// when none is stored (a camera never tracked, or forgotten).
func (s *State) NextTrackID(ctx context.Context, camera string) (uint64, error) {
	if err := checkToken("camera", camera); err != nil {
		return 0, fmt.Errorf("state: next track id: %w", err)
	}
	data, err := s.get(ctx, trackerKey(camera))
	if err != nil || data == nil {
		return 0, err
	}
	var ts TrackerState
	if err := json.Unmarshal(data, &ts); err != nil {
		return 0, fmt.Errorf("state: %s: %w", trackerKey(camera), err)
	}
	return ts.NextID, nil
}
