package tiles

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/ogc"
)

// OGC API - Tiles: the tiles of /tiles/{layer}/{z}/{x}/{y} addressed as
// /collections/{collectionId}/tiles/WebMercatorQuad/{tileMatrix}/{tileRow}/{tileCol},
// with the tile matrix set and tileset documents that describe them. A
// collection is one published layer; its tiles are the same tiles, from
// the same cache, as /tiles serves.

// WebMercatorQuad is the id of the one tile matrix set served: the XYZ
// grid of /tiles, as registered by the OGC (TMS 2.0).
const WebMercatorQuad = "WebMercatorQuad"

// OGC identifiers of the tile matrix set, its CRS and the link relations.
const (
	WebMercatorQuadURI = "http://www.opengis.net/def/tilematrixset/OGC/1.0/WebMercatorQuad"
	crsWebMercator     = "http://www.opengis.net/def/crs/EPSG/0/3857"
	crsCRS84           = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"

	RelTilingScheme   = "http://www.opengis.net/def/rel/ogc/1.0/tiling-scheme"
	RelTilingSchemes  = "http://www.opengis.net/def/rel/ogc/1.0/tiling-schemes"
	RelTilesetsVector = "http://www.opengis.net/def/rel/ogc/1.0/tilesets-vector"
	RelStyles         = "http://www.opengis.net/def/rel/ogc/1.0/styles"
)

// ogcMaxZoom is the last tile matrix of WebMercatorQuad. Layers may
// declare zooms up to MaxZoom on /tiles; the OGC routes serve those the
// tile matrix set defines.
const ogcMaxZoom = 24

// Conformance lists the OGC API - Tiles conformance classes the tile
// routes implement, for the service's /conformance document.
var Conformance = []string{
	"http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/core",
	"http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/tileset",
	"http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/tilesets-list",
	"http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/geodata-tilesets",
	"http://www.opengis.net/spec/ogcapi-tiles-1/1.0/conf/mvt",
}

// Link is a link of an OGC API document. A templated link's href holds
// {placeholders} to fill in.
type Link = ogc.Link

// CollectionLinks are the links a collection's description
// (/collections/{collectionId}) gives to its tiles: its vector tilesets.
// base is the service's scheme and host (Handler.BaseURL).
func CollectionLinks(base, layerID string) []Link {
	return []Link{{
		Href: base + "/collections/" + layerID + "/tiles", Rel: RelTilesetsVector,
		Type: "application/json", Title: "Vector tilesets of " + layerID,
	}}
}

// LandingLinks are the links the service's landing page gives to the
// tile matrix sets and the styles.
func LandingLinks(base string) []Link {
	return []Link{
		{Href: base + "/tileMatrixSets", Rel: RelTilingSchemes, Type: "application/json", Title: "Tile matrix sets"},
		{Href: base + "/styles", Rel: RelStyles, Type: "application/json", Title: "Map styles"},
	}
}

// BaseURL is the scheme and host URLs in documents start with: the
// configured public URL, else the request's (see baseURL).
func (h *Handler) BaseURL(c *gin.Context) string { return h.baseURL(c) }

// TileMatrix is one zoom level of a tile matrix set (TMS 2.0).
type TileMatrix struct {
	ID               string     `json:"id"`
	ScaleDenominator float64    `json:"scaleDenominator"`
	CellSize         float64    `json:"cellSize"`
	CornerOfOrigin   string     `json:"cornerOfOrigin"`
	PointOfOrigin    [2]float64 `json:"pointOfOrigin"`
	TileWidth        int        `json:"tileWidth"`
	TileHeight       int        `json:"tileHeight"`
	MatrixWidth      int        `json:"matrixWidth"`
	MatrixHeight     int        `json:"matrixHeight"`
}

// BoundingBox is a 2D box in crs.
type BoundingBox struct {
	LowerLeft  [2]float64 `json:"lowerLeft"`
	UpperRight [2]float64 `json:"upperRight"`
	CRS        string     `json:"crs"`
}

