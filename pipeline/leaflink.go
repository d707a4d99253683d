package pipeline

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// leafCheckEvery is how often the daemon looks at the embedded server's link to the hub: the
// precision of visiond_leaf_link_last_change_timestamp_seconds.
const leafCheckEvery = time.Second

// leafLink follows the embedded NATS server's link to the hub (nats.leaf), for the metrics
// and the log. The run goroutine observes it; scrapes read it.
type leafLink struct {
	up    atomic.Bool
	since atomic.Int64 // unix ns of the last change of up, or of the start
}

// observe records the link's state at now, logging a change.
func (l *leafLink) observe(up bool, now time.Time, log *slog.Logger) {
	if up == l.up.Load() {
		return
	}
	was := now.Sub(time.Unix(0, l.since.Load())).Round(time.Second)
	l.up.Store(up)
	l.since.Store(now.UnixNano())
	if up {
		log.Info("hub link up", "down_for", was)
	} else {
		log.Warn("hub link down: events wait in the box's stream until it is back", "up_for", was)
	}
}

// state returns whether the link is up and since when.
func (l *leafLink) state() (up bool, since time.Time) {
	return l.up.Load(), time.Unix(0, l.since.Load())
}

// hasLeaf reports whether the daemon's embedded server has a link to a hub to follow.
func (d *Daemon) hasLeaf() bool { return d.natsServer != nil && d.natsServer.Leaf.URL != "" }
