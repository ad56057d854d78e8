package features

import (
	"slices"
	"strings"

	"github.com/geogate/geogate/internal/catalog"
)

// layerSQL holds what the statements of one layer are built from; every
// identifier in it comes from the catalog.
type layerSQL struct {
	l *catalog.Layer
	// own says the layer has geogate's own shape (id, name, a jsonb
	// properties): its properties are the id, the name and the stored
	// ones.
	own  bool
	key  string // the feature id of row l, and its type
	kind string
	// lonLat is the column of row l as a geometry in longitude/latitude.
	lonLat string
	// all is every property of row l as jsonb.
	all string
	// queryables name what filters and sortby may use, in order.
	queryables []queryable
	// timeCol is the queryable datetime filters on, nil without one.
	timeCol *queryable
}

// queryable is a property a filter or sortby may name.
type queryable struct {
	Name string
	SQL  string // over row alias l
	// PGType is what SQL gives; values read back from a cursor are cast
	// to it.
	PGType       string
	Type, Format string // JSON Schema
}

func newLayerSQL(l *catalog.Layer, own string) *layerSQL {
	key, shaped := l.GeogateShape()
	keyed := *l
	keyed.Key = key
	s := &layerSQL{l: &keyed, own: shaped, lonLat: lonLatExpr(&keyed)}
	s.key, s.kind = keyExpr(&keyed)
	if shaped {
		// The id is a property too, as a key column is of any other
		// table: GIS clients keep properties, not always feature ids.
		s.all = `coalesce(l.properties, '{}'::jsonb) || jsonb_build_object('id', l.id, 'name', l.name)`
	} else {
		s.all = l.PropertiesJSON("l")
	}
	s.queryables = columnQueryables(&keyed, shaped)
	s.pickTime()
	return s
}

// versionSQL reads the data version of the layer's table, with its
// argument; ok is false for a layer without geogate's triggers.
func (s *layerSQL) versionSQL(own string) (sql, table string, ok bool) {
	if !s.l.Invalidated {
		return "", "", false
	}
	return "SELECT version FROM " + catalog.QuoteIdent(own) + ".tile_versions WHERE tbl = $1", s.l.Schema + "." + s.l.Table, true
}

// keyExpr is the feature id of row l and its PostgreSQL type; a layer
// without a key names its features by a hash of the row.
func keyExpr(l *catalog.Layer) (expr, typ string) {
	if l.Key.FromRow() {
		return "md5(l::text)", "text"
	}
	return "l." + catalog.QuoteIdent(l.Key.Column), l.Key.PGType
}

// lonLatExpr is the layer's column of row l as geometry in EPSG:4326.
// Curves are cut into straight segments first (see catalog.Layer.Linear);
// a layer in SRID 0 has no longitude and latitude: its column as it is.
func lonLatExpr(l *catalog.Layer) string {
	col := l.Linear("l." + catalog.QuoteIdent(l.Column))
	switch {
	case l.Geography:
		return catalog.LonLatOfGeography(col, l.GeometryType)
	case l.SRID == 4326 || !l.Located():
		return col
	}
	return "ST_Transform(" + col + ", 4326)"
}

// columnQueryables are the properties with a value a filter can compare:
// for geogate's own shape its id and name (the stored properties are
// added once sampled, see ownQueryables), else every scalar column.
func columnQueryables(l *catalog.Layer, own bool) []queryable {
	if own {
		return []queryable{
			{Name: "id", SQL: "l.id", PGType: l.Key.PGType, Type: "integer"},
			{Name: "name", SQL: "l.name", PGType: "text", Type: "string"},
		}
	}
	var out []queryable
	for _, p := range l.Properties {
		switch p.Type {
		case "string", "number", "integer", "boolean":
			out = append(out, queryable{Name: p.Name, SQL: "l." + catalog.QuoteIdent(p.Name), PGType: p.PGType, Type: p.Type, Format: p.Format})
		}
	}
	return out
}

// pickTime chooses the column datetime filters on: the first timestamp,
// else the first date.
func (s *layerSQL) pickTime() {
	for _, f := range []string{"date-time", "date"} {
		if i := slices.IndexFunc(s.queryables, func(q queryable) bool { return q.Format == f }); i >= 0 {
			s.timeCol = &s.queryables[i]
			return
		}
	}
}

func (s *layerSQL) queryable(name string) (queryable, bool) {
	i := slices.IndexFunc(s.queryables, func(q queryable) bool { return q.Name == name })
	if i < 0 {
		return queryable{}, false
	}
	return s.queryables[i], true
}

// propertyNames are the names a properties parameter may list; nil for
// geogate's own shape, whose stored properties are free-form.
func (s *layerSQL) propertyNames() []string {
	if s.own {
		return nil
	}
	var names []string
	for _, p := range s.l.Properties {
		names = append(names, p.Name)
	}
	return names
}

// textArray writes names as a SQL text[] literal.
func textArray(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoteLiteral(n)
	}
	return "ARRAY[" + strings.Join(q, ", ") + "]::text[]"
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
