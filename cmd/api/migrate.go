package main

import (
	"context"
	"flag"
	"io"

	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/pg"
)

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(getenv, config.NeedPostgres)
	if err != nil {
		return err
	}
	pool, err := openMigratePool(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	return pg.Migrate(ctx, pool, migrationSchemas(cfg), newLogger(stderr, cfg.Server))
}
