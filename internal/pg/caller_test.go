package pg_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// tenantTable makes a table of two tenants' rows whose policy shows a
// role the rows of the tenant claim in request.jwt.claims, and the role
// itself; roles are the cluster's, so their names are this package's.
func tenantTable(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	for _, sql := range []string{
		`DO $$ BEGIN CREATE ROLE gg_pgtest_reader NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
		`DROP TABLE IF EXISTS pg_caller_rows`,
		`CREATE TABLE pg_caller_rows (id int PRIMARY KEY, tenant text NOT NULL)`,
		`INSERT INTO pg_caller_rows VALUES (1, 'a'), (2, 'a'), (3, 'b')`,
		`ALTER TABLE pg_caller_rows ENABLE ROW LEVEL SECURITY`,
		`CREATE POLICY tenant ON pg_caller_rows USING (tenant = current_setting('request.jwt.claims', true)::json->>'tenant')
		   WITH CHECK (tenant = current_setting('request.jwt.claims', true)::json->>'tenant')`,
		`GRANT SELECT, INSERT ON pg_caller_rows TO gg_pgtest_reader`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func TestStatementsRunAsTheCaller(t *testing.T) {
	pool := open(t, pg.Options{MaxConns: 1})
	tenantTable(t, pool)
	cfg := pool.Config().Copy()
	trips := &testenv.RoundTrips{}
	cfg.ConnConfig.Tracer = trips
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(traced.Close)
	run := pg.Runner{Pool: traced, Timeouts: pg.Timeouts{QueryTimeout: 10 * time.Second, AcquireTimeout: 10 * time.Second}}
	caller := func(tenant string) context.Context {
		ctx := pg.WithCallerSlot(context.Background())
		c := pg.Caller{Role: "gg_pgtest_reader", Claims: `{"tenant":"` + tenant + `"}`, Key: "k-" + tenant, Identity: "key:k-" + tenant}
		if err := pg.SetCaller(ctx, c); err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	ids := func(ctx context.Context) (got []int, user, key string) {
		t.Helper()
		err := run.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
			rows, err := conn.Query(ctx, "SELECT id, current_user, current_setting('request.geogate.key', true) FROM pg_caller_rows ORDER BY id")
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var id int
				if err := rows.Scan(&id, &user, &key); err != nil {
					return err
				}
				got = append(got, id)
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		return got, user, key
	}
	for _, tt := range []struct {
		tenant string
		want   []int
	}{{"a", []int{1, 2}}, {"b", []int{3}}, {"c", nil}} {
		ids(caller(tt.tenant)) // prepares the statement
		before := trips.N()
		got, user, key := ids(caller(tt.tenant))
		if trips := trips.N() - before; trips != 1 {
			t.Errorf("tenant %s: a query as the caller took %d round trips, want 1", tt.tenant, trips)
		}
		if !equalInts(got, tt.want) || (len(got) > 0 && (user != "gg_pgtest_reader" || key != "k-"+tt.tenant)) {
			t.Errorf("tenant %s: rows %v as %q with key %q, want %v as gg_pgtest_reader with key k-%s", tt.tenant, got, user, key, tt.want, tt.tenant)
		}
	}

	// The connection goes back to the pool as the login role, with no
	// claims left: the next request without a caller sees every row.
	var n int
	var user, claims string
	err = run.Do(context.Background(), func(ctx context.Context, conn pg.Conn) error {
		return conn.QueryRow(ctx, "SELECT count(*), current_user, coalesce(current_setting('request.jwt.claims', true), '') FROM pg_caller_rows").Scan(&n, &user, &claims)
	})
	if err != nil || n != 3 || user == "gg_pgtest_reader" || claims != "" {
		t.Errorf("after the caller's requests, without one: %d rows as %q, claims %q, err %v; want 3 as the login role, no claims", n, user, claims, err)
	}

	// QueryRow, Exec and SendBatch run as the caller too.
	a := caller("a")
	err = run.Do(a, func(ctx context.Context, conn pg.Conn) error {
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_caller_rows").Scan(&n); err != nil || n != 2 {
			t.Errorf("QueryRow as tenant a: %d, %v; want 2", n, err)
		}
		b := &pgx.Batch{}
		b.Queue("SELECT count(*) FROM pg_caller_rows WHERE id < 3")
		b.Queue("SELECT count(*) FROM pg_caller_rows")
		br := conn.SendBatch(ctx, b)
		var x, y int
		if err := br.QueryRow().Scan(&x); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&y); err != nil {
			return err
		}
		if err := br.Close(); err != nil || x != 2 || y != 2 {
			t.Errorf("SendBatch as tenant a: %d and %d, %v; want 2 and 2", x, y, err)
		}
		_, err := conn.Exec(ctx, "INSERT INTO pg_caller_rows VALUES (4, 'a')")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The policy's WITH CHECK refuses a row of another tenant.
	err = run.Do(a, func(ctx context.Context, conn pg.Conn) error {
		_, err := conn.Exec(ctx, "INSERT INTO pg_caller_rows VALUES (5, 'b')")
		return err
	})
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "42501" {
		t.Errorf("inserting another tenant's row = %v, want SQLSTATE 42501", err)
	}
	// So does a transaction of the caller's.
	err = run.Do(a, func(ctx context.Context, conn pg.Conn) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM pg_caller_rows").Scan(&n); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if err != nil || n != 3 {
		t.Errorf("a transaction as tenant a counted %d, %v; want 3 (1, 2 and 4)", n, err)
	}
}

func TestSetCallerNeedsASlot(t *testing.T) {
	if err := pg.SetCaller(context.Background(), pg.Caller{Role: "x"}); !errors.Is(err, pg.ErrNoCallerSlot) {
		t.Errorf("SetCaller without a slot = %v, want ErrNoCallerSlot", err)
	}
	if c := pg.CallerOf(context.Background()); c != nil {
		t.Errorf("CallerOf a bare context = %+v, want nil", c)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestQueueAsThenAsLogin: within one transaction, the statements queued
// between QueueAs and QueueAsLogin run as the caller, and those after as
// the login role again, with the caller's settings emptied; and
// WithoutCaller takes a request's caller away from its statements.
func TestQueueAsThenAsLogin(t *testing.T) {
	pool := open(t, pg.Options{MaxConns: 1})
	tenantTable(t, pool)
	ctx := context.Background()
	var login string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&login); err != nil {
		t.Fatal(err)
	}
	c := &pg.Caller{Role: "gg_pgtest_reader", Claims: `{"tenant":"b"}`, Key: "k", Identity: "key:k"}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	pg.QueueAs(b, c)
	var asCaller []int
	b.Queue("SELECT id FROM pg_caller_rows ORDER BY id").Query(func(rows pgx.Rows) error {
		var err error
		asCaller, err = pgx.CollectRows(rows, pgx.RowTo[int])
		return err
	})
	pg.QueueAsLogin(b)
	var user, claims string
	var all int
	b.Queue("SELECT current_user, current_setting('request.jwt.claims', true), (SELECT count(*) FROM pg_caller_rows)").QueryRow(func(row pgx.Row) error {
		return row.Scan(&user, &claims, &all)
	})
	b.Queue("COMMIT")
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asCaller, []int{3}) {
		t.Errorf("as the caller: rows %v, want [3] (tenant b's)", asCaller)
	}
	if user != login || claims != "" || all != 3 {
		t.Errorf("after QueueAsLogin: user %q, claims %q, %d rows; want %q, no claims, 3 rows", user, claims, all, login)
	}

	slot := pg.WithCallerSlot(ctx)
	if err := pg.SetCaller(slot, *c); err != nil {
		t.Fatal(err)
	}
	if pg.CallerOf(slot) == nil || pg.CallerOf(pg.WithoutCaller(slot)) != nil {
		t.Errorf("WithoutCaller kept the caller of its context")
	}
}
