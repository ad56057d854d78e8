package delivery

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/events"
)

// claimed is an event leased to this worker, with what sending it needs.
type claimed struct {
	events.Event
	Owner   string
	Webhook string
	// Secrets sign the delivery: the current one, then the previous one
	// while its grace period lasts.
	Secrets []string
	// attempts were made before this one.
	attempts int
	// lease is the lease_until this worker set: every later change of the
	// event names it, so that a worker whose lease ran out (and whose
	// event another took) changes nothing.
	lease time.Time
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
RETURNING ` + claimColumns

// claimWindow is how many of the longest due events a claim looks for
// heads among. A device with more queued than this behind a delivery in
// flight holds the others back only until that delivery ends.
const claimWindow = 1000

// claim leases up to n due events; on a database error it logs and
// claims none (the next look tries again).
func (w *Worker) claim(ctx context.Context, n int) []claimed {
	var out []claimed
	err := w.batch(ctx, func(br pgx.BatchResults) (err error) {
		out, err = claimedOf(br)
		return err
	}, query{claimSQL, []any{n, w.s.PerSubscription, w.s.Lease.Milliseconds(), claimWindow}})
	if err != nil {
		w.warn(ctx, "claim", err)
		return nil
	}
	return out
}

// workerSettingsSQL sets up a transaction of the workers' statements:
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
const workerSettingsSQL = `SELECT set_config('synchronous_commit', 'off', true), set_config('enable_seqscan', 'off', true)`

// query is one statement of a batch, with its arguments.
type query struct {
	sql  string
	args []any
}

// batch runs qs after workerSettingsSQL in one round trip and one
// transaction (the statements of a batch run in one), and hands their
// results to read.
func (w *Worker) batch(ctx context.Context, read func(pgx.BatchResults) error, qs ...query) error {
	b := &pgx.Batch{}
	b.Queue(workerSettingsSQL)
	for _, q := range qs {
		b.Queue(q.sql, q.args...)
	}
	br := w.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = read(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// claimedOf reads the next result of br, rows of claimColumns.
func claimedOf(br pgx.BatchResults) ([]claimed, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	return scanClaimed(rows)
}

// claimColumns are what a claim returns of each event it leases, read by
// scanClaimed.
const claimColumns = events.EventColumns + `, s.owner, s.webhook, s.secret,
  CASE WHEN s.previous_until > now() THEN s.previous_secret END, e.attempts, e.lease_until`

// scanClaimed reads rows of claimColumns and closes rows.
func scanClaimed(rows pgx.Rows) ([]claimed, error) {
	defer rows.Close()
	var out []claimed
	for rows.Next() {
		var c claimed
		var secret string
		var previous *string
		e, err := events.ScanEvent(func(dest ...any) error {
			return rows.Scan(append(dest, &c.Owner, &c.Webhook, &secret, &previous, &c.attempts, &c.lease)...)
		})
		if err != nil {
			return out, err
		}
		c.Event, c.Secrets = e, []string{secret}
		if previous != nil {
			c.Secrets = append(c.Secrets, *previous)
		}
		out = append(out, c)
	}
	return out, rows.Err()
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

// look updates the outbox age and returns how long until the next event
// falls due, when one will.
func (w *Worker) look(ctx context.Context) (time.Duration, bool) {
	var age, next *float64
	err := w.batch(ctx, func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(&age, &next)
	}, query{lookSQL, nil})
	if err != nil {
		w.warn(ctx, "look", err)
		return 0, false
	}
	w.m.outboxAge.Set(deref(age))
	if next == nil {
		return 0, false
	}
	return time.Duration(*next * float64(time.Second)), true
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}

// warn logs a failed statement, unless the worker is stopping.
func (w *Worker) warn(ctx context.Context, what string, err error) {
	if ctx.Err() == nil {
		w.log.Warn("event delivery: "+what+" failed", "err", err.Error())
	}
}
