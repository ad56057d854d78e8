package geofence

import (
	"context"
	"slices"
	"strconv"

	"github.com/geogate/geogate/internal/pg"
	"github.com/jackc/pgx/v5"
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

// Contains returns the features of layer holding p (boundary included),
// by key, with their properties and without their geometries; layer ""
// is the built-in fences. They stop before the one that would take them
// past maxBytes encoded (0: no bound; the first always fits), and cut
// says so. It fails with apperr.NotFound for an unknown layer and with a
// validation error for a layer without polygons.
func (s *Service) Contains(ctx context.Context, layer string, p Point, maxBytes int) (fs []Feature, cut bool, err error) {
	fs = []Feature{}
	cut, err = s.ContainsRows(ctx, layer, p, maxBytes, func(f Feature) error {
		fs = append(fs, f)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return fs, cut, nil
}

// ContainsRows hands out, as their rows arrive, the features Contains
// returns, one at a time, so that the answer is never held whole; it
// returns whether maxBytes cut it short. An error of out ends it.
func (s *Service) ContainsRows(ctx context.Context, layer string, p Point, maxBytes int, out func(Feature) error) (cut bool, err error) {
	sql := containsSQL
	var l *layerSQL
	if layer != "" {
		if l, err = s.polygonLayer(layer); err != nil {
			return false, err
		}
		sql = l.containsOne
	}
	err = s.db.read(ctx, func(ctx context.Context, conn pg.Conn) error {
		cut = false
		rows, err := conn.Query(ctx, sql, p.Lng, p.Lat)
		if err != nil {
			return err
		}
		defer rows.Close()
		page := pageBytes{max: maxBytes}
		for rows.Next() {
			f, err := scanContaining(rows, l)
			if err != nil {
				return err
			}
			if !page.fits(featureSize(f, false)) {
				cut = true
				return nil // the rest are read off and dropped
			}
			if err := out(f); err != nil {
				return err
			}
		}
		return rows.Err()
	})
	return cut, err
}

// scanContaining reads a row of containsSQL (l nil: the built-in fences)
// or of l's containsOne.
func scanContaining(rows pgx.Rows, l *layerSQL) (Feature, error) {
	var f Feature
	if l == nil {
		err := rows.Scan(&f.ID, &f.Name, &f.Props)
		return f, err
	}
	var key string
	var name *string
	if err := rows.Scan(&key, &name, &f.Props); err != nil {
		return f, err
	}
	f.Key, f.Name, f.NoName = l.keyJSON(key), deref(name), name == nil
	return f, nil
}

// polygonLayer returns the statements of the published layer id, which
// must hold polygons.
func (s *Service) polygonLayer(id string) (*layerSQL, error) {
	l, err := s.layer(id)
	if err != nil {
		return nil, err
	}
	if l.containsBatch == "" {
		return nil, notPolygonal(l.l)
	}
	return l, nil
}

// ContainsSQL returns the statement QueueInside queues for layer, whose
// arguments are the arrays of longitudes and latitudes and whose rows
// are (point index, key as text), so that benchmarks can drive the
// identical SQL directly. ok is false for an unknown layer or one
// without polygons.
func (s *Service) ContainsSQL(layer string) (sql string, ok bool) {
	l, err := s.polygonLayer(layer)
	if err != nil {
		return "", false
	}
	return l.containsBatch, true
}

// Polygonal says whether layer is published and holds polygons, so that
// its features can hold points.
func (s *Service) Polygonal(layer string) bool {
	_, err := s.polygonLayer(layer)
	return err == nil
}

// AsCaller says whether layer runs its statements as the caller (the
// layer file's as_caller).
func (s *Service) AsCaller(layer string) bool {
	l := s.cat.Layer(layer)
	return l != nil && l.AsCaller
}

// QueueInside queues, in b, finding the features of layer holding each
// point (lngs[i], lats[i]). ok is false for an unknown layer or one
// without polygons: nothing is queued.
func (s *Service) QueueInside(b *pgx.Batch, layer string, lngs, lats []float64) (*Found, bool) {
	l, err := s.polygonLayer(layer)
	if err != nil {
		return nil, false
	}
	return queueFound(b, len(lngs), l.containsBatch, lngs, lats), true
}

// Found is what a queued lookup found, once its batch is read: for each
// point or segment, in order, the keys (as text) of the features it
// found, in ascending order.
type Found struct {
	Keys [][]string
}

// queueFound queues sql over args, whose rows are (index from 1, key),
// for n points or segments.
func queueFound(b *pgx.Batch, n int, sql string, args ...any) *Found {
	f := &Found{Keys: make([][]string, n)}
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		var i int
		var key string
		_, err := pgx.ForEachRow(rows, []any{&i, &key}, func() error {
			f.Keys[i-1] = append(f.Keys[i-1], key)
			return nil
		})
		for _, ks := range f.Keys {
			slices.Sort(ks)
		}
		return err
	})
	return f
}

// ContainsBatch returns, for each point, the ids of the features of layer
// holding it in ascending order, each written as JSON (a number, or a
// string for a text key), in one database round trip; layer "" is the
// built-in fences. It fails as Contains does.
func (s *Service) ContainsBatch(ctx context.Context, layer string, pts []Point) ([][]string, error) {
	sql := ContainsBatchSQL
	var l *layerSQL
	if layer != "" {
		var err error
		if l, err = s.polygonLayer(layer); err != nil {
			return nil, err
		}
		sql = l.containsBatch
	}
	lngs, lats := make([]float64, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		lngs[i], lats[i] = p.Lng, p.Lat
	}
	out := make([][]string, len(pts))
	for i := range out {
		out[i] = []string{}
	}
	if len(pts) == 0 {
		return out, nil
	}
	err := s.db.read(ctx, func(ctx context.Context, conn pg.Conn) error {
		rows, err := conn.Query(ctx, sql, lngs, lats)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			i, key, err := scanMatch(rows, l)
			if err != nil {
				return err
			}
			if i >= 1 && int(i) <= len(out) {
				out[i-1] = append(out[i-1], key)
			}
		}
		return rows.Err()
	})
	return out, err
}

// scanMatch reads one (point index, id) row of a batch, the id written as
// JSON: a fence's integer id when l is nil, else l's key.
func scanMatch(rows pgx.Rows, l *layerSQL) (int64, string, error) {
	var i int64
	if l == nil {
		var id int64
		err := rows.Scan(&i, &id)
		return i, strconv.FormatInt(id, 10), err
	}
	var key string
	err := rows.Scan(&i, &key)
	return i, string(l.keyJSON(key)), err
}
