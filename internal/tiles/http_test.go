package tiles

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/rdb"
	"github.com/geogate/geogate/internal/testenv"
)

func TestTileFeatures(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{})
	tests := []struct {
		name, layer string
		z           int
		lng, lat    float64
		want        map[string]map[string]any // name -> properties wanted
		absent      []string
	}{
		{"PlacesZ4", "places", 4, 13.41, 52.52, map[string]map[string]any{"Berlin": {"country": "DE"}}, []string{"Sydney"}},
		{"PlacesZ8", "places", 8, 13.41, 52.52, map[string]map[string]any{"Berlin": {"country": "DE"}}, []string{"Paris"}},
		{"PlacesZ5", "places", 5, 13.41, 52.52, map[string]map[string]any{"Berlin": {"country": "DE"}, "Potsdam": {"country": "DE"}}, []string{"Paris"}},
		{"PlacesZ12", "places", 12, 13.41, 52.52, map[string]map[string]any{"Berlin": {"country": "DE"}}, []string{"Potsdam"}},
		{"PlacesZ14Sydney", "places", 14, 151.2073, -33.8679, map[string]map[string]any{"Sydney": {"country": "AU"}}, nil},
		{"GeofencesZ4", "geofences", 4, 13.41, 52.52, map[string]map[string]any{"berlin-box": {"name": "berlin-box"}}, []string{"sydney-box"}},
		{"GeofencesZ12", "geofences", 12, 13.41, 52.52, map[string]map[string]any{"berlin-box": {"name": "berlin-box"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tileOf(tt.lng, tt.lat, tt.z)
			w := rp.get(t, tilePath(tt.layer, tl))
			if w.Code != http.StatusOK {
				t.Fatalf("GET %s = %d %s, want 200", tilePath(tt.layer, tl), w.Code, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != ContentType {
				t.Errorf("Content-Type = %q, want %q", ct, ContentType)
			}
			got := featureNames(decode(t, w.Body.Bytes(), tl), tt.layer)
			for name, props := range tt.want {
				p, ok := got[name]
				if !ok {
					t.Errorf("tile %s has no feature %q; has %v", tl, name, got)
					continue
				}
				for k, v := range props {
					if p[k] != v {
						t.Errorf("feature %q property %s = %v, want %v", name, k, p[k], v)
					}
				}
			}
			for _, name := range tt.absent {
				if _, ok := got[name]; ok {
					t.Errorf("tile %s has feature %q, want it absent", tl, name)
				}
			}
		})
	}
}

func TestTileAddressing(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, nil, "", replicaOptions{})
	tests := []struct {
		name, path string
		want       int
	}{
		{"Mvt", "/tiles/places/0/0/0.mvt", 200},
		{"Pbf", "/tiles/places/0/0/0.pbf", 200},
		{"EmptyTile", "/tiles/places/10/0/0.mvt", 204},
		{"UnknownLayer", "/tiles/nope/0/0/0.mvt", 404},
		{"BadExtension", "/tiles/places/0/0/0.png", 404},
		{"NoExtension", "/tiles/places/0/0/0", 404},
		{"XOutOfRange", "/tiles/places/1/2/0.mvt", 404},
		{"ZOutOfRange", "/tiles/places/23/0/0.mvt", 404},
		{"NotInteger", "/tiles/places/a/0/0.mvt", 404},
		{"Negative", "/tiles/places/1/-1/0.mvt", 404},
		{"SQLInLayer", "/tiles/places;drop/0/0/0.mvt", 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := rp.get(t, tt.path)
			if w.Code != tt.want {
				t.Fatalf("GET %s = %d %s, want %d", tt.path, w.Code, w.Body, tt.want)
			}
			if tt.want >= 400 {
				var body struct{ Detail string }
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Detail == "" {
					t.Errorf("GET %s body = %s, want {\"detail\": ...}", tt.path, w.Body)
				}
			}
		})
	}
}

