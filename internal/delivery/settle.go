package delivery

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// settleTimeout bounds recording a delivery's outcome, which runs even
// when the worker is stopping: a send that finished is worth recording.
const settleTimeout = 5 * time.Second

// Each statement below changes the event only while this worker's lease
// ($2) is still on it: once it ran out, the event is another's.

// deliveredSQL records a success and returns the time from the event's
// creation to now, by the database's clock.
const deliveredSQL = `
UPDATE events SET state = 'delivered', delivered_at = now(), attempts = attempts + 1,
  lease_until = NULL, last_error = NULL
WHERE seq = $1 AND lease_until = $2 AND state = 'pending'
RETURNING extract(epoch FROM now() - created_at)::float8`

// nextSQL leases, for $4 milliseconds, the next event of subscription
// $1 and device $2 after event $3, when this transaction recorded $3
// delivered (its delivered_at is the transaction's now()), it is due and
// nobody holds it: with $3 gone it is the device's head.
const nextSQL = `
WITH picked AS (
  SELECT e.seq FROM events e
  WHERE e.state = 'pending' AND e.subscription = $1::text::uuid AND e.device = $2 AND e.seq > $3
    AND EXISTS (SELECT 1 FROM events d WHERE d.seq = $3 AND d.state = 'delivered' AND d.delivered_at = now())
  ORDER BY e.seq
  LIMIT 1
  FOR UPDATE OF e SKIP LOCKED
)
UPDATE events e SET lease_until = now() + $4 * interval '1 millisecond'
FROM picked, event_subscriptions s
WHERE e.seq = picked.seq AND s.id = e.subscription AND s.webhook IS NOT NULL
  AND e.next_at <= now() AND (e.lease_until IS NULL OR e.lease_until <= now())
RETURNING ` + claimColumns

// failedSQL records a failure: the event is retried after $4
// milliseconds, but no later than the end of its retry window ($5
// milliseconds after it began), where a failure makes it dead.
const failedSQL = `
UPDATE events SET attempts = attempts + 1, last_error = $3, lease_until = NULL,
  state = CASE WHEN now() >= coalesce(retry_from, created_at) + $5 * interval '1 millisecond' THEN 'dead' ELSE 'pending' END,
  dead_at = CASE WHEN now() >= coalesce(retry_from, created_at) + $5 * interval '1 millisecond' THEN now() END,
  next_at = least(now() + $4 * interval '1 millisecond', coalesce(retry_from, created_at) + $5 * interval '1 millisecond')
WHERE seq = $1 AND lease_until = $2 AND state = 'pending'
RETURNING state`

// postponeSQL puts a delivery off by $3 milliseconds without counting an
// attempt: the owner's delivery budget was spent.
const postponeSQL = `
UPDATE events SET next_at = now() + $3 * interval '1 millisecond', lease_until = NULL
WHERE seq = $1 AND lease_until = $2 AND state = 'pending'`

// releaseSQL gives an event back at once: its send was cut short.
const releaseSQL = `
UPDATE events SET lease_until = NULL
WHERE seq = $1 AND lease_until = $2 AND state = 'pending'`

// delivered records c's success; latency is its time in the outbox.
func (w *Worker) delivered(ctx context.Context, c claimed) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var latency float64
	if err := w.write(ctx, deliveredSQL, []any{c.Seq, c.lease}, &latency); err != nil {
		w.lost(c, "delivered", err)
		return
	}
	w.m.delivered.Inc()
	w.m.latency.Observe(latency)
}

// deliveredNext records c's success and leases its device's next event
// when it is due, which it returns, in one round trip: the two
// statements of a batch run in one transaction.
func (w *Worker) deliveredNext(ctx context.Context, c claimed) (claimed, bool) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var latency float64
	var next []claimed
	err := w.batch(sctx, func(br pgx.BatchResults) error {
		if err := br.QueryRow().Scan(&latency); err != nil {
			return err
		}
		var err error
		next, err = claimedOf(br)
		return err
	}, query{deliveredSQL, []any{c.Seq, c.lease}}, query{nextSQL, []any{c.Subscription, c.Device, c.Seq, w.s.Lease.Milliseconds()}})
	if err != nil {
		w.lost(c, "delivered", err)
		return claimed{}, false
	}
	w.m.delivered.Inc()
	w.m.latency.Observe(latency)
	switch {
	case len(next) == 0:
		return claimed{}, false
	case ctx.Err() != nil:
		w.release(ctx, next[0])
		return claimed{}, false
	}
	return next[0], true
}

// failed records c's failure and when to try again.
func (w *Worker) failed(ctx context.Context, c claimed, why string, after time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	var state string
	err := w.write(ctx, failedSQL, []any{c.Seq, c.lease, why, after.Milliseconds(), w.s.RetryFor.Milliseconds()}, &state)
	if err != nil {
		w.lost(c, "failed", err)
		return
	}
	if state == "dead" {
		w.m.dead.Inc()
		w.log.Warn("event dead-lettered: its retries ran out", "event", c.ID, "subscription", c.Subscription, "last_error", why)
		return
	}
	w.m.retried.Inc()
}

// postpone puts c off by after, its lease dropped.
func (w *Worker) postpone(ctx context.Context, c claimed, after time.Duration) {
	w.exec(ctx, c, "postponed", postponeSQL, c.Seq, c.lease, max(after, time.Millisecond).Milliseconds())
	w.m.postponed.Inc()
}

// release gives c back for another worker, or this one, to send.
func (w *Worker) release(ctx context.Context, c claimed) {
	w.exec(ctx, c, "released", releaseSQL, c.Seq, c.lease)
}

func (w *Worker) exec(ctx context.Context, c claimed, what, sql string, args ...any) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if err := w.write(ctx, sql, args); err != nil {
		w.lost(c, what, err)
	}
}

// write runs sql, one of the workers' own writes, in a batch (see
// workerSettingsSQL), and scans its one row into dest when dest is given.
func (w *Worker) write(ctx context.Context, sql string, args []any, dest ...any) error {
	return w.batch(ctx, func(br pgx.BatchResults) error {
		if len(dest) > 0 {
			return br.QueryRow().Scan(dest...)
		}
		_, err := br.Exec()
		return err
	}, query{sql, args})
}

// lost logs an outcome that could not be recorded. Nothing is lost for
// the receiver: the lease runs out and the event is sent again. No rows
// means the lease had already run out and another worker has the event.
func (w *Worker) lost(c claimed, what string, err error) {
	w.log.Warn("event delivery: outcome not recorded; the event will be sent again", "event", c.ID, "outcome", what, "err", err.Error())
}
