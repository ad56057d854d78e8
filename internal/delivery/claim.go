package delivery

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/outbox"
)

// claim leases up to n due events; on a database error it logs and
// claims none (the next look tries again).
func (w *Worker) claim(ctx context.Context, n int) []outbox.Lease {
	var out []outbox.Lease
	if err := w.batch(ctx, func(b *pgx.Batch) {
		outbox.Claim(b, n, w.s.PerSubscription, w.s.Lease, &out)
	}); err != nil {
		w.warn(ctx, "claim", err)
		return nil
	}
	return out
}

// batch runs the statements queue queues, after the workers' settings
// (outbox.WorkerSettings), in one round trip and one transaction; the
// statements' own readers run before it returns.
func (w *Worker) batch(ctx context.Context, queue func(*pgx.Batch)) error {
	b := &pgx.Batch{}
	outbox.WorkerSettings(b)
	queue(b)
	return w.pool.SendBatch(ctx, b).Close()
}

// look updates the outbox age and returns how long until the next event
// falls due, when one will.
func (w *Worker) look(ctx context.Context) (time.Duration, bool) {
	var age time.Duration
	var next *time.Duration
	if err := w.batch(ctx, func(b *pgx.Batch) { outbox.Look(b, &age, &next) }); err != nil {
		w.warn(ctx, "look", err)
		return 0, false
	}
	w.m.outboxAge.Set(age.Seconds())
	if next == nil {
		return 0, false
	}
	return *next, true
}

// warn logs a failed statement, unless the worker is stopping.
func (w *Worker) warn(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		w.log.Warn("event delivery: "+what+" failed", "err", err.Error())
	}
}