func TestTileJSON(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	trusted, _ := httpx.ParseTrustedProxies([]string{"10.0.0.1"})
	rp := newReplicaBehind(t, db, nil, "", replicaOptions{}, trusted)
	tests := []struct {
		name, remote string
		headers      []string
		wantTiles    string
	}{
		{"Direct", "192.0.2.1:1234", nil, "http://example.com/tiles/places/{z}/{x}/{y}.mvt"},
		{"TrustedProxy", "10.0.0.1:1234", []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "maps.example.org"}, "https://maps.example.org/tiles/places/{z}/{x}/{y}.mvt"},
		{"UntrustedPeerIgnored", "192.0.2.1:1234", []string{"X-Forwarded-Proto", "https", "X-Forwarded-Host", "evil.example"}, "http://example.com/tiles/places/{z}/{x}/{y}.mvt"},
		{"BadForwardedHostIgnored", "10.0.0.1:1234", []string{"X-Forwarded-Host", "evil.example/path?"}, "http://example.com/tiles/places/{z}/{x}/{y}.mvt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := rp.getFrom(t, tt.remote, "/tiles/places.json", tt.headers...)
			if w.Code != http.StatusOK {
				t.Fatalf("GET /tiles/places.json = %d %s", w.Code, w.Body)
			}
			var tj TileJSON
			if err := json.Unmarshal(w.Body.Bytes(), &tj); err != nil {
				t.Fatalf("TileJSON %s: %v", w.Body, err)
			}
			if tj.TileJSON != "3.0.0" || len(tj.Tiles) != 1 || tj.Tiles[0] != tt.wantTiles {
				t.Errorf("tilejson = %q, tiles = %v; want 3.0.0, [%s]", tj.TileJSON, tj.Tiles, tt.wantTiles)
			}
			if len(tj.VectorLayers) != 1 || tj.VectorLayers[0].ID != "places" || tj.VectorLayers[0].Fields["name"] != "String" || tj.VectorLayers[0].Fields["country"] != "String" {
				t.Errorf("vector_layers = %+v, want places with name and country", tj.VectorLayers)
			}
			if tj.MaxZoom != 22 || tj.Bounds[0] >= tj.Bounds[2] {
				t.Errorf("maxzoom = %d, bounds = %v", tj.MaxZoom, tj.Bounds)
			}
		})
	}
	if w := rp.get(t, "/tiles/nope.json"); w.Code != 404 {
		t.Errorf("GET /tiles/nope.json = %d, want 404", w.Code)
	}
	w := rp.get(t, "/tiles")
	var list struct{ Layers []LayerInfo }
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || len(list.Layers) != 2 || list.Layers[0].Name != "geofences" || list.Layers[0].Geometry != Polygons || list.Layers[1].Name != "places" {
		t.Errorf("GET /tiles = %d %s, want geofences and places", w.Code, w.Body)
	}
}

