package config_test

import (
	"strings"
	"testing"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
)

// workers.pools[].sessions reaches the pool's config as written; unset, it is 0 and the
// pool takes the provider's default (infer.DefaultSessions); out of range, the error names
// the field and its line.
func TestPoolSessions(t *testing.T) {
	cfg, err := config.Parse([]byte(`
workers:
  pools:
    - {provider: cuda, sessions: 8, cuda: {cudnn_conv_max_workspace: true}}
    - {provider: tensorrt}
    - {provider: cpu}
cameras: []
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		sessions, def int
		maxWS         bool
	}{{8, 4, true}, {0, 4, false}, {0, 1, false}}
	for i, w := range want {
		pc := cfg.Workers.PoolConfig(i)
		if pc.Sessions != w.sessions || pc.CUDA.CudnnConvMaxWorkspace != w.maxWS {
			t.Errorf("pool %d: sessions %d, cudnn_conv_max_workspace %v; want %d, %v", i, pc.Sessions, pc.CUDA.CudnnConvMaxWorkspace, w.sessions, w.maxWS)
		}
		if d := infer.DefaultSessions(pc.Provider); d != w.def {
			t.Errorf("pool %d: default sessions of %s %d, want %d", i, pc.Provider, d, w.def)
		}
	}
	for _, tc := range []struct{ doc, want string }{
		{"workers: {pools: [{provider: cuda, sessions: -1}]}\ncameras: []\n", "line 1: workers.pools[0].sessions: must be in 0..64 (0 = the provider's default), got -1"},
		{"workers:\n  pools:\n    - provider: cuda\n      sessions: 65\ncameras: []\n", "line 4: workers.pools[0].sessions: must be in 0..64 (0 = the provider's default), got 65"},
		{"workers: {pools: [{provider: cuda, sessions: many}]}\ncameras: []\n", "sessions"},
	} {
		_, err := config.Parse([]byte(tc.doc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// workers.pools[].cuda.device_io and graph reach the pool's options; graph on a provider
// other than cuda is an error naming the field and its line.
func TestPoolCUDAGraph(t *testing.T) {
	cfg, err := config.Parse([]byte("workers:\n  pools:\n    - {provider: cuda, cuda: {graph: true}}\n    - {provider: tensorrt, cuda: {device_io: true}}\ncameras: []\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.Workers.PoolConfig(0).CUDA; !c.Graph {
		t.Errorf("pool 0: %+v, want graph", c)
	}
	if c := cfg.Workers.PoolConfig(1).CUDA; !c.DeviceIO || c.Graph {
		t.Errorf("pool 1: %+v, want device_io only", c)
	}
	_, err = config.Parse([]byte("workers: {pools: [{provider: tensorrt, cuda: {graph: true}}]}\ncameras: []\n"))
	if want := "line 1: workers.pools[0].cuda.graph: needs provider cuda"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("graph on tensorrt: err %v, want one containing %q", err, want)
	}
}
