package features

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/cql2"
	"github.com/jackc/pgx/v5"
)

// filterLimits bound a filter's size, so that no request makes the parser
// or the planner work without end.
var filterLimits = cql2.DefaultLimits()

// parseFilter reads filter, filter-lang and filter-crs, and checks the
// expression against l's queryables now, so that a bad one is a 400 before
// any SQL runs.
func (s *Service) parseFilter(l *layerSQL, v url.Values) (*filter, error) {
	if !v.Has("filter") {
		for _, p := range []string{"filter-lang", "filter-crs"} {
			if v.Has(p) {
				return nil, bad("%s is given without a filter.", p)
			}
		}
		return nil, nil
	}
	var e cql2.Expr
	var err error
	switch lang := v.Get("filter-lang"); lang {
	case "", "cql2-text", "cql-text": // cql-text: the draft's name, which GDAL before 3.7 sends
		e, err = cql2.ParseText(v.Get("filter"), filterLimits)
	case "cql2-json":
		e, err = cql2.ParseJSON([]byte(v.Get("filter")), filterLimits)
	default:
		return nil, bad("filter-lang: %q is not served; use cql2-text or cql2-json.", lang)
	}
	if err != nil {
		return nil, filterError(l, err)
	}
	crs := cql2.CRS{SRID: 4326}
	if v.Has("filter-crs") {
		c, err := parseCRS("filter-crs", v.Get("filter-crs"), l.l.SRID)
		if err != nil {
			return nil, err
		}
		crs = cql2.CRS{SRID: c.SRID, LatLon: c.LatFirst}
	}
	cols := l.cql2Columns()
	var probe []any
	if _, err := cql2.SQL(e, cols, crs, &probe); err != nil {
		return nil, filterError(l, err)
	}
	return &filter{render: func(args *[]any) string {
		sql, _ := cql2.SQL(e, cols, crs, args) // it rendered above
		return sql
	}}, nil
}

// filterError answers a filter the client must fix with a 400 that says
// where, and points an unknown property to the queryables.
func filterError(l *layerSQL, err error) error {
	var ce *cql2.Error
	if !errors.As(err, &ce) {
		return err
	}
	msg := "filter: " + ce.Error()
	if ce.Property != "" {
		msg += " (/collections/" + l.l.ID + "/queryables lists the properties a filter may name)"
	}
	return apperr.Wrap(apperr.BadRequest, msg, err)
}

// cql2Columns are the queryables as the filter package takes them: the
// properties, and the geometry as "geometry" (and by its column's name,
// unless a property has it).
func (l *layerSQL) cql2Columns() cql2.Columns {
	cols := cql2.Columns{}
	for _, q := range l.queryables {
		t := q.Type
		switch q.Format {
		case "date-time":
			t = "timestamp"
		case "date":
			t = "date"
		}
		cols[q.Name] = cql2.Column{SQL: q.SQL, Type: t}
	}
	g := cql2.Column{SQL: "l." + catalog.QuoteIdent(l.l.Column), Type: "geometry", SRID: l.l.SRID, Geography: l.l.Geography}
	cols["geometry"] = g
	if _, taken := cols[l.l.Column]; !taken {
		cols[l.l.Column] = g
	}
	return cols
}

// filterConformance lists the filtering classes implemented: OGC API –
// Features Part 3 and the CQL2 classes the parser covers.
func (s *Service) filterConformance() []string {
	return append([]string{
		"http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/filter",
		"http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/features-filter",
		"http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/queryables",
	}, cql2.Conformance()...)
}

// CheckFilter says whether the CQL2 text filter fits collection id: a
// filter the collection cannot take is a 400, an unknown or forbidden
// collection as on /collections.
func (s *Service) CheckFilter(ctx context.Context, id, filter string) error {
	_, _, err := s.matching(ctx, id, filter)
	return err
}

// Kept is what a queued filter kept, once its batch is read: the keys
// whose features pass it.
type Kept struct {
	Keys map[string]bool
}

// QueueMatching queues, in b, keeping those of keys (features' ids as
// text) whose features of collection id pass the CQL2 text filter. The
// filter is checked as CheckFilter does, and nothing is queued when it
// fails.
func (s *Service) QueueMatching(ctx context.Context, b *pgx.Batch, id, filter string, keys []string) (*Kept, error) {
	sql, args, err := s.matching(ctx, id, filter)
	if err != nil {
		return nil, err
	}
	k := &Kept{Keys: map[string]bool{}}
	args[0] = keys
	b.Queue(sql, args...).Query(func(rows pgx.Rows) error {
		var key string
		_, err := pgx.ForEachRow(rows, []any{&key}, func() error { k.Keys[key] = true; return nil })
		return err
	})
	return k, nil
}

// matching returns the statement that keeps, of the feature ids in $1
// (text[]), those of collection id whose features pass filter, and its
// arguments, $1 left nil.
func (s *Service) matching(ctx context.Context, id, filter string) (string, []any, error) {
	l, err := s.layer(ctx, id)
	if err != nil {
		return "", nil, err
	}
	f, err := s.parseFilter(l, url.Values{"filter": {filter}})
	if err != nil {
		return "", nil, err
	}
	args := []any{nil} // $1, the ids
	cond := f.render(&args)
	sql := fmt.Sprintf("SELECT (%[1]s)::text FROM %[2]s l WHERE (%[1]s)::text = ANY($1::text[]) AND (%[3]s)", l.key, l.l.Qualified(), cond)
	return sql, args, nil
}
