package geofence

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
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
	keyText  string // Key as PostgreSQL writes it, for the next cursor
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
	l, err := s.layer(q.Layer)
	if err != nil {
		return WithinPage{}, err
	}
	if err := checkProps(l, q.Props); err != nil {
		return WithinPage{}, err
	}
	var page WithinPage
	more := false
	err = s.db.read(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, l.within, withinArgs(q)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		// Most pages are short: grow as rows come rather than reserve
		// the whole limit per request (it dominated allocations).
		page.Features = []Feature{}
		size := pageBytes{max: q.MaxBytes}
		for rows.Next() {
			var f Feature
			var key string
			var name *string
			if err := rows.Scan(&key, &name, &f.Distance, &f.Props, &f.Geometry); err != nil {
				return err
			}
			f.Name, f.NoName = deref(name), name == nil
			f.Key = l.keyJSON(key)
			f.keyText = key
			// The row past the page tells that more remain; the database
			// sends few if any after it (see budgetSQL).
			if len(page.Features) == q.Limit || !size.fits(featureSize(f, true)) {
				more = true
				break
			}
			page.Features = append(page.Features, f)
		}
		return rows.Err()
	})
	if err != nil {
		return WithinPage{}, err
	}
	if n := len(page.Features); more && n > 0 {
		last := page.Features[n-1]
		if len(last.keyText) <= maxCursorKey {
			page.Next = &Position{Dist: last.Distance, Key: last.keyText}
		}
	}
	return page, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
