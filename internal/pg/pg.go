// Package pg opens geogate's PostgreSQL pool and applies its migrations.
package pg

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options tunes the pool.
type Options struct {
	// Lazy opens the pool without waiting for the server (a replica may be
	// down at start; the pool connects when it can), with a connect
	// timeout of 2s unless the URL sets one.
	Lazy     bool
	MaxConns int32
	// MinConns are opened in the background at start and kept open, so
	// that the first burst of traffic does not wait for connections.
	MinConns int32
	// AppName shows up in pg_stat_activity.
	AppName string
	// StatementTimeout, when positive, is every connection's
	// statement_timeout: the server ends any statement running longer
	// (SQLSTATE 57014), even when the client's cancel request is lost.
	// Rounded up to whole milliseconds. Leave it 0 for pools that run
	// long statements on purpose (migrations, imports).
	StatementTimeout time.Duration
	// Warm, when set, runs on every new connection before the pool hands
	// it out; its errors are ignored. A server process pays for its first
	// geography call (tens of milliseconds), so the serving pool pays it
	// here, for MinConns before the first request, rather than in one.
	Warm string
	// GenericPlans makes every connection plan its prepared statements
	// once, for any parameters (plan_cache_mode force_generic_plan).
	// PostgreSQL otherwise plans such a statement anew for each call as
	// long as that looks cheaper on paper; for tile statements, whose
	// best plan hardly depends on the tile, that planning costs more than
	// rendering a small tile.
	GenericPlans bool
	// Schema, when set, is geogate's own schema: every connection puts it
	// first on its search_path, ahead of the server's own, so that
	// geogate's tables (api_keys, tile_versions, ...) are found there and
	// the user's tables where they always are. Migrations run on a pool
	// without it: they name geogate's schema themselves.
	Schema string
}

// DefaultSchema holds geogate's own tables unless GEOGATE_SCHEMA says
// otherwise.
const DefaultSchema = "geogate"

// cancelGrace is how long a statement may run on after its context ends
// while the server handles the cancel request; past it the driver gives
// the connection up (a hung or unreachable server).
const cancelGrace = 2 * time.Second

// WarmPostGIS makes a new server process load PostGIS and set up its
// spheroid arithmetic.
const WarmPostGIS = "SELECT ST_Distance('POINT(0 0)'::geography, 'POINT(1 1)'::geography, true)"

// Open connects to url and checks that the database answers before ctx
// ends. The error says which part failed and never includes a password.
//
// On every connection of the pool, a statement whose context ends (its
// deadline passed, or the client went away) is cancelled inside
// PostgreSQL with a cancel request, so the server stops working on it and
// the connection, still healthy, goes back to the pool; only a server that
// does not answer the cancel within cancelGrace costs the connection.
func Open(ctx context.Context, url string, o Options) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL is malformed: %w", err)
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	if o.MinConns > 0 {
		cfg.MinConns = min(o.MinConns, cfg.MaxConns)
	}
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.HealthCheckPeriod = 15 * time.Second
	if o.AppName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = o.AppName
	}
	if o.StatementTimeout > 0 {
		ms := (o.StatementTimeout + time.Millisecond - 1) / time.Millisecond
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(int64(ms), 10)
	}
	if o.GenericPlans {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelGrace}
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if o.Schema != "" {
			if _, err := c.Exec(ctx, searchPathSQL(o.Schema)); err != nil {
				return fmt.Errorf("set search_path: %w", err)
			}
		}
		if o.Warm != "" {
			_, _ = c.Exec(ctx, o.Warm)
		}
		return nil
	}
	if o.Lazy && cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	}
	if deadline, ok := ctx.Deadline(); ok && cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = time.Until(deadline)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if o.Lazy {
		return pool, nil
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database at %s:%d is unreachable: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return pool, nil
}

// searchPathSQL is the statement that puts schema first on a connection's
// search_path, keeping what the server set (PostGIS may live in a schema
// of its own there).
func searchPathSQL(schema string) string {
	quoted := strings.ReplaceAll(pgx.Identifier{schema}.Sanitize(), "'", "''")
	return "SELECT set_config('search_path', '" + quoted + ", ' || current_setting('search_path'), false)"
}
