// Package homeassistant announces visiond's cameras to Home Assistant through MQTT discovery
// (https://www.home-assistant.io/integrations/mqtt/#mqtt-discovery) on the embedded server's
// MQTT listener, and keeps the announced entities' states from the daemon's own events.
//
// A camera is a Home Assistant device (identifiers visiond_<site>_<camera>) with:
//   - a sensor of its state (enum: connecting, online, offline, unauthorized), from its status
//     events and every health event;
//   - a sensor of its analysed frames a second, from every health event;
//   - per zone and class, a binary sensor (occupancy: the class is in the zone) and a sensor
//     (how many), from the zone events' occupancy;
//   - per line, direction and class, a sensor of the crossings (total_increasing), from the
//     line events' counts.
//
// Every config and state is a retained message, so Home Assistant has them whenever it
// (re)connects; availability is one retained topic, "online" while the daemon is connected and
// "offline" after it closes or (the MQTT will) after its connection is lost. An entity whose
// camera, zone or line leaves the config is removed: its config topic gets an empty retained
// message, and so does its state. Configs left retained by an earlier run for what is no
// longer configured are removed as they are seen.
//
// The states are read from the daemon's events on NATS (core subscriptions on the subjects
// docs/events.md lists), so Home Assistant sees what every other subscriber sees.
package homeassistant

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/sinks"
)

// DefaultPrefix is Home Assistant's discovery prefix.
const DefaultPrefix = "homeassistant"

// DefaultClasses returns the classes a zone or line gets entities for when neither it nor
// its camera's objects.track names any (a detector knows 80 classes; an entity for each
// would bury the ones people want).
func DefaultClasses() []string { return []string{"person"} }

// Camera is a camera as announced: its id, its name in Home Assistant, and the zones and
// lines with the classes each gets entities for.
type Camera struct {
	ID    string
	Name  string // the device's name; "" gives the id
	Zones []Scope
	Lines []Scope
}

// Scope is a zone or a line and the classes announced for it.
type Scope struct {
	ID      string
	Classes []string
}

// Discovery is the announcer. Set its fields, Start it with the cameras in force, call
// SetCameras after every reload, and Close it. Its one goroutine owns the MQTT client's
// publishing and what has been announced.
type Discovery struct {
	// Broker is the MQTT listener, "host:port". Required.
	Broker string
	// TLS, when set, is the listener's TLS (mqtts).
	TLS *tls.Config
	// Username and Password are the listener's credentials (the embedded server's auth).
	Username, Password string
	// Prefix is the discovery prefix. Default DefaultPrefix.
	Prefix string
	// SubjectPrefix and Site are the daemon's: the events read are
	// <SubjectPrefix>.<Site>.*.{status,zones,lines} and <SubjectPrefix>.<Site>.health, and the
	// states go under the topic <SubjectPrefix>-ha/<Site>/ (outside the site's stream).
	SubjectPrefix, Site string
	// Events is a connection to the NATS server the daemon publishes to. Required.
	Events *nats.Conn
	// Version is the daemon's, for the devices' sw_version.
	Version string
	Logger  *slog.Logger

	client      mqtt.Client
	subs        []*nats.Subscription
	cams        chan []Camera // latest wins
	reconnected chan struct{} // each (re)connection: everything is published again
	in          chan inbound  // events and seen configs, bounded
	dropped     atomic.Uint64
	cancel      context.CancelFunc
	done        chan struct{}
	closeMu     sync.Mutex
	closed      bool
}

// inbound is one thing for the run goroutine: an event from NATS, or a retained config seen
// on MQTT.
type inbound struct {
	subject string
	data    []byte
	config  string // a config topic seen retained
}

// qos is every publication's and the subscription's: 0, with everything published again on
// each reconnect (paho's resending of QoS 1 messages after a reconnect races with its writer:
// eclipse-paho/paho.mqtt.golang issue 703), and the broker on the same box.
const qos = 0

// inQueue bounds the events waiting for the run goroutine; more are dropped and counted (a
// state is corrected by the next event of its kind: health every 10 s).
const inQueue = 1024

