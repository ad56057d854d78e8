package features

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/pg"
)

// Feature is one feature as GeoJSON parts: its id, properties and
// geometry are JSON already.
type Feature struct {
	ID, Properties, Geometry []byte
	// Version is md5 of the feature's row, when the query asked for it
	// (query.version): what its ETag and If-Match name.
	Version []byte
}

// Page is what is known of a page of items once its features are
// written.
type Page struct {
	// Returned is how many features it has.
	Returned int
	// Matched is how many features the query matched when its first page
	// was read; Unknown when they were not counted (more matched than
	// Settings.CountMax, or counting is off).
	Matched int64
	// Cursor resumes after this page; "" on the last.
	Cursor string
}

// Unknown is Page.Matched when the features matched were not counted.
const Unknown = -1

// pageOut takes a page's features as their rows arrive, in order; full
// says the page's byte budget is spent with this one: the page ends
// there, with a cursor.
type pageOut func(f Feature) (full bool, err error)

// itemsRequest is an items request, checked: the layer, the query, the
// string its cursors are bound to, and the page it resumes after (nil on
// a first page).
type itemsRequest struct {
	l       *layerSQL
	q       *query
	binding string
	resumed *page
}

// checkItems checks an items request of collection id with query
// parameters v.
func (s *Service) checkItems(ctx context.Context, id string, v url.Values) (*itemsRequest, error) {
	l, err := s.layer(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := checkParams(v, itemsParams); err != nil {
		return nil, err
	}
	q, binding, err := s.itemsQuery(ctx, l, v)
	if err != nil {
		return nil, err
	}
	r := &itemsRequest{l: l, q: q, binding: binding}
	if c := v.Get("cursor"); c != "" {
		p, err := s.cursors.decode(binding, c)
		if err != nil || len(p.Sort) != len(q.sort) {
			return nil, errBadCursor
		}
		q.after, r.resumed = &position{sort: p.Sort, key: p.Key}, &p
	}
	return r, nil
}

// batch is the statements r runs, in one round trip: its page, then on a
// first page the count of the features it matches, up to countMax (see
// Settings.CountMax), unless its limit is countMax or more: then a page
// that is the whole answer counts it, and a full one says that more than
// the bound match (one its byte budget ends early goes without).
func (r *itemsRequest) batch(own string, budget, countMax int) []Statement {
	sql, args := r.l.pageSQL(r.q, own, budget)
	out := []Statement{{SQL: sql, Args: args}}
	if r.resumed == nil && (countMax < 0 || 0 < countMax && r.q.limit < countMax) {
		csql, cargs := r.l.countSQL(r.q, own, max(countMax, 0))
		out = append(out, Statement{SQL: csql, Args: cargs})
	}
	return out
}

// Statement is one SQL statement and its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// ItemsSQL returns the statements an items request of collection id with
// query parameters v runs, as the items route would run them for a caller
// who may see the whole layer: the page (limit+1 rows of the id, the
// properties, the GeoJSON geometry and each sort value, as text, stopped
// in the database past the page's byte budget), then, on a first page (no
// cursor) whose limit is below Settings.CountMax, the count of its
// matches up to that. The route sends them in one batch on one
// connection. A request
// the route refuses is the same error here.
func (s *Service) ItemsSQL(ctx context.Context, id string, v url.Values) ([]Statement, error) {
	r, err := s.checkItems(ctx, id, v)
	if err != nil {
		return nil, err
	}
	return r.batch(s.s.Own, s.maxPageBytes(), s.s.CountMax), nil
}

// items reads one page of collection id's features as the query
// parameters v ask, handing each to out as its row arrives; begin is
// called first with the page's CRS, once the request is checked. No page
// is held whole: a feature is written from the row's own bytes and
// dropped.
func (s *Service) items(ctx context.Context, id string, v url.Values, begin func(CRS), out pageOut) (Page, error) {
	return s.readItems(ctx, id, v, begin, out, nil)
}

// readItems is items; with version set, it first reads the layer's data
// version (see dataVersion) into it, in the same round trip.
func (s *Service) readItems(ctx context.Context, id string, v url.Values, begin func(CRS), out pageOut, version *int64) (Page, error) {
	r, err := s.checkItems(ctx, id, v)
	if err != nil {
		return Page{}, err
	}
	vsql, table, versioned := r.l.versionSQL(s.s.Own)
	if version != nil && !versioned {
		return Page{}, errUnversioned
	}
	begin(r.q.crs)
	var p Page
	var last position
	var more bool
	err = s.run.Read(ctx, func(ctx context.Context, conn pg.Conn) error {
		b := &pgx.Batch{}
		if version != nil {
			b.Queue(vsql, table)
		}
		stmts := r.batch(s.s.Own, s.maxPageBytes(), s.s.CountMax)
		for _, st := range stmts {
			b.Queue(st.SQL, st.Args...)
		}
		res := conn.SendBatch(ctx, b)
		defer res.Close()
		if version != nil {
			if err := res.QueryRow().Scan(version); err != nil {
				return err
			}
		}
		rows, err := res.Query()
		if err != nil {
			return err
		}
		p.Returned, last, more, err = writePage(rows, r.l, r.q, out)
		if err != nil {
			return err
		}
		switch {
		case r.resumed != nil:
			p.Matched = r.resumed.Matched
			return nil
		case !more:
			p.Matched = int64(p.Returned) // the whole answer
			return nil
		case len(stmts) == 1:
			p.Matched = Unknown
			return nil
		}
		if err := res.QueryRow().Scan(&p.Matched); err != nil {
			return err
		}
		if s.s.CountMax > 0 && p.Matched > int64(s.s.CountMax) {
			p.Matched = Unknown
		}
		return nil
	})
	if err != nil {
		return Page{}, badValue(err)
	}
	if more {
		p.Cursor = s.cursors.encode(r.binding, page{Sort: last.sort, Key: last.key, Matched: p.Matched})
	}
	return p, nil
}

// errUnversioned is asked of a layer whose writes geogate's triggers
// do not count: nothing read of it ahead can be proven current.
var errUnversioned = errors.New("features: the layer has no data version")

// dataVersion reads the data version of collection id's table, which
// geogate's triggers (api publish --invalidate, and the built-in layers')
// raise in every writing transaction.
func (s *Service) dataVersion(ctx context.Context, id string) (int64, error) {
	l, err := s.layer(ctx, id)
	if err != nil {
		return 0, err
	}
	vsql, table, ok := l.versionSQL(s.s.Own)
	if !ok {
		return 0, errUnversioned
	}
	var version int64
	err = s.run.Read(ctx, func(ctx context.Context, conn pg.Conn) error {
		return conn.QueryRow(ctx, vsql, table).Scan(&version)
	})
	return version, err
}

// busy says whether the database has no room for work nobody has asked
// for yet: the fair queue in front of it (when there is one) has callers
// waiting, or every slot held.
func (s *Service) busy() bool {
	b, ok := s.run.Queue.(interface{ Busy() bool })
	return ok && b.Busy()
}

// versioned says whether collection id has a data version.
func (s *Service) versioned(ctx context.Context, id string) bool {
	l, err := s.layer(ctx, id)
	return err == nil && l.l.Invalidated
}

// writePage hands the rows of a page to out, up to the page's limit or
// until out says the page is full, and returns how many it handed, the
// position of the last, and whether more may follow. Rows left when the
// page fills are read off and dropped (rows.Close), so that the batch's
// count can be read: few, since the database stops the page past its
// budget (see budgeted). Each feature is made of the row's own bytes, valid
// until the next row: nothing of a row outlives out.
func writePage(rows pgx.Rows, l *layerSQL, q *query, out pageOut) (n int, last position, more bool, err error) {
	defer rows.Close()
	jsonb := make([]bool, len(rows.FieldDescriptions()))
	for i, fd := range rows.FieldDescriptions() {
		jsonb[i] = fd.DataTypeOID == pgtype.JSONBOID && fd.Format == pgx.BinaryFormatCode
	}
	for rows.Next() {
		if n == q.limit {
			return n, last, true, rows.Err()
		}
		raw := rows.RawValues()
		props := raw[1]
		if jsonb[1] && len(props) > 0 {
			props = props[1:] // the binary jsonb's version byte
		}
		f := Feature{ID: l.keyJSON(string(raw[0])), Properties: props, Geometry: raw[2]}
		if q.version {
			f.Version = raw[3+len(q.sort)]
		}
		full, err := out(f)
		if err != nil {
			return n, last, false, err
		}
		n++
		last = position{sort: make([]*string, len(q.sort)), key: string(raw[0])}
		for i := range q.sort {
			if v := raw[3+i]; v != nil {
				s := string(v)
				last.sort[i] = &s
			}
		}
		if full {
			return n, last, rows.Next(), rows.Err() // a row beyond says more follow
		}
	}
	return n, last, false, rows.Err()
}

// itemsQuery checks v against layer l and returns the query, and the
// string its cursors are bound to: everything that decides which features
// match and in which order.
func (s *Service) itemsQuery(ctx context.Context, l *layerSQL, v url.Values) (*query, string, error) {
	if err := checkFormat(v); err != nil {
		return nil, "", err
	}
	q := &query{scope: auth.ScopeOf(ctx)}
	var err error
	if q.crs, err = optionalCRS(v, "crs", l.l.SRID); err != nil {
		return nil, "", err
	}
	if q.limit, err = parseLimit(v.Get("limit"), s.s.DefaultLimit, s.s.MaxLimit); err != nil {
		return nil, "", err
	}
	if !l.l.Located() && (v.Has("bbox") || q.scope != nil) {
		return nil, "", errNoCRS(map[bool]string{true: "bbox", false: "scope"}[v.Has("bbox")])
	}
	if b := v.Get("bbox"); b != "" {
		bc, err := optionalCRS(v, "bbox-crs", l.l.SRID)
		if err != nil {
			return nil, "", err
		}
		if q.bbox, err = parseBBox(b, bc); err != nil {
			return nil, "", err
		}
	} else if v.Has("bbox-crs") {
		if _, err := optionalCRS(v, "bbox-crs", l.l.SRID); err != nil {
			return nil, "", err
		}
	}
	if d := v.Get("datetime"); d != "" {
		if l.timeCol == nil {
			return nil, "", bad("datetime: collection %s has no date or time property to filter on.", l.l.ID)
		}
		if q.datetime, err = parseDatetime(d); err != nil {
			return nil, "", err
		}
	}
	if v.Has("properties") {
		if q.props, err = parseProperties(v.Get("properties"), l.propertyNames(), l.l.ID); err != nil {
			return nil, "", err
		}
	}
	if sb := v.Get("sortby"); sb != "" {
		if q.sort, err = l.parseSortby(sb); err != nil {
			return nil, "", err
		}
	}
	if q.filter, err = s.parseFilter(l, v); err != nil {
		return nil, "", err
	}
	binding := strings.Join([]string{l.l.ID, v.Get("bbox"), v.Get("bbox-crs"), v.Get("datetime"),
		v.Get("filter"), v.Get("filter-lang"), v.Get("filter-crs"), v.Get("sortby")}, "\x00")
	if q.scope != nil {
		binding += "\x00" + q.scope.Hash()
	}
	return q, binding, nil
}

func optionalCRS(v url.Values, param string, storage int) (CRS, error) {
	if !v.Has(param) {
		if storage <= 0 {
			return localCRS, nil
		}
		return CRS84, nil
	}
	return parseCRS(param, v.Get(param), storage)
}

// Item reads one feature of collection id; a feature outside the caller's
// scope is as unknown as one that does not exist.
func (s *Service) item(ctx context.Context, id, featureID string, v url.Values) (Feature, CRS, error) {
	l, err := s.layer(ctx, id)
	if err != nil {
		return Feature{}, CRS{}, err
	}
	if err := checkParams(v, itemParams); err != nil {
		return Feature{}, CRS{}, err
	}
	if err := checkFormat(v); err != nil {
		return Feature{}, CRS{}, err
	}
	q := &query{scope: auth.ScopeOf(ctx), limit: 1, id: &featureID, version: true}
	if q.crs, err = optionalCRS(v, "crs", l.l.SRID); err != nil {
		return Feature{}, CRS{}, err
	}
	if v.Has("properties") {
		if q.props, err = parseProperties(v.Get("properties"), l.propertyNames(), l.l.ID); err != nil {
			return Feature{}, CRS{}, err
		}
	}
	if !l.validKey(featureID) {
		return Feature{}, CRS{}, errNoFeature
	}
	var f *Feature
	err = s.run.Read(ctx, func(ctx context.Context, conn pg.Conn) error {
		sql, args := l.pageSQL(q, s.s.Own, 0)
		rows, err := conn.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		_, _, _, err = writePage(rows, l, q, func(one Feature) (bool, error) {
			// The row's bytes are the driver's until the next row: keep
			// a copy.
			f = &Feature{ID: one.ID, Properties: bytes.Clone(one.Properties), Geometry: bytes.Clone(one.Geometry), Version: bytes.Clone(one.Version)}
			return true, nil
		})
		return err
	})
	if err := badValue(err); err != nil {
		return Feature{}, CRS{}, err
	}
	if f == nil {
		return Feature{}, CRS{}, errNoFeature
	}
	return *f, q.crs, nil
}

var errNoFeature = apperr.New(apperr.NotFound, "No such feature in this collection.")

// validKey says whether s can be a feature id of the layer: an integer
// key takes only integers, so that the database never sees a value its
// cast refuses.
func (l *layerSQL) validKey(s string) bool {
	if l.l.Key.Type == "integer" {
		_, err := strconv.ParseInt(s, 10, 64)
		return err == nil
	}
	return len(s) <= maxCursor
}

// badValue turns a value PostgreSQL cannot read as the type it was cast
// to (a feature id that is no uuid, a date out of range) into a 404 or
// 400 instead of a 500.
func badValue(err error) error {
	var pe *pgconn.PgError
	switch {
	case !errors.As(err, &pe):
	case pe.Code == "22P02" || pe.Code == "22007" || pe.Code == "22008" || pe.Code == "22003" || pe.Code == "22023":
		return apperr.Wrap(apperr.BadRequest, "A value of the request cannot be read as the type of the property it is compared with.", err)
	case pe.Code == "XX000" && strings.HasPrefix(pe.Message, "transform"):
		// A filter's geometry far outside the layer's projection.
		return apperr.Wrap(apperr.BadRequest, "filter: a geometry of the filter lies where the collection's storage CRS cannot take it; cut it to the collection's extent.", err)
	}
	return err
}

// keyJSON writes a feature id as JSON: a number for an integer key, a
// string otherwise.
func (l *layerSQL) keyJSON(text string) []byte {
	if l.l.Key.Type == "integer" {
		return []byte(text)
	}
	b, _ := json.Marshal(text)
	return b
}
