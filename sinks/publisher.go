package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/visiond/visiond/internal/redact"
)

// Publisher delivers events to NATS without ever blocking the pipeline.
//
// Publish* stamp the event with the version, the site and its id, whatever the caller put
// there (ids.go says how ids are made), encode it and put it in a bounded outbox
// (OutboxBytes); one goroutine takes events from there and publishes them. With JetStream,
// each event goes into the site's stream with its id as Nats-Msg-Id, up to Window at once, and
// is forgotten only when the server acknowledges it; an error or a missing acknowledgement
// (AckTimeout) sends it again, and the server drops a copy of an id it already holds, so
// retries never duplicate; a second goroutine reads the stream's state every StoreCheck, so
// that no wait on the server holds up the first. While the server is unreachable events wait
// in the outbox; when it is full the oldest go first, and a gap event says how many and when.
// Without JetStream, events are published with core NATS once.
//
// The lifecycle is Start, then Publish* from any goroutine, then Close, which waits.
type Publisher struct {
	// URL lists external servers, comma-separated, each nats:// or tls://. Ignored when
	// Server is set; one of them is required.
	URL string
	// Server is the embedded server, which the publisher connects to in-process, with the
	// server's own credentials. Default nil: connect to URL.
	Server *Server
	// Auth holds the credentials to present to URL's servers. Default: none.
	Auth Auth
	// TLS holds the CA that signs URL's servers' certificates and an optional client
	// certificate. Default: none.
	TLS TLS

	// Prefix is the first token(s) of every subject, e.g. "visiond". Required.
	Prefix string
	// Site is the second token of every subject. Required.
	Site string
	// Instance names this daemon run: the first part of every event's id, and the instance
	// of health events. Default: Start makes a random one (8 hex digits), which InstanceID
	// returns.
	Instance string

	// JetStream publishes every event into Stream and waits for its acknowledgement;
	// false publishes with core NATS, once. Default false.
	JetStream bool
	// Stream is the stream that captures the site's subjects, with JetStream.
	Stream StreamConfig

	// OutboxBytes bounds the events held in memory while they wait to be sent or
	// acknowledged; past it the oldest go first. Default DefaultOutboxBytes (64 MiB).
	OutboxBytes int
	// Window is the number of events awaiting acknowledgement at once. Default 512.
	Window int
	// AckTimeout is how long an event may await its acknowledgement before it is sent
	// again. Default 5 s.
	AckTimeout time.Duration
	// StoreCheck is how often the stream is checked for events removed by its size limit.
	// Default 10 s.
	StoreCheck time.Duration
	// Logger receives the publisher's log lines. Default: none are written.
	Logger *slog.Logger

	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	out    *outbox
	log    *slog.Logger
	up     chan struct{} // a value on each reconnection
	stop   chan struct{} // closed by Close: drain, then return
	quit   chan struct{} // closed by Close past its timeout: return now
	done   chan struct{}
	closed sync.Once
	seq    atomic.Uint64 // numbers the ids of the kinds that have no key of their own (ids.go)

	published  atomic.Uint64
	failed     atomic.Uint64 // could not be encoded, or came after Close
	retried    atomic.Uint64
	dropped    atomic.Uint64
	duplicates atomic.Uint64 // acknowledged as duplicates: a retry of an event the server had
	inflight   atomic.Int64  // sent, awaiting acknowledgement
	held       atomic.Int64  // taken from the outbox, to be sent (again)

	streamStats atomic.Pointer[StreamStats] // the stream's state at its last check; nil: none yet
}

// StreamStats is the JetStream stream's state as last read: when the stream was made at
// Start, then every StoreCheck while the connection is up.
type StreamStats struct {
	Name     string
	Messages uint64
	Bytes    uint64
	MaxBytes int64     // the stream's size limit; -1 for none
	At       time.Time // when it was read
}

// Stats are the publisher's counters since Start.
type Stats struct {
	Published  uint64 // acknowledged (JetStream) or sent (core NATS)
	Failed     uint64 // not encodable, or published after Close
	Retried    uint64
	Dropped    uint64 // dropped from a full outbox
	Duplicates uint64 // retries the server already held
	Pending    int    // in the outbox or awaiting acknowledgement
}

