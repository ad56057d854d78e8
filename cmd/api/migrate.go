package main

import (
	"context"
	"flag"
	"fmt"
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
	url := getenv("DATABASE_URL")
	if url == "" {
		return fmt.Errorf("DATABASE_URL is required")
	}
	cfg, _ := config.Load(getenv) // only the timeouts matter here
	sctx, cancel := context.WithTimeout(ctx, cfg.Server.StartupTimeout)
	defer cancel()
	pool, err := pg.Open(sctx, url, pg.Options{MaxConns: 2, AppName: "geogate-migrate"})
	if err != nil {
		return err
	}
	defer pool.Close()
	return pg.Migrate(ctx, pool, newLogger(stdout, "info"))
}
