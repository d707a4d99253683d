package sinks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of the snapshot store: Snapshots' fields.
const (
	// DefaultSnapshotMaxBytes bounds the store: Snapshots.MaxBytes.
	DefaultSnapshotMaxBytes = 256 << 20
	// DefaultSnapshotMaxAge is how long a snapshot is kept: Snapshots.MaxAge.
	DefaultSnapshotMaxAge = 7 * 24 * time.Hour
	// DefaultSnapshotObjectBytes bounds one snapshot: Snapshots.MaxObjectBytes.
	DefaultSnapshotObjectBytes = 4 << 20
	// DefaultSnapshotQueueBytes bounds the snapshots waiting to be stored:
	// Snapshots.QueueBytes.
	DefaultSnapshotQueueBytes = 32 << 20
)

// ErrSnapshotQueueFull is PutSnapshot's error when the snapshot is dropped because the queue
// is full (the store is slow or unreachable); the drop is counted in SnapshotStats.Dropped.
var ErrSnapshotQueueFull = errors.New("snapshot queue full")

// Snapshots stores evidence JPEGs (a track's best frame, with its box drawn) in a JetStream
// object store bucket on the box (SnapshotBucket: <prefix>-<site>-snapshots), under the names
// SnapshotName gives (<camera>/t<track>.jpg) that object events carry in "snapshot".
//
// The bucket is bounded by age (MaxAge: older snapshots are removed by the server) and by
// size (MaxBytes): before storing a snapshot that would not fit, the oldest snapshots are
// deleted, whole, until it fits (nats-server's object store refuses new data when full;
// Snapshots makes that "the oldest go").
//
// PutSnapshot never blocks: it checks the name and the JPEG and queues it (QueueBytes; a
// snapshot put again under the same name before it is stored replaces the queued one); one
// goroutine stores them. When the queue is full the snapshot is dropped and counted. While
// the server is unreachable, the queue waits.
//
// The bucket is a stream (OBJ_<bucket>) in the box's JetStream domain: a hub reads it over
// the leaf link (docs/delivery.md).
//
// The lifecycle is Start (after the Publisher's), PutSnapshot and Get from any goroutine,
// then Close, which stores what is queued within its timeout.
type Snapshots struct {
	// Publisher is the started JetStream publisher whose connection the store uses.
	// Required.
	Publisher *Publisher
	// Bucket names the object store. Default SnapshotBucket(Publisher.Prefix,
	// Publisher.Site).
	Bucket string
	// MaxBytes bounds the store; the oldest snapshots go to make room. Default
	// DefaultSnapshotMaxBytes (256 MiB).
	MaxBytes int64
	// MaxAge removes snapshots older than this. Default DefaultSnapshotMaxAge (7 days).
	MaxAge time.Duration
	// MaxObjectBytes bounds one snapshot; a larger one is refused. At most MaxBytes/4.
	// Default DefaultSnapshotObjectBytes (4 MiB).
	MaxObjectBytes int
	// QueueBytes bounds the snapshots waiting to be stored. Default
	// DefaultSnapshotQueueBytes (32 MiB).
	QueueBytes int
	// Logger receives the store's log lines. Default: none are written.
	Logger *slog.Logger

	obs    jetstream.ObjectStore
	log    *slog.Logger
	writer queueWriter

	mu     sync.Mutex
	queue  []string          // names in the order put
	data   map[string][]byte // name -> the JPEG to store
	bytes  int               // of data
	closed bool

	index evictionIndex // the writer's: what the store holds, oldest first

	stored, dropped, evicted, failed atomic.Uint64
}

// SnapshotStats are the store's counters since Start.
type SnapshotStats struct {
	Stored  uint64 // snapshots stored
	Dropped uint64 // dropped: the queue was full
	Evicted uint64 // deleted to make room (the oldest)
	Failed  uint64 // stores that failed and were tried again
	Pending int    // snapshots queued
}

