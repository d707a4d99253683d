// Command visiond watches RTSP cameras, runs a YOLO-family detector on their frames in worker
// processes and publishes every detection to NATS.
//
//	visiond run    [-config FILE]   run the daemon (the embedded demo config without -config)
//	visiond check  [-config FILE]   validate a config and exit non-zero with its errors
//	visiond sub    [-nats URL]      print the events published on NATS
//	visiond worker ...              an inference worker process (started by the daemon)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/configs"
	"github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/pipeline"
	"github.com/visiond/visiond/sources/capture"
	"github.com/visiond/visiond/sources/samplecam"
)

const usage = `usage: visiond <command> [flags]

commands:
  run     run the daemon (without -config: the embedded demo with a built-in sample camera)
  check   validate a config file and exit non-zero with its errors
  sub     print the detection events published on NATS
  worker  an inference worker process (started by the daemon, not by hand)
`

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

func cli(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = runCmd(args[1:], stdout, stderr)
	case "check":
		err = checkCmd(args[1:], stdout)
	case "sub":
		err = subCmd(args[1:], stdout)
	case "capture":
		err = capture.Main(args[1:])
	case "worker":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		defer stop()
		err = worker.Main(ctx, args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "visiond: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "visiond %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

// loadConfig reads the file at path, or the embedded demo config when path is empty.
func loadConfig(path string) (*config.Config, string, error) {
	if path == "" {
		cfg, err := config.Parse(configs.Default)
		return cfg, "embedded default config", err
	}
	cfg, err := config.Load(path)
	return cfg, path, err
}

func checkCmd(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("config", "", "config file to validate (default: the embedded demo config)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("at most one config file, got %d", fs.NArg())
	}
	if fs.NArg() == 1 {
		*path = fs.Arg(0)
	}
	cfg, name, err := loadConfig(*path)
	if err != nil {
		return err
	}
	enabled := 0
	for _, c := range cfg.Cameras {
		if c.Enabled {
			enabled++
		}
	}
	fmt.Fprintf(stdout, "%s: ok (%d cameras, %d enabled)\n", name, len(cfg.Cameras), enabled)
	return nil
}

func runCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", os.Getenv("VISIOND_CONFIG"), "config file (default: $VISIOND_CONFIG, else the embedded demo config)")
	print := fs.Bool("print", false, "also print every published event on stdout, as `visiond sub` does")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, name, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	log.Info("starting", "config", name)

	// Signals first, so one that arrives during a slow start is not lost.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	if cfg.Sample.Enabled { // the demo's camera, up before the daemon opens it
		sample, err := startSample(cfg.Sample, log)
		if err != nil {
			return err
		}
		defer sample.Close()
	}

	// systemd (Type=notify): ready once started and after each reload; the watchdog is fed
	// while the slicer goes round.
	notify := newNotifier(log.With("component", "systemd"))
	d := &pipeline.Daemon{
		Config:     cfg,
		ConfigPath: *path, // watched and reloaded by the daemon
		Logger:     log,
		Reloading:  notify.Reloading,
		Reloaded:   func(pipeline.ReloadResult, error) { notify.Ready() },
	}
	if err := d.Start(); err != nil {
		return err
	}
	notify.Ready()
	wdCtx, wdStop := context.WithCancel(context.Background())
	wdDone := make(chan struct{})
	go func() {
		defer close(wdDone)
		notify.watchdog(wdCtx, d.Healthy)
	}()
	defer func() { wdStop(); <-wdDone }()
	if *print {
		ctx, cancel := context.WithCancel(context.Background())
		printed := make(chan error, 1)
		go func() { printed <- printEvents(ctx, d.NATSURL(), cfg.NATS.SubjectPrefix+".>", false, 0, stdout) }()
		defer func() { cancel(); <-printed }()
	}

	// Until SIGTERM or SIGINT; SIGHUP reloads the config file (the daemon reloads it when it
	// changes, too).
	sig := <-sigs
	for sig == syscall.SIGHUP {
		d.ReloadNow("SIGHUP")
		sig = <-sigs
	}
	log.Info("stopping", "signal", sig.String())
	notify.Stopping()
	wdStop()
	<-wdDone
	stopped := make(chan struct{})
	go func() {
		d.Close()
		close(stopped)
	}()
	for {
		select {
		case <-stopped:
			log.Info("stopped")
			return nil
		case sig := <-sigs:
			if sig != syscall.SIGHUP {
				return fmt.Errorf("second signal (%s): exiting without a clean stop", sig)
			}
		}
	}
}

// sampleCamera is the path the built-in sample camera is served on.
const sampleCamera = "sample"

// startSample serves the built-in sample camera (the sample section): the demo's file over
// RTSP on loopback, at rtsp://<listen>/sample.
func startSample(c config.Sample, log *slog.Logger) (*samplecam.Server, error) {
	s := &samplecam.Server{Listen: c.Listen, Streams: map[string]string{sampleCamera: c.File}, Logger: log}
	if err := s.Start(); err != nil {
		return nil, fmt.Errorf("sample camera: %w", err)
	}
	return s, nil
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
