package homeassistant

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks"
	"github.com/visiond/visiond/sinks/natstest"
)

// broker is an embedded server with JetStream and its MQTT listener, as the daemon runs it,
// and a NATS connection to it for the daemon's events.
type broker struct {
	srv  *sinks.Server
	mqtt string // host:port
	nc   *nats.Conn
}

func startBroker(t *testing.T) *broker {
	t.Helper()
	natstest.NeedMosquitto(t)
	s := &sinks.Server{Listen: "127.0.0.1:0", MQTT: "127.0.0.1:0", StoreDir: t.TempDir(), Domain: "lab", Logger: testutil.Logger(t)}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return &broker{srv: s, mqtt: s.MQTTAddr(), nc: nc}
}

// waitRetained waits until cond holds of what is retained under filter.
func (b *broker) waitRetained(t *testing.T, filter, what string, cond func(map[string]string) bool) map[string]string {
	t.Helper()
	return natstest.MQTT{Addr: b.mqtt}.WaitRetained(t, filter, what, cond)
}

// publish sends one of the daemon's events on its subject, as the daemon's publisher does.
func (b *broker) publish(t *testing.T, subject string, ev any) {
	t.Helper()
	data, ok := ev.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.nc.Publish(subject, data); err != nil {
		t.Fatal(err)
	}
}

