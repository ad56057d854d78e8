package geofence

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
)

// WithinQuery asks for the features of Layer within Radius metres of
// (Lng, Lat), nearest first.
type WithinQuery struct {
	Layer    string
	Lng, Lat float64
	Radius   float64
	Limit    int
	// Props lists the stored properties to return; nil means all of them
	// and an empty slice none.
	Props []string
	// After resumes after this position (from a cursor); nil starts at the
	// nearest feature.
	After *Position
}

// Feature is one /within or geofence result. Props and Geometry are JSON
// (an object without the name key, and a GeoJSON geometry).
type Feature struct {
	ID       int64
	Name     string
	Props    []byte
	Geometry []byte
	// Distance is the spheroid distance in metres (only for /within).
	Distance float64
}

// WithinPage is one page of /within results, nearest first (ties by id).
type WithinPage struct {
	Features []Feature
	// Next is where the next page starts, or nil when none remains.
	Next *Position
}

// withinSQL is /within for one table. Ordering by exact spheroid distance
// over every match would sort them all; instead:
//
//  1. bound: the first $4 matches in index (KNN, sphere) order give an
//     upper bound on the spheroid distance of the $4-th nearest match,
//     whatever the difference between sphere and spheroid, because any $4
//     matches do;
//  2. the answer: matches within that bound (a small, index-assisted
//     range, slightly widened against rounding) sorted exactly by
//     (spheroid distance, id).
//
// Both steps use ST_DWithin on geom::geography, the indexed expression.
// $1 lng, $2 lat, $3 radius m, $4 rows, $5/$6 keyset position or NULLs,
// $7 property names or NULL for all.
func withinSQL(table string) string {
	return fmt.Sprintf(`
WITH pt AS MATERIALIZED (
  SELECT ST_SetSRID(ST_MakePoint($1::float8, $2::float8), 4326)::geography AS g
),
bound AS (
  SELECT max(ST_Distance(c.geom::geography, (SELECT g FROM pt), true)) AS d
  FROM (
    SELECT l.geom FROM %[1]s l
    WHERE ST_DWithin(l.geom::geography, (SELECT g FROM pt), $3::float8)
      AND ($6::bigint IS NULL
           OR (ST_Distance(l.geom::geography, (SELECT g FROM pt), true), l.id) > ($5::float8, $6::bigint))
    ORDER BY l.geom::geography <-> (SELECT g FROM pt)
    LIMIT $4::int
  ) c
)
SELECT r.id, coalesce(r.name::text, ''), r.d,
  CASE WHEN $7::text[] IS NULL THEN coalesce(r.properties, '{}'::jsonb)
       ELSE (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
             FROM jsonb_each(coalesce(r.properties, '{}'::jsonb)) e WHERE e.key = ANY($7::text[]))
  END - '{name,distance_m}'::text[],
  ST_AsGeoJSON(r.geom)
FROM (
  SELECT l.id, l.name, l.properties, l.geom,
         ST_Distance(l.geom::geography, (SELECT g FROM pt), true) AS d
  FROM %[1]s l
  WHERE ST_DWithin(l.geom::geography, (SELECT g FROM pt),
                   LEAST($3::float8, (SELECT d FROM bound) * (1 + 1e-9) + 1e-6))
    AND ST_DWithin(l.geom::geography, (SELECT g FROM pt), $3::float8)
    AND ($6::bigint IS NULL
         OR (ST_Distance(l.geom::geography, (SELECT g FROM pt), true), l.id) > ($5::float8, $6::bigint))
  ORDER BY d, l.id
  LIMIT $4::int
) r
ORDER BY r.d, r.id`, table)
}

// WithinSQL returns the statement /within runs for layer, with its
// arguments for q, so that benchmarks can drive the identical SQL
// directly. ok is false for an unknown layer.
func (s *Service) WithinSQL(q WithinQuery) (sql string, args []any, ok bool) {
	l, ok := s.layers[q.Layer]
	if !ok {
		return "", nil, false
	}
	return l.within, withinArgs(q), true
}

func withinArgs(q WithinQuery) []any {
	var afterD, afterID any
	if q.After != nil {
		afterD, afterID = q.After.Dist, q.After.ID
	}
	var props any
	if q.Props != nil {
		props = q.Props
	}
	return []any{q.Lng, q.Lat, q.Radius, q.Limit + 1, afterD, afterID, props}
}

// Within returns one page of features of q.Layer within q.Radius metres,
// nearest first by spheroid distance, ties by id. It fails with
// apperr.NotFound for an unknown layer.
func (s *Service) Within(ctx context.Context, q WithinQuery) (WithinPage, error) {
	l, ok := s.layers[q.Layer]
	if !ok {
		return WithinPage{}, apperr.Errorf(apperr.NotFound, "Unknown layer %q.", q.Layer)
	}
	var page WithinPage
	err := s.db.do(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, l.within, withinArgs(q)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		// Most pages are short: grow as rows come rather than reserve
		// the whole limit per request (it dominated allocations).
		page.Features = []Feature{}
		for rows.Next() {
			var f Feature
			if err := rows.Scan(&f.ID, &f.Name, &f.Distance, &f.Props, &f.Geometry); err != nil {
				return err
			}
			page.Features = append(page.Features, f)
		}
		return rows.Err()
	})
	if err != nil {
		return WithinPage{}, err
	}
	if len(page.Features) > q.Limit {
		page.Features = page.Features[:q.Limit]
		last := page.Features[q.Limit-1]
		page.Next = &Position{Dist: last.Distance, ID: last.ID}
	}
	return page, nil
}