// SnapshotBucket is the default name of the site's snapshot store:
// <prefix>-<site>-snapshots, with the dots of a prefix of several tokens as '-'.
func SnapshotBucket(prefix, site string) string {
	return strings.ReplaceAll(prefix, ".", "-") + "-" + site + "-snapshots"
}

// SnapshotName is the object name of the best frame of track on camera, first seen at
// firstSeen, in the snapshot store: <camera>/t<track>-<first seen, unix ms>.jpg. Track ids
// are not reused on a camera, but a camera removed and added again starts them again (and
// the state bucket may be lost): the first-seen time keeps a name to one object, so no
// object's evidence overwrites another's.
func SnapshotName(camera string, track uint64, firstSeen time.Time) string {
	return fmt.Sprintf("%s/t%d-%d.jpg", camera, track, firstSeen.UnixMilli())
}

// Start creates the store, or updates it to its limits, reads what it holds and starts the
// writer.
func (s *Snapshots) Start() error {
	p := s.Publisher
	if p == nil || p.js == nil {
		return errors.New("snapshot store: needs a started publisher with JetStream (nats.jetstream: true)")
	}
	if s.Bucket == "" {
		s.Bucket = SnapshotBucket(p.Prefix, p.Site)
	}
	if s.MaxBytes <= 0 {
		s.MaxBytes = DefaultSnapshotMaxBytes
	}
	if s.MaxAge <= 0 {
		s.MaxAge = DefaultSnapshotMaxAge
	}
	if s.MaxObjectBytes <= 0 {
		s.MaxObjectBytes = DefaultSnapshotObjectBytes
	}
	if s.QueueBytes <= 0 {
		s.QueueBytes = DefaultSnapshotQueueBytes
	}
	if int64(s.MaxObjectBytes) > s.MaxBytes/4 {
		return fmt.Errorf("snapshot store %s: a snapshot of up to %d bytes in a store of %d: want at most a quarter of the store", s.Bucket, s.MaxObjectBytes, s.MaxBytes)
	}
	s.log = s.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := p.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      s.Bucket,
		Description: "visiond snapshots of site " + p.Site + ": each track's best frame",
		TTL:         s.MaxAge,
		MaxBytes:    s.MaxBytes,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("snapshot store %s: %w", s.Bucket, err)
	}
	if err := s.index.open(ctx, p.js, obs, s.Bucket); err != nil {
		return fmt.Errorf("snapshot store %s: %w", s.Bucket, err)
	}
	s.obs = obs
	s.data = map[string][]byte{}
	s.writer.start(s.write)
	return nil
}

// checkObjectName says whether name is a snapshot name: 1 to 255 letters, digits, '_', '-',
// '.' and '/', not starting with '/' or holding "..".
func checkObjectName(name string) error {
	if name == "" {
		return errors.New("snapshot name is empty")
	}
	if len(name) > 255 {
		return fmt.Errorf("snapshot name %.40q...: %d characters, at most 255", name, len(name))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./", r)) {
			return fmt.Errorf("snapshot name %q: %q is not allowed; want letters, digits, '_', '-', '.' or '/'", name, r)
		}
	}
	if strings.HasPrefix(name, "/") || strings.Contains(name, "..") {
		return fmt.Errorf("snapshot name %q: no leading '/' or '..'", name)
	}
	return nil
}

