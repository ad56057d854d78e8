package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// breaker stops calls to a Redis that keeps failing. After threshold
// consecutive failures it opens for cooldown; then one call at a time may
// probe, and the first success closes it again. While closed and healthy
// it costs two atomic loads per call.
type breaker struct {
	threshold int32
	cooldown  time.Duration
	now       func() time.Time
	// onChange is called (outside the lock) when it opens or closes.
	onChange func(open bool)

	open     atomic.Bool
	failures atomic.Int32

	mu      sync.Mutex
	until   time.Time // while open, no probe before this
	probing bool
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: int32(threshold), cooldown: cooldown, now: time.Now, onChange: func(bool) {}}
}

// allow reports whether a call may go to Redis now. A true answer while
// open makes the caller the probe; it must report the result.
func (b *breaker) allow() bool {
	if !b.open.Load() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open.Load() {
		return true
	}
	if b.probing || b.now().Before(b.until) {
		return false
	}
	b.probing = true
	return true
}

// done records the result of a call that allow let through.
func (b *breaker) done(err error) {
	if err == nil {
		if b.failures.Load() != 0 {
			b.failures.Store(0)
		}
		if !b.open.Load() {
			return
		}
		b.mu.Lock()
		changed := b.open.Load()
		b.open.Store(false)
		b.probing = false
		b.mu.Unlock()
		if changed {
			b.onChange(false)
		}
		return
	}
	n := b.failures.Add(1)
	b.mu.Lock()
	changed := false
	if b.open.Load() {
		b.probing = false
		b.until = b.now().Add(b.cooldown)
	} else if n >= b.threshold {
		b.open.Store(true)
		b.until = b.now().Add(b.cooldown)
		changed = true
	}
	b.mu.Unlock()
	if changed {
		b.onChange(true)
	}
}

// abandon ends a call that allow let through without a verdict on Redis
// (the caller went away first).
func (b *breaker) abandon() {
	if !b.open.Load() {
		return
	}
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// isOpen reports whether calls are currently being kept from Redis.
func (b *breaker) isOpen() bool { return b.open.Load() }
