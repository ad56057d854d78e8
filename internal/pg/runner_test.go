package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/pg"
)

// failsAfterCancel sleeps until its statement is cancelled, then fails
// for a reason of its own (SQLSTATE 22023): an error that arrives after
// the deadline but is not the deadline's doing.
const failsAfterCancel = `DO $$
BEGIN
	PERFORM pg_sleep(10);
EXCEPTION WHEN query_canceled THEN
	RAISE EXCEPTION 'bad argument' USING ERRCODE = '22023';
END $$`

func exec(sql string) func(ctx context.Context, conn pg.Conn) error {
	return func(ctx context.Context, conn pg.Conn) error {
		_, err := conn.Exec(ctx, sql)
		return err
	}
}

func TestRunnerClassifiesByTheError(t *testing.T) {
	t.Parallel()
	// One connection, warmed with a DO block: the cancel must find the
	// statement inside its sleep. On a cold or busy connection it could
	// arrive while the block was still being set up, outside its handler.
	pool := open(t, pg.Options{MaxConns: 1})
	if _, err := pool.Exec(context.Background(), `DO $$ BEGIN PERFORM 1; END $$`); err != nil {
		t.Fatal(err)
	}
	run := pg.Runner{Pool: pool, Timeouts: pg.Timeouts{QueryTimeout: 500 * time.Millisecond, AcquireTimeout: time.Second}}
	tests := []struct {
		name     string
		sql      string
		wantKind apperr.Kind
		wantCode string // the SQLSTATE kept in the chain, if any
	}{
		{"OwnErrorAfterDeadline", failsAfterCancel, apperr.Internal, "22023"},
		{"OwnErrorBeforeDeadline", `DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '22023'; END $$`, apperr.Internal, "22023"},
		{"Cancelled", "SELECT pg_sleep(10)", apperr.Timeout, "57014"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run.Do(context.Background(), exec(tt.sql))
			if err == nil {
				t.Fatal("Do() = nil, want an error")
			}
			if got := apperr.KindOf(err); got != tt.wantKind {
				t.Errorf("KindOf(Do()) = %v, want %v (err %v)", got, tt.wantKind, err)
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != tt.wantCode {
				t.Errorf("Do() = %v, want SQLSTATE %s in the chain", err, tt.wantCode)
			}
		})
	}
}

func TestRunnerClientGoneIsNotATimeout(t *testing.T) {
	t.Parallel()
	pool := open(t, pg.Options{MaxConns: 1})
	run := pg.Runner{Pool: pool, Timeouts: pg.Timeouts{QueryTimeout: 10 * time.Second, AcquireTimeout: time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := run.Do(ctx, exec("SELECT pg_sleep(10)"))
	if !errors.Is(err, context.DeadlineExceeded) || apperr.KindOf(err) != apperr.Internal {
		t.Errorf("Do() after the caller's deadline = %v, want the caller's context.DeadlineExceeded", err)
	}
}

// TestRunnerOnClosedPool: after a graceful shutdown closed the pool, a
// request still running is told the database is unavailable (503, try
// again), not that it failed.
func TestRunnerOnClosedPool(t *testing.T) {
	t.Parallel()
	pool := open(t, pg.Options{MaxConns: 2})
	run := pg.Runner{Pool: pool, Timeouts: pg.Timeouts{QueryTimeout: time.Second, AcquireTimeout: time.Second}}
	pool.Close()
	err := run.Do(context.Background(), exec("SELECT 1"))
	if got := apperr.KindOf(err); got != apperr.Unavailable {
		t.Errorf("KindOf(Do() on a closed pool) = %v, want Unavailable (err %v)", got, err)
	}
}