// Start connects to the broker (waiting for the first connection up to timeout), announces
// cams, subscribes to the daemon's events and starts the goroutine.
func (d *Discovery) Start(cams []Camera, timeout time.Duration) error {
	if d.Broker == "" || d.Events == nil || d.Site == "" {
		return errors.New("homeassistant: Broker, Events and Site are required")
	}
	if d.Prefix == "" {
		d.Prefix = DefaultPrefix
	}
	if d.SubjectPrefix == "" {
		d.SubjectPrefix = "visiond"
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	d.cams = make(chan []Camera, 1)
	d.in = make(chan inbound, inQueue)
	d.done = make(chan struct{})
	d.reconnected = make(chan struct{}, 1)
	connected := make(chan struct{}, 1)

	scheme := "tcp://"
	if d.TLS != nil {
		scheme = "ssl://"
	}
	o := mqtt.NewClientOptions().AddBroker(scheme+d.Broker).
		SetClientID("visiond-"+token(d.Site)+"-ha").
		SetUsername(d.Username).SetPassword(d.Password).
		SetCleanSession(true).
		SetAutoReconnect(true).SetConnectRetry(true).SetMaxReconnectInterval(10*time.Second).
		SetWill(d.availability(), "offline", 1, true).
		SetOrderMatters(false).
		SetOnConnectHandler(func(c mqtt.Client) {
			// Online again (the will may have said offline), and what an earlier run left
			// retained is read again: configs no longer wanted are removed as they come.
			c.Publish(d.availability(), qos, true, "online")
			c.Subscribe(d.Prefix+"/+/+/+/config", qos, func(_ mqtt.Client, m mqtt.Message) {
				if parts := strings.Split(m.Topic(), "/"); len(m.Payload()) > 0 && len(parts) >= 4 && strings.HasPrefix(parts[len(parts)-3], d.nodePrefix()) {
					d.queue(inbound{config: m.Topic()})
				}
			})
			select {
			case connected <- struct{}{}:
			default:
			}
			select {
			case d.reconnected <- struct{}{}:
			default:
			}
		}).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			d.Logger.Warn("Home Assistant discovery: MQTT connection lost; reconnecting", "broker", d.Broker, "error", err)
		})
	if d.TLS != nil {
		o.SetTLSConfig(d.TLS)
	}
	d.client = mqtt.NewClient(o)
	d.client.Connect()
	select {
	case <-connected:
	case <-time.After(timeout):
		d.client.Disconnect(0)
		return fmt.Errorf("homeassistant: no MQTT connection to %s within %v", d.Broker, timeout)
	}
	select { // the first connection's: run announces everything anyway
	case <-d.reconnected:
	default:
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go d.run(ctx, cams) // announced first: the configs seen retained (queued meanwhile) are judged against them
	base := d.SubjectPrefix + "." + d.Site
	for _, s := range []string{base + ".*.status", base + ".*.zones", base + ".*.lines", base + ".health"} {
		sub, err := d.Events.Subscribe(s, func(m *nats.Msg) { d.queue(inbound{subject: m.Subject, data: m.Data}) })
		if err != nil {
			d.Close()
			return fmt.Errorf("homeassistant: subscribing to %s: %w", s, err)
		}
		d.subs = append(d.subs, sub)
	}
	d.Logger.Info("Home Assistant discovery on", "broker", d.Broker, "prefix", d.Prefix, "availability", d.availability(), "cameras", len(cams))
	return nil
}

func (d *Discovery) queue(m inbound) {
	select {
	case d.in <- m:
	default:
		d.dropped.Add(1)
	}
}

// SetCameras announces cams in place of those announced: new entities get their configs,
// those gone are removed. It never blocks: a set not yet announced is replaced.
func (d *Discovery) SetCameras(cams []Camera) {
	for {
		select {
		case d.cams <- cams:
			return
		default:
		}
		select {
		case <-d.cams:
		default:
		}
	}
}

// Dropped is how many events were dropped, the queue full.
func (d *Discovery) Dropped() uint64 { return d.dropped.Load() }

// Close says offline (retained), disconnects and waits for the goroutine. Safe to call twice.
func (d *Discovery) Close() {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed || d.cancel == nil {
		return
	}
	d.closed = true
	for _, s := range d.subs {
		_ = s.Unsubscribe()
	}
	d.cancel()
	<-d.done
	if d.client.IsConnectionOpen() {
		d.client.Publish(d.availability(), qos, true, "offline").WaitTimeout(2 * time.Second)
	}
	d.client.Disconnect(250)
}

// availability is the daemon's availability topic.
func (d *Discovery) availability() string { return d.stateRoot() + "/availability" }

// stateRoot is the root of the states' topics: <prefix>-ha/<site>, the prefix's dots as
// slashes (outside <prefix>/<site>/, which the site's stream captures).
func (d *Discovery) stateRoot() string {
	return strings.ReplaceAll(d.SubjectPrefix, ".", "/") + "-ha/" + d.Site
}

// nodePrefix begins every node id of this site: visiond_<site>_.
func (d *Discovery) nodePrefix() string { return "visiond_" + token(d.Site) + "_" }

