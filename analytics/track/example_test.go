package track_test

import (
	"fmt"
	"time"

	"github.com/visiond/visiond/analytics/track"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// A person walks right at 2 analysed frames per second: tentative for two frames,
// confirmed at the third, lost when the detector misses it, found again, and ended once it
// has been missed for longer than LostTimeout.
func Example() {
	tr, err := track.New(track.Config{}, 41) // ids from 41
	if err != nil {
		panic(err)
	}
	state := map[uint64]track.State{}
	start := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	for frame := range 20 {
		at := start.Add(time.Duration(frame) * 500 * time.Millisecond)
		var dets []infer.Detection
		if frame < 6 || frame == 7 { // missed in frame 6, gone after 7
			x := 100 + 40*float64(frame)
			dets = append(dets, infer.Detection{ClassID: 0, Label: "person", Score: 0.8,
				Box: geom.Box{X: x, Y: 200, W: 50, H: 150}})
		}
		res, err := tr.Update(at, 1280, 720, dets)
		if err != nil {
			panic(err)
		}
		for _, t := range res.New {
			fmt.Printf("frame %d: new %d (%s)\n", frame, t.ID, t.Label)
		}
		for _, t := range res.Tracks {
			if t.ID != 0 && state[t.ID] != t.State {
				fmt.Printf("frame %d: %d %v\n", frame, t.ID, t.State)
				state[t.ID] = t.State
			}
		}
		for _, t := range res.Ended {
			fmt.Printf("frame %d: end %d, seen %v, %d hits\n", frame, t.ID, t.LastSeen.Sub(t.FirstSeen), t.Hits)
		}
		if len(res.IDs) > 0 {
			fmt.Printf("frame %d: detection 0 has id %d\n", frame, res.IDs[0])
		}
	}
	// Output:
	// frame 0: detection 0 has id 0
	// frame 1: detection 0 has id 0
	// frame 2: new 41 (person)
	// frame 2: 41 confirmed
	// frame 2: detection 0 has id 41
	// frame 3: detection 0 has id 41
	// frame 4: detection 0 has id 41
	// frame 5: detection 0 has id 41
	// frame 6: 41 lost
	// frame 7: 41 confirmed
	// frame 7: detection 0 has id 41
	// frame 8: 41 lost
	// frame 18: end 41, seen 3.5s, 7 hits
}
