package geofence

import (
	"fmt"
	"slices"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
)

// layerSQL holds the /within statement of one published layer, built from
// the catalog: every identifier in it comes from there.
type layerSQL struct {
	l *catalog.Layer
	// own says the layer has geogate's own shape (id, name, a jsonb
	// properties): its features keep the properties they always had.
	own    bool
	within string
	// containsOne and containsBatch are the point-in-polygon statements,
	// "" for a layer without polygons; crossesBatch finds the polygons
	// segments meet.
	containsOne, containsBatch, crossesBatch string
}

// newLayerSQL builds the statements of l; own is geogate's schema, which
// holds the search-box functions.
func newLayerSQL(l *catalog.Layer, own string) *layerSQL {
	key, shaped := l.GeogateShape()
	keyed := *l
	keyed.Key = key
	s := &layerSQL{l: &keyed, own: shaped}
	s.within = withinSQL(s.l, catalog.QuoteIdent(own), shaped)
	if l.Polygonal() {
		s.containsOne = containsOneSQL(s.l, own, shaped)
		s.containsBatch = containsBatchSQL(s.l, own)
		s.crossesBatch = crossesBatchSQL(s.l, own)
	}
	return s
}

// geogExpr is the layer's column of the row alias as geography.
func geogExpr(l *catalog.Layer, alias string) string {
	col := l.Linear(alias + "." + catalog.QuoteIdent(l.Column))
	switch {
	case l.Geography:
		return col
	case l.SRID == 4326:
		return col + "::geography"
	}
	return "ST_Transform(" + col + ", 4326)::geography"
}

// keyExpr is the feature id of the row alias, and the type a cursor's
// text form is read back as.
func keyExpr(l *catalog.Layer, alias string) (expr, typ string) {
	if l.Key.FromRow() {
		return "md5(" + alias + "::text)", "text"
	}
	return alias + "." + catalog.QuoteIdent(l.Key.Column), l.Key.PGType
}

// propsExpr is the feature's properties of the row alias r (a record of
// the layer's relation) as jsonb, filtered by the names in $7 when it is
// not NULL: every column but the geometries, or for geogate's own shape
// the stored properties (its name follows in their own column).
func propsExpr(l *catalog.Layer, own bool) string {
	if own {
		return `CASE WHEN $7::text[] IS NULL THEN coalesce((r.row).properties, '{}'::jsonb)
       ELSE (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
             FROM jsonb_each(coalesce((r.row).properties, '{}'::jsonb)) e WHERE e.key = ANY($7::text[]))
  END - '{name,distance_m}'::text[]`
	}
	// distance_m is the feature's own: a column of that name gives way.
	all := l.PropertiesJSON("(r.row)") + " - 'distance_m'"
	return `CASE WHEN $7::text[] IS NULL THEN ` + all + `
       ELSE (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
             FROM jsonb_each(` + all + `) e WHERE e.key = ANY($7::text[]))
  END`
}

