package sinks

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// evictionIndex is what a bounded object store (Snapshots', Clips') holds, oldest first, as
// its writer last knew it. nats-server's object store refuses new data when full; the index
// lets the writer make that "the oldest go, whole" instead. Only the writer goroutine uses it.
//
// The index deletes an object by purging its chunks and then its info from the store's
// stream, not with the object store's Delete: that writes a marker in the object's place
// first (its info, marked deleted, kept until the age limit), which a full store refuses
// (nats-server's "maximum bytes exceeded"), so that eviction stopped for good once the store
// was full to within a marker; and the markers of every object ever evicted filled the store
// and the server's per-subject index, and pinned each of the server's blocks they landed in,
// so that evicting the oldest punched holes the server reclaims only at its sync (every 2
// minutes) instead of dropping whole blocks: on the H100 at 250 cameras a 64 MiB clip store
// took 2.4 GiB of disk.
type evictionIndex struct {
	obs     jetstream.ObjectStore
	stream  jetstream.Stream // the store's stream (OBJ_<bucket>)
	subject string           // its subjects' prefix: $O.<bucket>.
	objs    []storedObject
}

// storedObject is an object in the store.
type storedObject struct {
	name string
	at   time.Time // when it was stored
}

// open binds the index to obs, the object store named bucket, reads what it holds and
// removes the markers of objects deleted with the object store's Delete (by an earlier
// version).
func (x *evictionIndex) open(ctx context.Context, js jetstream.JetStream, obs jetstream.ObjectStore, bucket string) error {
	stream, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		return fmt.Errorf("the store's stream: %w", err)
	}
	x.obs, x.stream, x.subject = obs, stream, "$O."+bucket+"."
	infos, err := obs.List(ctx, jetstream.ListObjectsShowDeleted())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		return fmt.Errorf("list: %w", err)
	}
	x.objs = x.objs[:0]
	for _, info := range infos {
		if info.Deleted {
			if err := x.purge(ctx, x.infoSubject(info.Name)); err != nil {
				return fmt.Errorf("remove the delete marker of %s: %w", info.Name, err)
			}
			continue
		}
		x.objs = append(x.objs, storedObject{name: info.Name, at: info.ModTime})
	}
	slices.SortStableFunc(x.objs, func(a, b storedObject) int { return a.at.Compare(b.at) })
	return nil
}

// infoSubject is the subject of the info of the object name: the object store names it by
// the name's base64url.
func (x *evictionIndex) infoSubject(name string) string {
	return x.subject + "M." + base64.URLEncoding.EncodeToString([]byte(name))
}

// purge removes the store's messages on subject.
func (x *evictionIndex) purge(ctx context.Context, subject string) error {
	return x.stream.Purge(ctx, jetstream.WithPurgeSubject(subject))
}

// remove deletes the object name: its chunks, then its info (a marker, if that is what is
// left, goes too). Between the two a reader finds the object's data missing; a daemon
// stopped there finds the object in its next List and evicts it again. found says whether
// there was an object (not removed by age meanwhile).
func (x *evictionIndex) remove(ctx context.Context, name string) (found bool, err error) {
	info, err := x.obs.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if !info.Deleted && info.NUID != "" {
		if err := x.purge(ctx, x.subject+"C."+info.NUID); err != nil {
			return false, err
		}
	}
	return !info.Deleted, x.purge(ctx, x.infoSubject(name))
}

// add records name, just stored at at.
func (x *evictionIndex) add(name string, at time.Time) {
	x.objs = append(x.objs, storedObject{name: name, at: at})
}

// forget drops name from the index.
func (x *evictionIndex) forget(name string) {
	if i := slices.IndexFunc(x.objs, func(o storedObject) bool { return o.name == name }); i >= 0 {
		x.objs = slices.Delete(x.objs, i, i+1)
	}
}

// evictOldest deletes the oldest object (what names the kind in errors), counting it in
// evicted; false when the index is empty. An object already gone (removed by age) is
// dropped from the index without counting.
func (x *evictionIndex) evictOldest(ctx context.Context, what string, evicted *atomic.Uint64) (bool, error) {
	if len(x.objs) == 0 {
		return false, nil
	}
	oldest := x.objs[0]
	found, err := x.remove(ctx, oldest.name)
	if err != nil {
		return false, fmt.Errorf("delete the oldest %s %s: %w", what, oldest.name, err)
	}
	if found {
		evicted.Add(1)
	}
	x.objs = x.objs[1:]
	return true, nil
}

// makeRoom deletes the oldest objects, whole, until n more bytes fit under maxBytes, or
// none is left.
func (x *evictionIndex) makeRoom(ctx context.Context, n, maxBytes int64, what string, evicted *atomic.Uint64) error {
	for {
		st, err := x.obs.Status(ctx)
		if err != nil {
			return err
		}
		if int64(st.Size())+n+objectOverhead(n) <= maxBytes {
			return nil
		}
		if ok, err := x.evictOldest(ctx, what, evicted); err != nil || !ok {
			return err
		}
	}
}

// objectOverhead is a generous bound on the store's bytes for an object of n bytes beyond
// its own: the meta message, and each 128 KiB chunk's subject and headers.
func objectOverhead(n int64) int64 { return 1024 + (n/(128<<10)+1)*256 }
