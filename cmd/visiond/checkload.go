package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer/pool"
)

// checkLoad is `visiond check -load`: it starts one worker process of each pool of cfg, as
// the daemon would (model, library, provider and its options), reports what each loaded
// (input size, classes, the provider it runs on, a fallback included) and stops them. A
// worker that cannot start (a model ONNX Runtime cannot load, a provider not available)
// fails the check with its error, and so does a class named by the analytics settings
// (zones, lines, objects) that the loaded model does not have.
func checkLoad(cfg *config.Config, stdout, stderr io.Writer) error {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for i, pc := range cfg.Workers.Pools {
		opts := cfg.Workers.PoolConfig(i)
		opts.Count = 1
		opts.GPUMemoryCommand = []string{} // no memory sampling for a check
		opts.Logger = log.With("pool", i)
		p := pool.New(opts)
		start := time.Now()
		err := p.Start(context.Background())
		if err != nil {
			p.Close()
			return fmt.Errorf("workers.pools[%d] (%s): %w", i, pc.Provider, err)
		}
		m := p.Model()
		p.Close()
		fmt.Fprintf(stdout, "workers.pools[%d] (%s): loaded %s in %.1f s: input %dx%d, provider %s, %d classes: %s\n",
			i, pc.Provider, m.Path, time.Since(start).Seconds(), m.InputW, m.InputH, m.Provider, len(m.Classes), strings.Join(m.Classes, ", "))
		if err := cfg.CheckClasses(m.Classes); err != nil { // the analytics settings' class names
			return fmt.Errorf("workers.pools[%d] (%s): the analytics settings name classes the model does not have:\n%w", i, pc.Provider, err)
		}
	}
	return nil
}
