package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/pipeline"
	"github.com/visiond/visiond/sinks"
)

// replayCmd analyses a recording as a camera of the config would be analysed live, as fast
// as the workers go, and prints its events (or publishes them): for tuning a camera's zones
// and lines on a recording.
func replayCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("replay", " VIDEO", stderr)
	path := fs.String("config", os.Getenv("VISIOND_CONFIG"), "config `file` (default: $VISIOND_CONFIG, else the embedded demo config)")
	camera := fs.String("camera", "", "`id` of the camera whose zones, lines, filters and fps are used (default: the config's only camera)")
	fps := fs.Float64("fps", 0, "frames analysed per second of video (default: the camera's fps)")
	raw := fs.Bool("json", false, `print each event as {"subject": ..., "event": {...}}, the event as the daemon publishes it`)
	publish := fs.Bool("publish", false, "publish the events to the config's NATS server (core NATS) instead of printing them")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 0:
		return usagef("no video file to replay")
	case fs.NArg() > 1:
		return usagef("one video file, got %d arguments (flags go before the file)", fs.NArg())
	case *fps < 0:
		return usagef("-fps %v: must be 0 (the camera's) or more", *fps)
	case *publish && *raw:
		return usagef("-json prints the events, -publish publishes them: one or the other")
	}
	cfg, name, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var sink pipeline.EventSink
	out := bufio.NewWriter(stdout)
	if *publish {
		pub, err := replayPublisher(cfg)
		if err != nil {
			return err
		}
		pub.Logger = log.With("component", "nats")
		if err := pub.Start(); err != nil {
			return err
		}
		defer pub.Close(5 * time.Second)
		sink = pub
	} else {
		// A failed write (stdout closed, say by "| head") ends the replay.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		sink = &printSink{w: out, prefix: cfg.NATS.SubjectPrefix, site: cfg.Site, raw: *raw, failed: cancel}
	}
	st, err := pipeline.Replay(ctx, pipeline.ReplayOptions{Config: cfg, Camera: *camera, File: fs.Arg(0), FPS: *fps, Log: log}, sink)
	if ferr := out.Flush(); ferr != nil {
		err = fmt.Errorf("printing the events: %w", ferr) // the replay was cut short by it
	} else if ps, ok := sink.(*printSink); ok && ps.err != nil {
		err = fmt.Errorf("printing the events: %w", ps.err)
	}
	if err != nil {
		return fmt.Errorf("%s (config %s): %w", fs.Arg(0), name, err)
	}
	fmt.Fprintf(stderr, "visiond replay: %s: %d frames, %d analysed, %.1f s of video in %.1f s (%.1f frames analysed a second, %.2f x real time)\n",
		fs.Arg(0), st.Frames, st.Analysed, st.Video.Seconds(), st.Elapsed.Seconds(),
		float64(st.Analysed)/st.Elapsed.Seconds(), st.Video.Seconds()/st.Elapsed.Seconds())
	return nil
}

// replayPublisher is the publisher of a replay's events: the config's, with core NATS (a
// replay is a tool, not the site's record: it waits for no stream), to the config's external
// servers or, when the daemon runs the embedded one, to that server's listen address.
func replayPublisher(cfg *config.Config) (*sinks.Publisher, error) {
	pub := cfg.NATSPublisher()
	pub.JetStream = false
	if pub.URL == "" {
		if cfg.NATS.Listen == "" {
			return nil, fmt.Errorf("-publish: the config has neither nats.url nor nats.listen")
		}
		scheme := "nats"
		if cfg.NATS.TLS.CertFile != "" {
			scheme = "tls"
		}
		pub.URL = scheme + "://" + cfg.NATS.Listen
	}
	return pub, nil
}

// printSink prints a replay's events, one a line: as `visiond sub` prints them, or their
// JSON with the subject they would be published on. They carry the config's site and the
// events' version, as published events do, but no id (the publisher's, per daemon run).
type printSink struct {
	w            io.Writer
	prefix, site string
	raw          bool
	failed       func() // called on the first write error
	err          error  // the first write error
}

func (p *printSink) PublishDetections(ev *sinks.DetectionEvent) error {
	ev.Version, ev.Site = sinks.Version, p.site
	return p.print(sinks.DetectionSubject(p.prefix, p.site, ev.Camera), ev)
}

func (p *printSink) PublishObject(ev *sinks.ObjectEvent) error {
	ev.Version, ev.Site = sinks.Version, p.site
	return p.print(sinks.ObjectSubject(p.prefix, p.site, ev.Camera), ev)
}

func (p *printSink) PublishZone(ev *sinks.ZoneEvent) error {
	ev.Version, ev.Site = sinks.Version, p.site
	return p.print(sinks.ZoneSubject(p.prefix, p.site, ev.Camera), ev)
}

func (p *printSink) PublishLine(ev *sinks.LineEvent) error {
	ev.Version, ev.Site = sinks.Version, p.site
	return p.print(sinks.LineSubject(p.prefix, p.site, ev.Camera), ev)
}

// replayLine is a printed event with -json.
type replayLine struct {
	Subject string          `json:"subject"`
	Event   json.RawMessage `json:"event"`
}

func (p *printSink) print(subject string, ev any) error {
	if p.err != nil {
		return p.err
	}
	data, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event on %s: %w", subject, err)
	}
	if p.raw {
		line, err := json.Marshal(replayLine{Subject: subject, Event: data})
		if err != nil {
			return err
		}
		_, p.err = fmt.Fprintf(p.w, "%s\n", line)
	} else {
		_, p.err = fmt.Fprintln(p.w, formatEvent(&nats.Msg{Subject: subject, Data: data}))
	}
	if p.err != nil {
		p.failed()
	}
	return p.err
}
