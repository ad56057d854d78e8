package outbox

import (
	"time"

	"github.com/jackc/pgx/v5"
)

// Each statement below changes the event only while the lease it names
// is still on it: once it ran out, the event is another's. Each fails
// with pgx.ErrNoRows when the lease was gone.

// deliveredSQL records a success and returns the time from the event's
// creation to now, by the database's clock.
const deliveredSQL = `
UPDATE events SET state = 'delivered', delivered_at = now(), attempts = attempts + 1,
  lease_until = NULL, last_error = NULL
WHERE seq = $1 AND lease_until = $2 AND state = 'pending'
RETURNING extract(epoch FROM now() - created_at)::float8`

// Delivered queues, in b, recording l's success; *latency gets its time
// in the outbox.
func Delivered(b *pgx.Batch, l Lease, latency *time.Duration) {
	b.Queue(deliveredSQL, l.Seq, l.Until).QueryRow(func(row pgx.Row) error {
		var s float64
		err := row.Scan(&s)
		*latency = seconds(s)
		return err
	})
}

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
RETURNING ` + leaseColumns

// Next queues, in b after Delivered(l), leasing for lease the next event
// of l's subscription and device when it is due; *into gets it.
func Next(b *pgx.Batch, l Lease, lease time.Duration, into *[]Lease) {
	b.Queue(nextSQL, l.Subscription, l.Device, l.Seq, lease.Milliseconds()).Query(scanLeases(into))
}

// failedSQL records a failure: the event is retried after $4
// milliseconds, but no later than the end of its retry window ($5
// milliseconds after it began), where a failure makes it dead.
const failedSQL = `
UPDATE events SET attempts = attempts + 1, last_error = $3, lease_until = NULL,
  state = CASE WHEN now() >= coalesce(retry_from, created_at) + $5 * interval '1 millisecond' THEN 'dead' ELSE 'pending' END,
  dead_at = CASE WHEN now() >= coalesce(retry_from, created_at) + $5 * interval '1 millisecond' THEN now() END,
  next_at = least(now() + $4 * interval '1 millisecond', coalesce(retry_from, created_at) + $5 * interval '1 millisecond')
WHERE seq = $1 AND lease_until = $2 AND state = 'pending'
RETURNING state = 'dead'`

// Failed queues, in b, recording l's failure for why, to be tried again
// after after, unless its retries, retryFor from its creation or replay,
// ran out: then *dead is true and it is a dead letter.
func Failed(b *pgx.Batch, l Lease, why string, after, retryFor time.Duration, dead *bool) {
	b.Queue(failedSQL, l.Seq, l.Until, why, after.Milliseconds(), retryFor.Milliseconds()).QueryRow(func(row pgx.Row) error {
		return row.Scan(dead)
	})
}

// Postpone queues, in b, putting l off by after without counting an
// attempt: its owner's delivery budget was spent.
func Postpone(b *pgx.Batch, l Lease, after time.Duration) {
	b.Queue(`UPDATE events SET next_at = now() + $3 * interval '1 millisecond', lease_until = NULL
WHERE seq = $1 AND lease_until = $2 AND state = 'pending'`, l.Seq, l.Until, max(after, time.Millisecond).Milliseconds())
}

// Release queues, in b, giving l back at once: its send was cut short.
func Release(b *pgx.Batch, l Lease) {
	b.Queue(`UPDATE events SET lease_until = NULL WHERE seq = $1 AND lease_until = $2 AND state = 'pending'`, l.Seq, l.Until)
}
