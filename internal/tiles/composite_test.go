package tiles

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// TestCompositeTiles asks for places and geofences in one tile: one MVT
// layer each, in the order named, each part cached like the single tile
// (the single tile is then a hit) and retired by a write like it; TileJSON
// lists both layers; a layer outside its zoom range leaves its part out.
func TestCompositeTiles(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	maxZoom := 6
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{}, func(s *Settings) {
		s.Layers = map[string]LayerSettings{"geofences": {MaxZoom: &maxZoom}}
	})
	tl := tileOf(13.41, 52.52, 6)
	path := tilePath("places,geofences", tl)
	names := func(path string, tl Tile) ([]string, map[string]map[string]any, string) {
		w := rp.get(t, path, "Accept-Encoding", "gzip")
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
		}
		ls := decode(t, w.Body.Bytes(), tl)
		return layerNames(ls), featureNames(ls, "places"), w.Header().Get("X-Cache")
	}
	got, places, status := names(path, tl)
	if strings.Join(got, ",") != "places,geofences" || status != "MISS" || places["Berlin"] == nil {
		t.Fatalf("composite = %v %s with places %v, want places then geofences, MISS, Berlin", got, status, places)
	}
	if _, _, status := names(path, tl); status != "HIT" {
		t.Errorf("second composite GET = %s, want HIT", status)
	}
	if _, _, status := names(tilePath("places", tl), tl); status != "HIT" {
		t.Errorf("single places tile after the composite = %s, want HIT (the part is shared)", status)
	}
	if _, err := db.Exec(context.Background(), "INSERT INTO places (name, geom) VALUES ('Newtown', ST_SetSRID(ST_MakePoint(13.3, 52.45), 4326))"); err != nil {
		t.Fatal(err)
	}
	if err := rp.svc.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, places, status := names(path, tl); status != "MISS" || places["Newtown"] == nil {
		t.Errorf("composite after a write = %s with %d places, want MISS with Newtown", status, len(places))
	}
	z8 := tileOf(13.41, 52.52, 8)
	if got, _, _ := names(tilePath("places,geofences", z8), z8); strings.Join(got, ",") != "places" {
		t.Errorf("composite at z8, beyond geofences' maxzoom = %v, want places alone", got)
	}
	w := rp.get(t, "/tiles/places,geofences.json")
	var tj TileJSON
	if err := json.Unmarshal(w.Body.Bytes(), &tj); w.Code != http.StatusOK || err != nil {
		t.Fatalf("composite TileJSON = %d %s", w.Code, w.Body)
	}
	if len(tj.VectorLayers) != 2 || tj.VectorLayers[0].ID != "places" || tj.VectorLayers[1].ID != "geofences" ||
		tj.VectorLayers[1].MaxZoom != 6 || tj.MaxZoom != 22 || !strings.HasSuffix(tj.Tiles[0], "/tiles/places,geofences/{z}/{x}/{y}.mvt") {
		t.Errorf("composite TileJSON = %+v", tj)
	}
	for _, bad := range []struct{ path, detail string }{
		{tilePath("places,places", tl), "each layer once"},
		{tilePath("places,nope", tl), `Unknown tile layer \"nope\"`},
		{"/tiles/places,nope.json", `Unknown tile layer \"nope\"`},
		{tilePath("geofences", z8), "No such tile"},
		{tilePath(strings.Repeat("places,", 16)+"places", tl), "at most 16"},
	} {
		if w := rp.get(t, bad.path); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), bad.detail) {
			t.Errorf("GET %s = %d %s, want 404 with %q", bad.path, w.Code, w.Body, bad.detail)
		}
	}
}

// TestUntrackedLayerLivesOneTTL serves a view, whose writes nothing
// reports: its tile is cached, outlives a change to the table under it
// (as documented), and is drawn again once its TTL period has passed.
func TestUntrackedLayerLivesOneTTL(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, "CREATE VIEW public.german_places AS SELECT id, name, geom FROM public.places WHERE properties->>'country' = 'DE'"); err != nil {
		t.Fatal(err)
	}
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{}, func(s *Settings) { s.CacheTTL = 2 * time.Second })
	l := layer(t, rp.svc.r, "german_places")
	if l.versionKey != "" {
		t.Fatalf("the view has version key %q, want none", l.versionKey)
	}
	tl := tileOf(13.41, 52.52, 8)
	path := tilePath("german_places", tl)
	get := func() (map[string]map[string]any, string) {
		w := rp.get(t, path)
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
		}
		return featureNames(decode(t, w.Body.Bytes(), tl), "german_places"), w.Header().Get("X-Cache")
	}
	start := rp.cache(t).period(l)
	if _, status := get(); status != "MISS" {
		t.Fatalf("first GET = %s, want MISS", status)
	}
	if _, err := db.Exec(ctx, "UPDATE public.places SET name = 'Berlin-Mitte' WHERE name = 'Berlin'"); err != nil {
		t.Fatal(err)
	}
	names, status := get()
	// The second GET may straddle a period boundary; it then draws and
	// caches a tile of its own, so the last GET must wait for a period
	// later than the one the second GET ended in.
	last := rp.cache(t).period(l)
	if last == start && (status != "HIT" || names["Berlin"] == nil) {
		t.Errorf("GET in the same TTL period = %s %v, want the cached tile", status, names)
	}
	testenv.WaitFor(t, 10*time.Second, "the next TTL period", func() bool { return rp.cache(t).period(l) > last })
	if names, status := get(); status != "MISS" || names["Berlin-Mitte"] == nil {
		t.Errorf("GET in the next period = %s %v, want a new tile with Berlin-Mitte", status, names)
	}
}
