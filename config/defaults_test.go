package config

import (
	"testing"

	"github.com/visiond/visiond/infer"
)

func TestPoolDefaults(t *testing.T) {
	for _, c := range []struct {
		provider            infer.Provider
		cpus, count, thread int
	}{
		{"cpu", 1, 1, 1},
		{"cpu", 2, 2, 1},
		{"cpu", 6, 6, 1},
		{"cpu", 8, 8, 1},
		{"cpu", 64, 8, 1},
		{"cuda", 16, 1, 0},
		{"tensorrt", 16, 1, 0},
	} {
		count, threads := poolDefaults(c.provider, c.cpus)
		if count != c.count || threads != c.thread {
			t.Errorf("poolDefaults(%s, %d) = %d, %d; want %d, %d", c.provider, c.cpus, count, threads, c.count, c.thread)
		}
	}
	if p := defaultPool(6); p != (WorkerPool{Count: 6, Provider: "cpu", Threads: 1}) {
		t.Errorf("defaultPool(6) = %+v", p)
	}
}
