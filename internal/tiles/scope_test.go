package tiles

import (
	"net/http"
	"testing"

	"github.com/geogate/geogate/internal/spatial"
	"github.com/geogate/geogate/internal/testenv"
)

func mustBBoxScope(t *testing.T, minLng, minLat, maxLng, maxLat float64) *spatial.Scope {
	t.Helper()
	s, err := spatial.NewBBox(minLng, minLat, maxLng, maxLat)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSpatialScopes(t *testing.T) {
	t.Parallel()
	db := fixtureDB(t)
	scopes := map[string]*spatial.Scope{
		"germany": mustBBoxScope(t, 5, 47, 16, 55),
		"east":    mustBBoxScope(t, 13.2, 52.0, 14.0, 53.0), // Berlin, not Potsdam
		"east2":   mustBBoxScope(t, 13.25, 52.0, 14.0, 53.0),
		"touch":   mustBBoxScope(t, 12.5, 52.0, 13.0, 53.0), // shares berlin-box's west edge
	}
	rp := newReplica(t, db, testenv.Redis(t), testenv.Prefix(t)+":", replicaOptions{
		Scope: scopeByName(scopes),
	})
	berlin8 := tilePath("places", tileOf(13.41, 52.52, 8))
	if w := rp.get(t, berlin8); w.Header().Get("X-Cache") != "MISS" {
		t.Fatalf("unscoped GET X-Cache = %q, want MISS", w.Header().Get("X-Cache"))
	}
	t.Run("InsideSharesTheCache", func(t *testing.T) {
		w := rp.get(t, berlin8, "X-Test-Scope", "germany")
		if w.Code != 200 || w.Header().Get("X-Cache") != "HIT" {
			t.Errorf("scoped GET of a tile inside = %d %q, want 200 HIT", w.Code, w.Header().Get("X-Cache"))
		}
		if cc := w.Header().Get("Cache-Control"); cc != "private, max-age=60" {
			t.Errorf("scoped caller's Cache-Control = %q, want private, max-age=60", cc)
		}
	})
	t.Run("OutsideRefusedWithoutRendering", func(t *testing.T) {
		before := rp.svc.renders.Load()
		w := rp.get(t, tilePath("places", tileOf(151.2, -33.87, 8)), "X-Test-Scope", "germany")
		if w.Code != http.StatusForbidden {
			t.Errorf("scoped GET of a tile outside = %d, want 403", w.Code)
		}
		if n := rp.svc.renders.Load(); n != before {
			t.Errorf("renders went from %d to %d for a refused tile", before, n)
		}
	})
	t.Run("StraddlingKeepsOnlyInside", func(t *testing.T) {
		tl := tileOf(13.41, 52.52, 5)
		full := featureNames(decode(t, rp.get(t, tilePath("places", tl)).Body.Bytes(), tl), "places")
		if full["Potsdam"] == nil || full["Berlin"] == nil {
			t.Fatalf("unscoped tile %s = %v, want Berlin and Potsdam", tl, full)
		}
		w := rp.get(t, tilePath("places", tl), "X-Test-Scope", "east")
		if w.Code != 200 || w.Header().Get("X-Cache") != "MISS" {
			t.Fatalf("straddling GET = %d %q, want 200 MISS", w.Code, w.Header().Get("X-Cache"))
		}
		got := featureNames(decode(t, w.Body.Bytes(), tl), "places")
		if got["Berlin"] == nil || got["Potsdam"] != nil || got["Paris"] != nil {
			t.Errorf("straddling tile = %v, want Berlin only", got)
		}
		if w := rp.get(t, tilePath("places", tl), "X-Test-Scope", "east"); w.Header().Get("X-Cache") != "HIT" {
			t.Errorf("same scope again X-Cache = %q, want HIT", w.Header().Get("X-Cache"))
		}
		if w := rp.get(t, tilePath("places", tl), "X-Test-Scope", "east2"); w.Header().Get("X-Cache") != "MISS" {
			t.Errorf("another scope X-Cache = %q, want MISS (its own entry)", w.Header().Get("X-Cache"))
		}
		fw := rp.get(t, tilePath("geofences", tl), "X-Test-Scope", "east")
		b, ok := fenceBound(t, decode(t, fw.Body.Bytes(), tl), "berlin-box")
		if !ok || !near(b.Min[0], 13.2) || !near(b.Max[0], 13.8) {
			t.Errorf("scoped fence bounds = %v (found %v), want cut at 13.2 on the west", b, ok)
		}
		tw := rp.get(t, tilePath("geofences", tl), "X-Test-Scope", "touch")
		if tw.Code != http.StatusOK && tw.Code != http.StatusNoContent {
			t.Fatalf("touching scope GET = %d %s", tw.Code, tw.Body)
		}
		if _, ok := fenceBound(t, decode(t, tw.Body.Bytes(), tl), "berlin-box"); ok {
			t.Errorf("a fence that only touches the scope's edge is in the tile")
		}
	})
}
