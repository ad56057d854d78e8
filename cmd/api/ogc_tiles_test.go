package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/maptile"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/testenv"
)

// TestOGCTilesEndToEnd: a tile fetched through /tiles is a cache hit
// through the OGC route and the other way round, each charged to the
// policy of what it was; a fence moved through the API retires the tile
// for both; the OGC documents spend tiles-cached and are refused past it.
func TestOGCTilesEndToEnd(t *testing.T) {
	pool, dbURL := testenv.DBWithURL(t)
	const secret = "ogc-test-secret"
	if _, err := auth.NewStore(pool).Create(context.Background(), auth.CreateOptions{
		Key:    auth.Key{ID: "ogc", Scopes: []string{"geofences:write", "geofences:read", "tiles:read"}},
		Secret: secret,
	}); err != nil {
		t.Fatal(err)
	}
	base, _ := startService(t, map[string]string{
		"DATABASE_URL": dbURL, "RATELIMIT_GEOFENCE": "100000/1s", "RATELIMIT_TILES_CACHED": "40/1m",
	})
	do := func(method, path string, body any) (*http.Response, []byte) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, base+path, rd)
		req.Header.Set("x-api-key", secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp, out
	}
	fence := func(west float64) map[string]any {
		return map[string]any{"type": "Feature", "properties": map[string]any{"name": "moving"},
			"geometry": map[string]any{"type": "Polygon", "coordinates": [][][]float64{{{west, 52.3}, {west + 0.5, 52.3}, {west + 0.5, 52.7}, {west, 52.7}, {west, 52.3}}}}}
	}
	resp, body := do("POST", "/geofences", fence(13.0))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create = %d %s", resp.StatusCode, body)
	}
	var created struct{ ID int64 }
	_ = json.Unmarshal(body, &created)

	mt := maptile.At([2]float64{13.4, 52.5}, 8)
	xyz := fmt.Sprintf("/tiles/geofences/8/%d/%d.mvt", mt.X, mt.Y)
	ogc := fmt.Sprintf("/collections/geofences/tiles/WebMercatorQuad/8/%d/%d", mt.Y, mt.X)
	// west is where the fence's west edge is in the tile at path.
	west := func(path, wantCache, wantPolicy string) float64 {
		t.Helper()
		resp, body := do("GET", path, nil)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Cache") != wantCache {
			t.Fatalf("GET %s = %d X-Cache %q, want 200 %s", path, resp.StatusCode, resp.Header.Get("X-Cache"), wantCache)
		}
		if p := resp.Header.Get("RateLimit-Policy"); !strings.HasPrefix(p, `"`+wantPolicy+`"`) {
			t.Errorf("GET %s RateLimit-Policy = %q, want %s", path, p, wantPolicy)
		}
		ls, err := mvt.Unmarshal(body)
		if err != nil {
			t.Fatal(err)
		}
		ls.ProjectToWGS84(mt)
		for _, l := range ls {
			for _, f := range l.Features {
				if f.Properties["name"] == "moving" {
					return f.Geometry.Bound().Min[0]
				}
			}
		}
		t.Fatalf("GET %s: the fence is not in the tile", path)
		return 0
	}
	const tol = 0.003
	if w := west(xyz, "MISS", "tiles"); math.Abs(w-13.0) > tol {
		t.Errorf("/tiles: west = %v, want 13.0", w)
	}
	if w := west(ogc, "HIT", "tiles-cached"); math.Abs(w-13.0) > tol {
		t.Errorf("OGC after /tiles: west = %v, want 13.0", w)
	}
	if resp, body := do("PUT", fmt.Sprintf("/geofences/%d", created.ID), fence(13.1)); resp.StatusCode != http.StatusOK {
		t.Fatalf("update = %d %s", resp.StatusCode, body)
	}
	if w := west(ogc, "MISS", "tiles"); math.Abs(w-13.1) > tol {
		t.Errorf("OGC after the write: west = %v, want 13.1", w)
	}
	if w := west(xyz, "HIT", "tiles-cached"); math.Abs(w-13.1) > tol {
		t.Errorf("/tiles after the write and the OGC tile: west = %v, want 13.1", w)
	}

	// The documents spend tiles-cached (whose 40 a minute the two cached
	// tiles above took 2 of) until it refuses: at the 39th, or a little
	// later should a minute of the approximate counter end meanwhile.
	docs := []string{"/tileMatrixSets", "/tileMatrixSets/WebMercatorQuad", "/collections/geofences/tiles",
		"/collections/geofences/tiles/WebMercatorQuad", "/styles", "/styles/default"}
	refused := false
	for i := 0; i < 80 && !refused; i++ {
		path := docs[i%len(docs)]
		resp, body := do("GET", path, nil)
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			refused = true
			if i < 38 {
				t.Errorf("the first 429 came at document %d, want none before the 39th (40 a minute, 2 spent on tiles)", i+1)
			}
		case resp.StatusCode != http.StatusOK:
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		case !strings.HasPrefix(resp.Header.Get("RateLimit-Policy"), `"tiles-cached"`):
			t.Errorf("GET %s RateLimit-Policy = %q, want tiles-cached", path, resp.Header.Get("RateLimit-Policy"))
		}
	}
	if !refused {
		t.Errorf("80 documents in a minute were all admitted; want the tiles-cached limit to refuse one")
	}
}

