package features

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/pg"
)

// A write of OGC API Features Part 4 on a layer the layer file opens for
// writing (catalog.Layer.Writable): a feature created, replaced, updated
// (JSON merge patch) or deleted, each one statement on the primary, as
// the caller where the layer runs as its caller, so that the table's
// policies and grants decide what may be written.
//
// A feature's version is md5 of its row's text: its ETag, and what
// If-Match is held against, in the statement that writes, so that two
// writers holding the same version cannot both succeed.

// maxFeatureBody bounds a written feature's body.
const maxFeatureBody = 5 << 20

var (
	errNotWritable = apperr.New(apperr.NotAllowed, "This collection is not open for writing: the layer file opens a table with `write: true`.")
	errChanged     = apperr.New(apperr.Changed, "The feature has changed since the version If-Match names: read it again, then write.")
	errKeyChange   = apperr.InvalidField("The feature's id is the one in the path: a body may not change it.", "value_error", "body", "id")
)

// written is a feature after a write: its id and its version.
type written struct {
	ID      string
	Version string
}

// featureBody is a feature a client sent: its id, properties and
// geometry, each as sent; Has* says which members the body had.
type featureBody struct {
	ID json.RawMessage
	// GeometryType is the geometry's GeoJSON type, "" without one.
	GeometryType string
	Properties   map[string]json.RawMessage
	Geometry     json.RawMessage
	HasGeometry  bool
	HasProps     bool
}

// parseFeature reads a GeoJSON Feature. A patch (merge patch) may leave
// out what it does not change; a full feature needs its geometry.
func parseFeature(body []byte, patch bool) (featureBody, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return featureBody{}, apperr.InvalidField("A GeoJSON Feature: a JSON object.", "model_attributes_type", "body")
	}
	var f featureBody
	if t, ok := m["type"]; ok && string(t) != `"Feature"` {
		return featureBody{}, apperr.InvalidField(`A GeoJSON Feature: "type" is "Feature".`, "literal_error", "body", "type")
	} else if !ok && !patch {
		return featureBody{}, apperr.InvalidField("Field required.", "missing", "body", "type")
	}
	f.ID = m["id"]
	if raw, ok := m["properties"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &f.Properties); err != nil || f.Properties == nil {
			return featureBody{}, apperr.InvalidField("An object of the feature's properties.", "dict_type", "body", "properties")
		}
		f.HasProps = true
	}
	raw, ok := m["geometry"]
	f.HasGeometry = ok
	switch {
	case !ok && !patch:
		return featureBody{}, apperr.InvalidField("Field required.", "missing", "body", "geometry")
	case ok && string(raw) == "null":
		return featureBody{}, apperr.InvalidField("A feature written here needs a geometry.", "value_error", "body", "geometry")
	case ok:
		var g struct {
			Type        string          `json:"type"`
			Coordinates json.RawMessage `json:"coordinates"`
			Geometries  json.RawMessage `json:"geometries"`
		}
		if err := json.Unmarshal(raw, &g); err != nil || g.Type == "" || (g.Coordinates == nil && g.Geometries == nil) {
			return featureBody{}, apperr.InvalidField("A GeoJSON geometry: an object with a type and coordinates, in longitude and latitude (CRS84).", "value_error", "body", "geometry")
		}
		f.Geometry, f.GeometryType = raw, g.Type
	}
	return f, nil
}

// checkValid refuses, with a 422 saying why, a geometry of f that is not
// valid (a ring crossing itself): PostGIS would store it, and every
// question about it after would have a doubtful answer. Points are always
// valid and cost no statement.
func checkValid(ctx context.Context, conn pg.Conn, f featureBody) error {
	if !f.HasGeometry || f.GeometryType == "Point" || f.GeometryType == "MultiPoint" {
		return nil
	}
	var reason string
	if err := conn.QueryRow(ctx, "SELECT ST_IsValidReason(ST_GeomFromGeoJSON($1::text))", string(f.Geometry)).Scan(&reason); err != nil {
		return err
	}
	if reason != "Valid Geometry" {
		return apperr.InvalidField("The geometry is not valid: "+reason+".", "value_error", "body", "geometry")
	}
	return nil
}

