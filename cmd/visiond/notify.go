package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"
)

// notifier speaks systemd's notify protocol (sd_notify) for systemd/visiond.service
// (Type=notify, WatchdogSec). Without $NOTIFY_SOCKET (not run by systemd, or a unit
// without Type=notify) every method is a no-op. A failure to notify is logged, never fatal.
//
// Where each call belongs in runCmd:
//
//   - Ready: once Daemon.Start has returned without error, and again when a reload has
//     finished (applied or rejected: the daemon keeps running either way).
//   - Reloading: when a reload begins (SIGHUP or a config file change), before the new
//     config is validated and applied; follow it with Ready (and a Status saying whether
//     the reload was applied or rejected).
//   - Stopping: on SIGTERM/SIGINT, before Daemon.Close.
//   - Status: any one-line state for `systemctl status` ("running: 3 cameras, 2 online",
//     "reload rejected: ...").
//   - watchdog: in a goroutine started after Ready, with a context cancelled (and the
//     goroutine waited for) before Close; healthy should report whether the daemon's main
//     loop is making progress, so that a hung daemon stops pinging and systemd restarts it.
type notifier struct {
	log *slog.Logger // nil: slog.Default()
}

func newNotifier(log *slog.Logger) *notifier { return &notifier{log: log} }

// Ready sends READY=1: start-up (or a reload) has finished.
func (n *notifier) Ready() { n.send(daemon.SdNotifyReady) }

// Reloading sends RELOADING=1 with MONOTONIC_USEC, the CLOCK_MONOTONIC time the reload began,
// as Type=notify-reload requires (plain Type=notify accepts it as well). Send Ready when the
// reload is done.
func (n *notifier) Reloading() {
	n.send(fmt.Sprintf("%s\nMONOTONIC_USEC=%d", daemon.SdNotifyReloading, monotonicUsec()))
}

// Stopping sends STOPPING=1: shutdown has begun.
func (n *notifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// Status sends STATUS=text, shown by `systemctl status`; line breaks become spaces, since
// each line of a notification is an assignment of its own.
func (n *notifier) Status(text string) {
	n.send("STATUS=" + strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(text))
}

// watchdog sends WATCHDOG=1 every half of the interval systemd gives in $WATCHDOG_USEC
// (WatchdogSec=), at once and then on each tick, but only when healthy() returns true, until
// ctx ends. It returns at once when the watchdog is off: no $NOTIFY_SOCKET, no $WATCHDOG_USEC,
// or a $WATCHDOG_PID that is not this process.
func (n *notifier) watchdog(ctx context.Context, healthy func() bool) {
	if !notifySocketSet() {
		return
	}
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.logger().Warn("systemd watchdog disabled", "error", err)
		return
	}
	if interval <= 0 {
		return
	}
	tick := time.NewTicker(interval / 2)
	defer tick.Stop()
	wasHealthy := true
	for {
		ok := healthy()
		switch {
		case ok && !wasHealthy:
			n.logger().Info("healthy again: resuming systemd watchdog pings")
		case !ok && wasHealthy:
			n.logger().Warn("unhealthy: withholding systemd watchdog pings; systemd restarts the service if this lasts",
				"watchdog", interval)
		}
		wasHealthy = ok
		if ok {
			n.send(daemon.SdNotifyWatchdog)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (n *notifier) send(state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		n.logger().Warn("systemd notify failed", "state", strings.SplitN(state, "\n", 2)[0], "error", err)
	}
}

func (n *notifier) logger() *slog.Logger {
	if n.log == nil {
		return slog.Default().With("component", "systemd")
	}
	return n.log // the caller's logger already names the component
}

// notifySocketSet reports whether systemd gave the process a notify socket.
func notifySocketSet() bool { return os.Getenv("NOTIFY_SOCKET") != "" }

// monotonicUsec is CLOCK_MONOTONIC in microseconds, the clock systemd's MONOTONIC_USEC uses.
func monotonicUsec() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err) // cannot fail on Linux
	}
	return ts.Nano() / 1000
}
