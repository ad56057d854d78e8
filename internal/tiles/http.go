package tiles

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/pg"
)

// ContentType is the media type of a vector tile.
const ContentType = "application/vnd.mapbox-vector-tile"

// Handler serves tiles, TileJSON and the layer list.
type Handler struct {
	r        *Renderer
	versions *Versions
	cache    *Cache // nil: every tile is rendered
	s        Settings
	o        Options
	log      *slog.Logger
	flights  flights
	renders  atomic.Int64
	metrics  *metrics
}

var (
	errNoTile    = apperr.New(apperr.NotFound, "No such tile: z, x and y must be integers with z within the layer's zoom range and x, y below 2^z, and the name must end in .mvt or .pbf.")
	errOutside   = apperr.New(apperr.Forbidden, "This tile lies outside your spatial scope.")
	errRenderBad = apperr.New(apperr.Failed, "The tile could not be rendered: the layer's data or tile settings cannot be drawn at this address, and a retry will fail the same way. The service log says why.")
	errDBDown    = apperr.New(apperr.Unavailable, "The database is unavailable; try again shortly.")
	errTwice     = apperr.New(apperr.NotFound, "A composite tile names each layer once.")
	errTooMany   = apperr.New(apperr.NotFound, fmt.Sprintf("A composite tile combines at most %d layers.", maxComposite))
)

// errNoLayer answers a layer id that is not published.
func errNoLayer(id string) error {
	return apperr.New(apperr.NotFound, fmt.Sprintf("Unknown tile layer %q: GET /tiles lists the layers.", id))
}

// maxComposite bounds the layers of one composite tile.
const maxComposite = 16

// result is a rendered tile ready to serve.
type result struct {
	raw     []byte
	e       entry
	version int64
}

// part is one layer's share of an answer.
type part struct {
	l       *Layer
	res     result
	version int64 // the version a render must reach
	hit     bool
}

