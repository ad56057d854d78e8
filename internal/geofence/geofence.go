// Package geofence answers proximity queries (/within) over point and
// polygon layers and stores geofences with point-in-fence checks, all in
// PostGIS. Distances are on the WGS84 spheroid; every query runs under a
// deadline and a bounded wait for a pool connection.
package geofence

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Settings configure a Service and its Handler; internal/config fills
// them.
type Settings struct {
	Timeouts
	Rules
	// Layers are the tables /within may search. Each needs the columns
	// id (bigint), name (text), properties (jsonb) and geom (a 4326
	// geometry), and a GiST index on (geom::geography) to be fast.
	Layers []string
	// CursorKey signs paging cursors. Empty means a random key per start:
	// cursors then stop working across restarts and between replicas.
	CursorKey string
}

// Service is the proximity and geofence capability.
type Service struct {
	db     db
	layers map[string]layer
	names  []string
	// committed runs after every write that changed a fence.
	committed func(context.Context)
}

// layer holds the /within statement of one table, built once at start from
// a checked table name: request input never reaches an identifier.
type layer struct {
	name   string
	within string
}

// New checks that every configured layer exists with the columns /within
// reads, and returns the Service. committed, when not nil, runs after
// every write that changed a fence, once its transaction has committed
// and before the write returns: the tile cache retires the layer's tiles
// there.
func New(ctx context.Context, pool *pgxpool.Pool, s Settings, committed func(context.Context)) (*Service, error) {
	if committed == nil {
		committed = func(context.Context) {}
	}
	svc := &Service{db: db{pool: pool, timeouts: s.Timeouts}, layers: map[string]layer{}, committed: committed}
	for _, name := range s.Layers {
		if err := checkLayer(ctx, pool, name); err != nil {
			return nil, err
		}
		svc.layers[name] = layer{name: name, within: withinSQL(pgx.Identifier{name}.Sanitize())}
		svc.names = append(svc.names, name)
	}
	return svc, nil
}

const layerColumnsSQL = `
SELECT coalesce(array_agg(a.attname::text ORDER BY a.attname), '{}')
FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
  AND a.attname IN ('id', 'name', 'properties', 'geom')`

func checkLayer(ctx context.Context, pool *pgxpool.Pool, name string) error {
	var cols []string
	if err := pool.QueryRow(ctx, layerColumnsSQL, pgx.Identifier{name}.Sanitize()).Scan(&cols); err != nil {
		return fmt.Errorf("geofence layer %q: %w", name, err)
	}
	if len(cols) != 4 {
		return fmt.Errorf("geofence layer %q: need a table or view with columns geom, id, name, properties; found [%s]", name, strings.Join(cols, ", "))
	}
	return nil
}
