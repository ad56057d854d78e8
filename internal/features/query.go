package features

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/spatial"
)

// query is one items request, checked: what to select, how to order it
// and where to resume.
type query struct {
	// version asks for each row's version (md5 of its text) after the
	// sort values.
	version  bool
	bbox     *bbox
	datetime *interval
	filter   *filter
	props    []string // nil: all
	sort     []sortKey
	limit    int
	crs      CRS
	after    *position
	scope    *spatial.Scope
	// id, for a single feature, is its key as text.
	id *string
}

type sortKey struct {
	q    queryable
	desc bool
}

// bbox is a box in longitude/latitude (srid 4326, west may exceed east
// across the antimeridian) or in the layer's storage CRS.
type bbox struct {
	w, s, e, n float64
	srid       int
}

// interval is a datetime instant (start == end) or interval; nil ends are
// open.
type interval struct {
	start, end *time.Time
}

// filter is a CQL2 expression checked against the layer's queryables:
// render writes it as SQL, its values appended to args as parameters.
type filter struct {
	render func(args *[]any) string
}

// position is where a page ended: the sort values and key of its last
// feature, as PostgreSQL writes them (nil for NULL).
type position struct {
	sort []*string
	key  string
}

// builder collects a statement's arguments.
type builder struct{ args []any }

func (b *builder) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// conditions are the WHERE clauses q puts on row l, without paging.
func (s *layerSQL) conditions(b *builder, q *query, own string) []string {
	var where []string
	col := "l." + catalog.QuoteIdent(s.l.Column)
	if q.id != nil {
		where = append(where, fmt.Sprintf("%s = %s::text::%s", s.key, b.arg(*q.id), s.kind))
	}
	if q.bbox != nil {
		where = append(where, s.bboxCondition(b, q.bbox, col, own))
	}
	if q.scope != nil {
		bounds := q.scope.Bounds()
		where = append(where, s.prefilter(b, col, own, bounds[0], bounds[1], bounds[2], bounds[3]),
			fmt.Sprintf("ST_Intersects(%s, ST_GeomFromWKB(%s, 4326))", s.lonLat, b.arg(q.scope.WKB())))
	}
	if q.datetime != nil && s.timeCol != nil {
		t := s.timeCol.SQL
		if q.datetime.start != nil && q.datetime.end != nil && q.datetime.start.Equal(*q.datetime.end) {
			where = append(where, fmt.Sprintf("%s = %s::timestamptz", t, b.arg(*q.datetime.start)))
		} else {
			if q.datetime.start != nil {
				where = append(where, fmt.Sprintf("%s >= %s::timestamptz", t, b.arg(*q.datetime.start)))
			}
			if q.datetime.end != nil {
				where = append(where, fmt.Sprintf("%s <= %s::timestamptz", t, b.arg(*q.datetime.end)))
			}
		}
	}
	if q.filter != nil {
		where = append(where, "("+q.filter.render(&b.args)+")")
	}
	return where
}