// Start connects, makes sure the stream exists (with JetStream) and starts the publishing
// goroutines. The first connection must succeed, so that a wrong URL, credential or TLS file is
// reported at start; later outages are ridden out.
func (p *Publisher) Start() error {
	p.log = p.Logger
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.Instance == "" {
		p.Instance = newInstance()
	}
	if p.OutboxBytes <= 0 {
		p.OutboxBytes = DefaultOutboxBytes
	}
	if p.Window <= 0 {
		p.Window = defaultWindow
	}
	if p.AckTimeout <= 0 {
		p.AckTimeout = defaultAckTimeout
	}
	if p.StoreCheck <= 0 {
		p.StoreCheck = defaultStoreCheck
	}
	if p.Stream.MaxBytes <= 0 {
		p.Stream.MaxBytes = DefaultStreamMaxBytes
	}
	if p.Stream.Duplicates <= 0 {
		p.Stream.Duplicates = DefaultDuplicateWindow
	}
	p.out = newOutbox(p.OutboxBytes)
	p.up = make(chan struct{}, 1)
	p.stop = make(chan struct{})
	p.quit = make(chan struct{})
	p.done = make(chan struct{})

	if err := p.connect(); err != nil {
		return err
	}
	if p.JetStream {
		if err := p.ensureStream(); err != nil {
			p.nc.Close()
			return err
		}
	}
	go p.run()
	return nil
}

func (p *Publisher) connect() error {
	opts := []nats.Option{
		nats.Name("visiond " + p.Site),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectJitter(500*time.Millisecond, time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: our own Close
				p.log.Warn("NATS disconnected; events wait in the outbox", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			p.log.Info("NATS reconnected", "url", redact.URL(nc.ConnectedUrl()))
			select {
			case p.up <- struct{}{}:
			default:
			}
		}),
	}
	if p.JetStream {
		// Events wait in the outbox, not in nats.go's reconnect buffer, where a retry would
		// queue a second copy behind the first.
		opts = append(opts, nats.ReconnectBufSize(-1))
	} else {
		opts = append(opts, nats.ReconnectBufSize(p.OutboxBytes))
	}
	if p.Server != nil {
		nc, err := p.Server.Connect(opts...)
		if err != nil {
			return fmt.Errorf("embedded NATS server: connect: %w", err)
		}
		p.nc = nc
		return nil
	}
	sec, err := clientOptions("nats.auth", p.Auth, p.TLS)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(p.URL, append(opts, sec...)...)
	if err != nil {
		// nats.go may quote a URL in its error (a parse error does): scrub the whole text.
		msg := fmt.Sprintf("NATS %s: %v", p.URL, err)
		for _, u := range strings.Split(p.URL, ",") {
			msg = redact.New(strings.TrimSpace(u)).Scrub(msg)
		}
		if p.Auth.Password != "" {
			msg = strings.ReplaceAll(msg, p.Auth.Password, redact.Mask)
		}
		if p.Auth.Token != "" {
			msg = strings.ReplaceAll(msg, p.Auth.Token, redact.Mask)
		}
		return errors.New(msg)
	}
	p.nc = nc
	return nil
}

// ensureStream creates the site's stream, or updates it to the configured limits.
func (p *Publisher) ensureStream() error {
	js, err := jetstream.New(p.nc, jetstream.WithPublishAsyncTimeout(p.AckTimeout))
	if err != nil {
		return fmt.Errorf("NATS JetStream: %w", err)
	}
	cfg := jetstream.StreamConfig{
		Name:        p.Stream.Name,
		Description: "visiond events of site " + p.Site,
		Subjects:    []string{StreamSubjects(p.Prefix, p.Site)},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      p.Stream.MaxAge,
		MaxBytes:    p.Stream.MaxBytes,
		Duplicates:  p.Stream.Duplicates,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.CreateOrUpdateStream(ctx, cfg)
	if err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("NATS JetStream: stream %s: %w (is JetStream enabled on the server? set nats.jetstream: false for core NATS)", cfg.Name, err)
		}
		return fmt.Errorf("NATS JetStream: stream %s: %w", cfg.Name, err)
	}
	p.js, p.stream = js, s
	if info := s.CachedInfo(); info != nil {
		p.setStreamStats(info)
	}
	return nil
}

func (p *Publisher) setStreamStats(info *jetstream.StreamInfo) {
	p.streamStats.Store(&StreamStats{Name: info.Config.Name, Messages: info.State.Msgs, Bytes: info.State.Bytes,
		MaxBytes: info.Config.MaxBytes, At: time.Now()})
}

// InstanceID names this daemon run, as its events' ids and health events do: Instance, or the
// one Start made. Valid after Start.
func (p *Publisher) InstanceID() string { return p.Instance }

