// Command visiond watches RTSP cameras, runs a YOLO-family detector on their frames in worker
// processes and publishes every detection to NATS.
//
//	visiond run    [-config FILE]   run the daemon (the embedded demo config without -config)
//	visiond check  [-config FILE]   validate a config and exit non-zero with its errors
//	visiond sub    [-nats URL]      print the events published on NATS
//	visiond clip   ls|get ...       list or fetch the stored event clips
//	visiond replay [flags] VIDEO    analyse a recording as a camera of the config, print its events
//	visiond version                 print the build's version, Go's, ONNX Runtime's and its providers
//	visiond model inspect|fp16 ...  inspect or convert an ONNX model (docs/models.md)
//	visiond worker ...              an inference worker process (started by the daemon)
//	visiond capture                 a gstreamer camera's capture process (started by the daemon)
//
// Exit status: 0 done, 1 failed, 2 a usage error (unknown command or flag, bad arguments).
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
	"runtime/debug"
	"syscall"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/configs"
	"github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/internal/cmem"
	"github.com/visiond/visiond/pipeline"
	"github.com/visiond/visiond/sources/capture"
	"github.com/visiond/visiond/sources/samplecam"
)

const usage = `usage: visiond <command> [flags]

commands:
  run     run the daemon (without -config: the embedded demo with a built-in sample camera)
  check   validate a config file and exit non-zero with its errors
  sub     print the detection events published on NATS
  clip    list (clip ls) or fetch (clip get NAME) the stored event clips, from the box or a hub
  replay  analyse a video file as a camera of the config would be, as fast as the workers go,
          and print its events (or -publish them): tune zones and lines on a recording
  version print the version of visiond, Go and ONNX Runtime (also: --version)
  model   inspect or convert an ONNX model: visiond model inspect FILE, visiond model fp16 ...
  worker  an inference worker process (started by the daemon, not by hand)
  capture a gstreamer camera's capture process (started by the daemon, not by hand)

"visiond <command> -h" lists a command's flags. Exit status: 0 done, 1 failed, 2 usage error.
`

