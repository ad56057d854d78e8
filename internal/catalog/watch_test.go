package catalog

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/testenv"
)

func ids(ls []*Layer) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.ID
	}
	return out
}

// TestCatalogFollowsTheDatabase: a table created, given a second geometry
// column, altered and dropped is seen by Refresh, and by the watcher on
// its own within its interval; subscribers hear of each change.
func TestCatalogFollowsTheDatabase(t *testing.T) {
	db := testenv.DB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := Settings{Schemas: []string{"public"}, Own: "geogate", Refresh: 50 * time.Millisecond}
	c, err := Open(ctx, db, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan []string, 16)
	c.OnChange(func(ls []*Layer) { changes <- ids(ls) })
	if got := ids(c.Layers()); !slices.Equal(got, []string{"geofences", "places"}) {
		t.Fatalf("layers of a fresh database = %v, want geofences and places", got)
	}
	steps := []struct {
		sql  string
		want []string
	}{
		{"CREATE TABLE public.trees (id int PRIMARY KEY, species text, geom geometry(Point, 25832))",
			[]string{"geofences", "places", "trees"}},
		{"ALTER TABLE public.trees ADD COLUMN crown geometry(Polygon, 25832)",
			[]string{"geofences", "places", "trees", "trees__crown"}},
		{"DROP TABLE public.trees", []string{"geofences", "places"}},
	}
	for _, st := range steps {
		if _, err := db.Exec(context.Background(), st.sql); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-changes: // the watcher's own refresh
			if !slices.Equal(got, st.want) {
				t.Errorf("after %q: layers %v, want %v", st.sql, got, st.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after %q: no change seen within 10s", st.sql)
		}
	}
	if changed, err := c.Refresh(ctx); err != nil || changed {
		t.Errorf("Refresh with nothing changed = %v, %v; want false", changed, err)
	}
	if _, err := db.Exec(context.Background(), "ALTER TABLE public.places ADD COLUMN rating smallint"); err != nil {
		t.Fatal(err)
	}
	cancel() // the watcher stops; Refresh still works
	if changed, err := c.Refresh(context.Background()); err != nil || !changed {
		t.Fatalf("Refresh after a new column = %v, %v; want true", changed, err)
	}
	ps := c.Layer("places").Properties
	if last := ps[len(ps)-1]; last.Name != "rating" || last.Type != "integer" {
		t.Errorf("places' last property = %+v, want rating, integer", last)
	}
}

// TestListLayers: GET /layers describes each layer as the document says.
func TestListLayers(t *testing.T) {
	db := testenv.UserDB(t)
	c, err := Open(context.Background(), db, Settings{Schemas: testenv.UserSchemas, Own: "geogate"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := httpx.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, httpx.TrustedProxies{})
	r.GET("/layers", NewHandler(c, nil).List)
	h := contract.Wrap(t, r, openapi.Limits{})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/layers", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /layers = %d %s", w.Code, w.Body)
	}
	var body struct{ Layers []LayerInfo }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	byID := map[string]LayerInfo{}
	for _, l := range body.Layers {
		byID[l.ID] = l
	}
	roads, views := byID["roads"], byID["french_cities"]
	if roads.SRID != 3857 || roads.IDColumn == nil || roads.IDColumn.Name != "gid" || !roads.SpatialIndex || roads.Bounds == nil || roads.Invalidation != "ttl" {
		t.Errorf("roads = %+v", roads)
	}
	if views.IDColumn != nil || views.SpatialIndex || views.Kind != "view" {
		t.Errorf("french_cities = %+v, want a view without id column or index", views)
	}
	if p := byID["places"]; p.Invalidation != "exact" {
		t.Errorf("places invalidation = %q, want exact", p.Invalidation)
	}
	for id, want := range map[string]string{"roads": "", "countries": "index", "city_buffers": "scan", "geofences": "subdivided"} {
		got := ""
		if c := byID[id].Contains; c != nil {
			got = *c
		}
		if got != want {
			t.Errorf("%s contains = %q, want %q", id, got, want)
		}
	}
	if len(body.Layers) != 16 {
		t.Errorf("%d layers, want 16", len(body.Layers))
	}
}

// TestCatalogFollowsSubdividedCopies: the watcher notices a layer's copy
// and its triggers appearing, being disabled, vanishing and coming back,
// and says which path containment takes each time.
func TestCatalogFollowsSubdividedCopies(t *testing.T) {
	db := testenv.DB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := Settings{Schemas: []string{"public"}, Own: "geogate", Refresh: 50 * time.Millisecond}
	c, err := Open(ctx, db, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	changes := make(chan string, 16)
	c.OnChange(func(ls []*Layer) {
		for _, l := range ls {
			if l.ID == "lakes" {
				changes <- l.ContainsPath()
			}
		}
	})
	const fn = `geogate.layer_parts_sync('parts_lakes', 'id', 'geom')`
	copyTable := `CREATE TABLE geogate.parts_lakes (key integer NOT NULL, geom geometry(Geometry, 25832) NOT NULL)`
	steps := []struct{ sql, want string }{
		{"CREATE TABLE public.lakes (id integer PRIMARY KEY, name text, geom geometry(MultiPolygon, 25832))", "scan"},
		{"CREATE INDEX lakes_geom_idx ON public.lakes USING gist (geom)", "index"},
		{copyTable + `;
			CREATE TRIGGER p_insert AFTER INSERT ON public.lakes REFERENCING NEW TABLE AS geogate_new FOR EACH STATEMENT EXECUTE FUNCTION ` + fn + `;
			CREATE TRIGGER p_update AFTER UPDATE ON public.lakes REFERENCING OLD TABLE AS geogate_old NEW TABLE AS geogate_new FOR EACH STATEMENT EXECUTE FUNCTION ` + fn + `;
			CREATE TRIGGER p_delete AFTER DELETE ON public.lakes REFERENCING OLD TABLE AS geogate_old FOR EACH STATEMENT EXECUTE FUNCTION ` + fn + `;
			CREATE TRIGGER p_truncate AFTER TRUNCATE ON public.lakes FOR EACH STATEMENT EXECUTE FUNCTION ` + fn, "subdivided"},
		{"ALTER TABLE public.lakes DISABLE TRIGGER p_update", "index"},
		{"ALTER TABLE public.lakes ENABLE TRIGGER p_update", "subdivided"},
		{"DROP TABLE geogate.parts_lakes", "index"},
		{copyTable, "subdivided"},
		{"DROP TRIGGER p_truncate ON public.lakes", "index"},
	}
	for _, st := range steps {
		if _, err := db.Exec(context.Background(), st.sql); err != nil {
			t.Fatalf("%.60s: %v", st.sql, err)
		}
		select {
		case got := <-changes:
			if got != st.want {
				t.Errorf("after %.60q: contains path %q, want %q", st.sql, got, st.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after %.60q: no change seen within 10s", st.sql)
		}
	}
}
