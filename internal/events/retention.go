package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/outbox"
)

// Retention deletes the history that has outlived its time: positions,
// and events delivered or pulled (outbox.Prune). Pending events wait for
// delivery and dead letters for an operator, whatever their age.
type Retention struct {
	pool  *pgxpool.Pool
	keep  Keep
	batch int
	log   *slog.Logger
	// positions and events name the histories' locks and count what
	// their prunes deleted.
	positions, events history
}

// history is one table a Retention prunes: the lock its prunes take
// turns under, and the count of what they deleted.
type history struct {
	lock   string
	pruned prometheus.Counter
}

// Keep is how long each history is kept; 0 keeps it for ever.
type Keep struct {
	Positions, Events time.Duration
}

// pruneEvery is how often Run prunes.
const pruneEvery = time.Minute

// lockSQL takes the advisory lock a prune of one history holds for each
// batch, so that the replicas take turns instead of deleting the same
// rows at once.
const lockSQL = `SELECT pg_try_advisory_xact_lock(hashtext($1))`

// pruneSQL deletes, of the $2 oldest positions by id, those that arrived
// before $1, and counts them. Ids follow arrival, so a batch walks the
// primary key from its start and stops, and no index on the time is
// kept up on every insert for this. The ids go in as an array so that
// the deletion finds each by the key too.
const pruneSQL = `WITH gone AS (
  DELETE FROM event_positions WHERE id = ANY (ARRAY(
    SELECT id FROM (SELECT id, received_at FROM event_positions ORDER BY id LIMIT $2) oldest
    WHERE received_at < $1))
  RETURNING 1)
SELECT count(*) FROM gone`

// NewRetention keeps history for keep, pruning every minute in
// transactions of at most batch rows (5,000 when 0).
func NewRetention(pool *pgxpool.Pool, keep Keep, batch int, reg prometheus.Registerer, log *slog.Logger) *Retention {
	if batch <= 0 {
		batch = 5000
	}
	r := &Retention{pool: pool, keep: keep, batch: batch, log: log,
		positions: history{"geogate positions retention", prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_events_positions_pruned_total",
			Help: "Positions deleted for being older than EVENTS_POSITIONS_RETENTION.",
		})},
		events: history{"geogate events retention", prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_events_pruned_total",
			Help: "Events delivered or pulled deleted for being older than EVENTS_RETENTION.",
		})}}
	if reg != nil {
		reg.MustRegister(r.positions.pruned, r.events.pruned)
	}
	return r
}

// Run prunes now and then every minute until ctx ends. A failure (the
// database away, a timeout) is logged and the next round tries again.
func (r *Retention) Run(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		r.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round prunes each history that has a retention.
func (r *Retention) round(ctx context.Context) {
	var errs []error
	if r.keep.Positions > 0 {
		_, err := r.Prune(ctx, time.Now().Add(-r.keep.Positions))
		errs = append(errs, err)
	}
	if r.keep.Events > 0 {
		_, err := r.PruneEvents(ctx, time.Now().Add(-r.keep.Events))
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil && ctx.Err() == nil && r.log != nil {
		r.log.Warn("retention: prune failed; trying again in a minute", "err", err.Error())
	}
}

// Prune deletes the positions that arrived before cutoff, a batch per
// transaction, until none is left or another replica is pruning.
func (r *Retention) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	return r.walk(ctx, r.positions, func(tx pgx.Tx) (n int64, done bool, err error) {
		err = tx.QueryRow(ctx, pruneSQL, cutoff, r.batch).Scan(&n)
		return n, n == 0, err
	})
}

// PruneEvents deletes the events delivered or pulled that were made
// before cutoff, a batch per transaction, until it meets a later one or
// another replica is pruning.
func (r *Retention) PruneEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	var after int64
	return r.walk(ctx, r.events, func(tx pgx.Tx) (n int64, done bool, err error) {
		n, after, done, err = outbox.Prune(ctx, tx, cutoff, after, r.batch)
		return n, done, err
	})
}

// walk runs batch, each in a transaction of its own under h's lock, until
// one says it is done or another replica holds the lock, and counts what
// they deleted.
func (r *Retention) walk(ctx context.Context, h history, batch func(pgx.Tx) (int64, bool, error)) (int64, error) {
	var total int64
	for {
		var n int64
		var turn, done bool
		err := pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, lockSQL, h.lock).Scan(&turn); err != nil || !turn {
				return err
			}
			var err error
			n, done, err = batch(tx)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("%s: %w", h.lock, err)
		}
		total += n
		h.pruned.Add(float64(n))
		if !turn || done {
			return total, nil
		}
	}
}
