package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of the clip store: Clips' fields.
const (
	// DefaultClipMaxBytes bounds the store: Clips.MaxBytes.
	DefaultClipMaxBytes = 2 << 30
	// DefaultClipMaxAge is how long a clip is kept: Clips.MaxAge.
	DefaultClipMaxAge = 7 * 24 * time.Hour
	// DefaultClipObjectBytes bounds one clip: Clips.MaxObjectBytes.
	DefaultClipObjectBytes = 512 << 20
	// DefaultClipQueueBytes bounds the clip files waiting to be stored: Clips.QueueBytes.
	DefaultClipQueueBytes = 1 << 30
	// DefaultClipCacheBytes bounds the local copies of clips read for serving:
	// Clips.CacheBytes.
	DefaultClipCacheBytes = 512 << 20
)

// ErrClipQueueFull is PutClip's error when the clip is dropped because the queue is full
// (the store is slow or unreachable); the drop is counted in ClipStats.Dropped.
var ErrClipQueueFull = errors.New("clip queue full")

// errNoRoom marks a clip the store refused for lack of room with nothing left to evict.
var errNoRoom = errors.New("no room in the clip store")

// errFileGone marks a queued clip whose file went (removed by hand): it cannot be stored.
var errFileGone = errors.New("its queued file is gone")

// ClipMetadataKey is the key of a stored clip's object metadata that holds its ClipInfo as
// JSON, so that listing the store needs no download.
const ClipMetadataKey = "visiond-clip"

// Clips stores event clips (MP4 files, package clips) in a JetStream object store bucket on
// the box (ClipBucket: <prefix>-<site>-clips), under the names ClipName gives
// (<camera>/c<start, unix ms>.mp4), which ObjectClip events carry. Each object keeps its
// ClipInfo in its metadata (ClipMetadataKey), so List reads no video.
//
// The bucket is bounded by age (MaxAge: older clips are removed by the server) and by size
// (MaxBytes): before storing a clip that would not fit, the oldest clips are deleted, whole,
// until it fits. A clip the server refuses for lack of room even then is dropped and counted
// (ClipStats.Refused).
//
// PutClip never blocks on the network: it checks the clip and moves its file into Dir's
// queue (bounded by QueueBytes, on disk), with its ClipInfo and the events of its objects
// beside it as JSON (JoinClip adds one while it waits); one goroutine stores them, oldest
// first, and hands each stored clip's events to OnStored. While the server is unreachable the
// queue waits; when it is full new clips are dropped and counted. Files still queued at
// Close, or at a crash, are stored by the next Start, and their events handed to OnStored.
//
// Open serves a stored clip from a local copy in Dir (bounded by CacheBytes, the least
// recently used removed), so that http.ServeContent can answer range requests.
//
// The bucket is a stream (OBJ_<bucket>) in the box's JetStream domain: a hub reads it over
// the leaf link (docs/delivery.md).
//
// The lifecycle is Start (after the Publisher's), PutClip, List and Open from any goroutine,
// then Close, which stores what is queued within its timeout.
type Clips struct {
	// Publisher is the started JetStream publisher whose connection the store uses.
	// Required.
	Publisher *Publisher
	// Bucket names the object store. Default ClipBucket(Publisher.Prefix, Publisher.Site).
	Bucket string
	// MaxBytes bounds the store; the oldest clips go to make room. Default
	// DefaultClipMaxBytes (2 GiB).
	MaxBytes int64
	// MaxAge removes clips older than this. Default DefaultClipMaxAge (7 days).
	MaxAge time.Duration
	// MaxObjectBytes bounds one clip; a larger one is refused. At most MaxBytes/4. Default
	// DefaultClipObjectBytes (512 MiB), or MaxBytes/4 when that is less.
	MaxObjectBytes int64
	// QueueBytes bounds the clip files waiting to be stored, on disk. Default
	// DefaultClipQueueBytes (1 GiB).
	QueueBytes int64
	// CacheBytes bounds the local copies of clips read by Open. Default
	// DefaultClipCacheBytes (512 MiB).
	CacheBytes int64
	// Dir is a directory of the daemon's (under its state dir): clip files wait in its
	// "queue" folder, and clips read for serving are kept in its "cache" folder. PutClip's
	// files must be on its filesystem to be moved rather than copied. Required.
	Dir string
	// OnStored is called from the writer goroutine after each clip is stored, with the
	// events put with it (the daemon publishes their ObjectClip events), those of a clip
	// queued by an earlier run included. Default nil: nothing is called.
	OnStored func(ClipInfo, []ObjectEvent)
	// Logger receives the store's log lines. Default: none are written.
	Logger *slog.Logger

	obs      jetstream.ObjectStore
	log      *slog.Logger
	queueDir string
	cacheDir string
	writer   queueWriter
	failing  int // the writer's: store attempts failed in a row, for one warning per outage

	mu       sync.Mutex
	queue    []*queuedClip   // oldest first; the writer stores queue[0] and only it removes it
	reserved map[string]bool // clips PutClip is moving into the queue
	bytes    int64           // of queue and reserved
	closed   bool

	index evictionIndex // the writer's: what the store holds, oldest first

	cacheMu sync.Mutex
	cache   map[string]*cachedClip // clip name -> its local copy
	cached  int64                  // bytes of cache
	clock   uint64                 // numbers the cache's uses, for least recently used

	stored, dropped, evicted, failed, refused, invalid atomic.Uint64
}

