package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// breaker stops calls to a Redis that keeps failing. After threshold
// consecutive failures it opens, and a goroutine of its own then probes
// Redis every cooldown until Redis answers, whether or not requests
// arrive. No request is ever the probe: had one been, the others of its
// burst would be decided in process while it was in flight, and Redis
// would then decide more in the same window, up to twice the limit in all.
// While closed and healthy it costs two atomic loads per call.
//
// The gate orders decisions made in process against the closing: they
// hold it for reading, and the breaker closes holding it for writing,
// after handing the in-process counts over to Redis (see handOver). So
// once it is closed, no request is decided in process for a window that
// Redis decides, and Redis knows every unit admitted meanwhile.
type breaker struct {
	threshold int32
	cooldown  time.Duration
	timeout   time.Duration
	// ping asks whether Redis answers; handOver gives it what was decided
	// without it. Both are called by the prober only.
	ping     func(context.Context) error
	handOver func(context.Context) error
	// onChange is called when it opens or closes.
	onChange func(open bool)

	open     atomic.Bool
	failures atomic.Int32
	gate     sync.RWMutex

	mu      sync.Mutex
	stop    chan struct{} // closed by close: no more probing
	stopped bool
	probers sync.WaitGroup
}

func newBreaker(threshold int, cooldown, timeout time.Duration) *breaker {
	nop := func(context.Context) error { return nil }
	return &breaker{
		threshold: int32(threshold), cooldown: cooldown, timeout: timeout,
		ping: nop, handOver: nop, onChange: func(bool) {},
		stop: make(chan struct{}),
	}
}

// allow reports whether a call may go to Redis now.
func (b *breaker) allow() bool { return !b.open.Load() }

// done records the result of a call that allow let through. A success
// while open does not close the breaker: only the prober does, once it has
// handed over what was decided in process.
func (b *breaker) done(err error) {
	if err == nil {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		return
	}
	if b.failures.Add(1) < b.threshold || b.open.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open.Load() {
		return
	}
	b.open.Store(true)
	b.onChange(true)
	if !b.stopped { // after close, it stays open
		b.probers.Add(1)
		go b.probe()
	}
}

// probe pings Redis every cooldown while the breaker is open, and closes
// it at the first answer whose hand-over succeeds.
func (b *breaker) probe() {
	defer b.probers.Done()
	t := time.NewTicker(b.cooldown)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		if b.tryClose() {
			return
		}
	}
}

// tryClose closes the breaker if Redis answers and takes the hand-over.
// Requests wait at the gate while the hand-over runs: one round trip per
// batch of keys decided in process, bounded by the Redis timeout each.
func (b *breaker) tryClose() bool {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	err := b.ping(ctx)
	cancel()
	if err != nil {
		return false
	}
	b.gate.Lock()
	err = b.handOver(context.Background())
	if err == nil {
		b.failures.Store(0)
		b.open.Store(false)
	}
	b.gate.Unlock()
	if err != nil {
		return false
	}
	b.onChange(false)
	return true
}

// inProcess runs decide, a decision made without Redis, unless the
// breaker has closed since the caller found it open (open true): then it
// reports false and Redis must decide instead. A caller whose own Redis
// call failed (open false) decides in process whatever the state.
func (b *breaker) inProcess(open bool, decide func()) bool {
	b.gate.RLock()
	defer b.gate.RUnlock()
	if open && !b.open.Load() {
		return false
	}
	decide()
	return true
}

// close stops probing for good and waits for the prober to end; the
// breaker then stays as it is.
func (b *breaker) close() {
	b.mu.Lock()
	if !b.stopped {
		b.stopped = true
		close(b.stop)
	}
	b.mu.Unlock()
	b.probers.Wait()
}

// isOpen reports whether calls are currently being kept from Redis.
func (b *breaker) isOpen() bool { return b.open.Load() }
