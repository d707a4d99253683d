package pool

import (
	"fmt"
	"slices"
	"time"

	"github.com/visiond/visiond/infer"
	"github.com/visiond/visiond/internal/geom"
)

// TryDispatch hands the job to a worker with a free slot and returns true, or returns
// false at once if every worker holds Sessions*Slots jobs (or the pool is not running). It picks
// the worker with the fewest jobs in flight, so that an idle worker is preferred to a
// busy one and latency stays low while there is capacity; ties go round-robin. in writes
// the model's input, letterboxed as job.Letterbox says, into the worker's slot before
// TryDispatch returns, under the pool's lock (a copy, or a conversion from YUV).
//
// done is called exactly once with the job's result: on the goroutine that reads the
// results of the job's worker (or that ends its jobs when its process ends), one result
// after the other, in the order the worker's sessions finish them; for a job refused at
// once (a frame that does not fit the model, or that in failed to write), before
// TryDispatch returns. The pool starts
// no goroutine for a result and knows nothing of what its caller does with one: done must
// not block, and must not call the pool. It hands the result over (to a queue its owner
// drains, a channel with room for every job in flight) and returns; the worker's next
// results wait until it has.
func (p *Pool) TryDispatch(job infer.Job, in infer.Input, done func(infer.Result)) bool {
	ok, refused := p.dispatch(job, in, done)
	if refused != nil {
		done(*refused)
	}
	return ok
}

// dispatch is TryDispatch under p.mu; refused is the result of a job refused at once, for
// TryDispatch to hand over once p.mu is released.
func (p *Pool) dispatch(job infer.Job, in infer.Input, done func(infer.Result)) (ok bool, refused *infer.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.started {
		return false, nil
	}
	w := p.pick()
	if w == nil {
		return false, nil
	}
	p.next = (w.index + 1) % len(p.workers)
	slot := freeSlot(w.inflight, p.cfg.workerSlots())
	if err := p.writeInput(w.mem[slot*p.cfg.SlotBytes:], in, job.Letterbox); err != nil {
		res := infer.Result{Job: job, Worker: w.index, Err: fmt.Errorf("%w: camera %q seq %d: %v", infer.ErrJobRejected, job.Camera, job.Seq, err)}
		return true, &res
	}
	p.nextID++
	pr := w.pr
	w.inflight = append(w.inflight, &pending{id: p.nextID, slot: slot, job: job, done: done, started: time.Now()})
	p.startClocks(w)
	w.state = infer.WorkerBusy
	err := infer.WriteMessage(pr.jobsW, infer.Message{Type: infer.MsgJob, Job: &infer.JobMsg{
		ID: p.nextID, Slot: slot, Camera: job.Camera, Seq: job.Seq, Letterbox: job.Letterbox,
		ShrinkArenas: w.shrink,
	}})
	w.shrink = false
	if err != nil {
		// The worker is gone or going; its supervisor reports its jobs as lost.
		pr.note(fmt.Errorf("write job: %w", err))
		pr.kill()
	}
	return true, nil
}

// startClocks starts the JobTimeout clock of the jobs that are now among the Sessions
// oldest of w and sets the read deadline of its results to the oldest job's (Config.
// JobTimeout); none when w holds no job. Clocks start in dispatch order, so the oldest job
// has the earliest. Called with p.mu held, after each dispatch and result.
func (p *Pool) startClocks(w *worker) {
	if len(w.inflight) == 0 {
		w.pr.resR.SetReadDeadline(time.Time{}) // idle: the next dispatch sets its own
		return
	}
	now := time.Now()
	for _, pd := range w.inflight[:min(len(w.inflight), p.cfg.Sessions)] {
		if pd.clock.IsZero() {
			pd.clock = now
		}
	}
	w.pr.resR.SetReadDeadline(w.inflight[0].clock.Add(p.cfg.JobTimeout))
}

// Offer is what a pool offers the next job: the worker TryDispatch would pick now.
type Offer struct {
	InFlight int           // that worker's jobs in flight
	Slots    int           // its slots (Config.Sessions*Config.Slots)
	Sessions int           // its sessions, running jobs at once (Config.Sessions)
	Run      time.Duration // the pool's moving average of its jobs' session runs; 0 before one ran
}

// Offer returns what the pool offers the next job; ok is false if no worker has a free
// slot (TryDispatch would refuse it).
func (p *Pool) Offer() (o Offer, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.started {
		return Offer{}, false
	}
	w := p.pick()
	if w == nil {
		return Offer{}, false
	}
	return Offer{InFlight: len(w.inflight), Slots: p.cfg.workerSlots(), Sessions: p.cfg.Sessions, Run: p.runEst}, true
}