// queuedClip is a clip waiting in Dir's queue: its MP4 and, beside it, its info and events
// as JSON (a queuedRecord).
type queuedClip struct {
	info   ClipInfo
	events []ObjectEvent // the latest events of its objects, for OnStored; c.mu guards them
	file   string        // the MP4; file + ".json" holds the record
}

// queuedRecord is what a queued clip's JSON file holds: its info, and the events of its
// objects. (The info's fields at the top: a file of an earlier version, the info alone,
// reads as a record without events.)
type queuedRecord struct {
	ClipInfo
	Events []ObjectEvent `json:"events,omitempty"`
}

// cachedClip is a local copy of a stored clip.
type cachedClip struct {
	nuid string // the stored object's, so a clip stored again is read again
	file string
	size int64
	used uint64
}

// ClipStats are the store's counters since Start.
type ClipStats struct {
	Stored  uint64 // clips stored
	Dropped uint64 // dropped by PutClip: the queue was full
	Evicted uint64 // deleted to make room (the oldest)
	Failed  uint64 // store attempts that failed and were tried again
	// Refused counts clips the server refused for lack of room even after the oldest were
	// deleted, or as larger than the store: dropped, the store is full.
	Refused uint64
	// Invalid counts clips PutClip refused: a bad name or info, a file that is missing,
	// empty, too large or not an MP4, a clip already queued.
	Invalid      uint64
	Pending      int   // clips queued
	PendingBytes int64 // their files' bytes
}

// Start creates the store, or updates it to its limits, reads what it holds, queues the clip
// files a previous run left in Dir and starts the writer.
func (c *Clips) Start() error {
	p := c.Publisher
	if p == nil || p.js == nil {
		return errors.New("clip store: needs a started publisher with JetStream (nats.jetstream: true)")
	}
	if c.Bucket == "" {
		c.Bucket = ClipBucket(p.Prefix, p.Site)
	}
	if c.Dir == "" {
		return fmt.Errorf("clip store %s: no directory for the clip files (Dir)", c.Bucket)
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultClipMaxBytes
	}
	if c.MaxAge <= 0 {
		c.MaxAge = DefaultClipMaxAge
	}
	if c.MaxObjectBytes <= 0 {
		c.MaxObjectBytes = min(DefaultClipObjectBytes, c.MaxBytes/4)
	}
	if c.QueueBytes <= 0 {
		c.QueueBytes = DefaultClipQueueBytes
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = DefaultClipCacheBytes
	}
	if c.MaxObjectBytes > c.MaxBytes/4 {
		return fmt.Errorf("clip store %s: a clip of up to %d bytes in a store of %d: want at most a quarter of the store", c.Bucket, c.MaxObjectBytes, c.MaxBytes)
	}
	c.log = c.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.queueDir, c.cacheDir = filepath.Join(c.Dir, "queue"), filepath.Join(c.Dir, "cache")
	// The cache is only copies: a previous run's is dropped rather than trusted.
	if err := os.RemoveAll(c.cacheDir); err != nil {
		return fmt.Errorf("clip store %s: clear the cache: %w", c.Bucket, err)
	}
	for _, d := range []string{c.queueDir, c.cacheDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("clip store %s: %w", c.Bucket, err)
		}
	}
	if err := c.recover(); err != nil {
		return fmt.Errorf("clip store %s: the clips left in %s: %w", c.Bucket, c.queueDir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := p.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      c.Bucket,
		Description: "visiond clips of site " + p.Site + ": the video of the cameras' objects",
		TTL:         c.MaxAge,
		MaxBytes:    c.MaxBytes,
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("clip store %s: %w", c.Bucket, err)
	}
	if err := c.index.open(ctx, p.js, obs, c.Bucket); err != nil {
		return fmt.Errorf("clip store %s: %w", c.Bucket, err)
	}
	c.obs = obs
	c.cache = map[string]*cachedClip{}
	c.reserved = map[string]bool{}
	c.writer.start(c.write)
	return nil
}