// PutSnapshot queues jpeg to be stored under name (SnapshotName), replacing a snapshot of
// that name. It never blocks. It refuses a bad name, data that is not a JPEG or is larger
// than MaxObjectBytes, and returns ErrSnapshotQueueFull (wrapped) when the queue has no room.
func (s *Snapshots) PutSnapshot(name string, jpeg []byte) error {
	if err := checkObjectName(name); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if len(jpeg) > s.MaxObjectBytes {
		return fmt.Errorf("snapshot %s: %d bytes, at most %d (the largest snapshot the store takes)", name, len(jpeg), s.MaxObjectBytes)
	}
	if !bytes.HasPrefix(jpeg, []byte{0xFF, 0xD8, 0xFF}) {
		return fmt.Errorf("snapshot %s: %d bytes that are not a JPEG (no FF D8 FF start of image)", name, len(jpeg))
	}
	s.mu.Lock()
	if s.closed || s.data == nil {
		s.mu.Unlock()
		return fmt.Errorf("snapshot %s: the snapshot store is closed", name)
	}
	old, queued := s.data[name]
	if s.bytes-len(old)+len(jpeg) > s.QueueBytes {
		s.mu.Unlock()
		s.dropped.Add(1)
		return fmt.Errorf("snapshot %s: %w (%d bytes waiting)", name, ErrSnapshotQueueFull, s.QueueBytes)
	}
	if !queued {
		s.queue = append(s.queue, name)
	}
	s.data[name] = jpeg
	s.bytes += len(jpeg) - len(old)
	s.mu.Unlock()
	s.writer.wakeUp()
	return nil
}

// next takes the oldest queued snapshot.
func (s *Snapshots) next() (string, []byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return "", nil, false
	}
	name := s.queue[0]
	s.queue = s.queue[1:]
	data := s.data[name]
	delete(s.data, name)
	s.bytes -= len(data)
	return name, data, true
}

// unread puts a snapshot that could not be stored back at the front of the queue, unless a
// newer one of its name came meanwhile.
func (s *Snapshots) unread(name string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, newer := s.data[name]; newer {
		return
	}
	s.queue = append([]string{name}, s.queue...)
	s.data[name] = data
	s.bytes += len(data)
}

// write stores the oldest queued snapshot; the writer's (queueWriter).
func (s *Snapshots) write(ctx context.Context) (bool, error) {
	name, data, ok := s.next()
	if !ok {
		return false, nil
	}
	if err := s.store(ctx, name, data); err != nil {
		s.failed.Add(1)
		s.log.Debug("snapshot: store failed; trying again", "name", name, "error", err)
		s.unread(name, data)
		return true, err
	}
	return true, nil
}

// store makes room for data, oldest snapshots first, then stores it.
func (s *Snapshots) store(ctx context.Context, name string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s.index.forget(name) // its old version goes with the put
	if err := s.index.makeRoom(ctx, int64(len(data)), s.MaxBytes, "snapshot", &s.evicted); err != nil {
		return err
	}
	info, err := s.obs.PutBytes(ctx, name, data)
	if err != nil {
		return err
	}
	s.index.add(name, info.ModTime)
	s.stored.Add(1)
	return nil
}

// getTimeout bounds Get.
const getTimeout = 10 * time.Second

// Get reads the snapshot stored under name: jetstream.ErrObjectNotFound (wrapped) when there
// is none (never stored, removed by age, or to make room). The server removes an expired
// snapshot's data a moment before its entry: a read in between waits for data that will not
// come, so Get gives up after getTimeout unless ctx says sooner.
func (s *Snapshots) Get(ctx context.Context, name string) ([]byte, error) {
	if err := checkObjectName(name); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	data, err := s.obs.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", name, err)
	}
	return data, nil
}

// Stats returns the store's counters.
func (s *Snapshots) Stats() SnapshotStats {
	s.mu.Lock()
	n := len(s.queue)
	s.mu.Unlock()
	return SnapshotStats{Stored: s.stored.Load(), Dropped: s.dropped.Load(), Evicted: s.evicted.Load(),
		Failed: s.failed.Load(), Pending: n}
}

// Close stops taking snapshots, stores what is queued within timeout, and stops the writer.
// Safe to call twice.
func (s *Snapshots) Close(timeout time.Duration) {
	s.writer.close(timeout, func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	}, func() {
		s.log.Warn("snapshot: not stored before the shutdown deadline", "snapshots", s.Stats().Pending)
	})
}
