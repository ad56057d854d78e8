package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/geogate/geogate/internal/ratelimit"
)

// limiterDown is how long a delivery waits when the limiter cannot
// decide (Redis down and the policy failing closed).
const limiterDown = time.Second

// deliver sends one claimed event and records the outcome.
func (w *Worker) deliver(ctx context.Context, c claimed) {
	w.m.inFlight.Inc()
	defer w.m.inFlight.Dec()
	if wait, ok := w.admit(ctx, c); !ok {
		w.postpone(ctx, c, wait)
		return
	}
	out := w.send.post(ctx, c, time.Now())
	switch {
	case ctx.Err() != nil:
		w.release(ctx, c)
	case out.ok:
		w.delivered(ctx, c)
	default:
		after := out.retryAfter
		if after <= 0 {
			after = backoff(c.attempts+1, w.s.RetryMin, w.s.RetryMax)
		}
		w.failed(ctx, c, out.why, after)
	}
}

// admit spends one delivery of c's owner's budget; when it is spent, it
// says how long to put the delivery off. A refusal is no attempt: the
// receiver did nothing wrong.
func (w *Worker) admit(ctx context.Context, c claimed) (time.Duration, bool) {
	if w.limit == nil {
		return 0, true
	}
	d, err := w.limit.Allow(ctx, w.s.Policy, c.Owner, 1)
	switch {
	case errors.Is(err, ratelimit.ErrUnknownPolicy):
		return 0, true // no such policy configured: deliveries are not limited
	case err != nil:
		return limiterDown, false
	case d.Allowed:
		return 0, true
	case d.Impossible || d.RetryAfter <= 0:
		return w.s.RetryMax, false
	}
	return d.RetryAfter, false
}
