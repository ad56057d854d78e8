package geofence

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/geogate/geogate/internal/pg"
	"github.com/jackc/pgx/v5"
)

// WithinQuery asks for the features of Layer within Radius metres of
// (Lng, Lat), nearest first.
type WithinQuery struct {
	Layer    string
	Lng, Lat float64
	Radius   float64
	Limit    int
	// Props lists the stored properties to return; nil means all of them
	// and an empty slice none.
	Props []string
	// After resumes after this position (from a cursor); nil starts at the
	// nearest feature.
	After *Position
	// Scope, a spatial scope as WKB (nil for the whole world), cuts each
	// geometry to the scope. The circle lies inside the scope (the handler
	// refuses any other), so every feature within it meets the scope.
	Scope []byte
	// MaxBytes bounds the encoded size of the page (see pageBytes); 0
	// means no bound.
	MaxBytes int
}

// Feature is one /within or geofence result. Props and Geometry are JSON
// (an object without the name key, and a GeoJSON geometry).
type Feature struct {
	ID int64
	// Key, when set, is the feature id as JSON (a number or a string); a
	// fence has ID instead.
	Key  []byte
	Name string
	// NoName says the feature's layer has not geogate's own shape: its
	// properties are its columns, without a name of geogate's.
	NoName   bool
	Props    []byte
	Geometry []byte
	// Distance is the spheroid distance in metres (only for /within).
	Distance float64
}

// WithinPage is one page of /within results, nearest first (ties by id).
type WithinPage struct {
	Features []Feature
	// Next is where the next page starts, or nil when none remains.
	Next *Position
}

// WithinSQL returns the statement /within runs for layer, with its
// arguments for q, so that benchmarks can drive the identical SQL
// directly. ok is false for an unknown layer.
func (s *Service) WithinSQL(q WithinQuery) (sql string, args []any, ok bool) {
	l, err := s.layer(q.Layer)
	if err != nil {
		return "", nil, false
	}
	return l.within, withinArgs(q), true
}

func withinArgs(q WithinQuery) []any {
	var afterD, afterKey any
	if q.After != nil {
		afterD, afterKey = q.After.Dist, q.After.Key
	}
	var props any
	if q.Props != nil {
		props = q.Props
	}
	return []any{q.Lng, q.Lat, q.Radius, q.Limit + 1, afterD, afterKey, props, scopeArg(q.Scope), budgetArg(q.MaxBytes)}
}

// Within returns one page of features of q.Layer within q.Radius metres,
// nearest first by spheroid distance, ties by feature id, ending early
// before the feature that would pass q.MaxBytes. It fails with
// apperr.NotFound for an unknown layer, and with a validation error for a
// property the layer does not have.
func (s *Service) Within(ctx context.Context, q WithinQuery) (WithinPage, error) {
	// Most pages are short: grow as rows come rather than reserve the
	// whole limit per request (it dominated allocations).
	page := WithinPage{Features: []Feature{}}
	next, err := s.WithinRows(ctx, q, func(f Feature) error {
		f.Key, f.Props, f.Geometry = bytes.Clone(f.Key), bytes.Clone(f.Props), bytes.Clone(f.Geometry)
		page.Features = append(page.Features, f)
		return nil
	})
	page.Next = next
	return page, err
}

// WithinRows is Within handing each feature to out as its row arrives,
// made of the row's own bytes, valid until out returns: nothing of a row
// is copied or decoded but its distance and name. It returns where the
// next page starts, nil when none remains. An error of out ends the read
// and is returned.
func (s *Service) WithinRows(ctx context.Context, q WithinQuery, out func(Feature) error) (*Position, error) {
	l, err := s.layer(q.Layer)
	if err != nil {
		return nil, err
	}
	if err := checkProps(l, q.Props); err != nil {
		return nil, err
	}
	var next *Position
	err = s.db.read(ctx, func(ctx context.Context, conn pg.Conn) error {
		next = nil
		rows, err := conn.Query(ctx, l.within, withinArgs(q)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var dist func([]byte) (float64, error)
		size := pageBytes{max: q.MaxBytes}
		var n int
		var lastKey []byte
		var lastDist float64
		for rows.Next() {
			raw := rows.RawValues()
			if dist == nil { // the columns are known once a row came
				dist = float8Decoder(rows.FieldDescriptions()[2].Format)
			}
			f := Feature{NoName: raw[1] == nil, Props: raw[3], Geometry: raw[4], Key: l.rawKeyJSON(raw[0])}
			if f.Distance, err = dist(raw[2]); err != nil {
				return err
			}
			if !f.NoName {
				f.Name = string(raw[1])
			}
			// The row past the page tells that more remain; the database
			// sends few if any after it (see budgetSQL).
			if n == q.Limit || !size.fits(featureSize(f, true)) {
				if n > 0 && len(lastKey) <= maxCursorKey {
					next = &Position{Dist: lastDist, Key: string(lastKey)}
				}
				return nil
			}
			if err := out(f); err != nil {
				return err
			}
			n++
			lastKey, lastDist = append(lastKey[:0], raw[0]...), f.Distance
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}

// float8Decoder reads a float8 column sent in format.
func float8Decoder(format int16) func([]byte) (float64, error) {
	if format == pgx.BinaryFormatCode {
		return func(b []byte) (float64, error) {
			if len(b) != 8 {
				return 0, fmt.Errorf("geofence: a float8 of %d bytes", len(b))
			}
			return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
		}
	}
	return func(b []byte) (float64, error) { return strconv.ParseFloat(string(b), 64) }
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
