package testenv

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LockPlaces takes an ACCESS EXCLUSIVE lock on the places table in a
// transaction of its own, so that every query and tile render reading it
// waits. unlock rolls the transaction back; it runs at the latest when the
// test ends, and a second call does nothing.
func LockPlaces(tb testing.TB, pool *pgxpool.Pool) (unlock func()) {
	tb.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			if err := tx.Rollback(ctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
				tb.Errorf("releasing the lock on places: %v", err)
			}
		})
	}
	tb.Cleanup(unlock)
	if _, err := tx.Exec(ctx, "LOCK TABLE places IN ACCESS EXCLUSIVE MODE"); err != nil {
		tb.Fatal(err)
	}
	return unlock
}