// Conn is the publisher's connection, once started, for subscribers in the daemon to the
// events it publishes (Home Assistant discovery).
func (p *Publisher) Conn() *nats.Conn { return p.nc }

// StreamStats returns the stream's state as last read; false without JetStream or before the
// first read.
func (p *Publisher) StreamStats() (StreamStats, bool) {
	if s := p.streamStats.Load(); s != nil {
		return *s, true
	}
	return StreamStats{}, false
}

// PublishDetections publishes ev on its camera's detection subject.
func (p *Publisher) PublishDetections(ev *DetectionEvent) error {
	return p.publish(DetectionSubject(p.Prefix, p.Site, ev.Camera), ev)
}

// PublishObject publishes ev on its camera's object subject. Its Seq is required: it numbers
// the track's events, and two events of a track with the same number would be one to
// JetStream. An ObjectClip event has no Seq but its Clip, which names it.
func (p *Publisher) PublishObject(ev *ObjectEvent) error {
	if ev.Type == ObjectClip {
		if ev.Clip == nil || ev.Clip.Name == "" {
			p.failed.Add(1)
			return fmt.Errorf("clip event of camera %q, track %d: no clip", ev.Camera, ev.TrackID)
		}
	} else if ev.Seq == 0 {
		p.failed.Add(1)
		return fmt.Errorf("object event of camera %q, track %d: no Seq (the track's event number, from 1)", ev.Camera, ev.TrackID)
	}
	return p.publish(ObjectSubject(p.Prefix, p.Site, ev.Camera), ev)
}

// PublishZone publishes ev on its camera's zone subject.
func (p *Publisher) PublishZone(ev *ZoneEvent) error {
	return p.publish(ZoneSubject(p.Prefix, p.Site, ev.Camera), ev)
}

// PublishLine publishes ev on its camera's line subject.
func (p *Publisher) PublishLine(ev *LineEvent) error {
	return p.publish(LineSubject(p.Prefix, p.Site, ev.Camera), ev)
}

// PublishStatus publishes ev on its camera's status subject.
func (p *Publisher) PublishStatus(ev *StatusEvent) error {
	return p.publish(StatusSubject(p.Prefix, p.Site, ev.Camera), ev)
}

// PublishConfig publishes ev on the site's config subject.
func (p *Publisher) PublishConfig(ev *ConfigEvent) error {
	return p.publish(ConfigSubject(p.Prefix, p.Site), ev)
}

// PublishHealth publishes ev on the site's health subject, with the publisher's own counts.
func (p *Publisher) PublishHealth(ev *HealthEvent) error {
	s := p.Stats()
	ev.Publisher = PublishHealth{Published: s.Published, Retried: s.Retried, Dropped: s.Dropped, Pending: s.Pending}
	return p.publish(HealthSubject(p.Prefix, p.Site), ev)
}

// gapMessage makes the message of a gap event (NewGapEvent). It goes out before anything
// waiting, and takes no room in the outbox: it must not push out another event.
func (p *Publisher) gapMessage(ev *GapEvent) *message {
	m, err := p.message(GapSubject(p.Prefix, p.Site), ev)
	if err != nil {
		panic(err) // a GapEvent always encodes
	}
	return m
}

// publish puts ev, stamped and encoded, in the outbox.
func (p *Publisher) publish(subject string, ev event) error {
	m, err := p.message(subject, ev)
	if err != nil {
		p.failed.Add(1)
		return err
	}
	if !p.out.put(m) {
		p.failed.Add(1)
		return fmt.Errorf("event %s: the publisher is closed", m.id)
	}
	return nil
}

// message stamps ev with the version, the site and its id (<instance>.<key>, ids.go), and
// encodes it: the one way from an event of any kind to a message.
func (p *Publisher) message(subject string, ev event) (*message, error) {
	id := eventID(p.Instance, ev.key(&p.seq))
	ev.stamp(origin{site: p.Site, instance: p.Instance, id: id})
	data, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", id, err)
	}
	return &message{subject: subject, id: id, data: data, at: time.Now()}, nil
}

// Stats returns the publisher's counters.
func (p *Publisher) Stats() Stats {
	return Stats{
		Published:  p.published.Load(),
		Failed:     p.failed.Load(),
		Retried:    p.retried.Load(),
		Dropped:    p.dropped.Load(),
		Duplicates: p.duplicates.Load(),
		Pending:    p.out.len() + int(p.inflight.Load()+p.held.Load()),
	}
}

