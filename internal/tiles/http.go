package tiles

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/httpx"
)

// ContentType is the media type of a vector tile.
const ContentType = "application/vnd.mapbox-vector-tile"

// guard runs hook, if any; release is never nil.
func guard(c *gin.Context, hook Hook) (release func(), ok bool) {
	release = func() {}
	if hook == nil {
		return release, true
	}
	r, ok := hook(c)
	if r != nil {
		release = r
	}
	return release, ok
}

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
	errNoLayer   = apperr.New(apperr.NotFound, "Unknown tile layer.")
	errNoTile    = apperr.New(apperr.NotFound, "No such tile: z, x and y must be integers with z within the layer's zoom range and x, y below 2^z, and the name must end in .mvt or .pbf.")
	errOutside   = apperr.New(apperr.Forbidden, "This tile lies outside your spatial scope.")
	errRenderBad = apperr.New(apperr.Unavailable, "The tile could not be rendered; try again.")
)

// result is a rendered tile ready to serve.
type result struct {
	raw     []byte
	e       entry
	version int64
}

// Tile serves GET /tiles/{layer}/{z}/{x}/{y}.mvt (or .pbf): the tile from
// the cache when it holds it at the layer's current version, else
// rendered (once, however many ask at the same time) and cached.
func (h *Handler) Tile(c *gin.Context) {
	l := h.r.Layer(c.Param("layer"))
	if l == nil {
		httpx.Abort(c, errNoLayer)
		return
	}
	y, ok := strings.CutSuffix(c.Param("y"), ".mvt")
	if !ok {
		y, ok = strings.CutSuffix(c.Param("y"), ".pbf")
	}
	t, valid := ParseTile(c.Param("z"), c.Param("x"), y)
	if !ok || !valid || t.Z < l.MinZoom || t.Z > l.MaxZoom {
		httpx.Abort(c, errNoTile)
		return
	}
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
				h.metrics.answer(l.Name, "outside")
				httpx.Abort(c, errOutside)
				return
			case !s.ContainsBBox(minLng, minLat, maxLng, maxLat):
				scopeWKB, scopeHash = s.WKB(), s.Hash()
			}
		}
	}
	ctx := c.Request.Context()
	cached, version, hit := h.lookup(ctx, l, t, scopeHash)
	if hit {
		release, ok := guard(c, h.o.OnHit)
		if !ok {
			return
		}
		defer release()
		h.metrics.answer(l.Name, "hit")
		h.write(c, "HIT", cacheControl, cached.e, nil)
		return
	}
	release, ok := guard(c, h.o.OnMiss)
	if !ok {
		return
	}
	defer release()
	res, err := h.render(ctx, l, t, scopeWKB, scopeHash, version)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			err = apperr.Wrap(apperr.Unavailable, apperr.MessageOf(errRenderBad), err)
		}
		h.metrics.answer(l.Name, "error")
		httpx.Abort(c, err)
		return
	}
	h.metrics.answer(l.Name, "miss")
	h.write(c, "MISS", cacheControl, res.e, res.raw)
}

// lookup returns the cached tile, if any, and the version a render must
// reach. Redis failures count as misses.
func (h *Handler) lookup(ctx context.Context, l *Layer, t Tile, scopeHash string) (result, int64, bool) {
	if h.cache == nil {
		return result{}, h.versions.Local(l.Table), false
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
	key := l.Name + "|" + t.String() + "|" + scopeHash + "|" + strconv.FormatInt(version, 10)
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
	if err != nil {
		return result{}, err
	}
	h.metrics.rendered(l.Name, t.Z, time.Since(start))
	res := result{raw: out.MVT, e: entry{ETag: etag(out.MVT)}, version: out.Version}
	h.versions.raise(l.Table, out.Version)
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
