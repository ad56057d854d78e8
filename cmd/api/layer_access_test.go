package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/geofence"
	"github.com/geogate/geogate/internal/testenv"
)

// TestLayerAccess serves a team's database with a layer file and keys
// limited to some layers: a key's layers, a layer's scopes and a layer's
// rate-limit policy and cost hold on every route that reads a layer, and
// the listings show a caller only what it may read.
func TestLayerAccess(t *testing.T) {
	_, dbURL := testenv.UserDBWithURL(t)
	file := filepath.Join(t.TempDir(), "layers.yaml")
	if err := os.WriteFile(file, []byte(`
layers:
  parcels:
    scopes: [geofences:write]
  roads:
    limit: {policy: tiles, cost: 5}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DATABASE_URL":          dbURL,
		"PUBLISH_SCHEMAS":       strings.Join(testenv.UserSchemas, ","),
		"LAYERS_CONFIG":         file,
		"AUTH_ANONYMOUS_SCOPES": "none",
	}
	id := "acc-" + testenv.Prefix(t)
	limited := runCLI(t, env, "keys", "create", "--name", id+"-limited", "--scopes", "all", "--layers", "roads,places")
	reader := runCLI(t, env, "keys", "create", "--name", id+"-reader", "--scopes", "proximity:read,geofences:read,tiles:read")
	full := runCLI(t, env, "keys", "create", "--name", id+"-full", "--scopes", "all")
	base, _ := startService(t, env)

	send := func(method, key, path string) (int, string, http.Header) {
		t.Helper()
		var body io.Reader
		if method == "POST" {
			body = strings.NewReader(`{"points":[[-73.9857,40.7484]]}`)
		}
		req, _ := http.NewRequest(method, base+path, body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	get := func(key, path string) (int, string, http.Header) { return send("GET", key, path) }
	within := func(layer string) string { return "/within?lng=13.4&lat=52.5&radius=20000&layer=" + layer }
	contains := "/geofences/contains?lng=-73.9857&lat=40.7484&layer="
	for _, tc := range []struct {
		name, key, path string
		want            int
		detail          string
	}{
		{"LimitedOwnLayer", limited, within("roads"), 200, ""},
		{"LimitedOtherLayer", limited, within("parcels"), 403, `These credentials may not read layer \"parcels\"`},
		{"LimitedUnknownLayer", limited, within("nope"), 403, "may not read layer"},
		{"LimitedTile", limited, "/tiles/parcels/12/1206/1539.mvt", 403, "may not read layer"},
		{"LimitedComposite", limited, "/tiles/roads,parcels/12/1206/1539.mvt", 403, "may not read layer"},
		{"LimitedTileJSON", limited, "/tiles/parcels.json", 403, "may not read layer"},
		{"LimitedOGCTile", limited, "/collections/parcels/tiles/WebMercatorQuad/12/1539/1206", 403, "may not read layer"},
		{"LimitedTileSets", limited, "/collections/parcels/tiles", 403, "may not read layer"},
		{"LimitedTileSet", limited, "/collections/parcels/tiles/WebMercatorQuad", 403, "may not read layer"},
		{"LimitedOwnTileSet", limited, "/collections/roads/tiles/WebMercatorQuad", 200, ""},
		{"LimitedContains", limited, "/geofences/contains?lng=13.4&lat=52.5", 403, `may not read layer \"geofences\"`},
		{"LimitedContainsOtherLayer", limited, contains + "parcels", 403, `These credentials may not read layer \"parcels\"`},
		{"LimitedContainsUnknownLayer", limited, contains + "nope", 403, "may not read layer"},
		{"ReaderContainsWithoutLayerScope", reader, contains + "parcels", 403, `These credentials may not read layer \"parcels\"`},
		{"FullContains", full, contains + "parcels", 200, `"fences":[{"id":`},
		{"ReaderContainsOtherLayer", reader, "/geofences/contains?lng=-98&lat=39&layer=countries", 200, `"fences":[{"id":"USA"`},
		{"ReaderWithoutLayerScope", reader, within("parcels"), 403, `These credentials may not read layer \"parcels\"`},
		{"ReaderTileWithoutLayerScope", reader, "/tiles/parcels/12/1206/1539.mvt", 403, `These credentials may not read layer \"parcels\"`},
		{"ReaderOGCTileWithoutLayerScope", reader, "/collections/parcels/tiles/WebMercatorQuad/12/1539/1206", 403, `These credentials may not read layer \"parcels\"`},
		{"FullLayerScope", full, within("parcels"), 200, ""},
		{"ReaderOtherLayer", reader, within("roads"), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := get(tc.key, tc.path)
			if code != tc.want || !strings.Contains(body, tc.detail) {
				t.Errorf("GET %s = %d %s, want %d with %q", tc.path, code, body, tc.want, tc.detail)
			}
		})
	}
	for _, tc := range []struct {
		name, key, path string
		want            int
		detail          string
	}{
		{"LimitedOtherLayer", limited, contains + "parcels", 403, `These credentials may not read layer \"parcels\"`},
		{"ReaderWithoutLayerScope", reader, contains + "parcels", 403, `These credentials may not read layer \"parcels\"`},
		{"Full", full, contains + "parcels", 200, `"fences":[`},
	} {
		t.Run("Batch"+tc.name, func(t *testing.T) {
			code, body, _ := send("POST", tc.key, tc.path)
			if code != tc.want || !strings.Contains(body, tc.detail) {
				t.Errorf("POST %s = %d %s, want %d with %q", tc.path, code, body, tc.want, tc.detail)
			}
		})
	}
	listed := func(key, path, field string) []string {
		code, body, _ := get(key, path)
		var doc struct{ Layers []map[string]any }
		if err := json.Unmarshal([]byte(body), &doc); code != 200 || err != nil {
			t.Fatalf("GET %s = %d %s", path, code, body)
		}
		var ids []string
		for _, l := range doc.Layers {
			ids = append(ids, l[field].(string))
		}
		slices.Sort(ids)
		return ids
	}
	for _, path := range []struct{ path, field string }{{"/layers", "id"}, {"/tiles", "name"}} {
		if got := listed(limited, path.path, path.field); strings.Join(got, ",") != "places,roads" {
			t.Errorf("GET %s for the limited key lists %v, want places and roads", path.path, got)
		}
		if got := listed(reader, path.path, path.field); slices.Contains(got, "parcels") || !slices.Contains(got, "roads") {
			t.Errorf("GET %s for a reader without the parcels scope lists %v", path.path, got)
		}
	}
	// The style draws what the caller may read, and nothing else.
	styled := func(key string) []string {
		code, body, _ := get(key, "/styles/default")
		var style struct{ Sources map[string]any }
		if err := json.Unmarshal([]byte(body), &style); code != 200 || err != nil {
			t.Fatalf("GET /styles/default = %d %s", code, body)
		}
		ids := slices.Collect(maps.Keys(style.Sources))
		slices.Sort(ids)
		return ids
	}
	if got := styled(limited); strings.Join(got, ",") != "places,roads" {
		t.Errorf("style sources for the limited key = %v, want places and roads", got)
	}
	if got := styled(reader); slices.Contains(got, "parcels") || !slices.Contains(got, "roads") {
		t.Errorf("style sources for a reader without the parcels scope = %v", got)
	}
	// /within on roads spends the tiles policy, five times the radius's
	// cost.
	_, _, h := get(full, within("roads"))
	if p := h.Get("RateLimit-Policy"); !strings.Contains(p, `"tiles"`) {
		t.Errorf("RateLimit-Policy of /within on roads = %q, want the tiles policy", p)
	}
	rdb := testenv.Redis(t)
	want := int64(5 * geofence.RadiusCost(20000))
	if n, err := rdb.ZCard(context.Background(), "rl:tiles:key:"+id+"-full").Result(); err != nil || n != want {
		t.Errorf("ZCARD rl:tiles:key:%s-full = %d, %v; want %d (one request of cost 5 x %d)", id, n, err, want, want/5)
	}
}
