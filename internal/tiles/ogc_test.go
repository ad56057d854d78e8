package tiles

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
	"github.com/geogate/geogate/internal/testenv"
)

// TestOGCTilesShareTheCache fetches tiles one way and then the other: the
// second is a HIT with the same bytes and ETag, whichever came first. A
// write then retires the tile for both routes.
func TestOGCTilesShareTheCache(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{})
	z8, z6 := tileOf(13.41, 52.52, 8), tileOf(13.41, 52.52, 6)
	if z8.X == z8.Y {
		t.Fatalf("tile %s: want x != y so that swapping them shows", z8)
	}
	type answer struct {
		cache, etag string
		body        []byte
		places      map[string]map[string]any
	}
	get := func(path string, tl Tile) answer {
		t.Helper()
		w := rp.get(t, path)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s, want 200", path, w.Code, w.Body)
		}
		if ct := w.Header().Get("Content-Type"); ct != ContentType {
			t.Errorf("GET %s Content-Type = %q, want %q", path, ct, ContentType)
		}
		return answer{w.Header().Get("X-Cache"), w.Header().Get("ETag"), w.Body.Bytes(), featureNames(decode(t, w.Body.Bytes(), tl), "places")}
	}
	same := func(what string, a, b answer) {
		t.Helper()
		if a.etag != b.etag || !bytes.Equal(a.body, b.body) {
			t.Errorf("%s: ETag %s and %s, bodies equal %v: want the same tile", what, a.etag, b.etag, bytes.Equal(a.body, b.body))
		}
	}

	xyz := get(tilePath("places", z8), z8)
	ogc := get(ogcPath("places", z8), z8)
	if xyz.cache != "MISS" || ogc.cache != "HIT" || ogc.places["Berlin"] == nil {
		t.Fatalf("/tiles then OGC = %s then %s with %v, want MISS then HIT with Berlin", xyz.cache, ogc.cache, ogc.places)
	}
	same("/tiles then OGC", xyz, ogc)
	ogc6 := get(ogcPath("places", z6), z6)
	xyz6 := get(tilePath("places", z6), z6)
	if ogc6.cache != "MISS" || xyz6.cache != "HIT" {
		t.Fatalf("OGC then /tiles = %s then %s, want MISS then HIT", ogc6.cache, xyz6.cache)
	}
	same("OGC then /tiles", ogc6, xyz6)
	// Row and column swapped name another tile: not Berlin's.
	swapped := Tile{Z: z8.Z, X: z8.Y, Y: z8.X}
	if w := rp.get(t, ogcPath("places", swapped)); w.Code == http.StatusOK && featureNames(decode(t, w.Body.Bytes(), swapped), "places")["Berlin"] != nil {
		t.Errorf("OGC tile with row and column swapped holds Berlin")
	}

	if _, err := db.Exec(context.Background(), "INSERT INTO places (name, geom) VALUES ('Newtown', ST_SetSRID(ST_MakePoint(13.5, 52.6), 4326))"); err != nil {
		t.Fatal(err)
	}
	if err := rp.svc.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	ogc = get(ogcPath("places", z8), z8)
	xyz = get(tilePath("places", z8), z8)
	if ogc.cache != "MISS" || ogc.places["Newtown"] == nil || xyz.cache != "HIT" || xyz.places["Newtown"] == nil {
		t.Errorf("after the write: OGC %s with Newtown %v, then /tiles %s with Newtown %v; want MISS then HIT, both with it",
			ogc.cache, ogc.places["Newtown"] != nil, xyz.cache, xyz.places["Newtown"] != nil)
	}
	same("after the write", ogc, xyz)
	xyz6 = get(tilePath("places", z6), z6)
	ogc6 = get(ogcPath("places", z6), z6)
	if xyz6.cache != "MISS" || xyz6.places["Newtown"] == nil || ogc6.cache != "HIT" {
		t.Errorf("after the write: /tiles %s then OGC %s, want MISS with Newtown then HIT", xyz6.cache, ogc6.cache)
	}
}

