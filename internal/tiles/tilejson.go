package tiles

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/httpx"
)

// TileJSON is a TileJSON 3.0.0 document describing one layer or a
// composite of several.
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

// VectorLayer describes one MVT layer of the tiles.
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

// List serves GET /tiles: every layer the caller may read, with its zoom
// range and URLs.
func (h *Handler) List(c *gin.Context) {
	done, ok := h.enter(c)
	if !ok {
		return
	}
	defer done()
	base := h.baseURL(c)
	out := []LayerInfo{}
	for _, l := range h.svc.Published() {
		if h.gate.Check(c.Request.Context(), l.ID) != nil {
			continue
		}
		out = append(out, LayerInfo{
			Name: l.ID, Geometry: l.Kind, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom,
			TileJSON: base + "/tiles/" + l.ID + ".json",
			Tiles:    tilesURL(base, l.ID),
		})
	}
	c.JSON(http.StatusOK, gin.H{"layers": out})
}

// TileJSON serves GET /tiles/{layer}.json, the TileJSON 3.0.0 document of
// a layer or of a composite ({a},{b}.json): its zoom range covers every
// layer's, its bounds all of theirs.
func (h *Handler) TileJSON(c *gin.Context) {
	name, ok := strings.CutSuffix(c.Param("layer"), ".json")
	if !ok {
		httpx.Abort(c, errNoLayer(c.Param("layer")))
		return
	}
	ls, err := h.layers(c, name)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	done, ok := h.enter(c, layerIDs(ls)...)
	if !ok {
		return
	}
	defer done()
	scope := auth.ScopeOf(c.Request.Context())
	c.JSON(http.StatusOK, tileJSON(h.baseURL(c), name, ls, func(l *Layer) [4]float64 { return h.svc.Bounds(l, scope) }))
}

// tileJSON is the TileJSON document of layers ls, together called name,
// each within the bounds boundsOf gives.
func tileJSON(base, name string, ls []*Layer, boundsOf func(*Layer) [4]float64) TileJSON {
	doc := TileJSON{
		TileJSON: "3.0.0", Name: name, Scheme: "xyz",
		Tiles:   []string{tilesURL(base, name)},
		MinZoom: MaxZoom, MaxZoom: 0,
		VectorLayers: make([]VectorLayer, 0, len(ls)),
	}
	for i, l := range ls {
		fields := map[string]string{}
		for _, f := range l.Fields {
			fields[f.Name] = f.Type
		}
		doc.VectorLayers = append(doc.VectorLayers, VectorLayer{
			ID: l.ID, Fields: fields, MinZoom: l.MinZoom, MaxZoom: l.MaxZoom, Geometry: l.Kind,
		})
		doc.MinZoom, doc.MaxZoom = min(doc.MinZoom, l.MinZoom), max(doc.MaxZoom, l.MaxZoom)
		b := boundsOf(l)
		if i == 0 {
			doc.Bounds = b
		} else {
			doc.Bounds = [4]float64{min(doc.Bounds[0], b[0]), min(doc.Bounds[1], b[1]), max(doc.Bounds[2], b[2]), max(doc.Bounds[3], b[3])}
		}
	}
	return doc
}

// worldBounds is the Web Mercator world in longitude and latitude.
var worldBounds = [4]float64{-180, -85.0511, 180, 85.0511}

// bounds is the layer's estimated extent (the catalog's, from planner
// statistics), within the Web Mercator world; the world when unknown.
func bounds(l *Layer) [4]float64 {
	b := l.src.Bounds
	if b == nil {
		return worldBounds
	}
	return [4]float64{max(-180, b.West), max(-85.0511, b.South), min(180, b.East), min(85.0511, b.North)}
}

func tilesURL(base, name string) string {
	return base + "/tiles/" + name + "/{z}/{x}/{y}.mvt"
}

// baseURL is the scheme and host clients reach this service at (see
// httpx.BaseURL).
func (h *Handler) baseURL(c *gin.Context) string { return httpx.BaseURL(c.Request, h.s.PublicURL) }

// layerIDs are the ids of ls.
func layerIDs(ls []*Layer) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.ID
	}
	return ids
}
