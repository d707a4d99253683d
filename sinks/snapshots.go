package sinks

import "fmt"

// SnapshotName is the object name of the best frame of track on camera in the snapshot
// store: <camera>/t<track>.jpg. Track ids are not reused on a camera, across restarts too,
// so a name means one object.
func SnapshotName(camera string, track uint64) string {
	return fmt.Sprintf("%s/t%d.jpg", camera, track)
}
