package ratelimit

import (
	"sync"
	"time"
)

// breaker stops calls to a Redis that keeps failing. After threshold
// consecutive failures it opens for cooldown; then one call at a time may
// probe, and the first success closes it again.
type breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time
	// onChange is called (outside the lock) when it opens or closes.
	onChange func(open bool)

	mu       sync.Mutex
	failures int
	open     bool
	until    time.Time // while open, no probe before this
	probing  bool
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown, now: time.Now, onChange: func(bool) {}}
}

// allow reports whether a call may go to Redis now. A true answer while
// open makes the caller the probe; it must report the result.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
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
	b.mu.Lock()
	changed, open := false, b.open
	if err == nil {
		b.failures = 0
		if b.open {
			b.open, b.probing, changed, open = false, false, true, false
		}
	} else {
		b.failures++
		if b.open {
			b.probing = false
			b.until = b.now().Add(b.cooldown)
		} else if b.failures >= b.threshold {
			b.open, b.until, changed, open = true, b.now().Add(b.cooldown), true, true
		}
	}
	b.mu.Unlock()
	if changed {
		b.onChange(open)
	}
}

// isOpen reports whether calls are currently being kept from Redis.
func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

// abandon ends a call that allow let through without a verdict on Redis
// (the caller went away first).
func (b *breaker) abandon() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}
