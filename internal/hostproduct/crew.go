package hostproduct

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// crewSpin is the longest a crew member waits for its next job awake (yielding its core to any
// other goroutine that wants it) before it sleeps. The parts of a Qwen3-0.6B decode step between
// two product runs take 0.03–0.06 ms, attention 0.5 ms at depth 0 and milliseconds at depth; a
// goroutine started for each run, its thread asleep, began 40–65 µs after the run did on a
// 2-core Xeon VM, 5.2–7.4 ms of a 95–120 ms step (113 runs). A member waiting awake holds its
// core, which the wrapped backend's own goroutines then cannot use (compute shares a product
// out over its cores too): the executable tells the crew to wait awake only where the parts
// before its next step on the crew (a run of products or of attentions) took at most crewSpin
// the last time (executable.gaps, executable.spinAfter).
const crewSpin = 250 * time.Microsecond

// crew is the goroutines that share a product run with its caller, kept from one run to the
// next so that they start at once. Only one run uses the crew at a time; a run that finds it
// busy starts goroutines of its own.
type crew struct {
	members int
	busy    sync.Mutex // held by the run using the crew
	mu      sync.Mutex // guards job, gen and stopped for the sleepers
	wake    *sync.Cond
	job     func(member int)
	spin    time.Duration // how long the members wait awake after job
	gen     atomic.Uint64 // bumped for each job and at stop
	left    atomic.Int64  // the members still at the job
	stopped bool
	done    sync.WaitGroup
}

// newCrew starts members goroutines.
func newCrew(members int) *crew {
	c := &crew{members: members}
	c.wake = sync.NewCond(&c.mu)
	for m := range members {
		go c.member(m)
	}
	return c
}

// member runs each job given to the crew until stop.
func (c *crew) member(m int) {
	var seen uint64
	var spin time.Duration
	for {
		next := c.gen.Load()
		for since := time.Now(); next == seen; next = c.gen.Load() {
			if time.Since(since) < spin {
				runtime.Gosched()
				continue
			}
			c.mu.Lock()
			for c.gen.Load() == seen {
				c.wake.Wait()
			}
			c.mu.Unlock()
		}
		seen = next
		c.mu.Lock()
		job, stopped := c.job, c.stopped
		spin = c.spin
		c.mu.Unlock()
		if stopped {
			return
		}
		job(m)
		c.left.Add(-1)
		c.done.Done()
	}
}

// run runs job(0) … job(members-1) on the crew and own on the caller's goroutine, and waits for
// them all (awake for up to crewSpin, then asleep); then the members wait for the next job awake
// for up to spin before they sleep. It returns false, running nothing, when another run holds the
// crew or it is stopped (or nil: a backend finalized before its first product run).
func (c *crew) run(job func(member int), own func(), spin time.Duration) bool {
	if c == nil || !c.busy.TryLock() {
		return false
	}
	defer c.busy.Unlock()
	if c.stopped {
		return false
	}
	c.done.Add(c.members)
	c.left.Store(int64(c.members))
	c.mu.Lock()
	c.job, c.spin = job, spin
	c.gen.Add(1)
	c.wake.Broadcast()
	c.mu.Unlock()
	own()
	// Waiting for the members awake: one that finishes its last chunk a few microseconds after
	// the caller then hands the run back at once, where the caller asleep in the WaitGroup took
	// a thread's wake-up. Awake, a Qwen3-0.6B decode step ran 1.10–1.15× (bfloat16) and 1.04×
	// (float32) the tokens/s on a 2-core AMD EPYC (Zen 4), alternated in one process: a
	// bfloat16 step's products took 3.1–3.7 ms less, about 30 µs each of its 112 runs.
	for since := time.Now(); c.left.Load() > 0 && time.Since(since) < crewSpin; {
		runtime.Gosched()
	}
	c.done.Wait()
	return true
}

// stop ends the crew's goroutines once they finish their job.
func (c *crew) stop() {
	c.busy.Lock()
	defer c.busy.Unlock()
	c.mu.Lock()
	c.stopped = true
	c.gen.Add(1)
	c.wake.Broadcast()
	c.mu.Unlock()
}

// shareOut runs work(0) on the caller and work(1) … work(workers−1) on members of b's crew, and
// waits for them all (spin as crew.run); where the crew is busy, on goroutines of their own.
// Each work takes its share of a job from a counter of the job's, so a member that starts late
// takes less.
func (b *Backend) shareOut(workers int, work func(worker int), spin time.Duration) {
	if workers <= 1 {
		work(0)
		return
	}
	if b.crew().run(func(m int) {
		if m < workers-1 {
			work(m + 1)
		}
	}, func() { work(0) }, spin) {
		return
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { work(w) })
	}
	work(0)
	wg.Wait()
}
