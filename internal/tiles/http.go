package tiles

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
)

// ContentType is the media type of a vector tile.
const ContentType = "application/vnd.mapbox-vector-tile"

// Handler serves tiles, TileJSON, the layer list and the OGC API - Tiles
// and Styles documents: it parses each request, asks the gate, holds it
// to the caller's spatial scope and answers from the Service.
type Handler struct {
	svc  *Service
	s    Settings
	gate Gate
}

// Access is what the Handler asks of each request: the gate that checks
// and charges it (nil: gate.Open()). The part of the world the caller
// may see is its identity's (auth.ScopeOf).
type Access struct {
	Gate Gate
}

// Gate is what the Handler asks of the service's gate (gate.Gate).
type Gate interface {
	Admit(ctx context.Context, a gate.Ask) (gate.Pass, error)
	Check(ctx context.Context, layer string) error
	Partition(ctx context.Context, layer string) string
}

// NewHandler returns the HTTP handlers of svc under the public URL and
// Cache-Control of s.
func NewHandler(svc *Service, s Settings, a Access) *Handler {
	if a.Gate == nil {
		a.Gate = gate.Open()
	}
	return &Handler{svc: svc, s: s, gate: a.Gate}
}

var errNoTile = apperr.New(apperr.NotFound, "No such tile: z, x and y must be integers with z within the layer's zoom range and x, y below 2^z, and the name must end in .mvt or .pbf.")

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
		if err := h.gate.Check(c.Request.Context(), id); err != nil {
			return nil, err
		}
	}
	return h.svc.Layers(ids)
}

// enter asks the gate for a document about layers (none: about the
// service), which costs what a cached tile does; ok false means it has
// answered.
func (h *Handler) enter(c *gin.Context, layers ...string) (done func(), ok bool) {
	return h.admit(c, gate.Ask{Cached: layers})
}

// admit asks the gate for a; ok false means it has answered.
func (h *Handler) admit(c *gin.Context, a gate.Ask) (done func(), ok bool) {
	p, err := h.gate.Admit(c.Request.Context(), a)
	if !httpx.Admitted(c, p, err) {
		return nil, false
	}
	return p.Done, true
}

// Tile serves GET /tiles/{layer}/{z}/{x}/{y}.mvt (or .pbf), and the
// composite /tiles/{a},{b}/...: each layer's tile from the cache when it
// holds it at the layer's current version, else rendered (once, however
// many ask at the same time) and cached. Layers of a composite tile
// outside their zoom range leave theirs out.
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
// whichever route named it: looked up in the cache, the gate asked for
// the layers found there (the cached policy) and for those to render
// (the route's), then rendered and written.
func (h *Handler) serve(c *gin.Context, ls []*Layer, t Tile) {
	ctx := c.Request.Context()
	scope := auth.ScopeOf(ctx)
	found, err := h.svc.Find(ctx, ls, t, scope, func(layer string) string { return h.gate.Partition(ctx, layer) })
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	// The layers found and those to render are admitted together: a
	// render refused spends nothing on the cached policy either.
	release, ok := h.admit(c, gate.Ask{Layers: found.Misses(), Cached: found.Hits(), Size: "z" + strconv.Itoa(t.Z)})
	if !ok {
		return
	}
	defer release()
	a, err := h.svc.Render(ctx, found)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	cacheControl := h.s.CacheControl
	if scope != nil || found.Private() {
		// What this caller may see is not what everyone may: shared
		// HTTP caches must not keep it.
		cacheControl = private(cacheControl)
	}
	h.write(c, a, cacheControl)
}

// write answers with the tile: 304 when the client has it, 204 when it is
// empty, gzip bytes to clients that accept them. The MVT bytes, when
// known, save decompressing for clients that do not. The gzip bytes are a
// representation of their own with an ETag of their own (gzipETag), as
// strong validators must differ between content codings.
func (h *Handler) write(c *gin.Context, a Answer, cacheControl string) {
	empty := len(a.Gzip) == 0 && len(a.MVT) == 0
	gz := !empty && acceptsGzip(c.GetHeader("Accept-Encoding"))
	tag := a.ETag
	if gz {
		tag = gzipETag(a.ETag)
	}
	status := "MISS"
	if a.Hit {
		status = "HIT"
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
	if etagMatch(c.GetHeader("If-None-Match"), a.ETag) {
		c.Status(http.StatusNotModified)
		return
	}
	if empty {
		c.Status(http.StatusNoContent)
		return
	}
	if gz {
		if a.Gzip == nil {
			a.Gzip = compress(a.MVT)
		}
		hd.Set("Content-Encoding", "gzip")
		c.Data(http.StatusOK, ContentType, a.Gzip)
		return
	}
	if a.MVT == nil {
		var err error
		if a.MVT, err = decompress(a.Gzip); err != nil {
			httpx.Abort(c, err)
			return
		}
	}
	c.Data(http.StatusOK, ContentType, a.MVT)
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
