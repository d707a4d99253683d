package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/sinks/natstest"
)

// hubLink is the soak's hub: a NATS server with JetStream in this process (natstest.Hub), the
// daemon's leaf node link to it through a proxy that cuts it and restores it, and the hub's
// stream that sources the box's events.
type hubLink struct {
	dir    string
	hub    *natstest.Hub
	proxy  *natstest.Proxy
	nc     *nats.Conn
	stream jetstream.Stream
}

// startHubLink starts the hub and the proxy; the daemon links through url().
func startHubLink() (*hubLink, error) {
	dir, err := os.MkdirTemp("", "visiond-bench-hub-")
	if err != nil {
		return nil, err
	}
	l := &hubLink{dir: dir}
	if l.hub, err = natstest.NewHub(dir); err != nil {
		l.close()
		return nil, err
	}
	leaf := l.hub.LeafURL[len("nats-leaf://"):]
	if l.proxy, err = natstest.NewProxy(leaf); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// url is the daemon's nats.leaf.url: the proxy's address.
func (l *hubLink) url() string { return "nats-leaf://" + l.proxy.Addr }

// source creates the hub's stream sourcing the stream of the box of site (the daemon's
// defaults: its domain is the site). A daemon without JetStream has no stream to source.
func (l *hubLink) source(site string, jetStream bool) error {
	if !jetStream {
		return errors.New("-hub needs the daemon's JetStream (-jetstream)")
	}
	nc, err := nats.Connect(l.hub.ClientURL())
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	l.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	nc0 := config.Default().NATS
	cfg := natstest.SourceConfig("ALL", nc0.JetStreamDomain(site), nc0.StreamName(site))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l.stream, err = js.CreateStream(ctx, cfg); err != nil {
		return fmt.Errorf("hub: the stream sourcing the box's: %w", err)
	}
	return nil
}

// messages is the number of events in the hub's stream (0 before source, or on an error).
func (l *hubLink) messages() uint64 {
	if l.stream == nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := l.stream.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.Msgs
}

func (l *hubLink) close() {
	if l.nc != nil {
		l.nc.Close()
	}
	if l.proxy != nil {
		l.proxy.Close()
	}
	if l.hub != nil {
		l.hub.Close()
	}
	_ = os.RemoveAll(l.dir)
}

// fdCount counts the file descriptors of process pid; false when they cannot be read.
func fdCount(pid int) (int, bool) {
	if pid <= 0 {
		return 0, false
	}
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		return 0, false
	}
	return len(ents), true
}

// dirBytes adds up the sizes of the regular files under dir.
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
