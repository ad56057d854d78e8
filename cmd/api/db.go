package main

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/pg"
)

// openCLIPool opens a small pool on DATABASE_URL for a one-shot command
// (migrate, import, keys), waiting at most STARTUP_TIMEOUT for it. Only the
// database setting is required; other settings keep their defaults.
func openCLIPool(ctx context.Context, getenv func(string) string, app string) (*pgxpool.Pool, error) {
	url := getenv("DATABASE_URL")
	if url == "" {
		return nil, errors.New("DATABASE_URL is required")
	}
	cfg, _ := config.Load(getenv) // only the timeouts matter here
	sctx, cancel := context.WithTimeout(ctx, cfg.Server.StartupTimeout)
	defer cancel()
	return pg.Open(sctx, url, pg.Options{MaxConns: 2, AppName: app})
}
