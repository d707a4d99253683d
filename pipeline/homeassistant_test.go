package pipeline

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/internal/testutil"
	"github.com/visiond/visiond/sinks/natstest"
)

// haNATS is the nats section of the discovery tests: the embedded server on a free port, its
// MQTT listener on mqtt with Home Assistant discovery.
func haNATS(mqtt string) string {
	return "nats: {listen: 127.0.0.1:0, mqtt: {listen: " + mqtt + ", discovery: true}}\n"
}

// TestHomeAssistantDiscoveryAuth: with nats.auth set, the daemon's announcer logs into its
// own listener with the daemon's credentials (a user and password; a token as the password
// of any user), and announces the camera; a client without them, or with a wrong password,
// is refused.
func TestHomeAssistantDiscoveryAuth(t *testing.T) {
	natstest.NeedMosquitto(t)
	for _, tc := range []struct {
		name, auth string
		login      natstest.MQTT // Addr set below
	}{
		{"user", "{user: ha, password: 'pw-0123456789'}", natstest.MQTT{User: "ha", Password: "pw-0123456789"}},
		{"token", "{token: 'tok-0123456789abcdef'}", natstest.MQTT{User: "homeassistant", Password: "tok-0123456789abcdef"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mqtt := testutil.FreeAddr(t)
			d := startTestDaemon(t, lifeConfig(t, sampleCameras(t, 1))+
				"nats: {listen: 127.0.0.1:0, auth: "+tc.auth+", mqtt: {listen: "+mqtt+", discovery: true}}\n")
			login := tc.login
			login.Addr = d.natsServer.MQTTAddr()
			login.WaitRetained(t, "homeassistant/#", "the camera's entities", func(m map[string]string) bool {
				return m["homeassistant/sensor/visiond_test_cam0/state/config"] != ""
			})
			for _, other := range []natstest.MQTT{{Addr: login.Addr}, {Addr: login.Addr, User: login.User, Password: login.Password + "x"}} {
				if refused, out := other.Refused(t, "homeassistant/#"); !refused {
					t.Errorf("user %q, password %q: not refused: %s", other.User, other.Password, out)
				}
			}
		})
	}
}

// TestHomeAssistantDiscovery is issue 41's item 1 end to end: a daemon with
// nats.mqtt.discovery announces its sample camera to Home Assistant on its own MQTT listener
// (read with Debian's mosquitto_sub): the camera's entities, its state online, the zone's
// occupancy as the sample's people walk into it; a reload that renames the zone removes the
// old zone's entities and announces the new one's.
func TestHomeAssistantDiscovery(t *testing.T) {
	natstest.NeedMosquitto(t)
	cams := withZone(sampleCameras(t, 1), "cam0")
	mqtt := testutil.FreeAddr(t)
	d := startTestDaemon(t, lifeConfig(t, cams)+haNATS(mqtt))
	broker := natstest.MQTT{Addr: d.natsServer.MQTTAddr()}

	const node = "visiond_test_cam0"
	lower := "homeassistant/binary_sensor/" + node + "/lower_person_occupied/config"
	broker.WaitRetained(t, "homeassistant/#", "the camera's entities", func(m map[string]string) bool {
		return m["homeassistant/sensor/"+node+"/state/config"] != "" && m["homeassistant/sensor/"+node+"/fps/config"] != "" &&
			m[lower] != "" && m["homeassistant/sensor/"+node+"/lower_person_count/config"] != ""
	})
	broker.WaitRetained(t, "visiond-ha/test/#", "the camera online and a person in its zone", func(m map[string]string) bool {
		n := m["visiond-ha/test/cam0/zones/lower/person"]
		return m["visiond-ha/test/availability"] == "online" && m["visiond-ha/test/cam0/state"] == "online" && n != "" && n != "0"
	})

	// Its metric: nothing dropped in this calm run.
	metricsSrv := httptest.NewServer(d.metricsHandler())
	defer metricsSrv.Close()
	if v, ok := scrape(t, metricsSrv.URL)["visiond_homeassistant_events_dropped_total"]; !ok || v != 0 {
		t.Errorf("visiond_homeassistant_events_dropped_total: %v (present %v), want 0", v, ok)
	}

	cfg, err := config.Parse([]byte(lifeConfig(t, strings.Replace(cams, "zones: [{id: lower", "zones: [{id: upper", 1)) + haNATS(mqtt)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.reload(cfg); err != nil {
		t.Fatal(err)
	}
	broker.WaitRetained(t, "homeassistant/#", "the zone renamed: lower's entities gone, upper's come", func(m map[string]string) bool {
		return m[lower] == "" && m["homeassistant/binary_sensor/"+node+"/upper_person_occupied/config"] != ""
	})
}