// bboxCondition selects the features meeting box: through the layer's
// index with a box sure to hold it in the layer's SRID, then exactly.
func (s *layerSQL) bboxCondition(b *builder, box *bbox, col, own string) string {
	if box.srid != 4326 {
		env := fmt.Sprintf("ST_MakeEnvelope(%s, %s, %s, %s, %d)", b.arg(box.w), b.arg(box.s), b.arg(box.e), b.arg(box.n), box.srid)
		return fmt.Sprintf("ST_Intersects(%s, %s)", col, env)
	}
	var parts []string
	for _, p := range splitAntimeridian(box) {
		pre := s.prefilter(b, col, own, p.w, p.s, p.e, p.n)
		env := fmt.Sprintf("ST_MakeEnvelope(%s, %s, %s, %s, 4326)", b.arg(p.w), b.arg(p.s), b.arg(p.e), b.arg(p.n))
		parts = append(parts, fmt.Sprintf("(%s AND ST_Intersects(%s, %s))", pre, s.lonLat, env))
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// prefilter is an index condition on col holding every feature that
// meets the longitude/latitude box w, s, e, n.
func (s *layerSQL) prefilter(b *builder, col, own string, w, so, e, n float64) string {
	switch {
	case s.l.Geography:
		// A geography box has great-circle edges: widen it by a degree and
		// cut its edges into one-degree pieces, which then lie outside the
		// parallels and meridians of the box asked for.
		w, so, e, n = max(w-1, -180), max(so-1, -90), min(e+1, 180), min(n+1, 90)
		return fmt.Sprintf("%s && ST_Segmentize(ST_MakeEnvelope(%s, %s, %s, %s, 4326), 1)::geography", col, b.arg(w), b.arg(so), b.arg(e), b.arg(n))
	case s.l.SRID == 4326:
		return fmt.Sprintf("%s && ST_MakeEnvelope(%s, %s, %s, %s, 4326)", col, b.arg(w), b.arg(so), b.arg(e), b.arg(n))
	}
	return fmt.Sprintf("%s && %s.tile_box(%s, %s, %s, %s, %d)", col, catalog.QuoteIdent(own), b.arg(w), b.arg(so), b.arg(e), b.arg(n), s.l.SRID)
}

func splitAntimeridian(box *bbox) []bbox {
	if box.w <= box.e {
		return []bbox{*box}
	}
	return []bbox{{box.w, box.s, 180, box.n, 4326}, {-180, box.s, box.e, box.n, 4326}}
}

// order is the ORDER BY of q: its sort keys, then the feature id.
func (s *layerSQL) order(q *query) string {
	var parts []string
	for _, k := range q.sort {
		dir := " ASC NULLS LAST"
		if k.desc {
			dir = " DESC NULLS FIRST"
		}
		parts = append(parts, k.q.SQL+dir)
	}
	return strings.Join(append(parts, s.key), ", ")
}

// after is the keyset condition of resuming after p: rows that come later
// in order, sort key by sort key.
func (s *layerSQL) after(b *builder, q *query, p *position) string {
	keyCmp := fmt.Sprintf("%s > %s::text::%s", s.key, b.arg(p.key), s.kind)
	cond := keyCmp
	for i := len(q.sort) - 1; i >= 0; i-- {
		k, v := q.sort[i], p.sort[i]
		expr := k.q.SQL
		var later, same string
		if v == nil {
			same = expr + " IS NULL"
			if k.desc { // NULLs come first: every value is later
				later = expr + " IS NOT NULL"
			} else { // NULLs come last: nothing is later
				later = "false"
			}
		} else {
			val := fmt.Sprintf("%s::text::%s", b.arg(*v), k.q.PGType)
			same = fmt.Sprintf("%s = %s", expr, val)
			if k.desc {
				later = fmt.Sprintf("%s < %s", expr, val)
			} else {
				later = fmt.Sprintf("(%s > %s OR %s IS NULL)", expr, val, expr)
			}
		}
		cond = fmt.Sprintf("(%s OR (%s AND %s))", later, same, cond)
	}
	return cond
}

// pageSQL selects one page of q: id, properties, GeoJSON geometry, then
// each sort value as text, limit+1 rows (the extra says a next page
// exists). With a budget, the database stops the page too (see
// budgeted), and the properties come as text.
func (s *layerSQL) pageSQL(q *query, own string, budget int) (string, []any) {
	b := &builder{}
	where := s.conditions(b, q, own)
	if q.after != nil {
		where = append(where, s.after(b, q, q.after))
	}
	props := s.propsExpr(b, q.props)
	if budget > 0 {
		props = "(" + props + ")::text"
	}
	cols := []string{s.key + "::text", props, s.geoJSON(b, q, own)}
	for _, k := range q.sort {
		cols = append(cols, k.q.SQL+"::text")
	}
	if q.version {
		cols = append(cols, "md5(l::text)")
	}
	for i := range cols {
		cols[i] += fmt.Sprintf(" AS c%d", i)
	}
	// The page's rows are chosen first and written after: PostgreSQL
	// would otherwise build the properties of every match before a top-N
	// sort keeps limit+1 of them (a box's first page built them for all
	// 4,600 matches to send 1,000).
	rows := "SELECT l.* FROM " + s.l.Qualified() + " l"
	if len(where) > 0 {
		rows += " WHERE " + strings.Join(where, " AND ")
	}
	rows += " ORDER BY " + s.order(q) + " LIMIT " + b.arg(q.limit+1) + "::int"
	sql := "SELECT " + strings.Join(cols, ", ") + " FROM (" + rows + ") l ORDER BY " + s.order(q)
	if budget > 0 {
		sql = budgeted(sql, len(cols), b.arg(budget))
	}
	return sql, b.args
}

// budgeted is the page sel (columns c0 to c(n-1): the id, the properties
// and the geometry as text, the sort values) without the rows after the
// one that follows the first to bring the properties and geometry of
// the rows up to it to budget bytes. The page writer counts more than
// those (every feature's id and framing, the page's own), so it ends its
// page no later than that first row and still finds the next, which says
// that more follow; the rows past it are neither sent nor read, where
// pgx would otherwise read and drop every one before the connection
// could serve again.
func budgeted(sel string, n int, budget string) string {
	cols := make([]string, n)
	for i := range cols {
		cols[i] = fmt.Sprintf("w.c%d", i)
	}
	// The window keeps the page's order: it numbers and sums the rows as
	// the sorted, limited page yields them.
	return `SELECT ` + strings.Join(cols, ", ") + ` FROM (
  SELECT p.*, row_number() OVER () AS n,
    coalesce(sum(octet_length(p.c1) + coalesce(octet_length(p.c2), 0))
      OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND 2 PRECEDING), 0) AS before
  FROM (` + sel + `) p
) w
WHERE w.before < ` + budget + `::bigint
ORDER BY w.n`
}

// countSQL counts the features q matches, all pages together, stopping
// past bound (0: no bound): a count above bound says only that more
// match.
func (s *layerSQL) countSQL(q *query, own string, bound int) (string, []any) {
	b := &builder{}
	where := s.conditions(b, q, own)
	sql := "SELECT 1 FROM " + s.l.Qualified() + " l"
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	if bound > 0 {
		sql += " LIMIT " + b.arg(bound+1) + "::int"
	}
	return "SELECT count(*) FROM (" + sql + ") c", b.args
}

// propsExpr is the feature's properties, all or those named.
func (s *layerSQL) propsExpr(b *builder, names []string) string {
	if names == nil {
		return s.all
	}
	return fmt.Sprintf("(SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb) FROM jsonb_each(%s) e WHERE e.key = ANY(%s::text[]))", s.all, b.arg(names))
}

// geoJSON is the feature's geometry in q's CRS, cut to the caller's scope
// where it reaches beyond it.
func (s *layerSQL) geoJSON(b *builder, q *query, own string) string {
	col := s.l.Linear("l." + catalog.QuoteIdent(s.l.Column))
	if q.scope == nil && !s.l.Geography && q.crs.SRID == s.l.SRID && !q.crs.LatFirst {
		return "ST_AsGeoJSON(" + col + ")"
	}
	g := s.lonLat
	if q.scope != nil {
		sc := fmt.Sprintf("ST_GeomFromWKB(%s, 4326)", b.arg(q.scope.WKB()))
		g = fmt.Sprintf("CASE WHEN ST_CoveredBy(%[1]s, %[2]s) THEN %[1]s ELSE ST_Intersection(%[1]s, %[2]s) END", g, sc)
	}
	if q.crs.SRID != 4326 {
		g = fmt.Sprintf("%s.safe_transform(%s, %d)", catalog.QuoteIdent(own), g, q.crs.SRID)
	}
	if q.crs.LatFirst {
		g = "ST_FlipCoordinates(" + g + ")"
	}
	return "ST_AsGeoJSON(" + g + ")"
}