// TileMatrixSet is a tile matrix set definition (TMS 2.0 JSON encoding).
type TileMatrixSet struct {
	ID                string       `json:"id"`
	Title             string       `json:"title"`
	URI               string       `json:"uri"`
	CRS               string       `json:"crs"`
	OrderedAxes       []string     `json:"orderedAxes"`
	WellKnownScaleSet string       `json:"wellKnownScaleSet"`
	BoundingBox       BoundingBox  `json:"boundingBox"`
	TileMatrices      []TileMatrix `json:"tileMatrices"`
}

// webMercatorQuad is WebMercatorQuad's definition: 256-pixel tiles of
// the spherical Mercator square, 2^z a side at zoom z, rows from the top.
var webMercatorQuad = func() TileMatrixSet {
	const (
		radius   = 6378137.0 // EPSG:3857's sphere
		pixel    = 0.00028   // the standard rendering pixel, in metres
		tileSize = 256
	)
	half := math.Pi * radius
	tms := TileMatrixSet{
		ID: WebMercatorQuad, Title: "Google Maps Compatible for the World", URI: WebMercatorQuadURI,
		CRS: crsWebMercator, OrderedAxes: []string{"X", "Y"},
		WellKnownScaleSet: "http://www.opengis.net/def/wkss/OGC/1.0/GoogleMapsCompatible",
		BoundingBox:       BoundingBox{LowerLeft: [2]float64{-half, -half}, UpperRight: [2]float64{half, half}, CRS: crsWebMercator},
	}
	for z := 0; z <= ogcMaxZoom; z++ {
		cell := 2 * half / tileSize / float64(int64(1)<<z)
		tms.TileMatrices = append(tms.TileMatrices, TileMatrix{
			ID: strconv.Itoa(z), ScaleDenominator: cell / pixel, CellSize: cell,
			CornerOfOrigin: "topLeft", PointOfOrigin: [2]float64{-half, half},
			TileWidth: tileSize, TileHeight: tileSize, MatrixWidth: 1 << z, MatrixHeight: 1 << z,
		})
	}
	return tms
}()

var (
	errNoOGCTile = apperr.New(apperr.NotFound, fmt.Sprintf("No such tile: tileMatrix, tileRow and tileCol must be integers, "+
		"tileMatrix within the collection's zoom range (WebMercatorQuad has 0 to %d) and tileRow, tileCol below 2^tileMatrix.", ogcMaxZoom))
	errNoStyle = apperr.New(apperr.NotFound, "Unknown style: GET /styles lists them.")
)

func errNoTileMatrixSet(id string) error {
	return apperr.New(apperr.NotFound, fmt.Sprintf("Unknown tile matrix set %q: GET /tileMatrixSets lists them (%s).", id, WebMercatorQuad))
}

func errNoCollection(id string) error {
	return apperr.New(apperr.NotFound, fmt.Sprintf("Unknown collection %q: GET /tiles lists the layers, each a collection.", id))
}

// tileMatrixSetItem is an entry of GET /tileMatrixSets.
type tileMatrixSetItem struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	URI   string `json:"uri"`
	CRS   string `json:"crs"`
	Links []Link `json:"links"`
}

// TileMatrixSets serves GET /tileMatrixSets: the one set, WebMercatorQuad.
func (h *Handler) TileMatrixSets(c *gin.Context) {
	done, ok := h.enter(c)
	if !ok {
		return
	}
	defer done()
	base := h.baseURL(c)
	c.JSON(http.StatusOK, gin.H{
		"tileMatrixSets": []tileMatrixSetItem{{
			ID: webMercatorQuad.ID, Title: webMercatorQuad.Title, URI: webMercatorQuad.URI, CRS: webMercatorQuad.CRS,
			Links: []Link{{Href: base + "/tileMatrixSets/" + WebMercatorQuad, Rel: "self", Type: "application/json", Title: webMercatorQuad.Title}},
		}},
		"links": []Link{{Href: base + "/tileMatrixSets", Rel: "self", Type: "application/json", Title: "Tile matrix sets"}},
	})
}

// TileMatrixSet serves GET /tileMatrixSets/{tileMatrixSetId}: the
// definition of WebMercatorQuad, 404 for any other id.
func (h *Handler) TileMatrixSet(c *gin.Context) {
	done, ok := h.enter(c)
	if !ok {
		return
	}
	defer done()
	if id := c.Param("tileMatrixSetId"); id != WebMercatorQuad {
		httpx.Abort(c, errNoTileMatrixSet(id))
		return
	}
	c.JSON(http.StatusOK, webMercatorQuad)
}

