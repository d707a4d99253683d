package sinks

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/visiond/visiond/config"
)

// Publisher publishes events to NATS. Publish never blocks the pipeline: nats.go writes into
// its buffer and flushes from its own goroutine; while the connection is down events wait in
// the reconnect buffer (ReconnectBuffer bytes), and past it they are counted as failed.
type Publisher struct {
	URL             string // one or more comma-separated server URLs
	Prefix          string // subject prefix, e.g. "visiond"
	Site            string
	ReconnectBuffer int // bytes buffered while disconnected; default 64 MiB
	Logger          *slog.Logger

	nc        *nats.Conn
	published atomic.Uint64
	failed    atomic.Uint64
}

// Start connects. The first connection must succeed, so a wrong URL is reported at start;
// later outages are ridden out by reconnecting forever.
func (p *Publisher) Start() error {
	buf := p.ReconnectBuffer
	if buf == 0 {
		buf = 64 << 20
	}
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	nc, err := nats.Connect(p.URL,
		nats.Name("visiond"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(500*time.Millisecond, time.Second),
		nats.ReconnectBufSize(buf),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close
				log.Warn("NATS disconnected; buffering events", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "url", config.Redact(nc.ConnectedUrl()))
		}),
	)
	if err != nil {
		// nats.go may quote a URL in its error (a parse error does): scrub the whole text.
		msg := fmt.Sprintf("NATS %s: %v", p.URL, err)
		for _, u := range strings.Split(p.URL, ",") {
			msg = config.NewRedactor(strings.TrimSpace(u)).Scrub(msg)
		}
		return errors.New(msg)
	}
	p.nc = nc
	return nil
}

// PublishDetections publishes ev on its camera's detection subject.
func (p *Publisher) PublishDetections(ev *DetectionEvent) error {
	return p.publish(DetectionSubject(p.Prefix, p.Site, ev.Camera), ev.ID, ev)
}

// PublishStatus publishes ev on its camera's status subject.
func (p *Publisher) PublishStatus(ev *StatusEvent) error {
	return p.publish(StatusSubject(p.Prefix, p.Site, ev.Camera), ev.Camera+" "+ev.State, ev)
}

// PublishConfig publishes ev on the site's config subject.
func (p *Publisher) PublishConfig(ev *ConfigEvent) error {
	return p.publish(ConfigSubject(p.Prefix, p.Site), "config "+ev.Result, ev)
}

func (p *Publisher) publish(subject, what string, ev any) error {
	data, err := json.Marshal(ev)
	if err != nil {
		p.failed.Add(1)
		return fmt.Errorf("encode event %s: %w", what, err)
	}
	if err := p.nc.Publish(subject, data); err != nil {
		p.failed.Add(1)
		return fmt.Errorf("publish event %s: %w", what, err)
	}
	p.published.Add(1)
	return nil
}

// Stats returns the number of events published and failed so far.
func (p *Publisher) Stats() (published, failed uint64) {
	return p.published.Load(), p.failed.Load()
}

// Close flushes what is buffered (bounded by timeout) and closes the connection.
func (p *Publisher) Close(timeout time.Duration) {
	if p.nc == nil {
		return
	}
	if p.nc.IsConnected() {
		_ = p.nc.FlushTimeout(timeout)
	}
	p.nc.Close()
}
