package geofence

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/pg"
)

// Timeouts bound every database call of the package.
type Timeouts = pg.Timeouts

// db runs the package's queries under Timeouts (see pg.Runner). It is the
// only code that touches the pool.
type db struct{ run pg.Runner }

// do runs fn on a pooled connection, bounded and classified as pg.Runner
// does.
func (d *db) do(ctx context.Context, fn func(ctx context.Context, conn pg.Conn) error) error {
	return d.run.Do(ctx, fn)
}

// read runs a read-only fn, on a replica when one may serve it (see
// pg.Runner.Read).
func (d *db) read(ctx context.Context, fn func(ctx context.Context, conn pg.Conn) error) error {
	return d.run.Read(ctx, fn)
}

// pool is the pool the package's queries run on.
func (d *db) pool() *pgxpool.Pool { return d.run.Pool }
