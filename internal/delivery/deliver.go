package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/outbox"
	"github.com/geogate/geogate/internal/ratelimit"
)

// limiterDown is how long a delivery waits when the limiter cannot
// decide (Redis down and the policy failing closed).
const limiterDown = time.Second

// laneLength bounds how many events of one (subscription, device) a
// worker sends one after another before it gives its slot back to the
// claim, which serves the longest due events first.
const laneLength = 16

// deliver sends a claimed event and records the outcome. When it went
// through, the device's next event, if due, is leased in the same round
// trip and sent next: a device with a queue is served at the pace of its
// receiver, without a claim per event.
func (w *Worker) deliver(ctx context.Context, c outbox.Lease) {
	w.m.inFlight.Inc()
	defer w.m.inFlight.Dec()
	for n := 1; ; n++ {
		next, ok := w.deliverOne(ctx, c, n < laneLength)
		if !ok {
			return
		}
		c = next
	}
}

// deliverOne sends c and records the outcome; with more, a success also
// leases the device's next due event, which it returns.
func (w *Worker) deliverOne(ctx context.Context, c outbox.Lease, more bool) (outbox.Lease, bool) {
	if wait, ok := w.admit(ctx, c); !ok {
		w.postpone(ctx, c, wait)
		return outbox.Lease{}, false
	}
	out := w.send.post(ctx, c, time.Now())
	switch {
	case ctx.Err() != nil:
		w.release(ctx, c)
	case out.ok && more:
		return w.deliveredNext(ctx, c)
	case out.ok:
		w.delivered(ctx, c)
	default:
		after := out.retryAfter
		if after <= 0 {
			after = backoff(c.Attempts+1, w.s.RetryMin, w.s.RetryMax)
		}
		w.failed(ctx, c, out.why, after)
	}
	return outbox.Lease{}, false
}

// admit spends one delivery of c's owner's budget; when it is spent, it
// says how long to put the delivery off. A refusal is no attempt: the
// receiver did nothing wrong.
func (w *Worker) admit(ctx context.Context, c outbox.Lease) (time.Duration, bool) {
	if w.gate == nil {
		return 0, true
	}
	p, err := w.gate.Admit(gate.As(ctx, c.Owner, ""), gate.Ask{Policy: w.s.Policy})
	var refused *apperr.Error
	switch {
	case err == nil:
		p.Done()
		return 0, true
	case errors.Is(err, ratelimit.ErrUnknownPolicy):
		return 0, true // no such policy configured: deliveries are not limited
	case !errors.As(err, &refused) || refused.Kind != apperr.RateLimited:
		return limiterDown, false
	case refused.RetryAfter <= 0:
		return w.s.RetryMax, false // it can never fit: wait the longest
	}
	return refused.RetryAfter, false
}