// recover queues the clips a previous run left in the queue folder, oldest first, and removes
// what is not a whole queued clip: an info file without its MP4 (stored, or its put did not
// finish), an MP4 without its info, half-written files.
func (c *Clips) recover() error {
	entries, err := os.ReadDir(c.queueDir)
	if err != nil {
		return err
	}
	c.queue, c.bytes = nil, 0
	var left []*queuedClip
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(c.queueDir, name)
		switch {
		case strings.HasSuffix(name, ".mp4.json"):
			mp4 := strings.TrimSuffix(path, ".json")
			if _, err := os.Stat(mp4); err != nil {
				os.Remove(path)
				continue
			}
			q, err := readQueued(mp4)
			if err != nil {
				c.log.Warn("clip: a clip left in the queue is unreadable; removed", "file", mp4, "error", err)
				os.Remove(mp4)
				os.Remove(path)
				continue
			}
			left = append(left, q)
		case strings.HasSuffix(name, ".mp4"):
			if _, err := os.Stat(path + ".json"); err != nil {
				c.log.Warn("clip: a clip file left in the queue without its info; removed", "file", path)
				os.Remove(path)
			}
		default:
			os.Remove(path) // a half-written info file
		}
	}
	slices.SortFunc(left, func(a, b *queuedClip) int { return a.info.Start.Compare(b.info.Start) })
	for _, q := range left {
		c.queue = append(c.queue, q)
		c.bytes += q.info.Bytes
	}
	if len(left) > 0 {
		c.log.Info("clip: clips left by the last run, to be stored", "clips", len(left), "bytes", c.bytes)
	}
	return nil
}

// readQueued reads the info of the queued clip file mp4 and checks it against the file.
func readQueued(mp4 string) (*queuedClip, error) {
	data, err := os.ReadFile(mp4 + ".json")
	if err != nil {
		return nil, err
	}
	var rec queuedRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", mp4+".json", err)
	}
	info := rec.ClipInfo
	if err := checkClipInfo(info); err != nil {
		return nil, err
	}
	if queueFile(info.Name) != filepath.Base(mp4) {
		return nil, fmt.Errorf("%s: holds the info of clip %s", mp4+".json", info.Name)
	}
	st, err := os.Stat(mp4)
	if err != nil {
		return nil, err
	}
	info.Bytes = st.Size()
	return &queuedClip{info: info, events: rec.Events, file: mp4}, nil
}

// queueFile is the name of clip name's file in the queue and cache folders: its '/' as '+'
// (names hold no '+': checkObjectName).
func queueFile(name string) string { return strings.ReplaceAll(name, "/", "+") }

// cameraToken is what a camera id is made of (common.json's token).
var cameraToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// checkClipInfo checks that info names its clip as ClipName does.
func checkClipInfo(info ClipInfo) error {
	if !cameraToken.MatchString(info.Camera) {
		return fmt.Errorf("clip %q: camera %q: want 1 to 64 letters, digits, '_' or '-'", info.Name, info.Camera)
	}
	if info.Start.IsZero() {
		return fmt.Errorf("clip %q: no start time", info.Name)
	}
	if want := ClipName(info.Camera, info.Start); info.Name != want {
		return fmt.Errorf("clip %q: the name of camera %s's clip starting at %s is %q", info.Name, info.Camera,
			info.Start.UTC().Format(time.RFC3339Nano), want)
	}
	return checkObjectName(info.Name)
}