// withinSQL is /within for one layer. Ordering every match by exact
// spheroid distance would sort them all; instead:
//
//  1. bound: the first $4 matches in the index's own distance order give an
//     upper bound on the spheroid distance of the $4-th nearest match,
//     however that order differs from the spheroid's, because any $4
//     matches do;
//  2. the answer: matches within that bound sorted exactly by (spheroid
//     distance, key).
//
// A geography column is searched through its index with ST_DWithin; a
// geometry column, in whatever SRID, through its own index with a box in
// that SRID sure to hold the circle (own.search_box), then tested exactly
// on the spheroid. $1 lng, $2 lat, $3 radius m, $4 rows, $5/$6 keyset
// position (distance, key as text) or NULLs, $7 property names or NULL for
// all, $8 the caller's spatial scope (WKB) or NULL for the whole world, $9
// the page's byte budget (see budgetSQL) or NULL for none.
func withinSQL(l *catalog.Layer, own string, ownShape bool) string {
	col := "l." + catalog.QuoteIdent(l.Column)
	geog := geogExpr(l, "l")
	key, keyType := keyExpr(l, "l")
	filter1 := "ST_DWithin(" + geog + ", (SELECT geog FROM q), $3::float8)"
	filter2 := "ST_DWithin(" + geog + ", (SELECT geog FROM q), (SELECT r FROM near))"
	order := col + " <-> (SELECT p FROM q)"
	if l.Geography {
		order = col + " <-> (SELECT geog FROM q)"
	} else {
		filter1 = col + " && (SELECT box FROM q) AND " + filter1
		filter2 = col + " && (SELECT box FROM near) AND " + filter2
	}
	after := fmt.Sprintf("($6::text IS NULL OR (ST_Distance(%s, (SELECT geog FROM q), true), %s) > ($5::float8, $6::text::%s))", geog, key, keyType)
	name := "NULL::text"
	if ownShape {
		name = "coalesce((r.row).name::text, '')"
	}
	return fmt.Sprintf(`
WITH pt AS MATERIALIZED (
  SELECT ST_SetSRID(ST_MakePoint($1::float8, $2::float8), 4326) AS g
),
q AS MATERIALIZED (
  SELECT (SELECT g FROM pt)::geography AS geog,
         %[1]s.search_box($1::float8, $2::float8, $3::float8, %[2]d) AS box,
         %[1]s.safe_transform((SELECT g FROM pt), %[2]d) AS p
),
bound AS MATERIALIZED (
  SELECT max(ST_Distance(c.geog, (SELECT geog FROM q), true)) AS d
  FROM (
    SELECT %[3]s AS geog FROM %[4]s l
    WHERE %[5]s AND %[6]s
    ORDER BY %[7]s
    LIMIT $4::int
  ) c
),
near AS MATERIALIZED (
  SELECT r, %[1]s.search_box($1::float8, $2::float8, r, %[2]d) AS box
  FROM (SELECT LEAST($3::float8, (SELECT d FROM bound) * (1 + 1e-9) + 1e-6) AS r) x
)
`+budgetSQL(`
SELECT r.k, %[8]s AS name, r.d, (%[9]s)::text AS props, %[10]s AS geo
FROM (
  SELECT l AS row, ST_Distance(%[3]s, (SELECT geog FROM q), true) AS d, %[11]s AS k
  FROM %[4]s l
  WHERE %[12]s AND %[6]s
  ORDER BY d, k
  LIMIT $4::int
) r
ORDER BY r.d, r.k`, "k::text, name, d, props, geo", []string{"d", "k"}, "$9"),
		own, l.SRID, geog, l.Qualified(), filter1, after, order,
		name, propsExpr(l, ownShape), geoJSONRowExpr(l), key, filter2)
}

// geoJSONRowExpr is the GeoJSON geometry of the answer's row r.row, cut
// to the spatial scope in $8 (WKB) unless that is NULL.
func geoJSONRowExpr(l *catalog.Layer) string {
	col := l.Linear("(r.row)." + catalog.QuoteIdent(l.Column))
	whole, lonLat := "ST_AsGeoJSON(ST_Transform("+col+", 4326))", "ST_Transform("+col+", 4326)"
	switch {
	case l.Geography:
		whole, lonLat = "ST_AsGeoJSON("+col+")", catalog.LonLatOfGeography(col, l.GeometryType)
	case l.SRID == 4326:
		whole, lonLat = "ST_AsGeoJSON("+col+")", col
	}
	// The scoped branch is a subquery so that the geometry in longitude
	// and latitude, which cutToScope repeats, is computed once.
	cut := "(SELECT ST_AsGeoJSON(" + cutToScope("s.g", scopeWKBSQL("$8")) + ") FROM (SELECT " + lonLat + " AS g OFFSET 0) s)"
	return "CASE WHEN $8::bytea IS NULL THEN " + whole + " ELSE " + cut + " END"
}

// keyJSON writes a feature id as JSON: a number for an integer key, a
// string otherwise.
// rawKeyJSON is keyJSON of a key as the row's bytes hold it: an integer
// key is those bytes, not a copy.
func (s *layerSQL) rawKeyJSON(raw []byte) []byte {
	if s.l.Key.Type == "integer" {
		return raw
	}
	return appendString(nil, string(raw))
}

func (s *layerSQL) keyJSON(text string) []byte {
	if s.l.Key.Type == "integer" {
		return []byte(text)
	}
	return appendString(nil, text)
}

// checkProps refuses, with a 422 naming the parameter, names the layer
// has no property of. geogate's own shape stores free-form properties:
// any name is fine there.
func checkProps(s *layerSQL, names []string) error {
	if s.own {
		return nil
	}
	for _, n := range names {
		if !slices.ContainsFunc(s.l.Properties, func(p catalog.Property) bool { return p.Name == n }) {
			return apperr.InvalidField(fmt.Sprintf("Layer %s has no property %q.", s.l.ID, n), "value_error", "query", "properties")
		}
	}
	return nil
}
