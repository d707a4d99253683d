package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   debug.BuildInfo
		want Info
	}{
		{"stamped", debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "github.com/visiond/visiond", Version: "v0.0.0-20261201014018-faacf31abcde"},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "faacf31abcdef0123456789"},
				{Key: "vcs.time", Value: "2026-12-01T01:40:18Z"}, {Key: "vcs.modified", Value: "false"}}},
			Info{Version: "v0.0.0-20261201014018-faacf31abcde", Revision: "faacf31abcdef0123456789", Time: "2026-12-01T01:40:18Z", Go: "go1.26.8"}},
		{"modified", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			Info{Version: "v1.2.3+dirty", Revision: "abc", Modified: true, Go: "go1.26.8"}},
		{"no VCS (-buildvcs=false, a test binary)", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			Info{Version: "(devel)", Go: runtime.Version()}},
		{"nothing", debug.BuildInfo{}, Info{Version: "(devel)", Go: runtime.Version()}},
	} {
		got := FromBuildInfo(&tc.bi)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got := Get(); got.Go != runtime.Version() || got.Version == "" {
		t.Errorf("Get() = %+v: want this binary's Go version and a version", got)
	}
}
