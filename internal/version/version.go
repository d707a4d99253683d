// Package version describes the running build of visiond: the module version and VCS
// revision that the Go toolchain stamped into the binary, and the Go version that built it.
// `visiond version`, the visiond_build_info metric and GET /api/version report it.
package version

import (
	"runtime"
	"runtime/debug"
)

// Info is what the build says about itself.
type Info struct {
	// Version is the main module's version: a tag, a pseudo-version made from the commit
	// (v0.0.0-<time>-<revision>, with "+dirty" for a modified tree) or "(devel)" where the
	// build had no VCS information (go build -buildvcs=false, a tree outside git).
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, "" when unknown.
	Revision string `json:"revision"`
	// Time is the commit's time (RFC 3339), "" when unknown.
	Time string `json:"vcs_time,omitempty"`
	// Modified reports a build from a tree with uncommitted changes.
	Modified bool `json:"modified"`
	// Go is the Go version that built the binary.
	Go string `json:"go"`
}

// Get returns the running binary's Info.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "(devel)", Go: runtime.Version()}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo returns the Info that bi holds.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Go: bi.GoVersion}
	if in.Version == "" {
		in.Version = "(devel)" // a test binary, or a build that did not stamp it
	}
	if in.Go == "" {
		in.Go = runtime.Version()
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}
