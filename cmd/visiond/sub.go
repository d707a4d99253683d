package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/sinks"
)

// subCmd prints events as they arrive: one line per detection event, or the raw JSON.
func subCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("sub", "", stderr)
	url := fs.String("nats", nats.DefaultURL, "NATS server `url`")
	subject := fs.String("subject", "visiond.>", "`subject` to subscribe to (wildcards * and >)")
	raw := fs.Bool("json", false, "print each event's JSON as received")
	count := fs.Int("count", 0, "exit after `n` events (0: run until interrupted)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (the subject goes after -subject)", fs.Arg(0))
	}
	if *count < 0 {
		return usagef("-count %d: must be 0 (no limit) or more", *count)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return printEvents(ctx, *url, *subject, *raw, *count, stdout)
}

// printEvents prints the events on subject as they arrive until ctx ends or count events
// (0: no limit) have been printed. It waits for the server rather than fail, so it can be
// started together with the daemon.
func printEvents(ctx context.Context, url, subject string, raw bool, count int, w io.Writer) error {
	nc, err := nats.Connect(url, nats.Name("visiond-sub"), nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1), nats.ReconnectWait(500*time.Millisecond))
	if err != nil {
		return fmt.Errorf("NATS %s: %w", url, err)
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 1024)
	sub, err := nc.ChanSubscribe(subject, msgs)
	if err != nil {
		return fmt.Errorf("subscribe %q: %w", subject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	fmt.Fprintf(os.Stderr, "visiond: printing events on %s from %s\n", subject, url)

	for n := 0; count == 0 || n < count; n++ {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			if raw {
				fmt.Fprintf(w, "%s\n", m.Data)
				continue
			}
			fmt.Fprintln(w, formatEvent(m))
		}
	}
	return nil
}

// formatEvent renders an event (detections, objects, zones, lines, status, health, gap) as
// one human-readable line; other messages are shown as subject and payload.
func formatEvent(m *nats.Msg) string {
	if strings.HasSuffix(m.Subject, ".status") {
		var st sinks.StatusEvent
		if json.Unmarshal(m.Data, &st) == nil && st.Camera != "" {
			line := fmt.Sprintf("%s %s/%s %s (was %s)", st.At.Local().Format("15:04:05.000"), st.Site, st.Camera, st.State, st.Previous)
			if st.Reason != "" {
				line += ": " + st.Reason
			}
			if st.GapMS > 0 {
				line += fmt.Sprintf(", no frames for %.1f s", st.GapMS/1000)
			}
			return line
		}
	}
	if strings.HasSuffix(m.Subject, ".health") {
		var h sinks.HealthEvent
		if json.Unmarshal(m.Data, &h) == nil && h.Site != "" {
			var b strings.Builder
			fmt.Fprintf(&b, "%s %s health, last %.0f s:", h.At.Local().Format("15:04:05.000"), h.Site, h.Interval)
			for _, c := range h.Cameras {
				fmt.Fprintf(&b, " %s %s %.1f/%g fps (%d analysed, %d dropped);", c.Camera, c.State, c.FPSAchieved, c.FPS, c.Analysed, c.Dropped)
			}
			fmt.Fprintf(&b, " %d workers; events published %d, pending %d", h.Workers, h.Publisher.Published, h.Publisher.Pending)
			return b.String()
		}
	}
	if strings.HasSuffix(m.Subject, ".gaps") {
		var g sinks.GapEvent
		if json.Unmarshal(m.Data, &g) == nil && g.Site != "" {
			return fmt.Sprintf("%s %s GAP: %d events lost (%s), made %s to %s", g.At.Local().Format("15:04:05.000"), g.Site,
				g.Events, g.Reason, g.From.Local().Format("15:04:05.000"), g.To.Local().Format("15:04:05.000"))
		}
	}
	if line, ok := formatAnalytics(m); ok {
		return line
	}
	var ev sinks.DetectionEvent
	if !strings.HasSuffix(m.Subject, ".detections") || json.Unmarshal(m.Data, &ev) != nil {
		return fmt.Sprintf("%s %s", m.Subject, m.Data)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s frame %d (%dx%d) %.0f ms:", ev.CapturedAt.Local().Format("15:04:05.000"),
		ev.Site, ev.Camera, ev.Frame.Seq, ev.Frame.Width, ev.Frame.Height, ev.LatencyMS.Total)
	if len(ev.Detections) == 0 {
		b.WriteString(" nothing")
	}
	for _, d := range ev.Detections {
		if d.TrackID != 0 {
			fmt.Fprintf(&b, " #%d", d.TrackID)
		}
		fmt.Fprintf(&b, " %s %.2f [%.0f,%.0f %.0fx%.0f]", d.Label, d.Score, d.Box.X, d.Box.Y, d.Box.W, d.Box.H)
	}
	return b.String()
}

// formatAnalytics renders an object, zone or line event as one line; ok is false for other
// messages.
func formatAnalytics(m *nats.Msg) (line string, ok bool) {
	const clock = "15:04:05.000"
	switch {
	case strings.HasSuffix(m.Subject, ".objects"):
		var o sinks.ObjectEvent
		if json.Unmarshal(m.Data, &o) != nil || o.Camera == "" {
			return "", false
		}
		line = fmt.Sprintf("%s %s/%s object %s #%d %s %.2f", o.LastSeen.Local().Format(clock), o.Site, o.Camera, o.Type, o.TrackID, o.Label, o.Score)
		if len(o.Why) > 0 {
			line += " (" + strings.Join(o.Why, ", ") + ")"
		}
		if len(o.Zones) > 0 {
			line += " in " + strings.Join(o.Zones, ", ")
		}
		if o.Stationary {
			line += ", stationary"
		}
		if o.Type == sinks.ObjectClip && o.Clip != nil {
			line += fmt.Sprintf(", clip %s (%.1f s)", o.Clip.Name, o.Clip.DurationS)
		}
		if o.Type == sinks.ObjectEnd {
			line += fmt.Sprintf(", seen %.1f s, heading %.0f°", o.LastSeen.Sub(o.FirstSeen).Seconds(), o.Path.Direction)
			if o.Reason != "" {
				line += ", " + o.Reason
			}
		}
		return line, true
	case strings.HasSuffix(m.Subject, ".zones"):
		var z sinks.ZoneEvent
		if json.Unmarshal(m.Data, &z) != nil || z.Camera == "" {
			return "", false
		}
		line = fmt.Sprintf("%s %s/%s zone %s %s #%d %s", z.At.Local().Format(clock), z.Site, z.Camera, z.Zone, z.Type, z.TrackID, z.Label)
		if z.DwellS > 0 {
			line += fmt.Sprintf(" after %.1f s", z.DwellS)
		}
		n := 0
		for _, c := range z.Occupancy {
			n += c
		}
		return line + fmt.Sprintf(", %d inside", n), true
	case strings.HasSuffix(m.Subject, ".lines"):
		var l sinks.LineEvent
		if json.Unmarshal(m.Data, &l) != nil || l.Camera == "" {
			return "", false
		}
		return fmt.Sprintf("%s %s/%s line %s %s #%d %s (%s now %d)", l.At.Local().Format(clock), l.Site, l.Camera, l.Line,
			l.Direction, l.TrackID, l.Label, l.Direction, l.Counts[l.Direction][l.Label]), true
	}
	return "", false
}