// writeColumns are the columns a write of f sets, in the layer's order:
// the properties it names, each a column of the layer (a name that is
// not is a 422 naming it, so that no name the client chose ever reaches
// SQL), without the key unless keep.
func (l *layerSQL) writeColumns(f featureBody, all, keep bool) ([]string, error) {
	// In order, so that of several wrong names the same one is named.
	for _, name := range slices.Sorted(maps.Keys(f.Properties)) {
		if !slices.ContainsFunc(l.l.Properties, func(p catalog.Property) bool { return p.Name == name }) {
			return nil, apperr.InvalidField(fmt.Sprintf("Collection %s has no property %q (GET /collections/%s/schema lists them).", l.l.ID, name, l.l.ID), "extra_forbidden", "body", "properties", name)
		}
	}
	var cols []string
	for _, p := range l.l.Properties {
		if p.Name == l.l.Key.Column && !keep {
			continue
		}
		if _, named := f.Properties[p.Name]; named || all {
			cols = append(cols, p.Name)
		}
	}
	return cols, nil
}

// geometryExpr is the geometry of $n, GeoJSON in CRS84, as the layer's
// column stores it: in its SRID, made multi for a multi column, as a
// geography for a geography column.
func (l *layerSQL) geometryExpr(n int) string {
	g := fmt.Sprintf("ST_SetSRID(ST_GeomFromGeoJSON($%d::text), 4326)", n)
	if strings.HasPrefix(l.l.GeometryType, "Multi") {
		g = "ST_Multi(" + g + ")"
	}
	switch {
	case l.l.Geography:
		return g + "::geography"
	case l.l.SRID != 4326 && l.l.SRID != 0:
		return fmt.Sprintf("ST_Transform(%s, %d)", g, l.l.SRID)
	}
	return g
}

// keyMatch is the condition on row l of the key $n and, when $m is not
// NULL, the version $m (an array of versions, one of which must be the
// row's).
func (l *layerSQL) keyMatch(n, m int) string {
	return fmt.Sprintf("l.%s = $%d::text::%s AND ($%d::text[] IS NULL OR md5(l::text) = ANY($%d::text[]))",
		catalog.QuoteIdent(l.l.Key.Column), n, l.l.Key.PGType, m, m)
}

// record is the row the properties $1 (a JSON object) make.
func (l *layerSQL) record() string {
	return "jsonb_populate_record(NULL::" + l.l.Qualified() + ", $1::jsonb)"
}

func quoteAll(cols []string, prefix string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = prefix + catalog.QuoteIdent(c)
	}
	return out
}

// propsJSON is f's properties as one JSON object.
func propsJSON(f featureBody) []byte {
	if len(f.Properties) == 0 {
		return []byte("{}")
	}
	b, _ := json.Marshal(f.Properties)
	return b
}

// writable is the layer id names, open for writing.
func (s *Service) writable(ctx context.Context, id string) (*layerSQL, error) {
	l, err := s.layer(ctx, id)
	if err != nil {
		return nil, err
	}
	if !l.l.Writable || l.own {
		return nil, errNotWritable
	}
	return l, nil
}

// create inserts the feature in body and returns its id and version.
func (s *Service) create(ctx context.Context, id string, body []byte) (written, error) {
	l, err := s.writable(ctx, id)
	if err != nil {
		return written{}, err
	}
	f, err := parseFeature(body, false)
	if err != nil {
		return written{}, err
	}
	if f.ID != nil && string(f.ID) != "null" {
		// The id goes in as the key's property, as the table's own
		// default would otherwise make it.
		if f.Properties == nil {
			f.Properties = map[string]json.RawMessage{}
		}
		f.Properties[l.l.Key.Column] = f.ID
	}
	cols, err := l.writeColumns(f, false, true)
	if err != nil {
		return written{}, err
	}
	names := append(quoteAll(cols, ""), catalog.QuoteIdent(l.l.Column))
	values := append(quoteAll(cols, "v."), l.geometryExpr(2))
	sql := fmt.Sprintf("INSERT INTO %s AS l (%s) SELECT %s FROM %s v RETURNING l.%s::text, md5(l::text)",
		l.l.Qualified(), strings.Join(names, ", "), strings.Join(values, ", "), l.record(), catalog.QuoteIdent(l.l.Key.Column))
	var w written
	err = s.run.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		if err := checkValid(ctx, conn, f); err != nil {
			return err
		}
		return conn.QueryRow(ctx, sql, propsJSON(f), string(f.Geometry)).Scan(&w.ID, &w.Version)
	})
	return w, writeFailed(err)
}

