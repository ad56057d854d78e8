package geofence

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/pg"
)

// FenceInput is a checked geofence to store: Props is a JSON object
// (without the name) and WKB its Polygon or MultiPolygon in EPSG:4326.
type FenceInput struct {
	Name  string
	Props []byte
	WKB   []byte
}

// InvalidGeometryError is returned when PostGIS finds a geofence's
// geometry invalid (self-intersection, nested shells, ...). Reason is the
// PostGIS reason, safe to show.
type InvalidGeometryError struct {
	Reason string
}

func (e *InvalidGeometryError) Error() string { return "invalid geometry: " + e.Reason }

var errFenceNotFound = apperr.New(apperr.NotFound, "Geofence not found.")

// The validity check and the write run in one statement: an invalid
// geometry writes nothing and comes back with its reason.
const (
	fenceGeomCTE = `
WITH v AS (
  SELECT g, ST_IsValidReason(g) AS reason
  FROM (SELECT ST_Multi(ST_Force2D(ST_GeomFromWKB($3, 4326))) AS g) s
)`
	insertFenceSQL = fenceGeomCTE + `,
w AS (
  INSERT INTO geofences (name, properties, geom)
  SELECT $1, $2, g FROM v WHERE reason = 'Valid Geometry'
  RETURNING id, name, properties, geom
)
SELECT v.reason, w.id, w.name, w.properties - 'name', ST_AsGeoJSON(w.geom)
FROM v LEFT JOIN w ON true`
	updateFenceSQL = fenceGeomCTE + `,
w AS (
  UPDATE geofences f SET name = $1, properties = $2, geom = v.g, updated_at = now()
  FROM v WHERE f.id = $4 AND v.reason = 'Valid Geometry'
    AND ($5::bytea IS NULL OR ST_CoveredBy(f.geom, ST_GeomFromWKB($5, 4326)))
  RETURNING f.id, f.name, f.properties, f.geom
)
SELECT v.reason, w.id, w.name, w.properties - 'name', ST_AsGeoJSON(w.geom)
FROM v LEFT JOIN w ON true`
	// A caller with a spatial scope (WKB; NULL for the whole world)
	// changes only the fences wholly inside it.
	deleteFenceSQL = `DELETE FROM geofences
WHERE id = $1 AND ($2::bytea IS NULL OR ST_CoveredBy(geom, ST_GeomFromWKB($2, 4326)))`
)

