package limits

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/pg"
)

// FromDB returns a reader of the overrides stored in db: the rows of
// tier_overrides, and the overrides of every key not revoked, each named
// by identity(key id), the limiter's identity of that key.
func FromDB(db *pgxpool.Pool, identity func(keyID string) string) func(context.Context) ([]Override, error) {
	return func(ctx context.Context) ([]Override, error) {
		var out []Override
		err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{AccessMode: pgx.ReadOnly, IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT tier, policy, windows FROM tier_overrides ORDER BY tier, policy`)
			if err != nil {
				return err
			}
			var o Override
			if _, err := pgx.ForEachRow(rows, []any{&o.Tier, &o.Policy, &o.Windows}, func() error {
				out = append(out, o)
				return nil
			}); err != nil {
				return err
			}
			rows, err = tx.Query(ctx, `SELECT id, overrides FROM api_keys
				WHERE overrides IS NOT NULL AND (revoked_at IS NULL OR revoked_at > now()) ORDER BY id`)
			if err != nil {
				return err
			}
			var id string
			var raw []byte
			_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
				var m map[string]string
				if err := json.Unmarshal(raw, &m); err != nil {
					return fmt.Errorf("overrides of key %s: %w", id, err)
				}
				for p, w := range m {
					out = append(out, Override{Identity: identity(id), Policy: p, Windows: w})
				}
				return nil
			})
			return err
		})
		return out, err
	}
}

// Listen returns a listen func for Source.Run that hears the channels of
// tier and key changes on db.
func Listen(db *pgxpool.Pool, log *slog.Logger) func(ctx context.Context, changed func()) {
	return func(ctx context.Context, changed func()) {
		l := &pg.Listener{
			Pool: db, Channels: []string{TierChannel, KeyChannel}, Log: log,
			Topic:    "rate-limit override",
			OnListen: changed, // whatever changed while nobody listened
			OnNotify: func(string, string) { changed() },
		}
		l.Run(ctx)
	}
}
