package pipeline

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/visiond/visiond/analytics"
)

// Track ids never repeat on a camera, whatever the state bucket does (docs/events.md, "Track
// ids"). A camera's scene takes its ids in blocks of idBlock, each reserved in the bucket
// (sinks.State.ReserveTrackIDs, a compare-and-set acknowledged by the server) before any of
// it is used, so a daemon killed at any point restarts past every id it gave. The next block
// is reserved while half of the one in use is left, on a goroutine of its own, so confirming
// a track never waits on the network. When the bucket does not answer (or there is none), a
// block starts from the clock instead: the current time in unix milliseconds (clockFloor),
// above every id the bucket's counters give (they grow by the tracks confirmed, far below a
// thousand a second, from 1), and above any earlier clock block, which started at an earlier
// millisecond and used fewer ids than milliseconds went by since. The block reserved next
// starts past it, so the bucket learns of it once it answers again.
const idBlock = 1024

// idRetryAfter is how long a camera waits after a failed reservation before it tries again.
const idRetryAfter = time.Second

// idStore reserves blocks of track ids: *sinks.State.
type idStore interface {
	ReserveTrackIDs(ctx context.Context, camera string, atLeast, n uint64) (uint64, error)
}

// clockFloor is the first id of a block taken without the bucket at now.
func clockFloor(now time.Time) uint64 { return uint64(max(now.UnixMilli(), 1)) }

// trackIDs hands one camera's scene its blocks of ids. prepare runs under the camera's
// sceneMu, on whichever goroutine steps its scene; the reservation ahead runs on a
// goroutine of the result stage's (wg), one at a time per camera.
type trackIDs struct {
	camera string
	store  idStore // nil: no bucket, every block from the clock
	log    *slog.Logger
	wg     *sync.WaitGroup // the result stage's: its close waits for reservations in flight

	end uint64 // ids below it, from the scene's NextID, are the scene's to give (sceneMu)

	mu        sync.Mutex
	ahead     uint64    // the first id of the block reserved next; 0 when none
	reserving bool      // a reservation is in flight
	failedAt  time.Time // the last reservation that failed
	fallbacks int       // blocks taken from the clock
	idle      sync.Cond // signalled when a reservation ends (on mu)
}

func newTrackIDs(camera string, store idStore, log *slog.Logger, wg *sync.WaitGroup) *trackIDs {
	ids := &trackIDs{camera: camera, store: store, log: log, wg: wg}
	ids.idle.L = &ids.mu
	return ids
}

// first reserves the first block, from atLeast at least, synchronously within ctx, and
// returns its first id: a clock block when the bucket does not answer.
func (ids *trackIDs) first(ctx context.Context, now time.Time, atLeast uint64) uint64 {
	if ids.store != nil {
		first, err := ids.store.ReserveTrackIDs(ctx, ids.camera, atLeast, idBlock)
		if err == nil {
			ids.end = first + idBlock
			return first
		}
		ids.log.Warn("analytics: no block of track ids reserved in the state bucket; ids start from the clock, above every earlier one",
			"camera", ids.camera, "err", err)
	}
	return ids.fromClock(atLeast, 0, now)
}

// fromClock takes a block from the clock, from next at least, of at least need ids, and
// returns its first id.
func (ids *trackIDs) fromClock(next uint64, need int, now time.Time) uint64 {
	first := max(next, clockFloor(now))
	ids.end = first + max(idBlock, uint64(need))
	ids.mu.Lock()
	ids.fallbacks++
	ids.mu.Unlock()
	return first
}

// prepare makes sure scene can confirm need tracks (a frame's detections at most) with ids
// in hand before its next Step, moving it to the block reserved ahead or to a clock block
// when the one in use has not enough left, and starts the reservation of the next block
// when half of this one is used.
func (ids *trackIDs) prepare(scene *analytics.Scene, need int, now time.Time) {
	next := scene.NextID()
	if next+uint64(need) > ids.end {
		ids.mu.Lock()
		ahead := ids.ahead
		ids.ahead = 0
		ids.mu.Unlock()
		switch {
		case ahead >= next && need <= idBlock: // (an older block, passed by a clock one, is dropped)
			scene.SetNextID(ahead)
			ids.end = ahead + idBlock
		default:
			if ids.store != nil {
				ids.log.Warn("analytics: the block of track ids reserved ahead has not come; ids go on from the clock",
					"camera", ids.camera)
			}
			scene.SetNextID(ids.fromClock(next, need, now))
		}
		next = scene.NextID()
	}
	if ids.store == nil || ids.end-next > idBlock/2 {
		return
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.reserving || ids.ahead != 0 || now.Sub(ids.failedAt) < idRetryAfter {
		return
	}
	ids.reserving = true
	atLeast := ids.end // past every id this scene may give before it takes the block
	ids.wg.Add(1)
	go ids.reserve(atLeast)
}

// reserve reserves the next block, from atLeast; it runs on its own goroutine.
func (ids *trackIDs) reserve(atLeast uint64) {
	defer ids.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	first, err := ids.store.ReserveTrackIDs(ctx, ids.camera, atLeast, idBlock)
	cancel()
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.reserving = false
	ids.idle.Broadcast()
	if err != nil {
		ids.failedAt = time.Now()
		ids.log.Debug("analytics: next block of track ids not reserved; trying again", "camera", ids.camera, "err", err)
		return
	}
	ids.ahead = first
}

// wait returns once no reservation of the camera is in flight (the caller no longer steps
// its scene, so none starts).
func (ids *trackIDs) wait() {
	ids.mu.Lock()
	for ids.reserving {
		ids.idle.Wait()
	}
	ids.mu.Unlock()
}

// clockBlocks is the number of blocks taken from the clock.
func (ids *trackIDs) clockBlocks() int {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return ids.fallbacks
}