// checkMP4 checks that path is a file of 1 to max bytes starting with an MP4 ftyp box, and
// returns its size.
func checkMP4(path string, max int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	switch {
	case err != nil:
		return 0, err
	case !st.Mode().IsRegular():
		return 0, fmt.Errorf("%s is not a regular file", path)
	case st.Size() == 0:
		return 0, fmt.Errorf("%s is empty", path)
	case st.Size() > max:
		return 0, fmt.Errorf("%s: %d bytes, at most %d (the largest clip the store takes: a quarter of its size or less)", path, st.Size(), max)
	}
	var head [8]byte
	if _, err := io.ReadFull(f, head[:]); err != nil || string(head[4:]) != "ftyp" {
		return 0, fmt.Errorf("%s: %d bytes that are not an MP4 (no ftyp box at its start)", path, st.Size())
	}
	return st.Size(), nil
}

// PutClip takes the MP4 at path (a file on Dir's filesystem: it is moved, or else copied;
// either way it is not left at path) and queues it with info to be stored under info.Name,
// and events (the latest events of its objects) for OnStored once it is.
// It never blocks on the network. It refuses, with an error naming the problem, a bad name
// (info.Name must be ClipName(info.Camera, info.Start)), a clip of that name already queued,
// a file that is missing, empty, larger than MaxObjectBytes or not an MP4 (counted in
// Invalid), and returns ErrClipQueueFull (wrapped) when the queue has no room (counted in
// Dropped). info.Bytes is set to the file's size.
func (c *Clips) PutClip(info ClipInfo, events []ObjectEvent, path string) error {
	err := c.putClip(info, events, path)
	if err != nil {
		if !errors.Is(err, ErrClipQueueFull) {
			c.invalid.Add(1)
		}
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			c.log.Warn("clip: cannot remove a refused clip file", "file", path, "error", rerr)
		}
	}
	return err
}

func (c *Clips) putClip(info ClipInfo, events []ObjectEvent, path string) error {
	c.mu.Lock()
	closed := c.closed || !c.writer.started() // started by a Start that succeeded
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("clip %s: the clip store is closed", info.Name)
	}
	if err := checkClipInfo(info); err != nil {
		return err
	}
	size, err := checkMP4(path, c.MaxObjectBytes)
	if err != nil {
		return fmt.Errorf("clip %s: %w", info.Name, err)
	}
	info.Bytes = size
	data, err := json.Marshal(queuedRecord{ClipInfo: info, Events: events})
	if err != nil {
		return fmt.Errorf("clip %s: %w", info.Name, err)
	}
	// Its name and bytes are reserved while its files are moved, outside the lock (a copy
	// across filesystems takes a while).
	c.mu.Lock()
	if c.reserved[info.Name] || slices.ContainsFunc(c.queue, func(q *queuedClip) bool { return q.info.Name == info.Name }) {
		c.mu.Unlock()
		return fmt.Errorf("clip %s: already queued", info.Name)
	}
	if c.bytes+size > c.QueueBytes {
		waiting := c.bytes
		c.mu.Unlock()
		c.dropped.Add(1)
		return fmt.Errorf("clip %s: %w (%d of %d bytes waiting)", info.Name, ErrClipQueueFull, waiting, c.QueueBytes)
	}
	c.reserved[info.Name] = true
	c.bytes += size
	c.mu.Unlock()

	// The info first: a file in the queue always has its info beside it.
	file := filepath.Join(c.queueDir, queueFile(info.Name))
	err = writeFileAtomic(file+".json", data)
	if err == nil {
		if err = moveFile(path, file); err != nil {
			os.Remove(file + ".json")
		}
	}
	c.mu.Lock()
	delete(c.reserved, info.Name)
	if err != nil {
		c.bytes -= size
	} else {
		// Past Close the writer may be gone: the files wait for the next Start.
		c.queue = append(c.queue, &queuedClip{info: info, events: events, file: file})
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("clip %s: queue: %w", info.Name, err)
	}
	c.writer.wakeUp()
	return nil
}

