package pg_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

func open(t *testing.T, o pg.Options) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pg.Open(ctx, testenv.Getenv(t, "TEST_DATABASE_URL"), o)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func show(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var v string
	if err := pool.QueryRow(context.Background(), "SHOW statement_timeout").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// serverDefault is statement_timeout as a connection opened without any
// options sees it.
func serverDefault(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.Getenv(t, "TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStatementTimeoutSetting(t *testing.T) {
	t.Parallel()
	def := serverDefault(t)
	tests := []struct {
		name    string
		timeout time.Duration
		want    string
	}{
		{"Seconds", 12 * time.Second, "12s"},
		{"Milliseconds", 1500 * time.Millisecond, "1500ms"},
		// Not a few milliseconds: SHOW itself would run under that timeout
		// and a busy machine can take longer than that to answer it.
		{"RoundedUpToAMillisecond", 1999500 * time.Microsecond, "2s"},
		{"Unset", 0, def},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := open(t, pg.Options{MaxConns: 2, StatementTimeout: tt.timeout})
			if got := show(t, pool); got != tt.want {
				t.Errorf("Open(StatementTimeout: %v): SHOW statement_timeout = %q, want %q", tt.timeout, got, tt.want)
			}
		})
	}
	if def == "12s" || def == "1500ms" {
		t.Errorf("the server default is %s, one of the values set: the test cannot tell them apart", def)
	}
}

func TestStatementTimeoutEndsStatementWithoutClientDeadline(t *testing.T) {
	t.Parallel()
	pool := open(t, pg.Options{MaxConns: 1, StatementTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := pool.Exec(context.Background(), "SELECT pg_sleep(5)") // no deadline on the client side
	took := time.Since(start)
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "57014" {
		t.Fatalf("pg_sleep(5) under a 300ms statement_timeout = %v, want SQLSTATE 57014", err)
	}
	if took > 3*time.Second {
		t.Errorf("pg_sleep(5) ended after %v, want about 300ms", took)
	}
	// The connection survives and serves the next statement.
	var one int
	if err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Errorf("SELECT 1 after the timeout = %d, %v; want 1, nil", one, err)
	}
}

func TestNoStatementTimeoutLetsLongStatementsRun(t *testing.T) {
	t.Parallel()
	if def := serverDefault(t); def != "0" {
		t.Fatalf("the server's statement_timeout is %s: this test needs the default 0", def)
	}
	pool := open(t, pg.Options{MaxConns: 1})
	if _, err := pool.Exec(context.Background(), "SELECT pg_sleep(0.5)"); err != nil {
		t.Errorf("pg_sleep(0.5) without a statement_timeout = %v, want nil", err)
	}
}

// TestWarmRunsOnEveryNewConnection: each connection the pool opens has
// run the warm-up statement before its first use, and a failing warm-up
// leaves the connection usable.
func TestWarmRunsOnEveryNewConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name, warm, want string
	}{
		{"Runs", "SELECT set_config('geogate.warmed', 'yes', false)", "yes"},
		{"FailureIgnored", "SELECT no_such_function()", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := open(t, pg.Options{MaxConns: 3, Warm: tt.warm})
			// Three connections held at once: each was opened for this.
			var conns []*pgxpool.Conn
			for range 3 {
				c, err := pool.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
			}
			for i, c := range conns {
				var got string
				if err := c.QueryRow(ctx, "SELECT coalesce(current_setting('geogate.warmed', true), '')").Scan(&got); err != nil {
					t.Fatalf("connection %d: %v", i, err)
				}
				if got != tt.want {
					t.Errorf("connection %d: geogate.warmed = %q, want %q", i, got, tt.want)
				}
				c.Release()
			}
		})
	}
}

func TestWarmPostGISIsValid(t *testing.T) {
	t.Parallel()
	db := testenv.DB(t)
	var d float64
	if err := db.QueryRow(context.Background(), pg.WarmPostGIS).Scan(&d); err != nil || d < 150_000 || d > 160_000 {
		t.Errorf("%s = %v, %v; want about 157 km", pg.WarmPostGIS, d, err)
	}
}

// TestGenericPlansPlanOnce: with GenericPlans a prepared statement keeps
// one plan for every parameter value, so a bound value never shows up in
// it; without, PostgreSQL plans the first calls for their values.
func TestGenericPlansPlanOnce(t *testing.T) {
	t.Parallel()
	for _, generic := range []bool{false, true} {
		pool := open(t, pg.Options{MaxConns: 1, GenericPlans: generic})
		ctx := context.Background()
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mode string
		if err := conn.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, "PREPARE probe(int) AS SELECT count(*) FROM pg_class WHERE relpages > $1"); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE probe(424242)")
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Exec(ctx, "DEALLOCATE probe")
		conn.Release()
		custom := strings.Contains(strings.Join(lines, "\n"), "424242")
		if wantMode := map[bool]string{false: "auto", true: "force_generic_plan"}[generic]; mode != wantMode {
			t.Errorf("GenericPlans %v: plan_cache_mode = %q, want %q", generic, mode, wantMode)
		}
		if custom == generic {
			t.Errorf("GenericPlans %v: plan %q shows the bound value = %v, want %v", generic, lines, custom, !generic)
		}
	}
}

// TestEndedContextCancelsInServer: on every pool Open makes, whatever its
// options, a statement whose context ends (a deadline, a client that went
// away) stops inside PostgreSQL, and its connection, still healthy, goes
// back to the pool.
func TestEndedContextCancelsInServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    pg.Options
	}{
		{"Serving", pg.Options{MaxConns: 1, AppName: "cancel-serving", StatementTimeout: time.Minute, Warm: pg.WarmPostGIS}},
		{"GenericPlans", pg.Options{MaxConns: 1, AppName: "cancel-tiles", GenericPlans: true}},
		{"Bare", pg.Options{MaxConns: 1, AppName: "cancel-bare"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := open(t, tc.o)
			var pid int
			if err := pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
				t.Fatal(err)
			}
			for _, end := range []string{"deadline", "cancel"} {
				ctx, cancel := endIn(end, 200*time.Millisecond)
				start := time.Now()
				_, err := pool.Exec(ctx, "SELECT pg_sleep(30)")
				cancel()
				var pe *pgconn.PgError
				if !errors.As(err, &pe) || pe.Code != "57014" {
					t.Errorf("%s: Exec(pg_sleep(30)) = %v, want the statement cancelled in the server (57014)", end, err)
				}
				if took := time.Since(start); took > 5*time.Second {
					t.Errorf("%s: the statement ended %v after its context, want well under the grace", end, took)
				}
				var got int
				if err := pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&got); err != nil || got != pid {
					t.Errorf("%s: the next statement ran on backend %d (%v), want the same connection %d back in the pool", end, got, err, pid)
				}
			}
		})
	}
}

// endIn returns a context that ends after d: by its deadline, or for
// "cancel" by a cancel, as when a client hangs up.
func endIn(how string, d time.Duration) (context.Context, context.CancelFunc) {
	if how == "deadline" {
		return context.WithTimeout(context.Background(), d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(d, cancel)
	return ctx, cancel
}
