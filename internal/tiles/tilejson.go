package tiles

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/httpx"
)

// TileJSON is a TileJSON 3.0.0 document describing one layer.
type TileJSON struct {
	TileJSON     string        `json:"tilejson"`
	Name         string        `json:"name"`
	Scheme       string        `json:"scheme"`
	Tiles        []string      `json:"tiles"`
	MinZoom      int           `json:"minzoom"`
	MaxZoom      int           `json:"maxzoom"`
	Bounds       [4]float64    `json:"bounds"`
	VectorLayers []VectorLayer `json:"vector_layers"`
}

// VectorLayer describes the one MVT layer in each tile of a layer.
type VectorLayer struct {
	ID       string            `json:"id"`
	Fields   map[string]string `json:"fields"`
	MinZoom  int               `json:"minzoom"`
	MaxZoom  int               `json:"maxzoom"`
	Geometry Kind              `json:"geometry"`
}

// LayerInfo is one entry of GET /tiles.
type LayerInfo struct {
	Name     string `json:"name"`
	Geometry Kind   `json:"geometry"`
	MinZoom  int    `json:"minzoom"`
	MaxZoom  int    `json:"maxzoom"`
	TileJSON string `json:"tilejson"`
	Tiles    string `json:"tiles"`
}

// List serves GET /tiles: every layer with its zoom range and URLs.
func (h *Handler) List(c *gin.Context) {
	base := h.baseURL(c)
	out := make([]LayerInfo, 0, len(h.r.Layers()))
	for _, l := range h.r.Layers() {
		out = append(out, LayerInfo{
			Name: l.Name, Geometry: l.Kind, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom,
			TileJSON: base + "/tiles/" + l.Name + ".json",
			Tiles:    tilesURL(base, l),
		})
	}
	c.JSON(http.StatusOK, gin.H{"layers": out})
}

// TileJSON serves GET /tiles/{layer}.json, the layer's TileJSON 3.0.0
// document.
func (h *Handler) TileJSON(c *gin.Context) {
	name, ok := strings.CutSuffix(c.Param("layer"), ".json")
	l := h.r.Layer(name)
	if !ok || l == nil {
		httpx.Abort(c, errNoLayer)
		return
	}
	fields := map[string]string{}
	for _, f := range l.Fields {
		fields[f.Name] = f.Type
	}
	c.JSON(http.StatusOK, TileJSON{
		TileJSON: "3.0.0",
		Name:     l.Name,
		Scheme:   "xyz",
		Tiles:    []string{tilesURL(h.baseURL(c), l)},
		MinZoom:  l.MinZoom,
		MaxZoom:  l.MaxZoom,
		Bounds:   bounds(c.Request.Context(), h.r.db, l),
		VectorLayers: []VectorLayer{{
			ID: l.Name, Fields: fields, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom, Geometry: l.Kind,
		}},
	})
}

func tilesURL(base string, l *Layer) string {
	return base + "/tiles/" + l.Name + "/{z}/{x}/{y}.mvt"
}

// baseURL is the scheme and host clients reach this service at: the
// configured public URL, else the request's, where X-Forwarded-Proto and
// X-Forwarded-Host count only when the peer is a trusted proxy.
func (h *Handler) baseURL(c *gin.Context) string {
	if h.s.PublicURL != "" {
		return h.s.PublicURL
	}
	scheme, host := "http", c.Request.Host
	if c.Request.TLS != nil {
		scheme = "https"
	}
	if httpx.ClientOf(c.Request).ViaProxy {
		if p := firstValue(c.GetHeader("X-Forwarded-Proto")); p == "http" || p == "https" {
			scheme = p
		}
		if fh := firstValue(c.GetHeader("X-Forwarded-Host")); validHost(fh) {
			host = fh
		}
	}
	if !validHost(host) {
		host = "localhost"
	}
	return scheme + "://" + host
}

func firstValue(h string) string {
	v, _, _ := strings.Cut(h, ",")
	return strings.ToLower(strings.TrimSpace(v))
}

// validHost accepts a host name or address with an optional port and
// nothing else, so that a header cannot inject a path or a scheme.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		ch := h[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' ||
			ch == '.' || ch == '-' || ch == ':' || ch == '[' || ch == ']'
		if !ok {
			return false
		}
	}
	return true
}
