package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/visiond/visiond/infer/worker"
	"github.com/visiond/visiond/internal/version"
)

// versionCmd prints the build's version and revision, Go's version, and the version and
// execution providers of the ONNX Runtime library that the workers would load. A library
// that cannot be loaded is reported on its line; the rest is printed all the same.
func versionCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version", "", stderr)
	path := fs.String("config", os.Getenv("VISIOND_CONFIG"),
		"config `file` whose workers.library to report (default: $VISIOND_CONFIG, else the embedded demo config)")
	library := fs.String("library", "", "ONNX Runtime `library` to report (default: the config's workers.library)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	in := version.Get()
	fmt.Fprintf(stdout, "visiond %s\n", in.Version)
	rev := in.Revision
	if rev == "" {
		rev = "unknown (built without VCS information)"
	}
	if in.Modified {
		rev += " (modified)"
	}
	if in.Time != "" {
		rev += " " + in.Time
	}
	fmt.Fprintf(stdout, "revision: %s\n", rev)
	fmt.Fprintf(stdout, "go: %s\n", in.Go)

	lib := *library
	if lib == "" {
		cfg, name, err := loadConfig(*path)
		if err != nil {
			fmt.Fprintf(stdout, "onnxruntime: unknown (%s: %v)\n", name, err)
			return nil
		}
		lib = cfg.Workers.Library
	}
	v, providers, err := worker.RuntimeInfo(lib)
	switch {
	case err != nil && v != "":
		fmt.Fprintf(stdout, "onnxruntime: %s (%s), unusable: %v\n", v, lib, err)
	case err != nil:
		fmt.Fprintf(stdout, "onnxruntime: not loaded: %v\n", err)
	default:
		fmt.Fprintf(stdout, "onnxruntime: %s (%s)\nproviders: %s\n", v, lib, strings.Join(providers, ", "))
	}
	return nil
}