// Close stops taking events, publishes what is waiting within timeout (with JetStream: until
// acknowledged), then closes the connection. Events still unpublished then are counted and
// logged. Safe to call twice.
func (p *Publisher) Close(timeout time.Duration) {
	p.closed.Do(func() {
		if p.out == nil || p.nc == nil {
			return
		}
		p.out.close()
		close(p.stop)
		select {
		case <-p.done:
		case <-time.After(timeout):
			p.log.Warn("events not published before the shutdown deadline", "pending", p.Stats().Pending, "timeout", timeout)
			close(p.quit)
			<-p.done
		}
		if !p.JetStream && p.nc.IsConnected() {
			_ = p.nc.FlushTimeout(timeout)
		}
		p.nc.Close()
	})
}

// pending is an event sent and awaiting its acknowledgement.
type pending struct {
	m   *message
	ack jetstream.PubAckFuture
}

// run publishes from the outbox until Close and the outbox is drained (or the connection is
// closed under it): with core NATS each event once (runCore), with JetStream each until the
// server acknowledges it (runJetStream).
func (p *Publisher) run() {
	defer close(p.done)
	if p.JetStream {
		p.runJetStream()
	} else {
		p.runCore()
	}
}

// sendQueue is what run sends before the outbox: gap events, and with JetStream the events
// sent and not acknowledged. It is run's alone.
type sendQueue struct {
	p     *Publisher
	retry []*message
}

// next takes the next event to send: the queue's first, else the outbox's oldest.
func (q *sendQueue) next() (*message, bool) {
	if len(q.retry) > 0 {
		m := q.retry[0]
		q.retry = q.retry[1:]
		q.p.held.Add(-1)
		return m, true
	}
	return q.p.out.pop()
}

// unread puts m first: an event that could not be sent, or a gap event.
func (q *sendQueue) unread(m *message) {
	q.retry = append([]*message{m}, q.retry...)
	q.p.held.Add(1)
}

// again puts m, sent and not acknowledged, last in the queue (still before the outbox).
func (q *sendQueue) again(m *message) {
	q.retry = append(q.retry, m)
	q.p.held.Add(1)
}

// empty says whether nothing waits to be sent, here or in the outbox.
func (q *sendQueue) empty() bool { return len(q.retry) == 0 && q.p.out.len() == 0 }

// outboxGap counts the events the outbox dropped since the last call, if any, and puts a gap
// event saying so first.
func (q *sendQueue) outboxGap() {
	g := q.p.out.takeGap()
	if g.n == 0 {
		return
	}
	q.p.dropped.Add(g.n)
	q.p.log.Warn("outbox full: oldest events dropped", "events", g.n, "from", g.first, "to", g.last)
	q.unread(q.p.gapMessage(NewGapEvent(GapOutboxFull, g.n, g.first, g.last, 0, 0, time.Now())))
}

// retryWait is how long run waits after a failed send before sending again, unless the
// connection comes back first.
const retryWait = time.Second

// runCore publishes with core NATS: each event once, counted as published when nats.go has
// taken it (it buffers it while reconnecting).
func (p *Publisher) runCore() {
	q := sendQueue{p: p}
	var waitUp <-chan time.Time // non-nil after a failed send: wait before the next
	stopping := p.stop
	for {
		q.outboxGap()
		for waitUp == nil {
			if p.nc.IsClosed() {
				return
			}
			m, ok := q.next()
			if !ok {
				break
			}
			if err := p.nc.Publish(m.subject, m.data); err != nil {
				q.unread(m)
				waitUp = time.After(retryWait)
				break
			}
			p.published.Add(1)
		}
		if stopping == nil && q.empty() {
			return // closed and drained
		}
		select {
		case <-p.out.signal:
		case <-p.up:
			waitUp = nil
		case <-waitUp:
			waitUp = nil
		case <-stopping:
			stopping = nil // drain: the loop returns once nothing is left
		case <-p.quit:
			return
		}
	}
}

