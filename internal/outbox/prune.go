package outbox

import (
	"context"
	"time"
)

// pruneSQL deletes, of the $2 events numbered after $3, those that were
// delivered or are pulled and were made before $1, up to the first made
// since: numbers follow creation closely enough that the walk stops
// there. It reads the batch by the primary key, so no index on the
// creation time is kept up on every append for it. Pending events wait
// for delivery and dead letters for an operator however old they are,
// and are walked past. Each subscription remembers the last of its
// events deleted (pruned_through), in the same transaction, so that a
// cursor before it is known to have missed some (After). It returns how
// many it deleted, the last number it walked, and whether it stopped at
// a recent event or the end.
const pruneSQL = `
WITH batch AS MATERIALIZED (
  SELECT seq, state, created_at FROM events WHERE seq > $3 ORDER BY seq LIMIT $2
), young AS (
  SELECT min(seq) AS seq FROM batch WHERE created_at >= $1
), gone AS (
  DELETE FROM events e USING batch b, young y
  WHERE e.seq = b.seq AND b.state IN ('delivered', 'pull') AND b.created_at < $1
    AND (y.seq IS NULL OR b.seq < y.seq)
  RETURNING e.subscription, e.seq
), marked AS (
  UPDATE event_subscriptions s SET pruned_through = g.seq
  FROM (SELECT subscription, max(seq) AS seq FROM gone GROUP BY subscription) g
  WHERE s.id = g.subscription AND s.pruned_through < g.seq
)
SELECT (SELECT count(*) FROM gone), coalesce((SELECT max(seq) FROM batch), $3),
  (SELECT seq IS NOT NULL FROM young) OR (SELECT count(*) FROM batch) < $2`

// Prune deletes, in tx, up to limit events walked from after on: those
// delivered or pulled that were made before cutoff. It returns how many
// it deleted, where the next batch goes on from, and whether the walk
// is done.
func Prune(ctx context.Context, tx Querier, cutoff time.Time, after int64, limit int) (deleted, next int64, done bool, err error) {
	err = tx.QueryRow(ctx, pruneSQL, cutoff, limit, after).Scan(&deleted, &next, &done)
	return deleted, next, done, err
}
