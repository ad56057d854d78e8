package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier runs statements: a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// After returns up to limit events of subscription sub numbered after
// after, in order. Events are numbered in the order they commit (see
// Lock), so a reader that goes on from the last number it saw misses
// none.
func After(ctx context.Context, q Querier, sub string, after int64, limit int) ([]Event, error) {
	rows, err := q.Query(ctx, `SELECT `+eventColumns+` FROM events e
WHERE e.subscription = $1::uuid AND e.seq > $2 ORDER BY e.seq LIMIT $3`, sub, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		e, err := scanEvent(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Unhook turns the events of subscription sub that wait for its webhook
// to pulled ones, for a subscription whose webhook was removed in the
// transaction tx: no worker looks for them again.
func Unhook(ctx context.Context, tx Querier, sub string) error {
	_, err := tx.Exec(ctx, `SELECT outbox_unhook($1::uuid)`, sub)
	return err
}