// JoinClip adds ev, the latest event of an object that the clip name shows too, to the
// events of the clip while it waits in the queue, and reports whether it did: false when the
// clip is not queued (stored already, or never put).
func (c *Clips) JoinClip(name string, ev ObjectEvent) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.IndexFunc(c.queue, func(q *queuedClip) bool { return q.info.Name == name })
	if i < 0 {
		return false
	}
	q := c.queue[i]
	q.events = append(q.events, ev)
	// The record on disk follows, for a restart; the writer reads the events from memory.
	data, err := json.Marshal(queuedRecord{ClipInfo: q.info, Events: q.events})
	if err == nil {
		err = writeFileAtomic(q.file+".json", data)
	}
	if err != nil {
		c.log.Warn("clip: an object joined a queued clip, not written beside it: a restart before it is stored loses its event",
			"clip", name, "track", ev.TrackID, "error", err)
	}
	return true
}

// writeFileAtomic writes data to path through a temporary file, so path is whole or absent.
func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o640); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// moveFile renames from to to, or copies it across filesystems and removes from.
func moveFile(from, to string) error {
	err := os.Rename(from, to)
	if !errors.Is(err, syscall.EXDEV) {
		return err
	}
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := to + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, to)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(from)
}

// head is the oldest queued clip, or nil.
func (c *Clips) head() *queuedClip {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return nil
	}
	return c.queue[0]
}

// finish removes q, the head, from the queue and its files from the disk, and returns its
// events: none joins it from now on.
func (c *Clips) finish(q *queuedClip) []ObjectEvent {
	c.mu.Lock()
	c.queue = c.queue[1:]
	c.bytes -= q.info.Bytes
	events := q.events
	c.mu.Unlock()
	os.Remove(q.file)
	os.Remove(q.file + ".json")
	return events
}

// write stores the oldest queued clip; the writer's (queueWriter). A clip the store refuses
// for lack of room, or whose file is gone, is dropped, counted and logged; after another
// failure it stays first in the queue, and the first failure of an outage is logged as a
// warning, the next ones at debug level.
func (c *Clips) write(ctx context.Context) (bool, error) {
	q := c.head()
	if q == nil {
		return false, nil
	}
	err := c.store(ctx, q)
	if err == nil && c.failing > 0 {
		c.log.Info("clip: storing again", "failed_attempts", c.failing)
		c.failing = 0
	}
	switch {
	case err == nil:
		events := c.finish(q)
		c.stored.Add(1)
		if c.OnStored != nil {
			c.OnStored(q.info, events)
		}
	case errors.Is(err, errNoRoom):
		c.finish(q)
		c.refused.Add(1)
		c.log.Warn("clip: not stored: the clip store is full", "clip", q.info.Name, "bytes", q.info.Bytes, "error", err)
	case errors.Is(err, errFileGone):
		c.finish(q)
		c.failed.Add(1)
		c.log.Warn("clip: not stored", "clip", q.info.Name, "error", err)
	default:
		c.failed.Add(1)
		if c.failing++; c.failing == 1 {
			st := c.Stats()
			c.log.Warn("clip: store failed; clips wait on disk, trying again every second", "clip", q.info.Name,
				"pending", st.Pending, "pending_bytes", st.PendingBytes, "error", err)
		} else {
			c.log.Debug("clip: store failed; trying again", "clip", q.info.Name, "error", err)
		}
		return true, err
	}
	return true, nil
}

// transferTimeout bounds moving n bytes to or from the store (the local server takes
// hundreds of MB/s; this allows for a slow disk).
func transferTimeout(n int64) time.Duration {
	return 30*time.Second + time.Duration(n/(4<<20))*time.Second
}

