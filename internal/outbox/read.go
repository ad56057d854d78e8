package outbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs statements: a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Pruned is the error of a read whose cursor is older than what is
// kept: retention deleted events after it, up to Through, the oldest
// cursor still valid.
type Pruned struct {
	Through int64
}

func (p *Pruned) Error() string {
	return fmt.Sprintf("outbox: events up to %d were pruned", p.Through)
}

// After returns up to limit events of subscription sub numbered after
// after, in order. Events are numbered in the order they commit (see
// Lock), so a reader that goes on from the last number it saw misses
// none, unless retention pruned some: with after a cursor (not the
// beginning, which is -1) older than what is kept, it fails with
// *Pruned. The subscription's mark is read after the events, in the same
// round trip: a prune that ran before the read is seen, and one that runs
// between the two at worst answers *Pruned where nothing was missed.
//
// through is the subscription's mark: where a reader that found nothing
// after the beginning may go on from.
func After(ctx context.Context, q Batcher, sub string, after int64, limit int) (evs []Event, through int64, err error) {
	out := []Event{}
	var mark *int64
	b := &pgx.Batch{}
	b.Queue(`SELECT `+eventColumns+` FROM events e
WHERE e.subscription = $1::uuid AND e.seq > $2 ORDER BY e.seq LIMIT $3`, sub, max(after, 0), limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			e, err := scanEvent(rows.Scan)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	b.Queue(`SELECT pruned_through FROM event_subscriptions WHERE id = $1::uuid`, sub).Query(func(rows pgx.Rows) error {
		var t int64
		_, err := pgx.ForEachRow(rows, []any{&t}, func() error { mark = &t; return nil })
		return err
	})
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, 0, err
	}
	if mark == nil {
		return out, 0, nil // the subscription is gone: its events with it
	}
	if after >= 0 && after < *mark {
		return nil, *mark, &Pruned{Through: *mark}
	}
	return out, *mark, nil
}

// Batcher sends batches: a connection or a transaction.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// Unhook turns the events of subscription sub that wait for its webhook
// to pulled ones, for a subscription whose webhook was removed in the
// transaction tx: no worker looks for them again.
func Unhook(ctx context.Context, tx Querier, sub string) error {
	_, err := tx.Exec(ctx, `SELECT outbox_unhook($1::uuid)`, sub)
	return err
}