func TestCacheHitGzipETag(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{})
	tl := tileOf(13.41, 52.52, 8)
	path := tilePath("places", tl)

	first := rp.get(t, path, "Accept-Encoding", "gzip")
	if first.Code != 200 || first.Header().Get("X-Cache") != "MISS" || first.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("first GET = %d, X-Cache %q, Content-Encoding %q; want 200 MISS gzip", first.Code, first.Header().Get("X-Cache"), first.Header().Get("Content-Encoding"))
	}
	second := rp.get(t, path, "Accept-Encoding", "gzip")
	if second.Header().Get("X-Cache") != "HIT" || second.Header().Get("Content-Encoding") != "gzip" {
		t.Errorf("second GET X-Cache %q, Content-Encoding %q; want HIT gzip", second.Header().Get("X-Cache"), second.Header().Get("Content-Encoding"))
	}
	plain := rp.get(t, path)
	if plain.Header().Get("X-Cache") != "HIT" || plain.Header().Get("Content-Encoding") != "" {
		t.Errorf("GET without gzip: X-Cache %q, Content-Encoding %q; want HIT, none", plain.Header().Get("X-Cache"), plain.Header().Get("Content-Encoding"))
	}
	if got := featureNames(decode(t, plain.Body.Bytes(), tl), "places"); got["Berlin"] == nil {
		t.Errorf("uncompressed hit lacks Berlin: %v", got)
	}
	if got := featureNames(decode(t, second.Body.Bytes(), tl), "places"); got["Berlin"] == nil {
		t.Errorf("gzip hit lacks Berlin: %v", got)
	}
	// The gzip bytes and the plain bytes are two representations, each
	// with its own strong ETag, stable from miss to hit.
	gzTag, plainTag := first.Header().Get("ETag"), plain.Header().Get("ETag")
	if gzTag == "" || plainTag == "" || gzTag == plainTag || second.Header().Get("ETag") != gzTag {
		t.Errorf("ETags gzip miss %q, gzip hit %q, plain hit %q; want the gzip ones equal, the plain one different, none empty",
			gzTag, second.Header().Get("ETag"), plainTag)
	}
	if strings.HasPrefix(gzTag, "W/") || strings.HasPrefix(plainTag, "W/") {
		t.Errorf("ETags %q, %q; want strong validators", gzTag, plainTag)
	}
	if cc := first.Header().Get("Cache-Control"); cc != "public, max-age=60" {
		t.Errorf("Cache-Control = %q", cc)
	}
	conditional := []struct {
		name, acceptEncoding, ifNoneMatch string
		want                              int
		wantTag                           string // the ETag answered: the served representation's
	}{
		{"GzipOwnTag", "gzip", gzTag, http.StatusNotModified, gzTag},
		{"PlainOwnTag", "", plainTag, http.StatusNotModified, plainTag},
		{"GzipPlainTag", "gzip", plainTag, http.StatusNotModified, gzTag},
		{"PlainGzipTag", "", gzTag, http.StatusNotModified, plainTag},
		{"GzipOtherTag", "gzip", `"other"`, http.StatusOK, gzTag},
		{"PlainOtherTag", "", `"other"`, http.StatusOK, plainTag},
	}
	for _, tt := range conditional {
		t.Run(tt.name, func(t *testing.T) {
			w := rp.get(t, path, "Accept-Encoding", tt.acceptEncoding, "If-None-Match", tt.ifNoneMatch)
			if w.Code != tt.want || w.Header().Get("ETag") != tt.wantTag {
				t.Errorf("GET with Accept-Encoding %q, If-None-Match %s = %d ETag %s, want %d ETag %s",
					tt.acceptEncoding, tt.ifNoneMatch, w.Code, w.Header().Get("ETag"), tt.want, tt.wantTag)
			}
			if tt.want == http.StatusNotModified && w.Body.Len() != 0 {
				t.Errorf("304 with %d bytes, want none", w.Body.Len())
			}
		})
	}
	empty := tilePath("places", Tile{10, 0, 0})
	for i, want := range []string{"MISS", "HIT"} {
		w := rp.get(t, empty)
		if w.Code != http.StatusNoContent || w.Header().Get("X-Cache") != want {
			t.Errorf("empty tile GET #%d = %d %s, want 204 %s", i, w.Code, w.Header().Get("X-Cache"), want)
		}
	}
	if n := rp.svc.renders.Load(); n != 2 {
		t.Errorf("renders = %d, want 2 (one per distinct tile)", n)
	}
}

