package delivery

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/outbox"
)

// settleTimeout bounds recording a delivery's outcome, which runs even
// when the worker is stopping: a send that finished is worth recording.
const settleTimeout = 5 * time.Second

// delivered records c's success; latency is its time in the outbox.
func (w *Worker) delivered(ctx context.Context, c outbox.Lease) {
	var latency time.Duration
	if err := w.settle(ctx, func(b *pgx.Batch) { outbox.Delivered(b, c, &latency) }); err != nil {
		w.lost(c, "delivered", err)
		return
	}
	w.m.delivered.Inc()
	w.m.latency.Observe(latency.Seconds())
}

// deliveredNext records c's success and leases its device's next event
// when it is due, which it returns, in one round trip and transaction.
func (w *Worker) deliveredNext(ctx context.Context, c outbox.Lease) (outbox.Lease, bool) {
	var latency time.Duration
	var next []outbox.Lease
	err := w.settle(ctx, func(b *pgx.Batch) {
		outbox.Delivered(b, c, &latency)
		outbox.Next(b, c, w.s.Lease, &next)
	})
	if err != nil {
		w.lost(c, "delivered", err)
		return outbox.Lease{}, false
	}
	w.m.delivered.Inc()
	w.m.latency.Observe(latency.Seconds())
	switch {
	case len(next) == 0:
		return outbox.Lease{}, false
	case ctx.Err() != nil:
		w.release(ctx, next[0])
		return outbox.Lease{}, false
	}
	return next[0], true
}

// failed records c's failure and when to try again.
func (w *Worker) failed(ctx context.Context, c outbox.Lease, why string, after time.Duration) {
	var dead bool
	if err := w.settle(ctx, func(b *pgx.Batch) { outbox.Failed(b, c, why, after, w.s.RetryFor, &dead) }); err != nil {
		w.lost(c, "failed", err)
		return
	}
	if dead {
		w.m.dead.Inc()
		w.log.Warn("event dead-lettered: its retries ran out", "event", c.ID, "subscription", c.Subscription, "last_error", why)
		return
	}
	w.m.retried.Inc()
}

// postpone puts c off by after, its lease dropped.
func (w *Worker) postpone(ctx context.Context, c outbox.Lease, after time.Duration) {
	if err := w.settle(ctx, func(b *pgx.Batch) { outbox.Postpone(b, c, after) }); err != nil {
		w.lost(c, "postponed", err)
	}
	w.m.postponed.Inc()
}

// release gives c back for another worker, or this one, to send.
func (w *Worker) release(ctx context.Context, c outbox.Lease) {
	if err := w.settle(ctx, func(b *pgx.Batch) { outbox.Release(b, c) }); err != nil {
		w.lost(c, "released", err)
	}
}

// settle runs a batch that records an outcome, even when ctx has ended
// (see settleTimeout).
func (w *Worker) settle(ctx context.Context, queue func(*pgx.Batch)) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	return w.batch(ctx, queue)
}

// lost logs an outcome that could not be recorded. Nothing is lost for
// the receiver: the lease runs out and the event is sent again. No rows
// means the lease had already run out and another worker has the event.
func (w *Worker) lost(c outbox.Lease, what string, err error) {
	w.log.Warn("event delivery: outcome not recorded; the event will be sent again", "event", c.ID, "outcome", what, "err", err.Error())
}