// layers resolves the layer path parameter: one layer id, or several
// joined by commas (a composite tile). The caller must be allowed each
// before it is looked up, so that a caller refused a layer gets the same
// 403 whether it exists or not; then each must be published.
func (h *Handler) layers(c *gin.Context, param string) ([]*Layer, error) {
	ids := strings.Split(param, ",")
	if len(ids) > maxComposite {
		return nil, errTooMany
	}
	for _, id := range ids {
		if err := h.o.Gate.Check(c.Request.Context(), id); err != nil {
			return nil, err
		}
	}
	out := make([]*Layer, 0, len(ids))
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return nil, errTwice
		}
		l, err := h.r.Layer(id)
		if errors.Is(err, errUnknown) {
			return nil, errNoLayer(id)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// enter asks the gate for a document about layers (none: about the
// service), which costs what a cached tile does; ok false means it has
// answered.
func (h *Handler) enter(c *gin.Context, layers ...string) (done func(), ok bool) {
	p, ok := h.o.Gate.Admit(c, gate.Ask{Layers: layers, Cached: true})
	if !ok {
		return nil, false
	}
	return p.Done, true
}

// admit asks the gate for the layers named, if any: cached tiles spend
// the cached policy, renders the route's.
func (h *Handler) admit(c *gin.Context, layers []string, cached bool, size string) (done func(), ok bool) {
	if len(layers) == 0 {
		return func() {}, true
	}
	a := gate.Ask{Layers: layers, Size: size}
	if cached {
		a.Policy, a.Cached = h.o.CachedPolicy, true
	}
	p, ok := h.o.Gate.Admit(c, a)
	if !ok {
		return nil, false
	}
	return p.Done, true
}

// Tile serves GET /tiles/{layer}/{z}/{x}/{y}.mvt (or .pbf), and the
// composite /tiles/{a},{b}/...: each layer's tile from the cache when it
// holds it at the layer's current version, else rendered (once, however
// many ask at the same time) and cached. A composite tile is its layers'
// tiles one after the other, which MVT allows (a tile is a list of
// layers); layers outside their zoom range leave theirs out.
func (h *Handler) Tile(c *gin.Context) {
	ls, err := h.layers(c, c.Param("layer"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	y, ok := strings.CutSuffix(c.Param("y"), ".mvt")
	if !ok {
		y, ok = strings.CutSuffix(c.Param("y"), ".pbf")
	}
	t, valid := ParseTile(c.Param("z"), c.Param("x"), y)
	ls = slices.DeleteFunc(ls, func(l *Layer) bool { return t.Z < l.MinZoom || t.Z > l.MaxZoom })
	if !ok || !valid || len(ls) == 0 {
		httpx.Abort(c, errNoTile)
		return
	}
	h.serve(c, ls, t)
}

// serve answers with tile t of layers ls (each within its zoom range),
// whichever route named it: the caller's spatial scope applied, each
// layer's tile from the cache or rendered, the hooks charging the caller
// for hits and misses.
func (h *Handler) serve(c *gin.Context, ls []*Layer, t Tile) {
	var scopeWKB []byte
	var scopeHash string
	cacheControl := h.s.CacheControl
	if h.o.Scope != nil {
		if s := h.o.Scope(c.Request.Context()); s != nil {
			// What this caller may see is not what everyone may: shared
			// HTTP caches must not keep it.
			cacheControl = private(cacheControl)
			minLng, minLat, maxLng, maxLat := t.Bounds(float64(h.r.buffer) / float64(h.r.extent))
			switch {
			case !s.IntersectsBBox(minLng, minLat, maxLng, maxLat):
				for _, l := range ls {
					h.metrics.answer(l.ID, "outside")
				}
				httpx.Abort(c, errOutside)
				return
			case !s.ContainsBBox(minLng, minLat, maxLng, maxLat):
				scopeWKB, scopeHash = s.WKB(), s.Hash()
			}
		}
	}
	ctx := c.Request.Context()
	parts := make([]part, len(ls))
	var hits, misses []string
	for i, l := range ls {
		res, version, hit := h.lookup(ctx, l, t, scopeHash)
		parts[i] = part{l: l, res: res, version: version, hit: hit}
		if hit {
			hits = append(hits, l.ID)
		} else {
			misses = append(misses, l.ID)
		}
	}
	release, ok := h.admit(c, hits, true, "")
	if !ok {
		return
	}
	defer release()
	release, ok = h.admit(c, misses, false, "z"+strconv.Itoa(t.Z))
	if !ok {
		return
	}
	defer release()
	if err := h.renderParts(ctx, parts, t, scopeWKB, scopeHash); err != nil {
		httpx.Abort(c, h.renderFailed(ctx, err))
		return
	}
	status := "HIT"
	if len(misses) > 0 {
		status = "MISS"
	}
	if len(parts) == 1 {
		h.write(c, status, cacheControl, parts[0].res.e, parts[0].res.raw)
		return
	}
	raw, err := concat(parts)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	h.write(c, status, cacheControl, entry{ETag: etag(raw)}, raw)
}

// renderFailed is the answer to a render that failed with err. As for
// every query of the service (see pg.Runner), the error decides, not the
// clock: a cancellation while the caller still waits is the render
// timeout, a 504 like every deadline; a database out of reach is a 503
// worth retrying; any other error is the layer's data or settings failing
// the statement, which no retry mends, so it is a 500 that does not say
// "try again".
func (h *Handler) renderFailed(ctx context.Context, err error) error {
	switch {
	case apperr.KindOf(err) != apperr.Internal:
		return err
	case pg.IsCancellation(err) && ctx.Err() != nil:
		return err // the client went away
	case pg.IsCancellation(err):
		return apperr.Wrap(apperr.Timeout, fmt.Sprintf("The tile took longer than %s to render and was cancelled.", h.s.RenderTimeout), err)
	case pg.IsConnectErr(err):
		return apperr.Wrap(apperr.Unavailable, apperr.MessageOf(errDBDown), err)
	}
	return apperr.Wrap(apperr.Failed, apperr.MessageOf(errRenderBad), err)
}

// renderParts renders the parts the cache did not hold, at the same time,
// and counts every part's answer.
func (h *Handler) renderParts(ctx context.Context, parts []part, t Tile, scopeWKB []byte, scopeHash string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	first := -1
	for i := range parts {
		p := &parts[i]
		if p.hit {
			h.metrics.answer(p.l.ID, "hit")
			continue
		}
		if first < 0 {
			first = i // rendered on this goroutine, below
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.res, errs[i] = h.render(ctx, p.l, t, scopeWKB, scopeHash, p.version)
		}()
	}
	if first >= 0 {
		p := &parts[first]
		p.res, errs[first] = h.render(ctx, p.l, t, scopeWKB, scopeHash, p.version)
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case parts[i].hit:
		case err != nil:
			h.metrics.answer(parts[i].l.ID, "error")
		default:
			h.metrics.answer(parts[i].l.ID, "miss")
		}
	}
	return errors.Join(errs...)
}

// concat is the composite tile of parts: their MVT bytes in order.
func concat(parts []part) ([]byte, error) {
	var out []byte
	for _, p := range parts {
		raw := p.res.raw
		if raw == nil {
			var err error
			if raw, err = decompress(p.res.e.Gzip); err != nil {
				return nil, err
			}
		}
		out = append(out, raw...)
	}
	return out, nil
}

// lookup returns the cached tile, if any, and the version a render must
// reach. Redis failures count as misses.
func (h *Handler) lookup(ctx context.Context, l *Layer, t Tile, scopeHash string) (result, int64, bool) {
	if h.cache == nil {
		return result{}, h.versions.Local(l.versionKey), false
	}
	e, version, ok, err := h.cache.Get(ctx, l, t, scopeHash)
	if err != nil {
		h.log.Debug("tile cache unavailable", "err", err.Error())
	}
	return result{e: e, version: version}, version, ok
}

// render renders t once however many requests want it at the same
// version at the same time on this replica (and, through a short Redis
// lock, across replicas), and caches the result. The render runs under
// the first caller's context; should that caller leave, the others retry
// with their own.
func (h *Handler) render(ctx context.Context, l *Layer, t Tile, scopeWKB []byte, scopeHash string, version int64) (result, error) {
	key := l.cacheName + "|" + t.String() + "|" + scopeHash + "|" + strconv.FormatInt(version, 10)
	for attempt := 1; ; attempt++ {
		res, err := h.flights.do(ctx, key, func() (result, error) {
			return h.renderOnce(ctx, l, t, scopeWKB, scopeHash, version)
		})
		if err != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) && attempt < 3 {
			continue // the leader left; render for ourselves
		}
		return res, err
	}
}

// renderOnce renders t, unless another replica is rendering it at the same
// version, in which case it waits for that replica's result.
func (h *Handler) renderOnce(ctx context.Context, l *Layer, t Tile, scopeWKB []byte, scopeHash string, version int64) (result, error) {
	var lock string // held when not empty; Set releases it with the tile
	if h.cache != nil {
		e, done, held := h.cache.claim(ctx, l, t, scopeHash, version)
		if done {
			return result{e: e, version: version}, nil
		}
		lock = held
	}
	defer func() {
		if lock != "" {
			h.cache.unlock(ctx, lock)
		}
	}()
	h.renders.Add(1)
	rctx, cancel := context.WithTimeout(ctx, h.s.RenderTimeout)
	defer cancel()
	start := time.Now()
	out, err := h.r.Render(rctx, l, t, scopeWKB)
	if err == nil && l.versionKey != "" && out.Version < version {
		// Drawn on a replica that has not replayed the change behind
		// version: draw it again where it has, so that no tile older than
		// the version it is served and cached under ever leaves here.
		h.metrics.staleRender()
		out, err = h.r.Render(pg.WithMinLSN(rctx, math.MaxUint64), l, t, scopeWKB)
	}
	if err != nil {
		return result{}, err
	}
	h.metrics.rendered(l.ID, t.Z, time.Since(start))
	if l.versionKey == "" {
		out.Version = version // the cache period it was rendered in
	} else {
		h.versions.raise(l.versionKey, out.Version)
	}
	res := result{raw: out.MVT, e: entry{ETag: etag(out.MVT)}, version: out.Version}
	if h.cache == nil {
		return res, nil
	}
	res.e.Gzip = compress(out.MVT)
	if err := h.cache.Set(context.WithoutCancel(ctx), l, t, scopeHash, out.Version, res.e, lock); err != nil {
		h.log.Debug("tile not cached", "err", err.Error())
	} else {
		lock = ""
	}
	return res, nil
}

// write answers with the tile: 304 when the client has it, 204 when it is
// empty, gzip bytes to clients that accept them. raw, when known, saves
// decompressing for clients that do not. The gzip bytes are a
// representation of their own with an ETag of their own (gzipETag), as
// strong validators must differ between content codings.
func (h *Handler) write(c *gin.Context, status, cacheControl string, e entry, raw []byte) {
	empty := len(e.Gzip) == 0 && len(raw) == 0
	gz := !empty && acceptsGzip(c.GetHeader("Accept-Encoding"))
	tag := e.ETag
	if gz {
		tag = gzipETag(e.ETag)
	}
	hd := c.Writer.Header()
	hd.Set("X-Cache", status)
	hd.Set("ETag", tag)
	hd.Set("Vary", "Accept-Encoding")
	if cacheControl != "" {
		hd.Set("Cache-Control", cacheControl)
	}
	// Both tags name the same tile at the same data version: a client
	// holding either form, or behind a proxy that compressed or
	// decompressed the answer on the way, has the current tile.
	if etagMatch(c.GetHeader("If-None-Match"), e.ETag) {
		c.Status(http.StatusNotModified)
		return
	}
	if empty {
		c.Status(http.StatusNoContent)
		return
	}
	if gz {
		if e.Gzip == nil {
			e.Gzip = compress(raw)
		}
		hd.Set("Content-Encoding", "gzip")
		c.Data(http.StatusOK, ContentType, e.Gzip)
		return
	}
	if raw == nil {
		var err error
		if raw, err = decompress(e.Gzip); err != nil {
			httpx.Abort(c, err)
			return
		}
	}
	c.Data(http.StatusOK, ContentType, raw)
}

// gzipETag is the ETag of the gzip representation of the tile whose
// identity ETag is tag: "abc" becomes "abc-gz".
func gzipETag(tag string) string {
	return strings.TrimSuffix(tag, `"`) + `-gz"`
}

// private turns a Cache-Control value into one that shared caches obey by
// not storing the answer.
func private(cc string) string {
	switch {
	case strings.Contains(cc, "private"), strings.Contains(cc, "no-store"):
		return cc
	case strings.Contains(cc, "public"):
		return strings.Replace(cc, "public", "private", 1)
	case cc == "":
		return "private"
	}
	return "private, " + cc
}

// etagMatch implements If-None-Match's weak comparison: it reports whether
// header lists *, tag or tag's gzip form (gzipETag).
func etagMatch(header, tag string) bool {
	if header == "" {
		return false
	}
	gz := gzipETag(tag)
	for _, v := range strings.Split(header, ",") {
		v = strings.TrimPrefix(strings.TrimSpace(v), "W/")
		if v == "*" || v == tag || v == gz {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip
// (explicitly or through *) with a non-zero quality.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "x-gzip" && coding != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.ToLower(params), " ", "")
		if strings.HasPrefix(q, "q=0") && strings.Trim(strings.TrimPrefix(q, "q=0"), ".0") == "" {
			continue
		}
		return true
	}
	return false
}
