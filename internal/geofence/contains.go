package geofence

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Point is a lng/lat pair in EPSG:4326.
type Point struct {
	Lng, Lat float64
}

// Containment is tested against geofence_parts, the subdivided copy of the
// fences kept by triggers (migration 00003): the index finds the one or two
// small parts under a point instead of whole countries. A point on a
// fence's boundary counts as inside (ST_Intersects). Edges are straight
// lines in lng/lat, as stored.
const (
	containsSQL = `
SELECT f.id, f.name, f.properties - 'name'
FROM geofences f
WHERE f.id IN (
  SELECT p.fence_id FROM geofence_parts p
  WHERE ST_Intersects(p.geom, ST_SetSRID(ST_MakePoint($1::float8, $2::float8), 4326)))
ORDER BY f.id`
	// ContainsBatchSQL answers many points in one round trip: $1 and $2
	// are the lng and lat arrays; each row is a point's index (1-based)
	// and one fence containing it.
	ContainsBatchSQL = `
SELECT DISTINCT pt.i, p.fence_id
FROM unnest($1::float8[], $2::float8[]) WITH ORDINALITY AS pt(lng, lat, i)
JOIN geofence_parts p
  ON ST_Intersects(p.geom, ST_SetSRID(ST_MakePoint(pt.lng, pt.lat), 4326))
ORDER BY pt.i, p.fence_id`
	// NaiveContainsBatchSQL is ContainsBatchSQL against the whole fences,
	// the baseline the subdivided copy is measured against.
	NaiveContainsBatchSQL = `
SELECT DISTINCT pt.i, f.id
FROM unnest($1::float8[], $2::float8[]) WITH ORDINALITY AS pt(lng, lat, i)
JOIN geofences f
  ON ST_Intersects(f.geom, ST_SetSRID(ST_MakePoint(pt.lng, pt.lat), 4326))
ORDER BY pt.i, f.id`
)

// Contains returns the fences containing p (boundary included), by id,
// without their geometries.
func (s *Service) Contains(ctx context.Context, p Point) ([]Feature, error) {
	var fs []Feature
	err := s.db.do(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, containsSQL, p.Lng, p.Lat)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var f Feature
			if err := rows.Scan(&f.ID, &f.Name, &f.Props); err != nil {
				return err
			}
			fs = append(fs, f)
		}
		return rows.Err()
	})
	return fs, err
}

// ContainsBatch returns, for each point, the ids of the fences containing
// it in ascending order, in one database round trip.
func (s *Service) ContainsBatch(ctx context.Context, pts []Point) ([][]int64, error) {
	lngs, lats := make([]float64, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		lngs[i], lats[i] = p.Lng, p.Lat
	}
	out := make([][]int64, len(pts))
	for i := range out {
		out[i] = []int64{}
	}
	if len(pts) == 0 {
		return out, nil
	}
	err := s.db.do(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, ContainsBatchSQL, lngs, lats)
		if err != nil {
			return err
		}
		defer rows.Close()
		var i, id int64
		for rows.Next() {
			if err := rows.Scan(&i, &id); err != nil {
				return err
			}
			if i >= 1 && int(i) <= len(out) {
				out[i-1] = append(out[i-1], id)
			}
		}
		return rows.Err()
	})
	return out, err
}