// The readers answer a caller with a spatial scope only the part of a fence
// inside it (see cutToScope).
var (
	// A fence is listed when its shape meets the box ($2..$5): the
	// fences' index finds those whose bounding box does (&&); a fence
	// whose bounding box lies inside the box (@) meets it; for the others
	// the exact test runs on the fence's subdivided parts (geofence_parts,
	// as for containment), only on the few small parts whose own boxes
	// meet it. A box crossing the antimeridian (west > east) is split in
	// two. The exact test widens the box by 1e-9 degrees (0.1 mm): a box
	// of zero width or height is a point or a line, for which GEOS runs a
	// full topological test that throws on an invalid part (imported
	// borders have some), while a true rectangle takes its fast path.
	// $8 is the page's byte budget (see budgetSQL).
	listFencesSQL = budgetSQL(`
SELECT f.id, f.name, (f.properties - 'name')::text AS props, ST_AsGeoJSON(c.g) AS geo FROM geofences f
CROSS JOIN LATERAL `+scopedFenceSQL("f.geom", "$7")+` c
WHERE f.id > $1
  AND ($2::float8 IS NULL
       OR (f.geom && ST_MakeEnvelope(CASE WHEN $2 <= $4 THEN $2 ELSE -180 END, $3, $4, $5, 4326)
           OR ($2 > $4 AND f.geom && ST_MakeEnvelope($2, $3, 180, $5, 4326)))
      AND (f.geom @ ST_MakeEnvelope(CASE WHEN $2 <= $4 THEN $2 ELSE -180 END, $3, $4, $5, 4326)
           OR ($2 > $4 AND f.geom @ ST_MakeEnvelope($2, $3, 180, $5, 4326))
           OR EXISTS (
             SELECT 1 FROM geofence_parts p
             WHERE p.fence_id = f.id
               AND (ST_Intersects(p.geom, ST_Expand(ST_MakeEnvelope(CASE WHEN $2 <= $4 THEN $2 ELSE -180 END, $3, $4, $5, 4326), 1e-9))
                    OR ($2 > $4 AND ST_Intersects(p.geom, ST_Expand(ST_MakeEnvelope($2, $3, 180, $5, 4326), 1e-9)))))))
  AND ($7::bytea IS NULL OR ST_Intersects(f.geom, ST_GeomFromWKB($7, 4326)))
  AND NOT ST_IsEmpty(c.g)
ORDER BY f.id
LIMIT $6`, "id, name, props, geo", []string{"id"}, "$8")
	// A caller with a spatial scope ($2) reads a fence only when part of
	// it lies in the scope, and only that part.
	getFenceSQL = `
SELECT f.id, f.name, f.properties - 'name', ST_AsGeoJSON(c.g) FROM geofences f
CROSS JOIN LATERAL ` + scopedFenceSQL("f.geom", "$2") + ` c
WHERE f.id = $1 AND ($2::bytea IS NULL OR ST_Intersects(f.geom, ST_GeomFromWKB($2, 4326)))
  AND NOT ST_IsEmpty(c.g)`
)

// CreateFence stores in and returns it with its id. An invalid geometry
// fails with *InvalidGeometryError.
func (s *Service) CreateFence(ctx context.Context, in FenceInput) (Feature, error) {
	return s.writeFence(ctx, insertFenceSQL, in.Name, in.Props, in.WKB)
}

// UpdateFence replaces fence id with in. It fails with apperr.NotFound
// when there is no such fence (or, for a caller with a spatial scope, scope
// as WKB, none wholly inside it) and *InvalidGeometryError for an invalid
// geometry.
func (s *Service) UpdateFence(ctx context.Context, id int64, in FenceInput, scope []byte) (Feature, error) {
	return s.writeFence(ctx, updateFenceSQL, in.Name, in.Props, in.WKB, id, scopeArg(scope))
}

// budgetArg is a page's byte budget as a query argument: NULL for none.
func budgetArg(n int) any {
	if n <= 0 {
		return nil
	}
	return int64(n)
}

// scopeArg is a spatial scope as a query argument: NULL for the world.
func scopeArg(wkb []byte) any {
	if wkb == nil {
		return nil
	}
	return wkb
}

func (s *Service) writeFence(ctx context.Context, sql string, args ...any) (Feature, error) {
	var f Feature
	var reason string
	var id *int64
	err := s.db.do(ctx, func(ctx context.Context, conn pg.Conn) error {
		var name *string
		err := conn.QueryRow(ctx, sql, args...).Scan(&reason, &id, &name, &f.Props, &f.Geometry)
		if name != nil {
			f.Name = *name
		}
		return err
	})
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && (pe.Code == "XX000" || strings.HasPrefix(pe.Code, "22")):
		// PostGIS raises internal errors (XX000) and data exceptions for
		// geometries it cannot process; the geometry is the only input.
		return Feature{}, &InvalidGeometryError{Reason: "PostGIS cannot process this geometry"}
	case err != nil:
		return Feature{}, err
	case reason != "Valid Geometry":
		return Feature{}, &InvalidGeometryError{Reason: safeReason(reason)}
	case id == nil:
		return Feature{}, errFenceNotFound
	}
	f.ID = *id
	s.committed(ctx)
	return f, nil
}

