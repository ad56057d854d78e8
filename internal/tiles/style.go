package tiles

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/httpx"
)

// StyleContentType is the media type of a MapLibre (Mapbox GL) style
// document, as OGC API - Styles names it.
const StyleContentType = "application/vnd.mapbox.style+json"

// DefaultStyle is the id of the one style served: every layer the caller
// may read, drawn by its geometry.
const DefaultStyle = "default"

// Style is a MapLibre style document (style specification version 8),
// with the parts geogate uses.
type Style struct {
	Version  int                    `json:"version"`
	Name     string                 `json:"name"`
	Metadata StyleMetadata          `json:"metadata"`
	Sources  map[string]StyleSource `json:"sources"`
	Layers   []StyleLayer           `json:"layers"`
}

// StyleMetadata lists the layers a style draws, for clients that show a
// legend.
type StyleMetadata struct {
	Layers []StyleLayerInfo `json:"geogate:layers"`
}

// StyleLayerInfo is one published layer of a style: its id, which is
// also its source's, and its geometry family.
type StyleLayerInfo struct {
	ID       string `json:"id"`
	Geometry Kind   `json:"geometry"`
}

// StyleSource is a vector source: the layer's OGC tiles.
type StyleSource struct {
	Type    string     `json:"type"`
	Tiles   []string   `json:"tiles"`
	MinZoom int        `json:"minzoom"`
	MaxZoom int        `json:"maxzoom"`
	Bounds  [4]float64 `json:"bounds"`
}

// StyleLayer is one style layer; Source and SourceLayer are empty for
// the background.
type StyleLayer struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Source      string         `json:"source,omitempty"`
	SourceLayer string         `json:"source-layer,omitempty"`
	Filter      []any          `json:"filter,omitempty"`
	Paint       map[string]any `json:"paint"`
}

// styleItem is an entry of GET /styles.
type styleItem struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Links []Link `json:"links"`
}

// Styles serves GET /styles: the one style, default.
func (h *Handler) Styles(c *gin.Context) {
	done, ok := h.enter(c)
	if !ok {
		return
	}
	defer done()
	base := h.baseURL(c)
	c.JSON(http.StatusOK, gin.H{
		"styles": []styleItem{{
			ID: DefaultStyle, Title: "Every published layer by its geometry",
			Links: []Link{{Href: base + "/styles/" + DefaultStyle, Rel: "stylesheet", Type: StyleContentType, Title: "MapLibre style"}},
		}},
		"default": DefaultStyle,
		"links":   []Link{{Href: base + "/styles", Rel: "self", Type: "application/json", Title: "Styles"}},
	})
}

// Style serves GET /styles/{styleId}: the default style draws every
// layer the caller may read from its OGC tiles, polygons under lines
// under points.
func (h *Handler) Style(c *gin.Context) {
	done, ok := h.enter(c)
	if !ok {
		return
	}
	defer done()
	if c.Param("styleId") != DefaultStyle {
		httpx.Abort(c, errNoStyle)
		return
	}
	var ls []*Layer
	ctx := c.Request.Context()
	for _, l := range h.svc.Published() {
		if _, _, ok := zooms(l); !ok {
			continue // no tile matrix of WebMercatorQuad has its tiles
		}
		if h.gate.Check(ctx, l.ID) != nil {
			continue
		}
		ls = append(ls, l)
	}
	scope := auth.ScopeOf(ctx)
	body, err := json.Marshal(defaultStyle(h.baseURL(c), ls, func(l *Layer) [4]float64 { return h.svc.Bounds(l, scope) }))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Data(http.StatusOK, StyleContentType, body)
}

// drawOrder ranks geometry families from the bottom of the map up.
var drawOrder = map[Kind]int{Polygons: 0, Mixed: 1, Lines: 2, Points: 3}

// defaultStyle draws ls, each from a vector source of its own named
// like it.
func defaultStyle(base string, ls []*Layer, boundsOf func(*Layer) [4]float64) Style {
	ls = slices.Clone(ls)
	slices.SortStableFunc(ls, func(a, b *Layer) int { return drawOrder[a.Kind] - drawOrder[b.Kind] })
	st := Style{
		Version: 8, Name: "geogate",
		Metadata: StyleMetadata{Layers: []StyleLayerInfo{}},
		Sources:  map[string]StyleSource{},
		Layers: []StyleLayer{{ID: "background", Type: "background",
			Paint: map[string]any{"background-color": "#dde8ef"}}},
	}
	for _, l := range ls {
		lo, hi, _ := zooms(l)
		st.Sources[l.ID] = StyleSource{
			Type:    "vector",
			Tiles:   []string{base + "/collections/" + l.ID + "/tiles/" + WebMercatorQuad + "/{z}/{y}/{x}"},
			MinZoom: lo, MaxZoom: hi, Bounds: boundsOf(l),
		}
		st.Metadata.Layers = append(st.Metadata.Layers, StyleLayerInfo{ID: l.ID, Geometry: l.Kind})
		for _, sl := range styleLayers(l.ID, l.Kind) {
			sl.Source, sl.SourceLayer = l.ID, l.ID
			st.Layers = append(st.Layers, sl)
		}
	}
	return st
}

// styleLayers draws the features of layer id of kind k: polygons as a
// fill and an outline, lines as lines, points as circles. A layer whose
// column does not say its type may hold any: it gets all three, each
// filtered to its own geometry.
func styleLayers(id string, k Kind) []StyleLayer {
	switch k {
	case Polygons:
		return []StyleLayer{
			{ID: id + "-fill", Type: "fill", Paint: map[string]any{"fill-color": "#2e86c1", "fill-opacity": 0.25}},
			{ID: id + "-line", Type: "line", Paint: map[string]any{"line-color": "#1b4f72", "line-width": 1}},
		}
	case Lines:
		return []StyleLayer{{ID: id + "-line", Type: "line", Paint: map[string]any{"line-color": "#1b4f72", "line-width": 2}}}
	case Points:
		return []StyleLayer{{ID: id + "-points", Type: "circle", Paint: map[string]any{
			"circle-radius": 3, "circle-color": "#c0392b", "circle-stroke-color": "#fff", "circle-stroke-width": 1,
		}}}
	}
	var out []StyleLayer
	for _, part := range []struct {
		suffix string
		k      Kind
		types  []any
	}{
		{"-p", Polygons, []any{"Polygon", "MultiPolygon"}},
		{"-l", Lines, []any{"LineString", "MultiLineString"}},
		{"", Points, []any{"Point", "MultiPoint"}},
	} {
		for _, sl := range styleLayers(id+part.suffix, part.k) {
			// Renderers have differed on whether geometry-type names
			// multi-geometries as such: the match takes either.
			sl.Filter = []any{"match", []any{"geometry-type"}, part.types, true, false}
			out = append(out, sl)
		}
	}
	return out
}
