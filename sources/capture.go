package sources

import (
	"context"
	"errors"
	"time"
)

// runCapture runs a gstreamer or file session (in progress: not implemented yet).
func (c *Camera) runCapture(ctx context.Context) (time.Time, error) {
	return time.Time{}, errors.New("camera kind " + c.Kind + " is not implemented yet")
}