// runJetStream publishes into the stream, up to Window events awaiting acknowledgement at
// once. Acknowledgements are awaited in the order of sending: the server answers in that
// order, and a later answer waits in its future until its turn. An error or a missing
// acknowledgement sends the event again. The stream is checked for events removed by its size
// limit off this goroutine (watchStore), which hands the gap events in.
func (p *Publisher) runJetStream() {
	ctx, cancel := context.WithCancel(context.Background())
	gaps := make(chan *GapEvent)
	watched := make(chan struct{})
	go p.watchStore(ctx, gaps, watched)
	defer func() {
		cancel()
		<-watched
	}()
	q := sendQueue{p: p}
	var (
		inflight []pending
		waitUp   <-chan time.Time // non-nil after a failed send: wait before the next
	)
	stopping := p.stop
	for {
		q.outboxGap()
		// Send while the window has room and the connection is up.
		for waitUp == nil && len(inflight) < p.Window {
			if p.nc.IsClosed() {
				return
			}
			m, ok := q.next()
			if !ok {
				break
			}
			if !p.nc.IsConnected() {
				q.unread(m)
				waitUp = time.After(retryWait)
				break
			}
			msg := &nats.Msg{Subject: m.subject, Data: m.data, Header: nats.Header{}}
			ack, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(m.id))
			if err != nil {
				q.unread(m)
				waitUp = time.After(retryWait)
				break
			}
			inflight = append(inflight, pending{m, ack})
			p.inflight.Add(1)
		}
		if stopping == nil && len(inflight) == 0 && q.empty() {
			return // closed and drained
		}
		var okc <-chan *jetstream.PubAck
		var errc <-chan error
		if len(inflight) > 0 {
			okc, errc = inflight[0].ack.Ok(), inflight[0].ack.Err()
		}
		select {
		case a := <-okc:
			if a.Duplicate {
				p.duplicates.Add(1)
			}
			p.published.Add(1)
			inflight = inflight[1:]
			p.inflight.Add(-1)
		case err := <-errc:
			if p.nc.IsClosed() {
				return
			}
			p.retried.Add(1)
			p.log.Debug("event not acknowledged; sending it again", "id", inflight[0].m.id, "error", err)
			q.again(inflight[0].m)
			inflight = inflight[1:]
			p.inflight.Add(-1)
		case g := <-gaps:
			q.unread(p.gapMessage(g))
		case <-p.out.signal:
		case <-p.up:
			waitUp = nil
		case <-waitUp:
			waitUp = nil
		case <-stopping:
			stopping = nil // drain: the loop returns once nothing is left
		case <-p.quit:
			return
		}
	}
}

// watchStore reads the stream's state every StoreCheck while the connection is up, for
// StreamStats, and hands runJetStream a gap event on gaps when events were removed by the
// stream's size limit. It runs on its own goroutine, since the read waits for the server,
// until ctx ends; then it closes done.
func (p *Publisher) watchStore(ctx context.Context, gaps chan<- *GapEvent, done chan<- struct{}) {
	defer close(done)
	if p.stream == nil {
		return
	}
	check := time.NewTicker(p.StoreCheck)
	defer check.Stop()
	var store storeWatch
	for {
		select {
		case <-check.C:
		case <-ctx.Done():
			return
		}
		if !p.nc.IsConnected() {
			continue
		}
		g := store.check(ctx, p.stream, p.Stream.MaxAge)
		if store.info != nil {
			p.setStreamStats(store.info)
		}
		if g == nil {
			continue
		}
		p.log.Warn("stream full: oldest events removed before their age limit", "stream", p.Stream.Name,
			"events", g.Events, "first_seq", g.FirstSeq, "last_seq", g.LastSeq)
		select {
		case gaps <- g:
		case <-ctx.Done():
			return
		}
	}
}

// storeWatch notices events removed from the stream by its size limit: the stream's first
// sequence moved on while its first event was younger than the age limit.
type storeWatch struct {
	first     uint64
	firstTime time.Time
	info      *jetstream.StreamInfo // as read by the last check that could read it
}

func (w *storeWatch) check(ctx context.Context, s jetstream.Stream, maxAge time.Duration) *GapEvent {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := s.Info(ctx)
	if err != nil {
		return nil
	}
	w.info = info
	st := info.State
	prev, prevTime := w.first, w.firstTime
	w.first, w.firstTime = st.FirstSeq, st.FirstTime
	if prev == 0 || st.FirstSeq <= prev {
		return nil
	}
	// Removed: prev .. FirstSeq-1. Had the oldest of them reached the age limit, the age limit
	// (not the size limit) may have removed them: not a loss.
	now := time.Now()
	if maxAge > 0 && now.Sub(prevTime) >= maxAge {
		return nil
	}
	return NewGapEvent(GapStoreFull, st.FirstSeq-prev, prevTime, st.FirstTime, prev, st.FirstSeq-1, now)
}