func TestOGCTileAddressing(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	deep := 30
	rp := newReplica(t, db, nil, "", replicaOptions{}, func(s *Settings) {
		s.Layers = map[string]LayerSettings{"geofences": {MaxZoom: &deep}}
	})
	const wmq = "/collections/places/tiles/WebMercatorQuad"
	tests := []struct {
		name, path string
		want       int
		detail     string
	}{
		{"World", wmq + "/0/0/0", 200, ""},
		{"Empty", wmq + "/10/0/0", 204, ""},
		{"RowOutOfRange", wmq + "/1/2/0", 404, "No such tile"},
		{"ColOutOfRange", wmq + "/1/0/2", 404, "No such tile"},
		{"AboveLayerMaxZoom", wmq + "/23/0/0", 404, "No such tile"},
		{"AboveTileMatrixSet", "/collections/geofences/tiles/WebMercatorQuad/25/0/0", 404, "WebMercatorQuad has 0 to 24"},
		{"LastTileMatrix", "/collections/geofences/tiles/WebMercatorQuad/24/0/0", 204, ""},
		{"NotInteger", wmq + "/a/0/0", 404, "must be integers"},
		{"ColNotInteger", wmq + "/0/0/x", 404, "must be integers"},
		{"Suffix", wmq + "/0/0/0.mvt", 404, "must be integers"},
		{"Negative", wmq + "/1/-1/0", 404, "must be integers"},
		{"UnknownCollection", "/collections/nope/tiles/WebMercatorQuad/0/0/0", 404, `Unknown collection "nope"`},
		{"Composite", "/collections/places,geofences/tiles/WebMercatorQuad/0/0/0", 404, "Unknown collection"},
		{"UnknownTileMatrixSet", "/collections/places/tiles/WorldCRS84Quad/0/0/0", 404, `Unknown tile matrix set "WorldCRS84Quad"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := rp.get(t, tt.path)
			if w.Code != tt.want {
				t.Fatalf("GET %s = %d %s, want %d", tt.path, w.Code, w.Body, tt.want)
			}
			if tt.want < 400 {
				return
			}
			var body struct{ Detail string }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || !strings.Contains(body.Detail, tt.detail) {
				t.Errorf("GET %s body = %s, want {\"detail\": ...%s...}", tt.path, w.Body, tt.detail)
			}
		})
	}
	// /tiles serves zooms up to the layer's maxzoom, beyond the set's 24.
	if w := rp.get(t, "/tiles/geofences/25/0/0.mvt"); w.Code != http.StatusNoContent {
		t.Errorf("/tiles at z25 = %d, want 204", w.Code)
	}
}

func TestTileMatrixSetDocuments(t *testing.T) {
	t.Parallel()
	rp := newReplica(t, fixtureDB(t), nil, "", replicaOptions{})
	w := rp.get(t, "/tileMatrixSets")
	var list struct {
		TileMatrixSets []struct {
			ID, URI string
			Links   []Link
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || err != nil || len(list.TileMatrixSets) != 1 {
		t.Fatalf("GET /tileMatrixSets = %d %s", w.Code, w.Body)
	}
	item := list.TileMatrixSets[0]
	if item.ID != WebMercatorQuad || item.URI != WebMercatorQuadURI || len(item.Links) != 1 ||
		item.Links[0].Rel != "self" || item.Links[0].Href != "http://example.com/tileMatrixSets/WebMercatorQuad" {
		t.Errorf("tile matrix set item = %+v", item)
	}

	w = rp.get(t, "/tileMatrixSets/WebMercatorQuad")
	var tms TileMatrixSet
	if err := json.Unmarshal(w.Body.Bytes(), &tms); w.Code != 200 || err != nil {
		t.Fatalf("GET /tileMatrixSets/WebMercatorQuad = %d %s", w.Code, w.Body)
	}
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		t.Errorf("Content-Type = %q, want application/json", w.Header().Get("Content-Type"))
	}
	if tms.ID != WebMercatorQuad || tms.CRS != "http://www.opengis.net/def/crs/EPSG/0/3857" || len(tms.TileMatrices) != 25 {
		t.Fatalf("tile matrix set = %s %s with %d matrices, want WebMercatorQuad in EPSG:3857 with 25", tms.ID, tms.CRS, len(tms.TileMatrices))
	}
	// The values of the OGC's registered definition.
	close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Abs(b) }
	for _, want := range []struct {
		z           int
		scale, cell float64
	}{
		{0, 559082264.028717, 156543.033928041},
		{12, 136494.693366386, 38.2185141425881},
		{24, 33.3238997476528, 0.0093306919293428},
	} {
		m := tms.TileMatrices[want.z]
		if m.ID != fmt.Sprint(want.z) || !close(m.ScaleDenominator, want.scale) || !close(m.CellSize, want.cell) ||
			m.MatrixWidth != 1<<want.z || m.MatrixHeight != 1<<want.z || m.TileWidth != 256 || m.CornerOfOrigin != "topLeft" ||
			!close(m.PointOfOrigin[0], -20037508.3427892) || !close(m.PointOfOrigin[1], 20037508.3427892) {
			t.Errorf("tile matrix %d = %+v", want.z, m)
		}
	}

	if w := rp.get(t, "/tileMatrixSets/WorldCRS84Quad"); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "Unknown tile matrix set") {
		t.Errorf("GET an unknown tile matrix set = %d %s, want 404", w.Code, w.Body)
	}
}

func TestTileSetDocuments(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	lo, hi := 3, 12
	rp := newReplica(t, db, nil, "", replicaOptions{}, func(s *Settings) {
		s.Layers = map[string]LayerSettings{"places": {MinZoom: &lo, MaxZoom: &hi}}
	})
	w := rp.get(t, "/collections/places/tiles")
	var list struct {
		Tilesets []struct {
			DataType, CRS, TileMatrixSetURI string
			Links                           []Link
		}
		Links []Link
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || err != nil || len(list.Tilesets) != 1 {
		t.Fatalf("GET /collections/places/tiles = %d %s", w.Code, w.Body)
	}
	ts := list.Tilesets[0]
	if ts.DataType != "vector" || ts.TileMatrixSetURI != WebMercatorQuadURI ||
		link(ts.Links, "self") != "http://example.com/collections/places/tiles/WebMercatorQuad" ||
		link(ts.Links, RelTilingScheme) != "http://example.com/tileMatrixSets/WebMercatorQuad" {
		t.Errorf("tileset item = %+v", ts)
	}

	w = rp.get(t, "/collections/places/tiles/WebMercatorQuad")
	var doc TileSet
	if err := json.Unmarshal(w.Body.Bytes(), &doc); w.Code != 200 || err != nil {
		t.Fatalf("GET the places tileset = %d %s", w.Code, w.Body)
	}
	if len(doc.TileMatrixSetLimits) != hi-lo+1 || doc.TileMatrixSetLimits[0] != (TileMatrixLimits{"3", 0, 7, 0, 7}) ||
		doc.TileMatrixSetLimits[hi-lo].TileMatrix != "12" {
		t.Errorf("tile matrix limits = %+v, want matrices 3 to 12, every row and column", doc.TileMatrixSetLimits)
	}
	if len(doc.Layers) != 1 {
		t.Fatalf("tileset layers = %+v, want one", doc.Layers)
	}
	l := doc.Layers[0]
	if l.ID != "places" || l.GeometryDimension == nil || *l.GeometryDimension != 0 || l.MinTileMatrix != "3" || l.MaxTileMatrix != "12" ||
		l.PropertiesSchema.Properties["name"].Type != "string" || l.PropertiesSchema.Properties["country"].Type != "string" ||
		len(l.PropertiesSchema.Properties) != 2 {
		t.Errorf("tileset layer = %+v", l)
	}
	if doc.BoundingBox.LowerLeft[0] > 2.35 || doc.BoundingBox.UpperRight[0] < 151.2 {
		t.Errorf("bounding box = %+v, want Paris to Sydney within it", doc.BoundingBox)
	}
	var item Link
	for _, ln := range doc.Links {
		if ln.Rel == "item" {
			item = ln
		}
	}
	if !item.Templated || item.Type != ContentType || item.Href != "http://example.com/collections/places/tiles/WebMercatorQuad/{tileMatrix}/{tileRow}/{tileCol}" {
		t.Fatalf("item link = %+v", item)
	}
	z8 := tileOf(13.41, 52.52, 8)
	tile := strings.NewReplacer("http://example.com", "", "{tileMatrix}", "8", "{tileRow}", fmt.Sprint(z8.Y), "{tileCol}", fmt.Sprint(z8.X)).Replace(item.Href)
	if w := rp.get(t, tile); w.Code != 200 || featureNames(decode(t, w.Body.Bytes(), z8), "places")["Berlin"] == nil {
		t.Errorf("GET the item link filled in (%s) = %d, want Berlin's tile", tile, w.Code)
	}
	if link(doc.Links, "alternate") != "http://example.com/tiles/places.json" {
		t.Errorf("alternate link = %q, want the TileJSON", link(doc.Links, "alternate"))
	}

	w = rp.get(t, "/collections/geofences/tiles/WebMercatorQuad")
	if err := json.Unmarshal(w.Body.Bytes(), &doc); w.Code != 200 || err != nil || *doc.Layers[0].GeometryDimension != 2 ||
		len(doc.TileMatrixSetLimits) != 23 {
		t.Errorf("geofences tileset = %d %s, want polygons at matrices 0 to 22", w.Code, w.Body)
	}
	for _, path := range []string{"/collections/nope/tiles", "/collections/nope/tiles/WebMercatorQuad", "/collections/places/tiles/Nope"} {
		if w := rp.get(t, path); w.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, w.Code)
		}
	}
}

// link is the href of the first link of rel.
func link(ls []Link, rel string) string {
	for _, l := range ls {
		if l.Rel == rel {
			return l.Href
		}
	}
	return ""
}

type accessKey struct{}

// TestOGCRoutesRefuseLikeTiles: a caller who may not read a layer gets
// 403 for its tilesets and tiles and a style without it; a caller with a
// spatial scope gets 403 for a tile outside it, as on /tiles.
func TestOGCRoutesRefuseLikeTiles(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{
		Scope: scopeByName(map[string]*spatial.Scope{"germany": mustBBoxScope(t, 5, 47, 16, 55)}),
		Gate: hooks{check: func(ctx context.Context, layer string) error {
			if name, _ := ctx.Value(testScopeKey{}).(string); name == "nofences" && layer == "geofences" {
				return apperr.New(apperr.Forbidden, "not geofences")
			}
			return nil
		}},
	})
	berlin := tileOf(13.41, 52.52, 8)
	for _, path := range []string{"/collections/geofences/tiles", "/collections/geofences/tiles/WebMercatorQuad", ogcPath("geofences", berlin)} {
		if w := rp.get(t, path, "X-Test-Scope", "nofences"); w.Code != http.StatusForbidden {
			t.Errorf("GET %s without the layer = %d %s, want 403", path, w.Code, w.Body)
		}
		if w := rp.get(t, path); w.Code != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, w.Code, w.Body)
		}
	}
	var style Style
	if err := json.Unmarshal(rp.get(t, "/styles/default", "X-Test-Scope", "nofences").Body.Bytes(), &style); err != nil {
		t.Fatal(err)
	}
	if _, ok := style.Sources["geofences"]; ok || len(style.Sources) != 1 {
		t.Errorf("style for a caller without geofences has sources %v, want places alone", style.Sources)
	}
	if w := rp.get(t, ogcPath("places", tileOf(151.2, -33.87, 8)), "X-Test-Scope", "germany"); w.Code != http.StatusForbidden {
		t.Errorf("OGC tile outside the spatial scope = %d, want 403", w.Code)
	}
	if w := rp.get(t, ogcPath("places", berlin), "X-Test-Scope", "germany"); w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "private, max-age=60" {
		t.Errorf("OGC tile inside the spatial scope = %d Cache-Control %q, want 200 private", w.Code, w.Header().Get("Cache-Control"))
	}
}

func TestStyleDocument(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	if _, err := db.Exec(context.Background(), `
		CREATE TABLE public.roads (id bigint PRIMARY KEY, ref text, geom geometry(LineString, 4326));
		CREATE TABLE public.things (id bigint PRIMARY KEY, name text, geom geometry(Geometry, 4326));
		INSERT INTO public.things VALUES
		  (1, 'a point', ST_SetSRID(ST_MakePoint(13.4, 52.5), 4326)),
		  (2, 'a line', ST_SetSRID(ST_MakeLine(ST_MakePoint(13.1, 52.4), ST_MakePoint(13.7, 52.6)), 4326));`); err != nil {
		t.Fatal(err)
	}
	rp := newReplica(t, db, nil, "", replicaOptions{})

	w := rp.get(t, "/styles")
	var list struct {
		Styles []struct {
			ID    string
			Links []Link
		}
		Default string
	}
	if err := json.Unmarshal(w.Body.Bytes(), &list); w.Code != 200 || err != nil || len(list.Styles) != 1 || list.Default != "default" {
		t.Fatalf("GET /styles = %d %s", w.Code, w.Body)
	}
	if s := list.Styles[0]; s.ID != "default" || len(s.Links) != 1 || s.Links[0].Rel != "stylesheet" ||
		s.Links[0].Type != StyleContentType || s.Links[0].Href != "http://example.com/styles/default" {
		t.Errorf("style entry = %+v", s)
	}

	w = rp.get(t, "/styles/default")
	if w.Code != 200 || w.Header().Get("Content-Type") != StyleContentType {
		t.Fatalf("GET /styles/default = %d %q %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var style Style
	if err := json.Unmarshal(w.Body.Bytes(), &style); err != nil {
		t.Fatal(err)
	}
	var ids []string
	filtered := map[string]string{}
	for _, l := range style.Layers {
		ids = append(ids, l.ID)
		if l.Filter != nil {
			b, _ := json.Marshal(l.Filter)
			filtered[l.ID] = string(b)
		}
		if l.Type != "background" && (l.Source != strings.SplitN(l.ID, "-", 2)[0] || l.SourceLayer != l.Source) {
			t.Errorf("style layer %s draws source %q layer %q", l.ID, l.Source, l.SourceLayer)
		}
	}
	want := []string{"background", "geofences-fill", "geofences-line",
		"things-p-fill", "things-p-line", "things-l-line", "things-points", "roads-line", "places-points"}
	if !slices.Equal(ids, want) {
		t.Errorf("style layers = %v, want %v", ids, want)
	}
	wantFilters := map[string]string{
		"things-p-fill": `["match",["geometry-type"],["Polygon","MultiPolygon"],true,false]`,
		"things-p-line": `["match",["geometry-type"],["Polygon","MultiPolygon"],true,false]`,
		"things-l-line": `["match",["geometry-type"],["LineString","MultiLineString"],true,false]`,
		"things-points": `["match",["geometry-type"],["Point","MultiPoint"],true,false]`,
	}
	if fmt.Sprint(filtered) != fmt.Sprint(wantFilters) {
		t.Errorf("filters = %v, want %v", filtered, wantFilters)
	}
	if style.Version != 8 || len(style.Sources) != 4 || len(style.Metadata.Layers) != 4 {
		t.Fatalf("style = version %d, %d sources, metadata %+v", style.Version, len(style.Sources), style.Metadata)
	}
	src := style.Sources["places"]
	if src.Type != "vector" || src.MinZoom != 0 || src.MaxZoom != 22 ||
		!slices.Equal(src.Tiles, []string{"http://example.com/collections/places/tiles/WebMercatorQuad/{z}/{y}/{x}"}) {
		t.Errorf("places source = %+v", src)
	}
	z8 := tileOf(13.41, 52.52, 8)
	tile := strings.NewReplacer("http://example.com", "", "{z}", "8", "{y}", fmt.Sprint(z8.Y), "{x}", fmt.Sprint(z8.X)).Replace(src.Tiles[0])
	if w := rp.get(t, tile); w.Code != 200 || featureNames(decode(t, w.Body.Bytes(), z8), "places")["Berlin"] == nil {
		t.Errorf("GET the places source's tile (%s) = %d, want Berlin's tile", tile, w.Code)
	}
	if w := rp.get(t, "/styles/night"); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "Unknown style") {
		t.Errorf("GET /styles/night = %d %s, want 404", w.Code, w.Body)
	}
}

func TestCollectionLinks(t *testing.T) {
	got := CollectionLinks("https://maps.example.com", "places")
	if len(got) != 1 || got[0] != (Link{Href: "https://maps.example.com/collections/places/tiles", Rel: RelTilesetsVector,
		Type: "application/json", Title: "Vector tilesets of places"}) {
		t.Errorf("CollectionLinks = %+v", got)
	}
	landing := LandingLinks("https://maps.example.com")
	if len(landing) != 2 || landing[0].Href != "https://maps.example.com/tileMatrixSets" || landing[0].Rel != RelTilingSchemes ||
		landing[1].Href != "https://maps.example.com/styles" {
		t.Errorf("LandingLinks = %+v", landing)
	}
}