// replace writes the feature in body over feature fid (PUT), or merges
// it in (PATCH, patch true), when its version is one of ifMatch (nil:
// any version).
func (s *Service) replace(ctx context.Context, id, fid string, body []byte, patch bool, ifMatch []string) (written, error) {
	l, err := s.writable(ctx, id)
	if err != nil {
		return written{}, err
	}
	if !l.validKey(fid) {
		return written{}, errNoFeature
	}
	f, err := parseFeature(body, patch)
	if err != nil {
		return written{}, err
	}
	if f.ID != nil && string(f.ID) != "null" && strings.Trim(string(f.ID), `"`) != fid {
		return written{}, errKeyChange
	}
	if v, ok := f.Properties[l.l.Key.Column]; ok && strings.Trim(string(v), `"`) != fid {
		return written{}, errKeyChange
	}
	delete(f.Properties, l.l.Key.Column)
	cols, err := l.writeColumns(f, !patch, false)
	if err != nil {
		return written{}, err
	}
	args := []any{propsJSON(f), fid, ifMatch}
	sets := make([]string, 0, len(cols)+1)
	for _, c := range cols {
		sets = append(sets, catalog.QuoteIdent(c)+" = v."+catalog.QuoteIdent(c))
	}
	if f.HasGeometry {
		args = append(args, string(f.Geometry))
		sets = append(sets, catalog.QuoteIdent(l.l.Column)+" = "+l.geometryExpr(len(args)))
	}
	if len(sets) == 0 {
		// A patch that changes nothing still proves the feature is
		// there, at the version it names.
		sets = append(sets, catalog.QuoteIdent(l.l.Key.Column)+" = l."+catalog.QuoteIdent(l.l.Key.Column))
	}
	sql := fmt.Sprintf("UPDATE %s AS l SET %s FROM %s v WHERE %s RETURNING md5(l::text), l.%s::text",
		l.l.Qualified(), strings.Join(sets, ", "), l.record(), l.keyMatch(2, 3), catalog.QuoteIdent(l.l.Key.Column))
	w := written{ID: fid}
	err = s.run.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		if err := checkValid(ctx, conn, f); err != nil {
			return err
		}
		return s.watched(ctx, conn, l, func(tx pg.Conn) (string, error) {
			var key string
			err := tx.QueryRow(ctx, sql, args...).Scan(&w.Version, &key)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", s.missing(ctx, tx, l, fid, ifMatch)
			}
			return key, err
		}, false)
	})
	return w, writeFailed(err)
}

// remove deletes feature fid when its version is one of ifMatch (nil:
// any version).
func (s *Service) remove(ctx context.Context, id, fid string, ifMatch []string) error {
	l, err := s.writable(ctx, id)
	if err != nil {
		return err
	}
	if !l.validKey(fid) {
		return errNoFeature
	}
	sql := fmt.Sprintf("DELETE FROM %s AS l WHERE %s RETURNING l.%s::text", l.l.Qualified(), l.keyMatch(1, 2), catalog.QuoteIdent(l.l.Key.Column))
	err = s.run.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		return s.watched(ctx, conn, l, func(tx pg.Conn) (string, error) {
			var key string
			err := tx.QueryRow(ctx, sql, fid, ifMatch).Scan(&key)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", s.missing(ctx, tx, l, fid, ifMatch)
			}
			return key, err
		}, true)
	})
	return writeFailed(err)
}