// store makes room for q, oldest clips first, then stores it with its info. errNoRoom
// (wrapped) says the store refused it with nothing left to delete.
func (c *Clips) store(ctx context.Context, q *queuedClip) error {
	ctx, cancel := context.WithTimeout(ctx, transferTimeout(q.info.Bytes))
	defer cancel()
	n := q.info.Bytes
	if n+objectOverhead(n) > c.MaxBytes {
		return fmt.Errorf("%w: %d bytes, the store holds %d", errNoRoom, n, c.MaxBytes)
	}
	f, err := os.Open(q.file)
	if err != nil {
		return fmt.Errorf("%w: %w", errFileGone, err)
	}
	defer f.Close()
	meta, err := json.Marshal(q.info)
	if err != nil {
		return err
	}
	c.index.forget(q.info.Name) // its old version, if any, goes with the put
	if err := c.index.makeRoom(ctx, n, c.MaxBytes, "clip", &c.evicted); err != nil {
		return err
	}
	for {
		info, err := c.obs.Put(ctx, jetstream.ObjectMeta{
			Name:        q.info.Name,
			Description: fmt.Sprintf("clip of camera %s, %.1f s from %s", q.info.Camera, q.info.DurationS, q.info.Start.UTC().Format(time.RFC3339)),
			Metadata:    map[string]string{ClipMetadataKey: string(meta)},
		}, f)
		if err == nil {
			c.index.add(q.info.Name, info.ModTime)
			return nil
		}
		if !isNoRoom(err) {
			return err
		}
		// The server is fuller than its status said (another writer, or its account's
		// limits): the oldest go until it fits or none is left.
		ok, derr := c.index.evictOldest(ctx, "clip", &c.evicted)
		if derr != nil {
			return derr
		}
		if !ok {
			return fmt.Errorf("%w: %w", errNoRoom, err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
}

// isNoRoom says whether err is the server refusing data for lack of room: the stream's
// limit, or its account's or the server's storage.
func isNoRoom(err error) bool {
	var ae *jetstream.APIError
	if errors.As(err, &ae) && (ae.ErrorCode == 10023 || ae.ErrorCode == 10047) { // insufficient resources, storage exceeded
		return true
	}
	s := err.Error()
	return strings.Contains(s, "maximum bytes exceeded") || strings.Contains(s, "insufficient resources") ||
		strings.Contains(s, "resources exceeded")
}

// ListClips returns the clips stored in obs, a clip store (ClipBucket), of camera ("" for
// all), newest first, at most limit (<=0: all), read from their metadata: what a hub or the
// visiond clip command lists through the box's JetStream domain.
func ListClips(ctx context.Context, obs jetstream.ObjectStore, camera string, limit int) ([]ClipInfo, error) {
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []ClipInfo
	for _, oi := range infos {
		info := ClipInfoOf(oi)
		if camera == "" || info.Camera == camera {
			out = append(out, info)
		}
	}
	slices.SortStableFunc(out, func(a, b ClipInfo) int {
		if c := b.Start.Compare(a.Start); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ClipInfoOf is the info of the stored clip oi: what its metadata holds, with its name and
// size as stored. An object without it (not put by Clips) gets the camera its name starts
// with and nothing more.
func ClipInfoOf(oi *jetstream.ObjectInfo) ClipInfo {
	var info ClipInfo
	if err := json.Unmarshal([]byte(oi.Metadata[ClipMetadataKey]), &info); err != nil || info.Name != oi.Name {
		info = ClipInfo{}
		info.Camera, _, _ = strings.Cut(oi.Name, "/")
	}
	info.Name, info.Bytes = oi.Name, int64(oi.Size)
	return info
}

// List returns the stored clips of camera ("" for all), newest first, at most limit (<=0:
// all), with their info.
func (c *Clips) List(ctx context.Context, camera string, limit int) ([]ClipInfo, error) {
	if c.obs == nil {
		return nil, errors.New("clip store: not started")
	}
	// A clip that expires while the list is read leaves it waiting for a message that will
	// not come (the watcher's end of the initial values is never sent): bound it.
	lctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	clips, err := ListClips(lctx, c.obs, camera, limit)
	if err != nil {
		return nil, fmt.Errorf("clip store %s: list: %w", c.Bucket, err)
	}
	return clips, nil
}

// Open returns a reader over the stored clip name, for http.ServeContent (which answers
// range requests with its Seek), and its info: jetstream.ErrObjectNotFound (wrapped) when
// there is none (never stored, or removed by age or for room). It reads from a local copy in
// Dir, fetched on the first Open of the clip. The caller closes the reader.
func (c *Clips) Open(ctx context.Context, name string) (io.ReadSeekCloser, ClipInfo, error) {
	if err := checkObjectName(name); err != nil {
		return nil, ClipInfo{}, fmt.Errorf("clip: %w", err)
	}
	if c.obs == nil {
		return nil, ClipInfo{}, errors.New("clip store: not started")
	}
	gctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	oi, err := c.obs.GetInfo(gctx, name)
	if err != nil {
		return nil, ClipInfo{}, fmt.Errorf("clip %s: %w", name, err)
	}
	info := ClipInfoOf(oi)
	if f := c.openCached(name, oi.NUID); f != nil {
		return f, info, nil
	}
	f, err := c.fetch(ctx, oi)
	if err != nil {
		return nil, ClipInfo{}, fmt.Errorf("clip %s: %w", name, err)
	}
	return f, info, nil
}

// openCached opens the local copy of clip name stored as nuid, or returns nil.
func (c *Clips) openCached(name, nuid string) *os.File {
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	e := c.cache[name]
	if e == nil || e.nuid != nuid {
		return nil
	}
	f, err := os.Open(e.file)
	if err != nil {
		c.dropCached(name)
		return nil
	}
	c.clock++
	e.used = c.clock
	return f
}

// fetch copies the stored clip oi into the cache and opens the copy.
func (c *Clips) fetch(ctx context.Context, oi *jetstream.ObjectInfo) (*os.File, error) {
	// The server removes an expired clip's data a moment before its entry: a read in
	// between waits for data that will not come, hence the timeout.
	ctx, cancel := context.WithTimeout(ctx, transferTimeout(int64(oi.Size)))
	defer cancel()
	r, err := c.obs.Get(ctx, oi.Name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	file := filepath.Join(c.cacheDir, queueFile(oi.Name)+"."+oi.NUID)
	tmp, err := os.CreateTemp(c.cacheDir, "fetch-*")
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(tmp, r)
	if err == nil && n != int64(oi.Size) {
		err = fmt.Errorf("read %d bytes of %d", n, oi.Size)
	}
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	c.cacheMu.Lock()
	defer c.cacheMu.Unlock()
	if old := c.cache[oi.Name]; old != nil && old.file != file {
		c.dropCached(oi.Name)
	} else if old != nil {
		c.cached -= old.size // fetched again by two Opens at once: the same file
	}
	c.clock++
	c.cache[oi.Name] = &cachedClip{nuid: oi.NUID, file: file, size: n, used: c.clock}
	c.cached += n
	c.trimCache(oi.Name)
	return tmp, nil // its name is file now; the open descriptor reads it
}

// dropCached removes clip name's copy. cacheMu is held.
func (c *Clips) dropCached(name string) {
	e := c.cache[name]
	if e == nil {
		return
	}
	os.Remove(e.file) // a reader that has it open reads on
	c.cached -= e.size
	delete(c.cache, name)
}

// trimCache removes the least recently used copies, keep's aside, until the cache is within
// CacheBytes. cacheMu is held.
func (c *Clips) trimCache(keep string) {
	for c.cached > c.CacheBytes {
		var lru string
		var used uint64
		for name, e := range c.cache {
			if name != keep && (lru == "" || e.used < used) {
				lru, used = name, e.used
			}
		}
		if lru == "" {
			return
		}
		c.dropCached(lru)
	}
}

// Stats returns the store's counters.
func (c *Clips) Stats() ClipStats {
	c.mu.Lock()
	n, b := len(c.queue), c.bytes
	c.mu.Unlock()
	return ClipStats{Stored: c.stored.Load(), Dropped: c.dropped.Load(), Evicted: c.evicted.Load(),
		Failed: c.failed.Load(), Refused: c.refused.Load(), Invalid: c.invalid.Load(), Pending: n, PendingBytes: b}
}

// Close stops taking clips, stores what is queued within timeout, and stops the writer.
// Clips not stored by then stay in Dir, and the next Start stores them. Safe to call twice.
func (c *Clips) Close(timeout time.Duration) {
	c.writer.close(timeout, func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
	}, func() {
		st := c.Stats()
		c.log.Warn("clip: not stored before the shutdown deadline; left for the next start", "clips", st.Pending,
			"bytes", st.PendingBytes, "dir", c.queueDir)
	})
}
