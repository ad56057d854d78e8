package geofence

import (
	"fmt"
	"slices"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
)

// Point-in-polygon checks on any polygon layer test the point in the
// layer's own SRID, so that the layer's spatial index (or its copy's)
// finds the candidates: own.layer_points projects the points there and
// leaves out those the projection cannot take. A geography column is
// tested on the sphere, as PostGIS's geography ST_Intersects does, its
// edges great circles. A point on a boundary is inside (ST_Intersects). Of
// a generic column only the polygons count: a point or a line holds no
// point.
//
// Where the layer has a subdivided copy (catalog.Parts) the copy's index
// finds the one or two small parts under a point, and the features come
// from the layer by key; the copy answers only for rows the layer still
// has, so it can never outlive its table's rows.

// containsOneSQL is GET /geofences/contains on l: $1 lng, $2 lat; each row
// a feature holding the point, by key: its key as text, its name (NULL
// but for geogate's own shape) and its properties.
func containsOneSQL(l *catalog.Layer, own string, ownShape bool) string {
	key, _ := keyExpr(l, "l")
	name := "NULL::text"
	// Built from the property columns, as on /within: to_jsonb of the
	// whole row would write its geometry as GeoJSON, which fails on a
	// curve.
	props := l.PropertiesJSON("(r.row)")
	if ownShape {
		name = "coalesce((r.row).name::text, '')"
		props = "coalesce((r.row).properties, '{}'::jsonb) - 'name'"
	}
	cond := holds(l, "l", "(SELECT g FROM q)")
	if l.Parts != nil {
		cond = fmt.Sprintf("%s IN (SELECT p.%s FROM %s p WHERE ST_Intersects(p.geom, (SELECT g FROM q)))",
			key, catalog.QuoteIdent(l.Parts.Key), partsTable(l, own))
	}
	return fmt.Sprintf(`
WITH q AS MATERIALIZED (SELECT pt.g FROM %s)
SELECT r.k::text, %s, %s
FROM (SELECT l AS row, %s AS k FROM %s l WHERE %s) r
ORDER BY r.k`, pointsFrom(l, own, "ARRAY[$1::float8]", "ARRAY[$2::float8]"), name, props, key, l.Qualified(), cond)
}

// containsBatchSQL is POST /geofences/contains on l: $1 and $2 the arrays
// of longitudes and latitudes; each row a point's index (1-based) and the
// key, as text, of a feature holding it, by point and key.
func containsBatchSQL(l *catalog.Layer, own string) string {
	key, _ := keyExpr(l, "l")
	with := ""
	join := "JOIN " + l.Qualified() + " l ON " + holds(l, "l", "pt.g")
	if !l.Indexed && l.Parts == nil {
		// Without an index every point scans the layer: read it once, so
		// that a view's computed geometries are computed once per batch
		// rather than once per point.
		with = "WITH l AS MATERIALIZED (SELECT * FROM " + l.Qualified() + ")"
		join = "JOIN l ON " + holds(l, "l", "pt.g")
	}
	if l.Parts != nil {
		join, key = partsJoin(l, own, "pt.g")
	}
	return fmt.Sprintf(`%s
SELECT m.i, m.k::text FROM (
  SELECT DISTINCT pt.i, %s AS k
  FROM %s
  %s
) m
ORDER BY m.i, m.k`, with, key, pointsFrom(l, own, "$1::float8[]", "$2::float8[]"), join)
}

// pointsFrom is the FROM item pt(i, g) of the points of the longitude and
// latitude arrays lngs and lats in l's SRID, numbered from 1.
func pointsFrom(l *catalog.Layer, own, lngs, lats string) string {
	if l.Geography {
		return fmt.Sprintf(`(SELECT u.i::integer AS i, ST_SetSRID(ST_MakePoint(u.x, u.y), 4326)::geography AS g
        FROM unnest(%s, %s) WITH ORDINALITY AS u(x, y, i)) pt`, lngs, lats)
	}
	return fmt.Sprintf("%s.layer_points(%s, %s, %d) pt", catalog.QuoteIdent(own), lngs, lats, l.SRID)
}

// holds is the condition that the polygons of row alias's geometry hold
// point p: ST_Intersects, which the layer's index serves, and for a
// generic column on its polygons only, found through the index first. A
// column that may hold curves has its arcs cut into straight segments
// (catalog.Layer.Linear) before the polygons are taken: ST_CollectionExtract
// counts a CurvePolygon as no polygon at all, and the other routes serve
// curves cut the same way. The index condition stays on the column as
// stored, whose bounding box covers its arcs.
func holds(l *catalog.Layer, alias, p string) string {
	col := alias + "." + catalog.QuoteIdent(l.Column)
	switch {
	case slices.Contains([]string{"Polygon", "MultiPolygon", "PolygonM", "MultiPolygonM"}, l.GeometryType):
		return "ST_Intersects(" + col + ", " + p + ")"
	case l.Geography:
		return fmt.Sprintf("%[1]s && %[2]s AND ST_Intersects(ST_CollectionExtract(%[1]s::geometry, 3)::geography, %[2]s)", col, p)
	}
	return fmt.Sprintf("%s && %s AND ST_Intersects(ST_CollectionExtract(%s, 3), %s)", col, p, l.Linear(col), p)
}

// partsJoin is the join of a batch's items (their geometries g) to the
// parts of l's copy under them and to the features of those parts, one
// look-up by key for each part found, and the expression of the feature's
// key, k. Written as a plain join, the planner, which expects a thousand
// rows of a set-returning function and several parts for each, chose to
// hash the whole layer for every batch, 50,000 keys to match a few
// hundred parts, which cost three times the look-ups themselves. OFFSET 0
// keeps the look-up a subquery run for each part: it cannot be pulled up
// into a join the planner could hash.
func partsJoin(l *catalog.Layer, own, g string) (join, k string) {
	key, _ := keyExpr(l, "l")
	return fmt.Sprintf(`JOIN %s p ON ST_Intersects(p.geom, %s)
  CROSS JOIN LATERAL (SELECT %s AS k FROM %s l WHERE %s = p.%s OFFSET 0) f`,
		partsTable(l, own), g, key, l.Qualified(), key, catalog.QuoteIdent(l.Parts.Key)), "f.k"
}

// partsTable is l's copy, quoted.
func partsTable(l *catalog.Layer, own string) string {
	return catalog.QuoteIdent(own) + "." + catalog.QuoteIdent(l.Parts.Table)
}

// notPolygonal refuses a point-in-polygon check on a layer that holds no
// polygons.
func notPolygonal(l *catalog.Layer) error {
	return apperr.InvalidField(fmt.Sprintf("Layer %s holds %s geometries; containment needs a polygon layer (Polygon, MultiPolygon, CurvePolygon, MultiSurface, or a GeometryCollection or generic Geometry column, whose polygons count).",
		l.ID, l.GeometryType), "value_error", "query", "layer")
}
