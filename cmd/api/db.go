package main

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/pg"
)

// openCLIPool opens a small pool on the configured database for a
// one-shot command (migrate, import, keys), waiting at most
// STARTUP_TIMEOUT for it.
func openCLIPool(ctx context.Context, cfg config.Config, app string) (*pgxpool.Pool, error) {
	sctx, cancel := context.WithTimeout(ctx, cfg.Server.StartupTimeout)
	defer cancel()
	return pg.Open(sctx, cfg.DB.URL, pg.Options{MaxConns: 2, AppName: app, Schema: cfg.DB.Schema})
}

// openMigratePool opens the pool migrations run on: unlike the others it
// keeps the server's search_path, since the migrations name geogate's
// schema themselves.
func openMigratePool(ctx context.Context, cfg config.Config) (*pgxpool.Pool, error) {
	sctx, cancel := context.WithTimeout(ctx, cfg.Server.StartupTimeout)
	defer cancel()
	return pg.Open(sctx, cfg.DB.URL, pg.Options{MaxConns: 2, AppName: "geogate-migrate"})
}

// migrationSchemas are the schemas migrations create in: geogate's own,
// and the first published one for its data tables.
func migrationSchemas(cfg config.Config) pg.Schemas {
	return pg.Schemas{Own: cfg.DB.Schema, Data: cfg.Catalog.Schemas[0]}
}
