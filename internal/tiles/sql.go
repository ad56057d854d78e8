package tiles

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/geogate/geogate/internal/catalog"
)

// sqlSet holds a layer's tile queries. Each is one statement returning the
// layer's data version and the tile, read from one snapshot, so a tile is
// never stored under a version it does not show.
//
// Parameters: $1..$3 z, x, y; $4..$7 the tile plus its buffer in
// longitude and latitude; $8 the thinning grid (cells per metre, points)
// or the simplification tolerance in metres (the others); then the scope
// geometry as EPSG:4326 WKB (scoped queries only).
type sqlSet struct {
	plain, scoped         string
	thinned, thinnedScope string
}

// halfWorld is half the width of the Web Mercator world in metres.
const halfWorld = 20037508.342789244

func buildSQL(l *Layer, extent, buffer int, own string) sqlSet {
	b := builder{l: l, extent: extent, buffer: buffer, own: own}
	if l.Kind == Points {
		return sqlSet{
			plain: b.points(false, false), scoped: b.points(false, true),
			thinned: b.points(true, false), thinnedScope: b.points(true, true),
		}
	}
	return sqlSet{plain: b.shapes(false), scoped: b.shapes(true)}
}

// builder writes the statements of one layer.
type builder struct {
	l              *Layer
	extent, buffer int
	own            string // quoted
}

const box4326 = "ST_MakeEnvelope($4, $5, $6, $7, 4326)"

// col is the layer's geometry or geography column of the row l.
func (b builder) col() string { return "l." + catalog.QuoteIdent(b.l.src.Column) }

// linear is col without arcs, which neither ST_Simplify nor ST_AsMVTGeom
// take (see catalog.Layer.Linear).
func (b builder) linear() string { return b.l.src.Linear(b.col()) }

// srid is the SRID of the column's geometries (4326 for geography).
func (b builder) srid() int { return b.l.src.SRID }

// tileEnvelope is the tile plus its buffer in Web Mercator.
func (b builder) tileEnvelope() string {
	return "ST_TileEnvelope($1, $2, $3, margin => " + strconv.FormatFloat(float64(b.buffer)/float64(b.extent), 'g', -1, 64) + ")"
}

// indexed is the test that finds the rows near the tile through the
// column's own spatial index, in its own SRID: the box exactly for EPSG:4326
// and Web Mercator; for a geography column the box cut into half-degree
// pieces (the geodesic edges then stray metres, not kilometres, from the
// parallels, well within the buffer); for any other SRID a box sure to
// hold the tile (own.tile_box).
func (b builder) indexed() string {
	switch {
	case b.l.src.Geography:
		return b.col() + " && ST_Segmentize(" + box4326 + ", 0.5)::geography"
	case b.srid() == 4326:
		return b.col() + " && " + box4326
	case b.srid() == 3857:
		return b.col() + " && " + b.tileEnvelope()
	}
	return fmt.Sprintf("%s && %s.tile_box($4, $5, $6, $7, %d)", b.col(), b.own, b.srid())
}

// lngLat is the row's geometry in EPSG:4326.
func (b builder) lngLat() string {
	switch {
	case b.l.src.Geography:
		return catalog.LonLatOfGeography(b.col(), b.l.src.GeometryType)
	case b.srid() == 4326:
		return b.linear()
	}
	return "ST_Transform(" + b.linear() + ", 4326)"
}

// mercator is the row's geometry in Web Mercator; g4 is it in EPSG:4326.
func (b builder) mercator(g4 string) string {
	if b.srid() == 3857 && !b.l.src.Geography {
		return b.linear()
	}
	return "ST_Transform(" + g4 + ", 3857)"
}

// version reads the layer's data version in the tile's snapshot.
func (b builder) version() string {
	if b.l.versionKey == "" {
		return "NULL::bigint"
	}
	return fmt.Sprintf("(SELECT version FROM %s.tile_versions WHERE tbl = %s)", b.own, quoteLiteral(b.l.versionKey))
}

// columns lists the row's MVT feature id (when the layer's key is an
// integer; otherwise the key is a property like the others) and its
// properties, read from the table (from "") or from the subquery alias
// from, followed by more.
func (b builder) columns(from string, more ...string) string {
	var cols []string
	if b.hasID() {
		if from == "" {
			cols = append(cols, "l."+catalog.QuoteIdent(b.l.src.Key.Column)+" AS "+catalog.QuoteIdent(idCol))
		} else {
			cols = append(cols, from+"."+catalog.QuoteIdent(idCol))
		}
	}
	for _, f := range b.l.Fields {
		if from == "" {
			cols = append(cols, f.expr+" AS "+catalog.QuoteIdent(f.Name))
		} else {
			cols = append(cols, from+"."+catalog.QuoteIdent(f.Name))
		}
	}
	return strings.Join(append(cols, more...), ", ")
}

// hasID says the layer's key is an integer, so the MVT feature id.
func (b builder) hasID() bool {
	k := b.l.src.Key
	return !k.FromRow() && k.Type == "integer"
}

