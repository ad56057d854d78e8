package tiles

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5/pgxpool"
)

// earthCircumference is the width of the Web Mercator world in metres.
const earthCircumference = 2 * math.Pi * 6378137

// Renderer renders tiles of its layers with PostGIS.
type Renderer struct {
	db     *pgxpool.Pool
	layers map[string]*Layer
	order  []*Layer
	extent int
	buffer int
}

// NewRenderer checks every layer of s against the database catalog
// and returns a Renderer for them. The error names the first bad layer.
func NewRenderer(ctx context.Context, db *pgxpool.Pool, s Settings) (*Renderer, error) {
	if s.Extent <= 0 || s.Buffer < 0 {
		return nil, fmt.Errorf("tiles: extent %d and buffer %d: want a positive extent and a buffer of 0 or more", s.Extent, s.Buffer)
	}
	r := &Renderer{db: db, layers: map[string]*Layer{}, extent: s.Extent, buffer: s.Buffer}
	for _, lc := range s.Layers {
		l, err := checkLayer(ctx, db, lc, r.extent, r.buffer)
		if err != nil {
			return nil, err
		}
		r.layers[l.Name] = l
		r.order = append(r.order, l)
	}
	return r, nil
}

// Layer returns the layer called name, or nil.
func (r *Renderer) Layer(name string) *Layer { return r.layers[name] }

// Layers returns every layer in configuration order.
func (r *Renderer) Layers() []*Layer { return r.order }

// Rendered is one rendered tile: the MVT bytes (empty for a tile without
// features) and the data version of the layer's table they show.
type Rendered struct {
	MVT     []byte
	Version int64
}

// Render renders tile t of layer l. A non-nil scope (EPSG:4326 WKB) keeps
// only what lies inside it. The query runs under ctx, so a caller that
// goes away cancels it.
func (r *Renderer) Render(ctx context.Context, l *Layer, t Tile, scope []byte) (Rendered, error) {
	sql, args := r.query(l, t, scope)
	var out Rendered
	var version *int64
	if err := r.db.QueryRow(ctx, sql, args...).Scan(&version, &out.MVT); err != nil {
		return Rendered{}, fmt.Errorf("render %s %s: %w", l.Name, t, err)
	}
	if version != nil {
		out.Version = *version
	}
	return out, nil
}

// SQL returns the statement and arguments Render runs for tile t of l
// (unscoped), so that benchmarks can run the identical query.
func (r *Renderer) SQL(l *Layer, t Tile) (string, []any) { return r.query(l, t, nil) }

// query picks the layer's statement for t and binds its parameters.
func (r *Renderer) query(l *Layer, t Tile, scope []byte) (string, []any) {
	minLng, minLat, maxLng, maxLat := t.Bounds(float64(r.buffer) / float64(r.extent))
	args := []any{t.Z, t.X, t.Y, minLng, minLat, maxLng, maxLat}
	n := math.Exp2(float64(t.Z))
	var sql string
	switch {
	case l.Kind == Points && l.ThinCells > 0 && t.Z < l.ThinMaxZoom:
		sql = pick(scope, l.sql.thinned, l.sql.thinnedScope)
		args = append(args, n*float64(l.ThinCells)/360)
	case l.Kind == Points:
		sql = pick(scope, l.sql.plain, l.sql.scoped)
	default:
		sql = pick(scope, l.sql.plain, l.sql.scoped)
		args = append(args, l.Simplify*earthCircumference/n/float64(r.extent))
	}
	if scope != nil {
		args = append(args, scope)
	}
	return sql, args
}

func pick(scope []byte, plain, scoped string) string {
	if scope != nil {
		return scoped
	}
	return plain
}