func TestHooksGuardOnlyMisses(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	var misses, hits, released, hitsReleased, refusedReleased int
	deny := false
	reg := prometheus.NewRegistry()
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{
		Registerer: reg,
		Gate: hooks{miss: func(context.Context, []string) (func(), error) {
			misses++
			if deny {
				// As the limiter answers (see the document's 429).
				e := apperr.Limited("Rate limit exceeded.", "tiles")
				e.Header = http.Header{"Retry-After": {"1"}}
				return func() { refusedReleased++ }, e
			}
			return func() { released++ }, nil
		},
			hit: func(context.Context, []string) (func(), error) { hits++; return func() { hitsReleased++ }, nil },
		},
	})
	path := tilePath("places", tileOf(13.41, 52.52, 8))
	for range 3 {
		rp.get(t, path)
	}
	if misses != 1 || hits != 2 || released != 1 || hitsReleased != 2 {
		t.Errorf("after 3 GETs of one tile: misses %d, hits %d, released %d and %d; want 1, 2, 1, 2", misses, hits, released, hitsReleased)
	}
	// A revalidated hit (304) releases what it took too.
	etag := rp.get(t, path).Header().Get("ETag")
	if w := rp.get(t, path, "If-None-Match", etag); w.Code != http.StatusNotModified || hitsReleased != 4 {
		t.Errorf("revalidated hit = %d with %d hit releases, want 304 and 4", w.Code, hitsReleased)
	}
	deny = true
	if w := rp.get(t, path); w.Code != 200 {
		t.Errorf("hit with an exhausted render budget = %d, want 200", w.Code)
	}
	if w := rp.get(t, tilePath("places", tileOf(2.35, 48.85, 8))); w.Code != 429 {
		t.Errorf("miss with an exhausted render budget = %d, want 429", w.Code)
	}
	if n := rp.svc.renders.Load(); n != 1 {
		t.Errorf("renders = %d, want 1: a refused miss must not render", n)
	}
	if refusedReleased != 0 {
		t.Errorf("a refused miss ran its release %d times, want 0", refusedReleased)
	}
	got := map[string]float64{}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range m.GetLabel() {
				key += " " + lp.GetName() + "=" + lp.GetValue()
			}
			got[key] = m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
		}
	}
	want := map[string]float64{
		"geogate_tiles_requests_total layer=places result=hit":         5,
		"geogate_tiles_requests_total layer=places result=miss":        1,
		"geogate_tiles_replica_stale_renders_total":                    0,
		"geogate_tiles_render_duration_seconds layer=places zooms=mid": 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tile metrics (-want +got):\n%s", diff)
	}
}

func TestRedisDownRendersUncached(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	dead := redisClient(t, "redis://127.0.0.1:1/0")
	rp := newReplica(t, db, dead, testenv.Prefix(t)+":", replicaOptions{})
	path := tilePath("places", tileOf(13.41, 52.52, 8))
	for i := range 3 {
		w := rp.get(t, path, "Accept-Encoding", "gzip")
		if w.Code != 200 || w.Header().Get("X-Cache") != "MISS" {
			t.Fatalf("GET #%d with Redis down = %d %q %s, want 200 MISS", i, w.Code, w.Header().Get("X-Cache"), w.Body)
		}
		if got := featureNames(decode(t, w.Body.Bytes(), tileOf(13.41, 52.52, 8)), "places"); got["Berlin"] == nil {
			t.Errorf("GET #%d: no Berlin in %v", i, got)
		}
	}
}

