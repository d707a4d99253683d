package sinks

import (
	"context"
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
type evictionIndex struct {
	objs []storedObject
}

// storedObject is an object in the store.
type storedObject struct {
	name string
	at   time.Time // when it was stored
}

// load sets the index to what a List of the store returned.
func (x *evictionIndex) load(infos []*jetstream.ObjectInfo) {
	x.objs = x.objs[:0]
	for _, info := range infos {
		x.objs = append(x.objs, storedObject{name: info.Name, at: info.ModTime})
	}
	slices.SortStableFunc(x.objs, func(a, b storedObject) int { return a.at.Compare(b.at) })
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
func (x *evictionIndex) evictOldest(ctx context.Context, obs jetstream.ObjectStore, what string, evicted *atomic.Uint64) (bool, error) {
	if len(x.objs) == 0 {
		return false, nil
	}
	oldest := x.objs[0]
	if err := obs.Delete(ctx, oldest.name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return false, fmt.Errorf("delete the oldest %s %s: %w", what, oldest.name, err)
	} else if err == nil {
		evicted.Add(1)
	}
	x.objs = x.objs[1:]
	return true, nil
}

// makeRoom deletes the oldest objects, whole, until n more bytes fit under maxBytes, or
// none is left.
func (x *evictionIndex) makeRoom(ctx context.Context, obs jetstream.ObjectStore, n, maxBytes int64, what string, evicted *atomic.Uint64) error {
	for {
		st, err := obs.Status(ctx)
		if err != nil {
			return err
		}
		if int64(st.Size())+n+objectOverhead(n) <= maxBytes {
			return nil
		}
		if ok, err := x.evictOldest(ctx, obs, what, evicted); err != nil || !ok {
			return err
		}
	}
}

// objectOverhead is a generous bound on the store's bytes for an object of n bytes beyond
// its own: the meta message, and each 128 KiB chunk's subject and headers.
func objectOverhead(n int64) int64 { return 1024 + (n/(128<<10)+1)*256 }
