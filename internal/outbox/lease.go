package outbox

import (
	"time"

	"github.com/jackc/pgx/v5"
)

// Lease is an event leased to one delivery worker, with what sending it
// needs.
type Lease struct {
	Event
	Owner   string
	Webhook string
	// Secrets sign the delivery: the current one, then the previous one
	// while its grace period lasts.
	Secrets []string
	// Attempts were made before this one.
	Attempts int
	// Until is the lease_until the claim set: every later change of the
	// event names it, so that a worker whose lease ran out (and whose
	// event another took) changes nothing.
	Until time.Time
}

// WorkerSettings queues, first in b, the settings of a transaction of the
// delivery workers' statements:
//
//   - it commits without waiting for its WAL to reach the disk. The
//     workers' own writes (leases and outcomes) may all be lost in a
//     crash: a lease lost frees the event for a claim, an outcome lost
//     sends it again, which at-least-once delivery allows. Waiting for
//     the flush was most of a delivery's time under load.
//   - it scans no table whole. Every question the workers ask is
//     answered by a small partial index; the outbox changes faster than
//     its statistics, and a planner that believed it empty (after a
//     TRUNCATE, or as a new deployment fills it) read all of it for each
//     claim, seconds behind a backlog.
//
// The statements of a batch run in one transaction.
func WorkerSettings(b *pgx.Batch) {
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true), set_config('enable_seqscan', 'off', true)`)
}

// claimSQL leases up to $1 due events of webhook subscriptions for $3
// milliseconds. An event is due when it is pending, its next_at has come
// and nobody holds a lease on it; only the head of each (subscription,
// device) is eligible, which keeps their order, and a subscription gets
// no more than $2 deliveries in flight. Heads are looked for among the
// $4 longest due events only, so that a claim costs the same whatever
// the backlog; of each (subscription, device) only its first in that
// window can be its head, so only those are checked against the first
// pending event of their device. Each step is MATERIALIZED: the outbox
// changes faster than its statistics, and with estimates of one row the
// planner inlined the steps into a nested loop that computed the heads
// again for every due event, seconds per claim under a backlog. SKIP
// LOCKED lets concurrent claims pass each other; the lease, rechecked on
// the locked row, keeps a claim that read an older snapshot from taking
// an event just leased.
const claimSQL = `
WITH due AS MATERIALIZED (
  SELECT e.seq, e.subscription, e.device, e.next_at
  FROM events e
  WHERE e.state = 'pending' AND e.next_at <= now()
    AND (e.lease_until IS NULL OR e.lease_until <= now())
  ORDER BY e.next_at, e.seq
  LIMIT $4
), firsts AS MATERIALIZED (
  SELECT DISTINCT ON (subscription, device) seq, subscription, device, next_at
  FROM due ORDER BY subscription, device, seq
), inflight AS MATERIALIZED (
  SELECT subscription, count(*) AS n FROM events
  WHERE state = 'pending' AND lease_until > now()
  GROUP BY subscription
), heads AS MATERIALIZED (
  SELECT d.seq, d.subscription,
         row_number() OVER (PARTITION BY d.subscription ORDER BY d.next_at, d.seq) AS rank
  FROM firsts d
  JOIN event_subscriptions s ON s.id = d.subscription AND s.webhook IS NOT NULL
  WHERE d.seq = (SELECT p.seq FROM events p WHERE p.state = 'pending'
      AND p.subscription = d.subscription AND p.device = d.device ORDER BY p.seq LIMIT 1)
), picked AS (
  SELECT e.seq FROM events e
  JOIN heads h ON h.seq = e.seq
  LEFT JOIN inflight i ON i.subscription = h.subscription
  WHERE h.rank + coalesce(i.n, 0) <= $2
    AND e.state = 'pending' AND (e.lease_until IS NULL OR e.lease_until <= now())
  ORDER BY e.next_at, e.seq
  LIMIT $1
  FOR UPDATE OF e SKIP LOCKED
)
UPDATE events e SET lease_until = now() + $3 * interval '1 millisecond'
FROM picked, event_subscriptions s
WHERE e.seq = picked.seq AND s.id = e.subscription AND s.webhook IS NOT NULL
  AND e.state = 'pending' AND (e.lease_until IS NULL OR e.lease_until <= now())
RETURNING ` + leaseColumns

// ClaimWindow is how many of the longest due events a claim looks for
// heads among. A device with more queued than this behind a delivery in
// flight holds the others back only until that delivery ends.
const ClaimWindow = 1000

// Claim queues, in b, leasing for lease up to n due events, with no
// subscription holding more than perSubscription leases; *into gets them
// when b's results are read.
func Claim(b *pgx.Batch, n, perSubscription int, lease time.Duration, into *[]Lease) {
	b.Queue(claimSQL, n, perSubscription, lease.Milliseconds(), ClaimWindow).Query(scanLeases(into))
}

// leaseColumns are what a claim returns of each event it leases, read by
// scanLeases.
const leaseColumns = eventColumns + `, s.owner, s.webhook, s.secret,
  CASE WHEN s.previous_until > now() THEN s.previous_secret END, e.attempts, e.lease_until`

// scanLeases reads rows of leaseColumns into *into.
func scanLeases(into *[]Lease) func(pgx.Rows) error {
	return func(rows pgx.Rows) error {
		for rows.Next() {
			var l Lease
			var secret string
			var previous *string
			e, err := scanEvent(rows.Scan, &l.Owner, &l.Webhook, &secret, &previous, &l.Attempts, &l.Until)
			if err != nil {
				return err
			}
			l.Event, l.Secrets = e, []string{secret}
			if previous != nil {
				l.Secrets = append(l.Secrets, *previous)
			}
			*into = append(*into, l)
		}
		return rows.Err()
	}
}

// lookSQL reads the age of the oldest pending event and how long until
// the next retry falls due or the next lease runs out, each from its
// index: pending events are only ever webhook events (a subscription made
// pull-only turns its own to pull).
const lookSQL = `
SELECT extract(epoch FROM now() - (SELECT created_at FROM events WHERE state = 'pending' ORDER BY seq LIMIT 1))::float8,
  extract(epoch FROM least(
    (SELECT min(next_at) FROM events WHERE state = 'pending' AND next_at > now()),
    (SELECT min(lease_until) FROM events WHERE state = 'pending' AND lease_until > now())) - now())::float8`

// Look queues, in b, reading the age of the oldest pending event (*age,
// 0 with none) and how long until the next event falls due (*next, nil
// when none will).
func Look(b *pgx.Batch, age *time.Duration, next **time.Duration) {
	b.Queue(lookSQL).QueryRow(func(row pgx.Row) error {
		var a, n *float64
		if err := row.Scan(&a, &n); err != nil {
			return err
		}
		*age, *next = 0, nil
		if a != nil {
			*age = seconds(*a)
		}
		if n != nil {
			d := seconds(*n)
			*next = &d
		}
		return nil
	})
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