// DispatchAcross hands the job to the pool, of pools, expected to answer it first, and
// returns false if no pool has a free slot; done is as for TryDispatch: called once, and
// must not block.
//
// A worker of s sessions runs s of its jobs at once, so a job given to a worker holding n
// jobs is expected back after ceil((n+1)/s) runs of its pool (Offer.Run): that wait decides, then the
// load (n over slots), then the order of pools. So an idle slow device does not take a
// job that a fast one would answer sooner even behind the job it holds, a slow pool
// listed first does not get the jobs a faster one would answer sooner, and pools of
// about equal speed share the jobs by load, as the workers of one pool do. A pool not
// measured yet is taken to be as fast as the fastest measured one: it gets jobs by load
// until its first runs say what it is worth (before any run, it is the least-loaded
// worker across pools, the first pool on a tie).
func DispatchAcross(pools []*Pool, job infer.Job, in infer.Input, done func(infer.Result)) bool {
	type offer struct {
		Offer
		ok bool
	}
	var buf [8]offer
	offers := buf[:0]
	var fastest time.Duration
	for _, p := range pools {
		o, ok := p.Offer()
		offers = append(offers, offer{o, ok})
		if ok && o.Run > 0 && (fastest == 0 || o.Run < fastest) {
			fastest = o.Run
		}
	}
	best := -1
	var bestWait time.Duration
	var bestLoad float64
	for i, o := range offers {
		if !o.ok {
			continue
		}
		run := o.Run
		if run == 0 {
			run = fastest
		}
		wait, load := o.wait(run), float64(o.InFlight)/float64(o.Slots)
		if best < 0 || wait < bestWait || wait == bestWait && load < bestLoad {
			best, bestWait, bestLoad = i, wait, load
		}
	}
	if best < 0 {
		return false
	}
	if pools[best].TryDispatch(job, in, done) {
		return true
	}
	for i, p := range pools { // its worker was lost since its offer: any other will do
		if i != best && p.TryDispatch(job, in, done) {
			return true
		}
	}
	return false
}

// wait is how long a job given to the offering worker is expected to take, its runs taking
// run each: its sessions run its InFlight jobs and the new one Sessions at a time, so the
// new one ends after ceil((InFlight+1)/Sessions) runs.
func (o Offer) wait(run time.Duration) time.Duration {
	s := max(o.Sessions, 1)
	return time.Duration((o.InFlight+s)/s) * run
}

// runEstWeight is the weight of a new run in Pool.runEst: about the last 8 runs count.
const runEstWeight = 8

// pick returns the worker the next job goes to, or nil if none has a free slot: the one
// with the fewest jobs in flight, ties going round-robin. Called with p.mu held.
func (p *Pool) pick() *worker {
	var w *worker
	for k := range p.workers {
		c := p.workers[(p.next+k)%len(p.workers)]
		if p.accepts(c) && (w == nil || len(c.inflight) < len(w.inflight)) {
			w = c
		}
	}
	return w
}

// accepts says whether w can take a job now: its process serves, is not to be recycled
// and has a free slot. Called with p.mu held.
func (p *Pool) accepts(w *worker) bool {
	return (w.state == infer.WorkerIdle || w.state == infer.WorkerBusy) && w.pr != nil &&
		w.recycle == "" && !w.recycling && len(w.inflight) < p.cfg.workerSlots()
}

// freeSlot returns a slot no job in flight uses. The daemon writes a slot only after the
// job on it has been answered (the protocol, infer/protocol.go), so the worker never reads a frame being
// overwritten. There is one: len(inflight) < slots.
func freeSlot(inflight []*pending, slots int) int {
	for s := range slots {
		if !slices.ContainsFunc(inflight, func(pd *pending) bool { return pd.slot == s }) {
			return s
		}
	}
	panic("infer: no free slot") // accepts checked len(inflight) < slots
}

// writeInput checks a frame's letterbox against the model's input and writes the frame into
// slot, the start of a worker's slot: the model's RGB24 input.
func (p *Pool) writeInput(slot []byte, in infer.Input, lb geom.Letterbox) error {
	m := p.model
	if err := lb.Check(m.InputW, m.InputH); err != nil {
		return err
	}
	return in.WriteRGB(slot[:m.InputW*m.InputH*3])
}