// entity is one announced entity: its config topic and payload, its state topic, and the
// state it starts with when first announced ("": none, the next event gives it).
type entity struct {
	configTopic string
	config      []byte
	stateTopic  string
	initial     string
}

// run owns what is announced and the states published.
func (d *Discovery) run(ctx context.Context, cams []Camera) {
	defer close(d.done)
	s := &announcer{d: d, announced: map[string]entity{}, states: map[string]string{}, camState: map[string]string{}}
	s.announce(cams)
	for {
		select {
		case <-ctx.Done():
			return
		case cams := <-d.cams:
			s.announce(cams)
		case <-d.reconnected:
			s.republish()
		case m := <-d.in:
			if m.config != "" {
				s.seen(m.config)
			} else {
				s.event(m.subject, m.data)
			}
		}
	}
}

// announcer is the run goroutine's state.
type announcer struct {
	d         *Discovery
	cams      map[string]Camera
	announced map[string]entity // by config topic
	states    map[string]string // state topic -> the payload last published
	camState  map[string]string // camera -> its last known state, announced or not
}

func (s *announcer) publish(topic string, payload []byte) {
	s.d.client.Publish(topic, qos, true, payload) // lost while disconnected: all is published again on the reconnect
}

// republish publishes every announced config and every state again, after a reconnect: what
// was published while the connection was down was lost, and the retained messages may have
// gone with a broker that lost its store.
func (s *announcer) republish() {
	for _, e := range s.announced {
		s.publish(e.configTopic, e.config)
	}
	for topic, v := range s.states {
		s.publish(topic, []byte(v))
	}
}

// setState publishes payload on topic when it differs from what was last published there.
func (s *announcer) setState(topic, payload string) {
	if old, ok := s.states[topic]; ok && old == payload {
		return
	}
	s.states[topic] = payload
	s.publish(topic, []byte(payload))
}

// announce publishes the configs of cams' entities and removes those no longer wanted.
func (s *announcer) announce(cams []Camera) {
	want := map[string]entity{}
	byID := map[string]Camera{}
	var fresh []entity
	for _, c := range cams {
		byID[c.ID] = c
		for _, e := range s.entities(c) {
			want[e.configTopic] = e
			if old, ok := s.announced[e.configTopic]; !ok || string(old.config) != string(e.config) {
				s.publish(e.configTopic, e.config)
			}
			if _, ok := s.announced[e.configTopic]; !ok {
				fresh = append(fresh, e)
			}
		}
	}
	used := map[string]bool{}
	for _, e := range want {
		used[e.stateTopic] = true
	}
	for topic, e := range s.announced {
		if _, ok := want[topic]; ok {
			continue
		}
		s.publish(topic, nil)
		if !used[e.stateTopic] { // a zone's binary sensor and count share theirs
			used[e.stateTopic] = true
			delete(s.states, e.stateTopic)
			s.publish(e.stateTopic, nil)
		}
	}
	s.announced, s.cams = want, byID
	for _, e := range fresh {
		if e.initial != "" {
			s.setState(e.stateTopic, e.initial)
		}
	}
}

// seen handles a retained config of this site's nodes: removed when nothing announces it.
func (s *announcer) seen(topic string) {
	if _, ok := s.announced[topic]; !ok {
		s.d.Logger.Info("Home Assistant discovery: removing an entity no longer configured", "topic", topic)
		s.publish(topic, nil)
	}
}

// event updates states from one of the daemon's events.
func (s *announcer) event(subject string, data []byte) {
	root := s.d.stateRoot()
	switch {
	case strings.HasSuffix(subject, ".status"):
		var ev sinks.StatusEvent
		if json.Unmarshal(data, &ev) != nil || ev.Camera == "" {
			return
		}
		s.camState[ev.Camera] = ev.State
		if _, ok := s.cams[ev.Camera]; ok {
			s.setState(root+"/"+ev.Camera+"/state", ev.State)
		}
	case strings.HasSuffix(subject, ".health"):
		var ev sinks.HealthEvent
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		for _, c := range ev.Cameras {
			s.camState[c.Camera] = c.State
			if _, ok := s.cams[c.Camera]; ok {
				s.setState(root+"/"+c.Camera+"/state", c.State)
				s.setState(root+"/"+c.Camera+"/fps", strconv.FormatFloat(c.FPSAchieved, 'f', 2, 64))
			}
		}
	case strings.HasSuffix(subject, ".zones"):
		var ev sinks.ZoneEvent
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		for _, z := range s.cams[ev.Camera].Zones {
			if z.ID != ev.Zone {
				continue
			}
			for _, class := range z.Classes {
				s.setState(zoneTopic(root, ev.Camera, z.ID, class), strconv.Itoa(ev.Occupancy[class]))
			}
		}
	case strings.HasSuffix(subject, ".lines"):
		var ev sinks.LineEvent
		if json.Unmarshal(data, &ev) != nil {
			return
		}
		for _, l := range s.cams[ev.Camera].Lines {
			if l.ID != ev.Line {
				continue
			}
			for _, dir := range []string{sinks.DirectionIn, sinks.DirectionOut} {
				for _, class := range l.Classes {
					s.setState(lineTopic(root, ev.Camera, l.ID, dir, class), strconv.FormatUint(ev.Counts[dir][class], 10))
				}
			}
		}
	}
}