// wrap puts a feature query producing (@id, fields..., @geom) into the
// version-and-tile statement. OFFSET 0 keeps the feature query from being
// merged into the outer one: merged, the planner moves the @geom IS NOT
// NULL test down into the scan and computes each feature's clip,
// transform, simplification and ST_AsMVTGeom twice, once for the test and
// once for the tile.
func (b builder) wrap(features string) string {
	id := ""
	if b.hasID() {
		id = ", " + quoteLiteral(idCol)
	}
	// The box parameters are named in FROM so that their type is known
	// where the query does not use them (a layer in Web Mercator).
	return fmt.Sprintf(`SELECT
  %s AS version,
  (SELECT ST_AsMVT(t, %s, %d, %s%s) FROM (%s OFFSET 0) t WHERE t.%s IS NOT NULL) AS mvt
FROM (SELECT $4::float8, $5::float8, $6::float8, $7::float8) AS box`,
		b.version(), quoteLiteral(b.l.ID), b.extent, quoteLiteral(geomCol), id, features, catalog.QuoteIdent(geomCol))
}

func scopeGeom(param int) string { return fmt.Sprintf("ST_GeomFromWKB($%d, 4326)", param) }

// mvtGeom is ST_AsMVTGeom of a Web Mercator geometry.
func (b builder) mvtGeom(g string) string {
	return fmt.Sprintf("ST_AsMVTGeom(%s, ST_TileEnvelope($1, $2, $3), %d, %d, true) AS %s", g, b.extent, b.buffer, catalog.QuoteIdent(geomCol))
}

// points selects the points in the tile and, scoped, in the scope.
// Thinned, it keeps one point per cell of a global grid of 2^z*cells cells
// a side (Web Mercator), the one with the lowest rank; $8 is cells per
// metre. Cells nest from zoom to zoom, so a point shown at one zoom is
// shown at every higher zoom.
func (b builder) points(thinned, scoped bool) string {
	g4 := b.lngLat()
	where := b.indexed()
	if b.l.src.Geography || (b.srid() != 4326 && b.srid() != 3857) {
		// The index's box is wider than the tile; this keeps out what a
		// Web Mercator transform cannot take (the poles).
		where += " AND " + g4 + " && " + box4326
	}
	if scoped {
		param := 8
		if thinned {
			param = 9
		}
		where += fmt.Sprintf(" AND ST_Intersects(%s, %s)", g4, scopeGeom(param))
	}
	m := catalog.QuoteIdent("@m")
	more := []string{b.mercator(g4) + " AS " + m}
	if thinned {
		more = append(more, b.rank()+" AS "+catalog.QuoteIdent("@rank"))
	}
	src := fmt.Sprintf("SELECT %s FROM %s l WHERE %s", b.columns("", more...), b.l.src.Qualified(), where)
	if !thinned {
		return b.wrap(fmt.Sprintf("SELECT %s FROM (%s) w", b.columns("w", b.mvtGeom("w."+m)), src))
	}
	cells := fmt.Sprintf(`SELECT DISTINCT ON (%[5]s, %[6]s) s.*, floor((ST_X(s.%[1]s) + %[2]v) * $8) AS %[5]s, floor((%[2]v - ST_Y(s.%[1]s)) * $8) AS %[6]s
    FROM (%[3]s) s
    ORDER BY %[5]s, %[6]s, s.%[4]s`, m, halfWorld, src, catalog.QuoteIdent("@rank"), catalog.QuoteIdent("@cx"), catalog.QuoteIdent("@cy"))
	return b.wrap(fmt.Sprintf("SELECT %s FROM (\n    %s) w", b.columns("w", b.mvtGeom("w."+m)), cells))
}

// rank orders the points of a cell: the configured column, else the key,
// else the position (a layer without a key).
func (b builder) rank() string {
	switch {
	case b.l.Rank != "":
		return "l." + catalog.QuoteIdent(b.l.Rank)
	case !b.l.src.Key.FromRow():
		return "l." + catalog.QuoteIdent(b.l.src.Key.Column)
	}
	return "ARRAY[ST_X(" + b.lngLat() + "), ST_Y(" + b.lngLat() + ")]"
}

// shapes selects lines, polygons or mixed geometries in the tile, clipped
// to it in EPSG:4326 before the transform (large polygons cost only their
// part in the tile; a layer in Web Mercator is clipped there) and, when
// scoped, cut to the scope as well, then simplified by $8 metres.
func (b builder) shapes(scoped bool) string {
	g4 := b.lngLat()
	where := b.indexed()
	var g string
	switch {
	case scoped:
		// The overlay needs valid input: the clipped shape is repaired
		// first (stored shapes may be invalid, clipping may make them so).
		// Only the layer's own dimension is kept: a fence touching the
		// scope's edge leaves nothing, not a line.
		where += " AND " + g4 + " && " + scopeGeom(9)
		g = fmt.Sprintf("ST_Transform(ST_CollectionExtract(ST_Intersection(ST_MakeValid(ST_ClipByBox2D(%s, %s)), ST_Intersection(%s, %s)), %s), 3857)",
			g4, box4326, scopeGeom(9), box4326, b.dimension())
	case b.srid() == 3857 && !b.l.src.Geography:
		g = "ST_ClipByBox2D(" + b.linear() + ", " + b.tileEnvelope() + ")"
	default:
		g = "ST_Transform(ST_ClipByBox2D(" + g4 + ", " + box4326 + "), 3857)"
	}
	g = "ST_Simplify(" + g + ", $8, false)"
	features := fmt.Sprintf("SELECT %s FROM %s l WHERE %s", b.columns("", b.mvtGeom(g)), b.l.src.Qualified(), where)
	return b.wrap(features)
}

// dimension is what ST_CollectionExtract keeps of a scoped shape: the
// layer's own kind, or for mixed layers each feature's own.
func (b builder) dimension() string {
	switch b.l.Kind {
	case Lines:
		return "2"
	case Polygons:
		return "3"
	}
	return "ST_Dimension(" + b.lngLat() + ") + 1"
}
