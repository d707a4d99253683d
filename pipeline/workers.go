package pipeline

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/visiond/visiond/config"
	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/infer/pool"
)

// workerPools are the inference worker pools, one per configured device group. A job goes
// to the worker, across pools, expected to answer it first (pool.DispatchAcross): from
// its jobs in flight (each worker takes up to two, to keep its device busy) and its
// pool's measured run time, so that a fast device keeps the jobs a slow one would answer
// later, and pools of about equal speed share them by load. Ties go to the pool listed
// first: list faster devices first.
type workerPools struct {
	pools []*pool.Pool
	name  string // the model's name in events, set by start
}

// start starts every pool; all must load a model of the same input size.
func (w *workerPools) start(ctx context.Context, cfg config.Workers, command, env []string, log *slog.Logger) error {
	for i, pc := range cfg.Pools {
		pcfg := cfg.PoolConfig(i)
		pcfg.Command, pcfg.Env, pcfg.Logger = command, env, log.With("pool", i)
		p := pool.New(pcfg)
		w.pools = append(w.pools, p)
		if err := p.Start(ctx); err != nil {
			return fmt.Errorf("workers.pools[%d] (%s): %w", i, pc.Provider, err)
		}
		if m, first := p.Model(), w.pools[0].Model(); m.InputW != first.InputW || m.InputH != first.InputH {
			return fmt.Errorf("workers.pools[%d]: model input %dx%d differs from pool 0's %dx%d", i, m.InputW, m.InputH, first.InputW, first.InputH)
		}
	}
	if len(w.pools) > 0 {
		w.name = modelName(w.model())
	}
	return nil
}

// model describes the model the workers loaded.
func (w *workerPools) model() infer.ModelInfo { return w.pools[0].Model() }

// modelName is the model's name in events: its file name without the extension.
func (w *workerPools) modelName() string { return w.name }

// TryDispatch hands the job to the worker, across pools, expected to answer it first, or
// returns false if every worker is full.
func (w *workerPools) TryDispatch(job infer.Job, in infer.Input, done func(infer.Result)) bool {
	return pool.DispatchAcross(w.pools, job, in, done)
}

// sessions is the number of sessions of every pool's workers: the jobs they run at once.
func (w *workerPools) sessions() int {
	n := 0
	for _, p := range w.pools {
		n += p.Sessions()
	}
	return n
}

// workers reports every worker of every pool, in pool order.
func (w *workerPools) workers() []infer.WorkerStatus {
	var out []infer.WorkerStatus
	for _, p := range w.pools {
		out = append(out, p.Workers()...)
	}
	return out
}

// shrinkArenas makes every worker release its memory arenas before its next job: for when
// the camera set or a resolution changes, never per frame.
func (w *workerPools) shrinkArenas() {
	if w == nil {
		return
	}
	for _, p := range w.pools {
		p.ShrinkArenas()
	}
}

// close stops every pool and waits for them.
func (w *workerPools) close() {
	for _, p := range w.pools {
		p.Close()
	}
}
