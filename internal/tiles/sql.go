package tiles

import (
	"fmt"
	"strings"
)

// sqlSet holds a layer's tile queries. Each is one statement returning the
// layer's data version and the tile, read from one snapshot, so a tile is
// never stored under a version it does not show.
//
// Parameters: $1..$3 z, x, y; $4..$7 the search box in EPSG:4326 (the
// tile plus its buffer); $8 the thinning grid factor (points) or the
// simplification tolerance in metres (lines, polygons), absent for
// unthinned points; then the scope geometry as WKB (scoped queries only).
type sqlSet struct {
	plain, scoped         string
	thinned, thinnedScope string
}

func buildSQL(l *Layer, extent, buffer int) sqlSet {
	var s sqlSet
	if l.Kind == Points {
		s.plain = pointSQL(l, extent, buffer, false, false)
		s.scoped = pointSQL(l, extent, buffer, false, true)
		s.thinned = pointSQL(l, extent, buffer, true, false)
		s.thinnedScope = pointSQL(l, extent, buffer, true, true)
		return s
	}
	s.plain = shapeSQL(l, extent, buffer, false)
	s.scoped = shapeSQL(l, extent, buffer, true)
	return s
}

func scopeGeom(param int) string { return fmt.Sprintf("ST_GeomFromWKB($%d, 4326)", param) }

// wrap puts a feature query producing (id, fields..., geom) into the
// version-and-tile statement. OFFSET 0 keeps the feature query from being
// merged into the outer one: merged, the planner moves the geom IS NOT
// NULL test down into the scan and computes each feature's clip,
// transform, simplification and ST_AsMVTGeom twice, once for the test and
// once for the tile.
func wrap(l *Layer, extent int, features string) string {
	return fmt.Sprintf(`SELECT
  (SELECT version FROM tile_versions WHERE tbl = '%s') AS version,
  (SELECT ST_AsMVT(t, '%s', %d, 'geom', 'id') FROM (%s OFFSET 0) t WHERE t.geom IS NOT NULL) AS mvt`,
		l.Table, l.Name, extent, features)
}

func selectFields(l *Layer, from string) string {
	var b strings.Builder
	for _, f := range l.Fields {
		if from != "" {
			fmt.Fprintf(&b, ", %s.%s", from, quote(f.Name))
		} else {
			fmt.Fprintf(&b, ", %s AS %s", f.expr, quote(f.Name))
		}
	}
	return b.String()
}

// where finds the rows in the search box and, when scopeParam > 0, in the
// scope given as that parameter: points exactly; lines and polygons by
// bounding box only, since ST_Intersects fails on invalid shapes (real
// country borders have some) and their cut to the scope drops the others.
func where(l *Layer, scopeParam int) string {
	w := fmt.Sprintf("%s && ST_MakeEnvelope($4, $5, $6, $7, 4326)", quote(l.Geom))
	switch {
	case scopeParam > 0 && l.Kind == Points:
		w += fmt.Sprintf(" AND ST_Intersects(%s, %s)", quote(l.Geom), scopeGeom(scopeParam))
	case scopeParam > 0:
		w += fmt.Sprintf(" AND %s && %s", quote(l.Geom), scopeGeom(scopeParam))
	}
	return w
}

// pointSQL selects points in the search box. Thinned, it keeps one point
// per cell of a global grid of 2^z*cells cells a side (Web Mercator), the
// one with the lowest rank; $8 is 2^z*cells/360. Cells nest from zoom to
// zoom, so a point shown at one zoom is shown at every higher zoom.
func pointSQL(l *Layer, extent, buffer int, thinned, scoped bool) string {
	scopeParam := 0
	switch {
	case scoped && thinned:
		scopeParam = 9
	case scoped:
		scopeParam = 8
	}
	mvtGeom := fmt.Sprintf("ST_AsMVTGeom(ST_Transform(w.geom, 3857), ST_TileEnvelope($1, $2, $3), %d, %d, true) AS geom", extent, buffer)
	if !thinned {
		features := fmt.Sprintf(`SELECT w.id%s, %s FROM (SELECT %s AS id%s, %s AS geom FROM %s WHERE %s) w`,
			selectFields(l, "w"), mvtGeom, quote(l.ID), selectFields(l, ""), quote(l.Geom), quote(l.Table), where(l, scopeParam))
		return wrap(l, extent, features)
	}
	cells := fmt.Sprintf(`floor((ST_X(%[1]s) + 180) * $8) AS cx,
    floor((1 - ln(tan(radians(ST_Y(%[1]s))) + 1 / cos(radians(ST_Y(%[1]s)))) / pi()) * $8 * 180) AS cy`, quote(l.Geom))
	features := fmt.Sprintf(`SELECT w.id%s, %s FROM (
    SELECT DISTINCT ON (1, 2) %s, %s AS id%s, %s AS geom FROM %s WHERE %s
    ORDER BY 1, 2, %s, %s) w`,
		selectFields(l, "w"), mvtGeom, cells, quote(l.ID), selectFields(l, ""), quote(l.Geom), quote(l.Table), where(l, scopeParam),
		quote(l.Rank), quote(l.ID))
	return wrap(l, extent, features)
}

// shapeSQL selects lines or polygons in the search box, clipped to it in
// EPSG:4326 before the transform (large polygons cost only their part in
// the tile) and, when scoped, to the scope as well, then simplified by $8
// metres.
func shapeSQL(l *Layer, extent, buffer int, scoped bool) string {
	g := fmt.Sprintf("ST_ClipByBox2D(%s, ST_MakeEnvelope($4, $5, $6, $7, 4326))", quote(l.Geom))
	scopeParam := 0
	if scoped {
		// The overlay needs valid input: the clipped shape is repaired
		// first (stored shapes may be invalid, clipping may make them so).
		// Only the layer's own dimension is kept: a fence touching the
		// scope's edge leaves nothing, not a line.
		scopeParam = 9
		dim := 3
		if l.Kind == Lines {
			dim = 2
		}
		g = fmt.Sprintf("ST_CollectionExtract(ST_Intersection(ST_MakeValid(%s), ST_Intersection(%s, ST_MakeEnvelope($4, $5, $6, $7, 4326))), %d)",
			g, scopeGeom(scopeParam), dim)
	}
	g = fmt.Sprintf("ST_Simplify(ST_Transform(%s, 3857), $8, false)", g)
	features := fmt.Sprintf(`SELECT %s AS id%s, ST_AsMVTGeom(%s, ST_TileEnvelope($1, $2, $3), %d, %d, true) AS geom FROM %s WHERE %s`,
		quote(l.ID), selectFields(l, ""), g, extent, buffer, quote(l.Table), where(l, scopeParam))
	return wrap(l, extent, features)
}
