package natstest

import (
	"context"
	"errors"
	"fmt"
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

// MQTT is an MQTT broker as a test's client reaches it: its address (host:port) and the
// user and password to log in with (none when User and Password are empty).
type MQTT struct {
	Addr, User, Password string
}

// Retained returns what broker b holds retained under filter, read by Debian's
// mosquitto_sub: topic to payload.
func (b MQTT) Retained(tb testing.TB, filter string) map[string]string {
	tb.Helper()
	out, err := b.sub(filter)
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

// Refused reports whether b refuses a subscription to filter (mosquitto_sub's exit status 5:
// not authorised), and mosquitto_sub's output when it does not.
func (b MQTT) Refused(tb testing.TB, filter string) (bool, string) {
	tb.Helper()
	out, err := b.sub(filter)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode() == 5, fmt.Sprintf("%v: %s%s", err, out, exit.Stderr)
	}
	return false, fmt.Sprintf("%v: %s", err, out)
}

// sub runs mosquitto_sub for what is retained under filter, waiting 2 s for more.
func (b MQTT) sub(filter string) ([]byte, error) {
	host, port, err := net.SplitHostPort(b.Addr)
	if err != nil {
		return nil, err
	}
	args := []string{"-h", host, "-p", port, "-t", filter, "-v", "--retained-only", "-W", "2"}
	if b.User != "" || b.Password != "" {
		args = append(args, "-u", b.User, "-P", b.Password)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, "mosquitto_sub", args...).Output() // stderr: in the *exec.ExitError
}

// WaitRetained waits up to a minute until cond holds of what b retains under filter, and
// returns it; the test fails with what was retained last.
func (b MQTT) WaitRetained(tb testing.TB, filter, what string, cond func(map[string]string) bool) map[string]string {
	tb.Helper()
	for end := time.Now().Add(time.Minute); ; {
		got := b.Retained(tb, filter)
		if cond(got) {
			return got
		}
		if time.Now().After(end) {
			tb.Fatalf("timed out waiting for %s; retained under %s: %v", what, filter, got)
		}
	}
}