// GetFence returns fence id, or apperr.NotFound; with a spatial scope (as
// WKB, nil for the whole world) only a fence with part of it inside the
// scope is found, and its geometry is cut to the scope.
func (s *Service) GetFence(ctx context.Context, id int64, scope []byte) (Feature, error) {
	var f Feature
	err := s.db.read(ctx, func(ctx context.Context, conn pg.Conn) error {
		return conn.QueryRow(ctx, getFenceSQL, id, scopeArg(scope)).Scan(&f.ID, &f.Name, &f.Props, &f.Geometry)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Feature{}, errFenceNotFound
	}
	return f, err
}

// DeleteFence deletes fence id, or fails with apperr.NotFound; with a
// spatial scope (as WKB, nil for the whole world) only a fence wholly
// inside it is found.
func (s *Service) DeleteFence(ctx context.Context, id int64, scope []byte) error {
	var n int64
	err := s.db.do(ctx, func(ctx context.Context, conn pg.Conn) error {
		tag, err := conn.Exec(ctx, deleteFenceSQL, id, scopeArg(scope))
		n = tag.RowsAffected()
		return err
	})
	switch {
	case err != nil:
		return err
	case n == 0:
		return errFenceNotFound
	}
	s.committed(ctx)
	return nil
}

// BBox is a lng/lat envelope; West > East means it crosses the
// antimeridian.
type BBox struct {
	West, South, East, North float64
}

// ListQuery asks for a page of geofences by id, optionally only those
// whose shape meets BBox (a point on a fence's boundary counts).
type ListQuery struct {
	BBox    *BBox
	Limit   int
	AfterID int64
	// Scope, a spatial scope as WKB, limits the answer to the fences
	// with part of them inside it, cut to it; nil is the whole world.
	Scope []byte
	// MaxBytes bounds the encoded size of the page (see pageBytes); 0
	// means no bound.
	MaxBytes int
}

// ListFences returns up to q.Limit fences after q.AfterID in id order,
// fewer when they would pass q.MaxBytes, and whether more remain.
func (s *Service) ListFences(ctx context.Context, q ListQuery) ([]Feature, bool, error) {
	fs := make([]Feature, 0, min(q.Limit, 128))
	more, err := s.ListFenceRows(ctx, q, func(f Feature) error {
		fs = append(fs, f)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return fs, more, nil
}

// ListFenceRows hands out, as their rows arrive, the fences ListFences
// returns, one at a time, so that a page is never held whole; it returns
// whether more remain after the last handed out. An error of out ends
// the page with it.
func (s *Service) ListFenceRows(ctx context.Context, q ListQuery, out func(Feature) error) (bool, error) {
	args := []any{q.AfterID, nil, nil, nil, nil, q.Limit + 1, scopeArg(q.Scope), budgetArg(q.MaxBytes)}
	if b := q.BBox; b != nil {
		args[1], args[2], args[3], args[4] = b.West, b.South, b.East, b.North
	}
	more := false
	err := s.db.read(ctx, func(ctx context.Context, conn pg.Conn) error {
		more = false
		rows, err := conn.Query(ctx, listFencesSQL, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		page := pageBytes{max: q.MaxBytes}
		n := 0
		for rows.Next() {
			var f Feature
			if err := rows.Scan(&f.ID, &f.Name, &f.Props, &f.Geometry); err != nil {
				return err
			}
			// The row past the page tells that more remain; the database
			// sends few if any after it (see budgetSQL).
			if n == q.Limit || !page.fits(featureSize(f, false)) {
				more = n > 0
				return nil
			}
			if err := out(f); err != nil {
				return err
			}
			n++
		}
		return rows.Err()
	})
	return more, err
}

// reasonShape is what ST_IsValidReason says ("Self-intersection[1 2]");
// anything else is replaced rather than shown.
var reasonShape = regexp.MustCompile(`^[A-Za-z][A-Za-z ,'-]{0,80}(\[[-+0-9.eE ]{1,80}\])?$`)

func safeReason(r string) string {
	if reasonShape.MatchString(r) {
		return r
	}
	return "Invalid geometry"
}