// watched runs write, which changes or deletes one feature of l and
// returns its key as text. On a layer devices may be watched in, it runs
// in a transaction with the exits of the stays the write ended, so that
// they commit together; elsewhere it is the one statement it was. A
// device's report may end the same stay at the same time: the one
// PostgreSQL picks as a deadlock's victim runs again, up to three times
// in all, as reports do.
func (s *Service) watched(ctx context.Context, conn pg.Conn, l *layerSQL, write func(pg.Conn) (string, error), deleted bool) error {
	if s.watch == nil || !s.watch.Watched(l.l.ID) {
		_, err := write(conn)
		return err
	}
	var err error
	for range 3 {
		if err = s.watchedOnce(ctx, conn, l, write, deleted); !pg.Deadlocked(err) {
			break
		}
	}
	return err
}

func (s *Service) watchedOnce(ctx context.Context, conn pg.Conn, l *layerSQL, write func(pg.Conn) (string, error), deleted bool) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op once committed
	key, err := write(tx)
	if err != nil {
		return err
	}
	if err := s.watch.FenceWritten(ctx, tx, l.l.ID, key, deleted); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// missing says why a conditional write found no row: the feature is not
// there (404), or it is at another version than If-Match names (412).
func (s *Service) missing(ctx context.Context, conn pg.Conn, l *layerSQL, fid string, ifMatch []string) error {
	if ifMatch == nil {
		return errNoFeature
	}
	var there bool
	err := conn.QueryRow(ctx, fmt.Sprintf("SELECT EXISTS (SELECT 1 FROM %s l WHERE l.%s = $1::text::%s)",
		l.l.Qualified(), catalog.QuoteIdent(l.l.Key.Column), l.l.Key.PGType), fid).Scan(&there)
	switch {
	case err != nil:
		return err
	case there:
		return errChanged
	}
	return errNoFeature
}

// writeFailed turns what PostgreSQL says of a write the client can mend
// into its 4xx: a value its column cannot take, a geometry PostGIS
// cannot read or the column does not hold, a required property missing,
// an id taken. Refusals by the caller's role are the runner's 403.
func writeFailed(err error) error {
	var pe *pgconn.PgError
	if err == nil || !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Code == "23505":
		return apperr.Wrap(apperr.Conflict, "A feature with that id exists already.", err)
	case pe.Code == "23502":
		return apperr.Wrap(apperr.Invalid, fmt.Sprintf("Property %q is required.", pe.ColumnName), err)
	case pe.Code == "23514" || pe.Code == "23503":
		return apperr.Wrap(apperr.Invalid, "The feature breaks a rule of its table (a check or a reference).", err)
	case strings.HasPrefix(pe.Code, "22"):
		return apperr.Wrap(apperr.Invalid, "A value does not fit its column, or the geometry is not one the column holds.", err)
	case pe.Code == "XX000" && strings.Contains(strings.ToLower(pe.Message), "geojson"):
		return apperr.Wrap(apperr.Invalid, "The geometry is not GeoJSON PostGIS can read.", err)
	}
	return err
}

// parseIfMatch reads If-Match: nil when absent or "*" (any version),
// else the versions it names. ETags are "<version>" or
// "<version>-<representation>" (GET's); a weak one never matches.
func parseIfMatch(h string) []string {
	h = strings.TrimSpace(h)
	if h == "" || h == "*" {
		return nil
	}
	out := []string{}
	for _, t := range strings.Split(h, ",") {
		t = strings.TrimSpace(t)
		if !strings.HasPrefix(t, `"`) || !strings.HasSuffix(t, `"`) || len(t) < 2 {
			continue // weak or malformed: matches nothing
		}
		v, _, _ := strings.Cut(strings.Trim(t, `"`), "-")
		out = append(out, v)
	}
	return out
}

// etagOf is the ETag of a feature at version v.
func etagOf(v string) string { return `"` + v + `"` }

// readBody reads a request body of at most maxFeatureBody bytes.
func readBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxFeatureBody+1))
	if err != nil {
		return nil, apperr.InvalidField("The body could not be read.", "value_error", "body")
	}
	if len(b) > maxFeatureBody {
		return nil, apperr.New(apperr.TooLarge, fmt.Sprintf("A feature's body is at most %d bytes.", maxFeatureBody))
	}
	return b, nil
}
