package config

import (
	"fmt"
	"time"

	"github.com/visiond/visiond/analytics/track"
)

// MinTrackedFPS is the slowest a camera is analysed at and still tracked as documented: at
// 0.2 fps the tracker confirms an object at its third frame, within 15 s, and ends one missed
// for two frames. Below it objects confirm ever later (track.Config.FrameInterval), so those
// that pass in less time get no track, object, zone or line events.
const MinTrackedFPS = 0.2

// Warnings lists what is valid in c but will likely not do what its author wants, one line
// each naming the field (visiond check prints them, visiond run logs them): cameras analysed
// slower than MinTrackedFPS.
func (c *Config) Warnings() []string {
	var out []string
	for i, cam := range c.Cameras {
		if !cam.Enabled || !(cam.FPS > 0) || cam.FPS >= MinTrackedFPS {
			continue
		}
		interval := time.Duration(float64(time.Second) / cam.FPS)
		out = append(out, fmt.Sprintf("cameras[%d].fps: %g (camera %q) is below %g: an object is tracked only once seen in %d frames, %v here, "+
			"so one that passes quicker gets no track, object, zone or line events", i, cam.FPS, cam.ID, MinTrackedFPS,
			track.DefaultConfirmHits, (time.Duration(track.DefaultConfirmHits-1)*interval).Round(time.Second)))
	}
	return out
}