func zoneTopic(root, cam, zone, class string) string {
	return root + "/" + cam + "/zones/" + zone + "/" + token(class)
}

func lineTopic(root, cam, line, dir, class string) string {
	return root + "/" + cam + "/lines/" + line + "/" + dir + "/" + token(class)
}

// entities are camera c's entities, their configs as Home Assistant's discovery schema has
// them.
func (s *announcer) entities(c Camera) []entity {
	d := s.d
	root := d.stateRoot()
	node := d.nodePrefix() + token(c.ID)
	device := map[string]any{
		"identifiers":  []string{node},
		"name":         cmp.Or(c.Name, c.ID),
		"manufacturer": "visiond",
		"model":        "camera",
		"sw_version":   d.Version,
	}
	origin := map[string]any{"name": "visiond", "sw_version": d.Version, "support_url": "https://github.com/visiond/visiond"}
	mk := func(component, object string, fields map[string]any) entity {
		cfg := map[string]any{
			"unique_id":             node + "_" + object,
			"default_entity_id":     component + "." + node + "_" + object,
			"availability_topic":    d.availability(),
			"payload_available":     "online",
			"payload_not_available": "offline",
			"device":                device,
			"origin":                origin,
		}
		for k, v := range fields {
			cfg[k] = v
		}
		b, _ := json.Marshal(cfg) // maps of strings, numbers and slices
		return entity{configTopic: d.Prefix + "/" + component + "/" + node + "/" + object + "/config", config: b, stateTopic: cfg["state_topic"].(string)}
	}
	// The states new entities start with: a camera's, the last one known; a zone's, empty
	// (objects are followed afresh); a line's counts come with its crossings (the retained
	// count of an earlier run stays until then).
	state := mk("sensor", "state", map[string]any{"name": "State", "state_topic": root + "/" + c.ID + "/state",
		"device_class": "enum", "options": []string{"connecting", "online", "offline", "unauthorized"}, "icon": "mdi:cctv"})
	state.initial = cmp.Or(s.camState[c.ID], "connecting")
	es := []entity{state,
		mk("sensor", "fps", map[string]any{"name": "Analysed fps", "state_topic": root + "/" + c.ID + "/fps",
			"unit_of_measurement": "fps", "state_class": "measurement", "suggested_display_precision": 1, "entity_category": "diagnostic"}),
	}
	for _, z := range c.Zones {
		for _, class := range z.Classes {
			t := zoneTopic(root, c.ID, z.ID, class)
			obj := token(z.ID) + "_" + token(class)
			occupied := mk("binary_sensor", obj+"_occupied", map[string]any{"name": class + " in " + z.ID, "state_topic": t,
				"device_class": "occupancy", "value_template": "{{ 'ON' if value | int(0) > 0 else 'OFF' }}"})
			count := mk("sensor", obj+"_count", map[string]any{"name": class + " count in " + z.ID, "state_topic": t,
				"state_class": "measurement", "unit_of_measurement": "objects", "icon": "mdi:account-group"})
			occupied.initial, count.initial = "0", "0"
			es = append(es, occupied, count)
		}
	}
	for _, l := range c.Lines {
		for _, dir := range []string{sinks.DirectionIn, sinks.DirectionOut} {
			for _, class := range l.Classes {
				es = append(es, mk("sensor", token(l.ID)+"_"+dir+"_"+token(class), map[string]any{
					"name": class + " " + dir + " at " + l.ID, "state_topic": lineTopic(root, c.ID, l.ID, dir, class),
					"state_class": "total_increasing", "unit_of_measurement": "crossings", "icon": "mdi:transit-connection-horizontal"}))
			}
		}
	}
	return es
}

var notToken = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// token makes s fit a topic level and an object id: letters, digits, '_' and '-'.
func token(s string) string { return notToken.ReplaceAllString(s, "_") }
