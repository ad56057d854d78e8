package tiles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/pg"
)

// earthCircumference is the width of the Web Mercator world in metres.
const earthCircumference = 2 * math.Pi * 6378137

// Source is the catalog of published layers tiles are made of.
type Source interface {
	Layer(id string) *catalog.Layer
	Layers() []*catalog.Layer
	OnChange(func([]*catalog.Layer))
	// RefreshSoon reads the catalog again, in the background.
	RefreshSoon()
}

// Renderer renders tiles of the published layers with PostGIS.
type Renderer struct {
	// run holds the pool, the replicas, when set, that take the renders
	// a replica may serve (the Service checks that what a replica drew is
	// recent enough), and the queue, when set, a render enters before it
	// takes a connection.
	run    pg.Runner
	src    Source
	s      Settings
	extent int
	buffer int
	// built holds each catalog layer's tile layer (or the error its
	// settings gave), until the catalog changes.
	built sync.Map // *catalog.Layer -> built
	log   *slog.Logger
}

type built struct {
	l   *Layer
	err error
}

// NewRenderer returns a Renderer for the layers of src, drawing through
// run (see New). The error names the first layer whose settings do not
// fit its table.
func NewRenderer(run pg.Runner, src Source, s Settings, log *slog.Logger) (*Renderer, error) {
	if s.Extent <= 0 || s.Buffer < 0 {
		return nil, fmt.Errorf("tiles: extent %d and buffer %d: want a positive extent and a buffer of 0 or more", s.Extent, s.Buffer)
	}
	if s.Own == "" {
		s.Own = "geogate"
	}
	if log == nil {
		log = slog.Default()
	}
	r := &Renderer{run: run, src: src, s: s, extent: s.Extent, buffer: s.Buffer, log: log}
	src.OnChange(func([]*catalog.Layer) { r.built.Clear() })
	for _, cl := range src.Layers() {
		if b := r.build(cl); b.err != nil {
			return nil, fmt.Errorf("tiles: %w", b.err)
		}
	}
	return r, nil
}

// errUnknown says a layer id is not published.
var errUnknown = errors.New("tiles: unknown layer")

// errChanged answers a tile whose table went away or changed under the
// query: the catalog is read again at once, after which the layer is
// gone (404) or served as it is now.
var errChanged = apperr.New(apperr.NotFound, "This layer was removed or changed while the tile was being made; GET /tiles lists the layers as they are now.")

// errBadSettings answers a layer whose table changed under its settings
// (a column they name was dropped, say); the log says what.
var errBadSettings = apperr.New(apperr.Failed, "This layer's tile settings no longer fit its table; the service log says why.")

// errNoCRS answers a tile of a layer stored in SRID 0: its coordinates have
// no place on the Earth, so none of them falls in a Web Mercator tile.
var errNoCRS = apperr.New(apperr.Invalid, "This layer is stored in SRID 0, with no coordinate reference system: its coordinates have no place on the Earth and cannot be cut into Web Mercator tiles. Its features are served as they are at /collections/{collectionId}/items.")

// Layer returns the tile layer id, or the error to answer.
func (r *Renderer) Layer(id string) (*Layer, error) {
	cl := r.src.Layer(id)
	if cl == nil {
		return nil, errUnknown
	}
	if !cl.Located() {
		return nil, errNoCRS
	}
	b := r.build(cl)
	if b.err != nil {
		return nil, errBadSettings
	}
	return b.l, nil
}

func (r *Renderer) build(cl *catalog.Layer) built {
	if v, ok := r.built.Load(cl); ok {
		return v.(built)
	}
	l, err := newLayer(cl, r.s.Layers[cl.ID], r.extent, r.buffer, r.s.Own)
	if err != nil {
		r.log.Warn("tile layer not served", "layer", cl.ID, "err", err.Error())
	}
	v, _ := r.built.LoadOrStore(cl, built{l: l, err: err})
	return v.(built)
}

// Layers returns every layer whose tiles can be served, in the catalog's
// order.
func (r *Renderer) Layers() []*Layer {
	var out []*Layer
	for _, cl := range r.src.Layers() {
		if !cl.Located() {
			continue // see errNoCRS
		}
		if b := r.build(cl); b.err == nil {
			out = append(out, b.l)
		}
	}
	return out
}

// Rendered is one rendered tile: the MVT bytes (empty for a tile without
// features) and the data version of the layer's table they show.
type Rendered struct {
	MVT     []byte
	Version int64
}

// Render renders tile t of layer l. A non-nil scope (EPSG:4326 WKB) keeps
// only what lies inside it. The query runs under ctx, so a caller that
// goes away cancels it.
//
// With replicas it renders on one that qualifies for ctx (see
// pg.Replicas.Pick), and on the primary when the replica proves
// unreachable before the statement reached it.
//
// The render enters the Renderer's queue first, if it has one, and the
// time it held a connection is added to the Meter of ctx (see pg.Meter).
func (r *Renderer) Render(ctx context.Context, l *Layer, t Tile, scope []byte) (Rendered, error) {
	leave, err := pg.Enter(ctx, r.run.Queue)
	if err != nil {
		return Rendered{}, err
	}
	var held time.Duration
	defer func() { leave(held) }()
	var out Rendered
	err = r.run.Replicas.Read(ctx, r.run.Pool, func(pool *pgxpool.Pool) (err error) {
		var d time.Duration
		out, d, err = r.renderOn(ctx, pool, l, t, scope)
		held += d
		return err
	})
	return out, err
}

// renderOn renders on pool and says how long it held a connection.
func (r *Renderer) renderOn(ctx context.Context, pool *pgxpool.Pool, l *Layer, t Tile, scope []byte) (Rendered, time.Duration, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Rendered{}, 0, fmt.Errorf("render %s %s: %w", l.ID, t, err)
	}
	defer conn.Release()
	var out Rendered
	held, err := pg.Held(ctx, func() error { return r.draw(ctx, pg.ConnFor(ctx, conn), l, t, scope, &out) })
	return out, held, err
}

func (r *Renderer) draw(ctx context.Context, conn pg.Conn, l *Layer, t Tile, scope []byte, out *Rendered) error {
	sql, args := r.query(l, t, scope)
	var version *int64
	if err := conn.QueryRow(ctx, sql, args...).Scan(&version, &out.MVT); err != nil {
		if catalog.Stale(err) {
			r.src.RefreshSoon()
			return apperr.Wrap(apperr.NotFound, apperr.MessageOf(errChanged), err)
		}
		return fmt.Errorf("render %s %s: %w", l.ID, t, err)
	}
	if version != nil {
		out.Version = *version
	}
	return nil
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
		args = append(args, n*float64(l.ThinCells)/earthCircumference)
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
