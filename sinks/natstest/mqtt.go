package natstest

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// NeedMosquitto skips the test where Debian's mosquitto-clients are not installed.
func NeedMosquitto(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("mosquitto_sub"); err != nil {
		tb.Skip("mosquitto_sub not installed: apt-get install mosquitto-clients (scripts/setup.sh does)")
	}
}

// Retained returns what the MQTT broker at addr (host:port, no credentials) holds retained
// under filter, read by Debian's mosquitto_sub: topic to payload.
func Retained(tb testing.TB, addr, filter string) map[string]string {
	tb.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "mosquitto_sub", "-h", host, "-p", port, "-t", filter, "-v", "--retained-only", "-W", "2").Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 27) { // 27: its -W timeout, the end of the retained
		tb.Fatalf("mosquitto_sub -t %s: %v\n%s", filter, err, out)
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if topic, payload, ok := strings.Cut(l, " "); ok {
			got[topic] = payload
		} else if l != "" {
			got[l] = ""
		}
	}
	return got
}

// WaitRetained waits up to a minute until cond holds of what is retained under filter at
// addr, and returns it; the test fails with what was retained last.
func WaitRetained(tb testing.TB, addr, filter, what string, cond func(map[string]string) bool) map[string]string {
	tb.Helper()
	for end := time.Now().Add(time.Minute); ; {
		got := Retained(tb, addr, filter)
		if cond(got) {
			return got
		}
		if time.Now().After(end) {
			tb.Fatalf("timed out waiting for %s; retained under %s: %v", what, filter, got)
		}
	}
}
