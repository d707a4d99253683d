package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// idFloorDir is where, under the state directory, each camera's floor of track ids is kept.
const idFloorDir = "track-ids"

// floorIDs makes the reservations of track ids in the state bucket survive a power cut. The
// embedded NATS server acknowledges a write once it is in the operating system's cache and
// syncs its files to the disk every sync_interval (nats.sync_interval): a reservation
// acknowledged just before a cut may be gone after it, and the bucket would give the same
// ids again. So each block reserved is also written, before any of its ids is used, to a
// file of the camera's under the state directory, synced to the disk (the file, then its
// directory), and every reservation starts at least there. One small synced write per block
// of idBlock ids a camera.
type floorIDs struct {
	store idStore
	dir   string // the state directory's idFloorDir
}

// ReserveTrackIDs reserves a block of n ids in the store, from atLeast and from the camera's
// floor at least, and returns its first id once the block's end is on the disk. A floor that
// cannot be read or written is an error: the block is not used (the camera takes ids from
// the clock, above every earlier one).
func (f *floorIDs) ReserveTrackIDs(ctx context.Context, camera string, atLeast, n uint64) (uint64, error) {
	floor, err := f.floor(camera)
	if err != nil {
		return 0, err
	}
	first, err := f.store.ReserveTrackIDs(ctx, camera, max(atLeast, floor), n)
	if err != nil {
		return 0, err
	}
	if err := f.setFloor(camera, first+n); err != nil {
		return 0, err
	}
	return first, nil
}

// path is the camera's floor file.
func (f *floorIDs) path(camera string) string {
	return filepath.Join(f.dir, url.PathEscape(camera))
}

// floor returns the camera's floor: 0 when it has none.
func (f *floorIDs) floor(camera string) (uint64, error) {
	data, err := os.ReadFile(f.path(camera))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("track ids' floor: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("track ids' floor %s: not a number: %w", f.path(camera), err)
	}
	return v, nil
}

// setFloor writes the camera's floor and syncs it to the disk: a new file, synced, renamed
// over the old one, and the directory synced, so that a cut at any point leaves the old floor
// or the new one.
func (f *floorIDs) setFloor(camera string, v uint64) error {
	if err := os.MkdirAll(f.dir, 0o750); err != nil {
		return fmt.Errorf("track ids' floor: %w", err)
	}
	path := f.path(camera)
	tmp, err := os.CreateTemp(f.dir, ".floor-*")
	if err != nil {
		return fmt.Errorf("track ids' floor: %w", err)
	}
	_, err = tmp.WriteString(strconv.FormatUint(v, 10) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("track ids' floor %s: %w", path, err)
	}
	dir, err := os.Open(f.dir)
	if err != nil {
		return fmt.Errorf("track ids' floor: %w", err)
	}
	defer dir.Close()
	if err := dir.Sync(); err != nil {
		return fmt.Errorf("track ids' floor: sync %s: %w", f.dir, err)
	}
	return nil
}