// TestRedisHungRendersUncached pauses Redis (SIGSTOP): a tile costs at most
// about one Redis timeout, then Redis is skipped for a while and tiles come
// straight from PostgreSQL.
func TestRedisHungRendersUncached(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	proc := testenv.StartRedis(t)
	rc, err := rdb.Open(context.Background(), proc.URL(), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	rp := newReplica(t, db, rc, testenv.Prefix(t)+":", replicaOptions{})
	path := tilePath("places", tileOf(13.41, 52.52, 8))
	for _, want := range []string{"MISS", "HIT"} {
		if w := rp.get(t, path); w.Header().Get("X-Cache") != want {
			t.Fatalf("X-Cache = %q, want %q", w.Header().Get("X-Cache"), want)
		}
	}
	if err := proc.Pause(); err != nil {
		t.Fatal(err)
	}
	defer proc.Resume() //nolint:errcheck
	// Until the version window has passed, the copy in memory needs no
	// Redis read: wait until it no longer vouches.
	v := rp.svc.versions
	testenv.WaitFor(t, 10*time.Second, "the last version read to stop vouching for the memory copy", func() bool {
		return !v.current("public.places", v.Local("public.places"))
	})
	for i, name := range []string{"FirstWaitsOneTimeout", "ThenSkipsRedis"} {
		start := time.Now()
		w := rp.get(t, path)
		took := time.Since(start)
		if w.Code != 200 || w.Header().Get("X-Cache") != "MISS" {
			t.Errorf("%s: GET = %d %q, want 200 MISS", name, w.Code, w.Header().Get("X-Cache"))
		}
		// Generous: the point is that no call waits for Redis to wake.
		if took > 3*time.Second {
			t.Errorf("%s: GET took %v, want well under the time Redis stays paused", name, took)
		}
		if i == 0 && rp.cache(t).available() {
			t.Errorf("after a Redis timeout the cache still counts as available; want it skipped for %v", cooldown)
		}
	}
}

func TestLayerSettingsCheckedAtStart(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	if _, err := db.Exec(context.Background(), `CREATE TABLE public.roads (id bigint PRIMARY KEY, ref text, tags jsonb, geom geometry(LineString, 4326))`); err != nil {
		t.Fatal(err)
	}
	zoom := func(z int) *int { return &z }
	tests := []struct {
		name    string
		layer   string
		s       LayerSettings
		wantErr string // "" for good settings
	}{
		{"Fields", "roads", LayerSettings{Fields: []string{"ref", "tags.surface"}, MaxZoom: zoom(16)}, ""},
		{"NoColumn", "places", LayerSettings{Fields: []string{"population"}}, `field "population" is not a column of public.places`},
		{"NoJSONColumn", "roads", LayerSettings{Fields: []string{"ref.a"}}, `"ref" is not a jsonb column`},
		{"Twice", "places", LayerSettings{Fields: []string{"name", "name"}}, "used twice"},
		{"Reserved", "places", LayerSettings{Fields: []string{"properties.@id"}}, "used twice (or reserved)"},
		{"Rank", "places", LayerSettings{Rank: "importance"}, `rank column "importance"`},
		{"Zooms", "places", LayerSettings{MinZoom: zoom(9), MaxZoom: zoom(3)}, "minzoom 9 is above maxzoom 3"},
		{"UnknownLayer", "nope", LayerSettings{Fields: []string{"x"}}, ""}, // it may appear later
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultSettings()
			cfg.Layers = map[string]LayerSettings{tt.layer: tt.s}
			_, err := NewRenderer(pg.Runner{Pool: db}, openCatalog(t, db), cfg, quietLog())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("NewRenderer(%s) = %v, want no error", tt.layer, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("NewRenderer(%s) = %v, want an error with %q", tt.layer, err, tt.wantErr)
			}
		})
	}
	// The line layer renders with its fields.
	cfg := DefaultSettings()
	cfg.Layers = map[string]LayerSettings{"roads": tests[0].s}
	if _, err := db.Exec(context.Background(), `INSERT INTO public.roads VALUES (1, 'A10', '{"surface": "asphalt"}', ST_SetSRID(ST_MakeLine(ST_MakePoint(13.1, 52.4), ST_MakePoint(13.7, 52.6)), 4326))`); err != nil {
		t.Fatal(err)
	}
	r := newRenderer(t, db, cfg)
	tl := tileOf(13.41, 52.52, 8)
	out, err := r.Render(context.Background(), layer(t, r, "roads"), tl, nil)
	if err != nil {
		t.Fatal(err)
	}
	ls := decode(t, out.MVT, tl)
	if len(ls) != 1 || len(ls[0].Features) != 1 || ls[0].Features[0].Properties["ref"] != "A10" ||
		ls[0].Features[0].Properties["surface"] != "asphalt" || ls[0].Features[0].Geometry.GeoJSONType() != "LineString" {
		t.Errorf("roads tile = %+v, want one LineString A10 on asphalt", ls)
	}
}