func startDiscovery(t *testing.T, b *broker, addr string, cams []Camera) *Discovery {
	t.Helper()
	d := &Discovery{Broker: addr, Site: "lab", Events: b.nc, Version: "test", Logger: testutil.Logger(t)}
	if err := d.Start(cams, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

var lobby = []Camera{{ID: "cam0", Name: "Lobby", Zones: []Scope{{ID: "lower", Classes: []string{"person"}}},
	Lines: []Scope{{ID: "door", Classes: []string{"person", "traffic light"}}}}}

// TestDiscovery is issue 41's item 1 against the embedded server, read with Debian's
// mosquitto_sub: the retained configs of a camera's entities in Home Assistant's schema and
// their first states; states following the daemon's events (bad events ignored); entities
// removed on a reload; offline on Close; and, after a restart, configs an earlier run left
// for what is no longer configured removed.
func TestDiscovery(t *testing.T) {
	b := startBroker(t)
	d := startDiscovery(t, b, b.mqtt, lobby)

	const node = "visiond_lab_cam0"
	configs := b.waitRetained(t, "homeassistant/#", "the configs retained", func(m map[string]string) bool { return len(m) >= 8 })
	want := map[string]string{ // config topic -> state topic
		"homeassistant/sensor/" + node + "/state/config":                        "visiond-ha/lab/cam0/state",
		"homeassistant/sensor/" + node + "/fps/config":                          "visiond-ha/lab/cam0/fps",
		"homeassistant/binary_sensor/" + node + "/lower_person_occupied/config": "visiond-ha/lab/cam0/zones/lower/person",
		"homeassistant/sensor/" + node + "/lower_person_count/config":           "visiond-ha/lab/cam0/zones/lower/person",
		"homeassistant/sensor/" + node + "/door_in_person/config":               "visiond-ha/lab/cam0/lines/door/in/person",
		"homeassistant/sensor/" + node + "/door_out_person/config":              "visiond-ha/lab/cam0/lines/door/out/person",
		"homeassistant/sensor/" + node + "/door_in_traffic_light/config":        "visiond-ha/lab/cam0/lines/door/in/traffic_light",
		"homeassistant/sensor/" + node + "/door_out_traffic_light/config":       "visiond-ha/lab/cam0/lines/door/out/traffic_light",
	}
	if len(configs) != len(want) {
		t.Errorf("%d configs retained, want %d: %v", len(configs), len(want), configs)
	}
	for topic, state := range want {
		var c struct {
			UniqueID     string `json:"unique_id"`
			Name         string `json:"name"`
			StateTopic   string `json:"state_topic"`
			Availability string `json:"availability_topic"`
			DeviceClass  string `json:"device_class"`
			StateClass   string `json:"state_class"`
			Device       struct {
				Identifiers []string `json:"identifiers"`
				Name        string   `json:"name"`
			} `json:"device"`
		}
		if err := json.Unmarshal([]byte(configs[topic]), &c); err != nil {
			t.Errorf("%s: %v: %q", topic, err, configs[topic])
			continue
		}
		object := strings.Split(topic, "/")[3]
		if c.UniqueID != node+"_"+object || c.StateTopic != state || c.Availability != "visiond-ha/lab/availability" ||
			len(c.Device.Identifiers) != 1 || c.Device.Identifiers[0] != node || c.Device.Name != "Lobby" || c.Name == "" {
			t.Errorf("%s: %+v", topic, c)
		}
		switch {
		case strings.Contains(topic, "binary_sensor") && c.DeviceClass != "occupancy",
			strings.Contains(topic, "/door_") && c.StateClass != "total_increasing",
			strings.HasSuffix(topic, "/state/config") && c.DeviceClass != "enum":
			t.Errorf("%s: device class %q, state class %q", topic, c.DeviceClass, c.StateClass)
		}
	}
	states := b.waitRetained(t, "visiond-ha/#", "the first states", func(m map[string]string) bool { return len(m) >= 3 })
	for topic, v := range map[string]string{"visiond-ha/lab/availability": "online", "visiond-ha/lab/cam0/state": "connecting", "visiond-ha/lab/cam0/zones/lower/person": "0"} {
		if states[topic] != v {
			t.Errorf("%s = %q, want %q (all: %v)", topic, states[topic], v, states)
		}
	}

	// The daemon's events move the states; bad ones are ignored and the next still counts.
	b.publish(t, "visiond.lab.cam0.zones", []byte("{not json"))
	b.publish(t, "visiond.lab.cam9.zones", sinks.ZoneEvent{Camera: "cam9", Zone: "lower", Occupancy: map[string]int{"person": 5}})
	b.publish(t, "visiond.lab.cam0.status", sinks.StatusEvent{Camera: "cam0", State: "online", Previous: "connecting"})
	b.publish(t, "visiond.lab.cam0.zones", sinks.ZoneEvent{Camera: "cam0", Type: "enter", Zone: "lower", Label: "person", Occupancy: map[string]int{"person": 2, "dog": 1}})
	b.publish(t, "visiond.lab.cam0.lines", sinks.LineEvent{Camera: "cam0", Line: "door", Direction: "in", Counts: map[string]map[string]uint64{"in": {"person": 3}}})
	b.publish(t, "visiond.lab.health", sinks.HealthEvent{Cameras: []sinks.CameraHealth{{Camera: "cam0", State: "online", FPS: 5, FPSAchieved: 4.75}}})
	b.waitRetained(t, "visiond-ha/lab/cam0/#", "the states after the events", func(m map[string]string) bool {
		return m["visiond-ha/lab/cam0/state"] == "online" && m["visiond-ha/lab/cam0/zones/lower/person"] == "2" &&
			m["visiond-ha/lab/cam0/lines/door/in/person"] == "3" && m["visiond-ha/lab/cam0/lines/door/out/person"] == "0" &&
			m["visiond-ha/lab/cam0/fps"] == "4.75" && m["visiond-ha/lab/cam9/zones/lower/person"] == ""
	})

	// A reload drops the line: its four entities and their states go; the rest stay.
	d.SetCameras([]Camera{{ID: "cam0", Name: "Lobby", Zones: lobby[0].Zones}})
	got := b.waitRetained(t, "homeassistant/#", "the line's configs removed", func(m map[string]string) bool { return len(m) == 4 })
	for topic := range got {
		if strings.Contains(topic, "door") {
			t.Errorf("%s still retained after the line left the config", topic)
		}
	}
	b.waitRetained(t, "visiond-ha/lab/cam0/lines/#", "the line's states removed", func(m map[string]string) bool { return len(m) == 0 })

	// Close says offline; a restart with the zone gone removes what the first run left of it.
	d.Close()
	b.waitRetained(t, "visiond-ha/lab/availability", "offline after Close", func(m map[string]string) bool { return m["visiond-ha/lab/availability"] == "offline" })
	startDiscovery(t, b, b.mqtt, []Camera{{ID: "cam0"}})
	b.waitRetained(t, "homeassistant/#", "the zone's configs of the earlier run removed", func(m map[string]string) bool {
		return len(m) == 2 && m["homeassistant/sensor/"+node+"/state/config"] != "" && m["homeassistant/sensor/"+node+"/fps/config"] != ""
	})
	b.waitRetained(t, "visiond-ha/lab/availability", "online again", func(m map[string]string) bool { return m["visiond-ha/lab/availability"] == "online" })
}

// TestDiscoveryLastWill: a connection lost without a goodbye (the link cut) leaves the
// daemon's entities unavailable (the server sends the will); the reconnect makes them
// available again.
func TestDiscoveryLastWill(t *testing.T) {
	b := startBroker(t)
	proxy := natstest.StartProxy(t, b.mqtt)
	startDiscovery(t, b, proxy.Addr, lobby)
	avail := func(v string) func(map[string]string) bool {
		return func(m map[string]string) bool { return m["visiond-ha/lab/availability"] == v }
	}
	b.waitRetained(t, "visiond-ha/lab/availability", "online", avail("online"))
	proxy.Cut()
	b.waitRetained(t, "visiond-ha/lab/availability", "offline: the will, the link cut", avail("offline"))
	proxy.Restore()
	b.waitRetained(t, "visiond-ha/lab/availability", "online after the reconnect", avail("online"))
}

// A broker that cannot be reached is a clear error at Start, within its timeout.
func TestDiscoveryNoBroker(t *testing.T) {
	b := startBroker(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := &Discovery{Broker: addr, Site: "lab", Events: b.nc}
	if err := d.Start(lobby, 2*time.Second); err == nil || !strings.Contains(err.Error(), "no MQTT connection to "+addr) {
		t.Errorf("Start against nothing: %v", err)
	}
	if err := (&Discovery{Site: "lab", Events: b.nc}).Start(lobby, time.Second); err == nil {
		t.Error("Start without a broker: no error")
	}
}
