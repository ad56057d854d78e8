package events

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// Retention deletes the positions that have outlived their time. Events
// are not pruned: pending ones wait for delivery, dead letters for an
// operator, and the pull stream still serves the rest.
type Retention struct {
	pool    *pgxpool.Pool
	keep    time.Duration
	batch   int
	log     *slog.Logger
	deleted prometheus.Counter
}

// pruneEvery is how often Run prunes.
const pruneEvery = time.Minute

// lockSQL takes the advisory lock a prune holds for each batch, so that
// the replicas take turns instead of deleting the same rows at once.
const lockSQL = `SELECT pg_try_advisory_xact_lock(hashtext('geogate positions retention'))`

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

// NewRetention keeps positions for keep, pruning every minute in
// transactions of at most batch rows (5,000 when 0).
func NewRetention(pool *pgxpool.Pool, keep time.Duration, batch int, reg prometheus.Registerer, log *slog.Logger) *Retention {
	if batch <= 0 {
		batch = 5000
	}
	r := &Retention{pool: pool, keep: keep, batch: batch, log: log,
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "geogate_events_positions_pruned_total",
			Help: "Positions deleted for being older than EVENTS_POSITIONS_RETENTION.",
		})}
	if reg != nil {
		reg.MustRegister(r.deleted)
	}
	return r
}

// Run prunes now and then every minute until ctx ends. A failure (the
// database away, a timeout) is logged and the next round tries again.
func (r *Retention) Run(ctx context.Context) {
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if _, err := r.Prune(ctx, time.Now().Add(-r.keep)); err != nil && ctx.Err() == nil && r.log != nil {
			r.log.Warn("positions retention: prune failed; trying again in a minute", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Prune deletes the positions that arrived before cutoff, a batch per
// transaction, until none is left or another replica is pruning.
func (r *Retention) Prune(ctx context.Context, cutoff time.Time) (int64, error) {
	var total int64
	for {
		n, turn, err := r.pruneBatch(ctx, cutoff)
		total += n
		r.deleted.Add(float64(n))
		if err != nil {
			return total, fmt.Errorf("pruning positions: %w", err)
		}
		if !turn || n == 0 {
			return total, nil
		}
	}
}

// pruneBatch deletes one batch; turn is false when another replica holds
// the lock.
func (r *Retention) pruneBatch(ctx context.Context, cutoff time.Time) (n int64, turn bool, err error) {
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, lockSQL).Scan(&turn); err != nil || !turn {
			return err
		}
		return tx.QueryRow(ctx, pruneSQL, cutoff, r.batch).Scan(&n)
	})
	if err != nil {
		return 0, turn, err
	}
	return n, turn, nil
}