// collection resolves the collectionId path parameter: one published
// layer (no composite) the caller may read.
func (h *Handler) collection(c *gin.Context) (*Layer, error) {
	id := c.Param("collectionId")
	if strings.Contains(id, ",") {
		return nil, errNoCollection(id)
	}
	ls, err := h.layers(c, id)
	if apperr.KindOf(err) == apperr.NotFound {
		return nil, errNoCollection(id)
	}
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

// tileSetItem is an entry of a collection's tileset list.
type tileSetItem struct {
	Title            string `json:"title"`
	DataType         string `json:"dataType"`
	CRS              string `json:"crs"`
	TileMatrixSetURI string `json:"tileMatrixSetURI"`
	Links            []Link `json:"links"`
}

// TileSets serves GET /collections/{collectionId}/tiles: the
// collection's tilesets, one per tile matrix set (WebMercatorQuad).
func (h *Handler) TileSets(c *gin.Context) {
	l, err := h.collection(c)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	done, ok := h.enter(c, l.ID)
	if !ok {
		return
	}
	defer done()
	base := h.baseURL(c)
	own := base + "/collections/" + l.ID + "/tiles"
	c.JSON(http.StatusOK, gin.H{
		"tilesets": []tileSetItem{{
			Title: l.ID + " (" + WebMercatorQuad + ")", DataType: "vector", CRS: crsWebMercator, TileMatrixSetURI: WebMercatorQuadURI,
			Links: []Link{
				{Href: own + "/" + WebMercatorQuad, Rel: "self", Type: "application/json", Title: "The tileset"},
				{Href: base + "/tileMatrixSets/" + WebMercatorQuad, Rel: RelTilingScheme, Type: "application/json", Title: webMercatorQuad.Title},
			},
		}},
		"links": []Link{{Href: own, Rel: "self", Type: "application/json", Title: "Tilesets of " + l.ID}},
	})
}

// TileMatrixLimits are the rows and columns of one tile matrix a tileset
// has tiles in.
type TileMatrixLimits struct {
	TileMatrix string `json:"tileMatrix"`
	MinTileRow int    `json:"minTileRow"`
	MaxTileRow int    `json:"maxTileRow"`
	MinTileCol int    `json:"minTileCol"`
	MaxTileCol int    `json:"maxTileCol"`
}

// TileSetLayer describes the one vector layer of a collection's tiles.
type TileSetLayer struct {
	ID                string           `json:"id"`
	DataType          string           `json:"dataType"`
	GeometryDimension *int             `json:"geometryDimension,omitempty"`
	MinTileMatrix     string           `json:"minTileMatrix"`
	MaxTileMatrix     string           `json:"maxTileMatrix"`
	BoundingBox       BoundingBox      `json:"boundingBox"`
	PropertiesSchema  PropertiesSchema `json:"propertiesSchema"`
}

// PropertiesSchema is the JSON schema of a layer's feature properties.
type PropertiesSchema struct {
	Type       string                    `json:"type"`
	Properties map[string]PropertySchema `json:"properties"`
}

// PropertySchema is one property's type.
type PropertySchema struct {
	Type string `json:"type"`
}

// TileSet is the tileset document of a collection (TMS 2.0 tileset
// metadata, as OGC API - Tiles serves it).
type TileSet struct {
	Title               string             `json:"title"`
	DataType            string             `json:"dataType"`
	CRS                 string             `json:"crs"`
	TileMatrixSetURI    string             `json:"tileMatrixSetURI"`
	Links               []Link             `json:"links"`
	TileMatrixSetLimits []TileMatrixLimits `json:"tileMatrixSetLimits"`
	BoundingBox         BoundingBox        `json:"boundingBox"`
	Layers              []TileSetLayer     `json:"layers"`
}

// zooms is the part of l's zoom range WebMercatorQuad has; ok is false
// when none of it is.
func zooms(l *Layer) (lo, hi int, ok bool) {
	lo, hi = l.MinZoom, min(l.MaxZoom, ogcMaxZoom)
	return lo, hi, lo <= hi
}

// TileSet serves GET /collections/{collectionId}/tiles/{tileMatrixSetId}:
// the tile URL template, the tile matrices the layer has tiles in (its
// zoom range), its bounds and its vector layer with the fields' types.
func (h *Handler) TileSet(c *gin.Context) {
	l, err := h.collection(c)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	done, ok := h.enter(c, l.ID)
	if !ok {
		return
	}
	defer done()
	if id := c.Param("tileMatrixSetId"); id != WebMercatorQuad {
		httpx.Abort(c, errNoTileMatrixSet(id))
		return
	}
	c.JSON(http.StatusOK, tileSet(h.baseURL(c), l, h.svc.Bounds(l, auth.ScopeOf(c.Request.Context()))))
}

// tileSet is the tileset document of l, within bounds b.
func tileSet(base string, l *Layer, b [4]float64) TileSet {
	own := base + "/collections/" + l.ID + "/tiles/" + WebMercatorQuad
	box := BoundingBox{LowerLeft: [2]float64{b[0], b[1]}, UpperRight: [2]float64{b[2], b[3]}, CRS: crsCRS84}
	lo, hi, ok := zooms(l)
	limits := []TileMatrixLimits{}
	if ok {
		for z := lo; z <= hi; z++ {
			n := 1<<z - 1
			limits = append(limits, TileMatrixLimits{TileMatrix: strconv.Itoa(z), MaxTileRow: n, MaxTileCol: n})
		}
	} else {
		lo, hi = l.MinZoom, l.MaxZoom // no tile matrix has tiles: limits say so
	}
	props := map[string]PropertySchema{}
	for _, f := range l.Fields {
		props[f.Name] = PropertySchema{Type: strings.ToLower(f.Type)}
	}
	return TileSet{
		Title: l.ID, DataType: "vector", CRS: crsWebMercator, TileMatrixSetURI: WebMercatorQuadURI,
		Links: []Link{
			{Href: own, Rel: "self", Type: "application/json", Title: "This tileset"},
			{Href: base + "/tileMatrixSets/" + WebMercatorQuad, Rel: RelTilingScheme, Type: "application/json", Title: webMercatorQuad.Title},
			{Href: own + "/{tileMatrix}/{tileRow}/{tileCol}", Rel: "item", Type: ContentType, Title: "Mapbox vector tiles", Templated: true},
			{Href: base + "/tiles/" + l.ID + ".json", Rel: "alternate", Type: "application/json", Title: "TileJSON"},
		},
		TileMatrixSetLimits: limits,
		BoundingBox:         box,
		Layers: []TileSetLayer{{
			ID: l.ID, DataType: "vector", GeometryDimension: geometryDimension(l.Kind),
			MinTileMatrix: strconv.Itoa(lo), MaxTileMatrix: strconv.Itoa(hi), BoundingBox: box,
			PropertiesSchema: PropertiesSchema{Type: "object", Properties: props},
		}},
	}
}

// geometryDimension is 0 for points, 1 for lines, 2 for polygons, and
// nil (unsaid) for a layer of mixed geometries.
func geometryDimension(k Kind) *int {
	d := -1
	switch k {
	case Points:
		d = 0
	case Lines:
		d = 1
	case Polygons:
		d = 2
	}
	if d < 0 {
		return nil
	}
	return &d
}

// OGCTile serves GET /collections/{collectionId}/tiles/WebMercatorQuad/{tileMatrix}/{tileRow}/{tileCol}:
// tile z = tileMatrix, y = tileRow, x = tileCol of /tiles, the same
// bytes from the same cache, charged and refused the same way.
func (h *Handler) OGCTile(c *gin.Context) {
	l, err := h.collection(c)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	if id := c.Param("tileMatrixSetId"); id != WebMercatorQuad {
		httpx.Abort(c, errNoTileMatrixSet(id))
		return
	}
	t, ok := ParseTile(c.Param("tileMatrix"), c.Param("tileCol"), c.Param("tileRow"))
	if lo, hi, has := zooms(l); !ok || !has || t.Z < lo || t.Z > hi {
		httpx.Abort(c, errNoOGCTile)
		return
	}
	h.serve(c, []*Layer{l}, t)
}