// usageError is a mistake in the command line: cli exits with status 2, after printing it
// unless the flag package has printed it already (printed).
type usageError struct {
	err     error
	printed bool
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError.
func usagef(format string, args ...any) error { return usageError{err: fmt.Errorf(format, args...)} }

// newFlagSet returns a FlagSet for a command that writes its usage and parse errors to stderr.
func newFlagSet(name, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: visiond %s [flags]%s\n\nflags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args into fs; an error (flag.ErrHelp for -h) is a usageError. The flag
// package has already printed the error and the command's usage.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageError{err: err, printed: true}
	}
	return nil
}

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
		err = checkCmd(args[1:], stdout, stderr)
	case "sub":
		err = subCmd(args[1:], stdout, stderr)
	case "clip":
		err = clipCmd(args[1:], stdout, stderr)
	case "replay":
		err = replayCmd(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		err = versionCmd(args[1:], stdout, stderr)
	case "model":
		err = modelCmd(args[1:], stdout, stderr)
	case "capture":
		err = capture.Main(args[1:])
	case "worker":
		worker.IgnoreStopSignals() // the daemon's to act on: it ends the worker's job stream
		err = worker.Main(context.Background(), args[1:])
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
	var ue usageError
	if errors.As(err, &ue) {
		if !ue.printed {
			fmt.Fprintf(stderr, "visiond %s: %v\n", args[0], err)
		}
		return 2
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

func checkCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("check", " [FILE]", stderr)
	path := fs.String("config", "", "config `file` to validate (default: the embedded demo config)")
	load := fs.Bool("load", false, "also load the model in one worker per pool and report its input size, classes and provider,\nand open each enabled camera (kinds rtsp and file) to report its keyframe interval")
	probe := fs.Duration("probe", DefaultProbe, "with -load: how long each camera's stream is watched (0: the cameras are not opened)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usagef("at most one config file, got %d", fs.NArg())
	}
	if fs.NArg() == 1 {
		*path = fs.Arg(0)
	}
	cfg, name, err := loadConfig(*path)
	if err != nil {
		return err
	}
	if err := cfg.CheckFiles(); err != nil { // the model, library, TLS files...: what run would fail on
		return fmt.Errorf("%s: %w", name, err)
	}
	if *load {
		if err := checkLoad(cfg, stdout, stderr); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if *probe > 0 {
			checkCameras(cfg, stdout, *probe)
		}
	}
	enabled := 0
	for _, c := range cfg.Cameras {
		if c.Enabled {
			enabled++
		}
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(stdout, "%s: warning: %s\n", name, w)
	}
	fmt.Fprintf(stdout, "%s: ok (%d cameras, %d enabled)\n", name, len(cfg.Cameras), enabled)
	return nil
}

func runCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", "", stderr)
	path := fs.String("config", os.Getenv("VISIOND_CONFIG"), "config `file` (default: $VISIOND_CONFIG, else the embedded demo config)")
	// No back quotes in this text: the flag package would take them for the argument's name.
	print := fs.Bool("print", false, "also print every published event on stdout, as the sub command does")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (the config file goes after -config)", fs.Arg(0))
	}
	cfg, name, err := loadConfig(*path)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	log.Info("starting", "config", name, "gogc", tuneGC(os.Getenv))
	if !cmem.Tune() {
		log.Warn("the C allocator refused its settings; decoders' memory may be held after they close")
	}

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
	first, firstAt := sig, time.Now()
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
			since := time.Since(firstAt)
			switch {
			case sig == syscall.SIGHUP:
			case cutsStopShort(first, sig, since):
				return fmt.Errorf("second signal (%s, %s after %s): exiting without a clean stop", sig, since.Round(time.Millisecond), first)
			default:
				log.Info("signal repeated within the repeat window: the clean stop goes on", "signal", sig.String(),
					"after", since.Round(time.Millisecond), "window", signalRepeatWindow)
			}
		}
	}
}

// signalRepeatWindow is how long after the first stop signal another SIGTERM (or a SIGINT
// after a SIGTERM) counts as the same request. GNU timeout, for one, sends SIGTERM to the
// daemon and then to its whole process group, so the daemon sees two within microseconds; a
// service manager may repeat a stop, too.
const signalRepeatWindow = 2 * time.Second

// cutsStopShort reports whether sig, received since after first (the signal that began the
// clean stop), ends the process without finishing the stop: a second SIGINT does at once (a
// person pressing Ctrl-C again), any other stop signal only once signalRepeatWindow has
// passed.
func cutsStopShort(first, sig os.Signal, since time.Duration) bool {
	if first == syscall.SIGINT && sig == syscall.SIGINT {
		return true
	}
	return since >= signalRepeatWindow
}

// startSample serves the built-in sample camera (the sample section): the demo's file over
// RTSP on loopback, at rtsp://<listen>/sample.
func startSample(c config.Sample, log *slog.Logger) (*samplecam.Server, error) {
	s := &samplecam.Server{Listen: c.Listen, Streams: map[string]string{samplecam.Path: c.File}, Logger: log}
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

// defaultGOGC is the Go collector's GOGC for `visiond run`, where the environment sets none:
// the heap may grow by half its live part between collections, rather than Go's default of
// all of it. The daemon's live heap is mostly buffers (the NATS server's stores' block caches,
// access units, RTSP reads), cheap to mark; on the 2-CPU box, 16 cameras' daemon held 29 MiB
// less (1.5 MiB a camera) with the same frames analysed (BENCHMARKS.md, memory).
const defaultGOGC = 50

// tuneGC sets GOGC to defaultGOGC unless getenv("GOGC") sets it (the runtime has read that
// itself), and returns the GOGC in effect.
func tuneGC(getenv func(string) string) int {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGOGC)
	}
	return pipeline.GCPercent()
}