// ogrinfoPath finds GDAL's ogrinfo. The test fails without it; only
// -short skips it.
func ogrinfoPath(t *testing.T) string {
	t.Helper()
	testenv.NeedServices(t, "GDAL's ogrinfo (a client test)")
	p, err := exec.LookPath("ogrinfo")
	if err != nil {
		t.Fatal("no ogrinfo found: install GDAL with `apt-get install -y gdal-bin` (scripts/test.sh does)")
	}
	return p
}

var ogrPoint = regexp.MustCompile(`POINT \(([-0-9.e+]+) ([-0-9.e+]+)\)`)

// TestOGCTileReadByGDAL fetches a tile through the OGC route and reads it
// with GDAL's MVT driver, georeferenced by its tile address: Berlin is
// there, with its name, where Web Mercator puts it.
func TestOGCTileReadByGDAL(t *testing.T) {
	ogrinfo := ogrinfoPath(t)
	pool, dbURL := testenv.DBWithURL(t)
	if _, err := pool.Exec(context.Background(), mapFixtures); err != nil {
		t.Fatal(err)
	}
	base, _ := startService(t, map[string]string{"DATABASE_URL": dbURL})
	mt := maptile.At([2]float64{13.41053, 52.52437}, 8)
	status, h, body := call(t, "GET", fmt.Sprintf("%s/collections/places/tiles/WebMercatorQuad/8/%d/%d", base, mt.Y, mt.X), "", "")
	if status != http.StatusOK || h.Get("Content-Type") != "application/vnd.mapbox-vector-tile" {
		t.Fatalf("OGC tile = %d %q", status, h.Get("Content-Type"))
	}
	file := filepath.Join(t.TempDir(), "berlin.mvt")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ogrinfo, "-ro", "-al", "-oo", fmt.Sprintf("Z=%d", mt.Z), "-oo", fmt.Sprintf("X=%d", mt.X),
		"-oo", fmt.Sprintf("Y=%d", mt.Y), file).CombinedOutput()
	if err != nil {
		t.Fatalf("ogrinfo: %v\n%s", err, out)
	}
	text := string(out)
	if !strings.Contains(text, "Layer name: places") || !strings.Contains(text, "name (String) = Berlin") {
		t.Fatalf("ogrinfo does not show Berlin in layer places:\n%s", text)
	}
	// Berlin in EPSG:3857, to within a few tile grid units (38 m at z8).
	wantX := 13.41053 * math.Pi * 6378137 / 180
	wantY := math.Log(math.Tan((90+52.52437)*math.Pi/360)) * 6378137
	found := false
	for _, m := range ogrPoint.FindAllStringSubmatch(text, -1) {
		x, _ := strconv.ParseFloat(m[1], 64)
		y, _ := strconv.ParseFloat(m[2], 64)
		if math.Hypot(x-wantX, y-wantY) < 200 {
			found = true
		}
	}
	if !found {
		t.Errorf("no point within 200 m of Berlin (%.0f %.0f) in ogrinfo's output:\n%s", wantX, wantY, text)
	}
}
