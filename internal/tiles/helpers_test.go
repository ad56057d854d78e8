package tiles

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/encoding/mvt"
	"github.com/paulmach/orb/maptile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/openapi"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/spatial"
	"github.com/geogate/geogate/internal/testenv"
)

// fixtureSQL is a handful of known places and two fences: a square around
// Berlin and one far away.
const fixtureSQL = `
INSERT INTO places (name, properties, geom) VALUES
  ('Berlin',  '{"country":"DE"}', ST_SetSRID(ST_MakePoint(13.41053, 52.52437), 4326)),
  ('Potsdam', '{"country":"DE"}', ST_SetSRID(ST_MakePoint(13.06566, 52.39886), 4326)),
  ('Paris',   '{"country":"FR"}', ST_SetSRID(ST_MakePoint(2.3488, 48.85341), 4326)),
  ('Sydney',  '{"country":"AU"}', ST_SetSRID(ST_MakePoint(151.20732, -33.86785), 4326));
INSERT INTO geofences (name, properties, geom) VALUES
  ('berlin-box', '{"A3":"BER"}', ST_Multi(ST_MakeEnvelope(13.0, 52.3, 13.8, 52.7, 4326))),
  ('sydney-box', '{"A3":"SYD"}', ST_Multi(ST_MakeEnvelope(150.9, -34.1, 151.4, -33.7, 4326)));
ANALYZE places; ANALYZE geofences;`

// fixtureDB returns a fresh database holding fixtureSQL.
func fixtureDB(t *testing.T) *pgxpool.Pool {
	t.Helper()
	db := testenv.DB(t)
	if _, err := db.Exec(context.Background(), fixtureSQL); err != nil {
		t.Fatalf("load fixtures: %v", err)
	}
	return db
}

// replica is one service instance: a service, its handler, its router,
// and the router checked against the OpenAPI document (every exchange of
// a test through get or getFrom is; a violation fails the test).
type replica struct {
	svc     *Service
	h       *Handler
	r       *gin.Engine
	checked http.Handler
	// stop ends the version listener and waits until its session has left
	// PostgreSQL: the replica then learns of writes through Redis alone.
	stop func()
}

// replicaOptions are what a test replica is built with besides its
// settings: its handler's gate and scope (see Access) and the registerer
// of its service's metrics.
type replicaOptions struct {
	Gate       Gate
	Scope      func(context.Context) *spatial.Scope
	Registerer prometheus.Registerer
}

// newReplica builds a service and its handler on db and rdb (nil: cache off) under prefix
// (empty: the default), with the default settings changed by tweaks,
// waits for its version listener, and stops it when the test ends.
func newReplica(t *testing.T, db *pgxpool.Pool, rdb redis.UniversalClient, prefix string, o replicaOptions, tweaks ...func(*Settings)) replica {
	t.Helper()
	return newReplicaBehind(t, db, rdb, prefix, o, httpx.TrustedProxies{}, tweaks...)
}

// newReplicaBehind is newReplica behind the proxies trusted.
func newReplicaBehind(t *testing.T, db *pgxpool.Pool, rdb redis.UniversalClient, prefix string, o replicaOptions, trusted httpx.TrustedProxies, tweaks ...func(*Settings)) replica {
	t.Helper()
	s := DefaultSettings()
	s.Cache = rdb != nil
	s.RedisTimeout = 200 * time.Millisecond
	if prefix != "" {
		s.KeyPrefix = prefix
	}
	for _, tw := range tweaks {
		tw(&s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	others := listenerPIDs(t, db)
	svc, err := New(ctx, pg.Runner{Pool: db}, openCatalog(t, db), s, Options{Redis: rdb, Registerer: o.Registerer})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h := NewHandler(svc, s, Access{Gate: o.Gate})
	select {
	case <-svc.versions.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("version listener not ready after 10s")
	}
	var mine []int32
	for pid := range listenerPIDs(t, db) {
		if !others[pid] {
			mine = append(mine, pid)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("the new replica's version listener sessions: %v, want one", mine)
	}
	stop := func() {
		t.Helper()
		cancel()
		// The end of ctx reaches a listener idle in LISTEN only after the
		// pool's cancel grace (pg.Open), seconds in which it would still
		// hear NOTIFY; ending its session stops it at once (ctx has ended,
		// so it does not reconnect).
		if _, err := db.Exec(context.Background(), "SELECT pg_terminate_backend($1)", mine[0]); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, 10*time.Second, "the stopped version listener leaving PostgreSQL", func() bool {
			return !listenerPIDs(t, db)[mine[0]]
		})
	}
	r := httpx.NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, trusted)
	r.Use(func(c *gin.Context) {
		// A test names the caller's scope in a header (see withScope).
		if name := c.GetHeader("X-Test-Scope"); name != "" {
			c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), testScopeKey{}, name))
		}
		// The caller is an identity confined to o.Scope's answer, as
		// authentication would make it.
		if o.Scope != nil {
			ctx := c.Request.Context()
			c.Request = c.Request.WithContext(auth.WithIdentity(ctx, auth.Identity{Spatial: o.Scope(ctx)}))
		}
	})
	r.GET("/tiles", h.List)
	r.GET("/tiles/:layer", h.TileJSON)
	r.GET("/tiles/:layer/:z/:x/:y", h.Tile)
	r.GET("/tileMatrixSets", h.TileMatrixSets)
	r.GET("/tileMatrixSets/:tileMatrixSetId", h.TileMatrixSet)
	r.GET("/collections/:collectionId/tiles", h.TileSets)
	r.GET("/collections/:collectionId/tiles/:tileMatrixSetId", h.TileSet)
	r.GET("/collections/:collectionId/tiles/:tileMatrixSetId/:tileMatrix/:tileRow/:tileCol", h.OGCTile)
	r.GET("/styles", h.Styles)
	r.GET("/styles/:styleId", h.Style)
	return replica{svc: svc, h: h, r: r, checked: contract.Wrap(t, r, openapi.Limits{}), stop: stop}
}

// openCatalog returns the catalog of db's public schema, read again only
// on Refresh, and closed when the test ends.
func openCatalog(t *testing.T, db *pgxpool.Pool) *catalog.Catalog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := catalog.Open(ctx, db, catalog.Settings{Schemas: []string{"public"}, Own: "geogate"}, quietLog())
	if err != nil {
		t.Fatalf("catalog.Open: %v", err)
	}
	return c
}

// newRenderer returns a Renderer of db's public layers with settings s.
func newRenderer(t *testing.T, db *pgxpool.Pool, s Settings) *Renderer {
	t.Helper()
	r, err := NewRenderer(pg.Runner{Pool: db}, openCatalog(t, db), s, quietLog())
	if err != nil {
		t.Fatalf("NewRenderer: %v", err)
	}
	return r
}

// layer returns r's layer id.
func layer(t *testing.T, r *Renderer, id string) *Layer {
	t.Helper()
	l, err := r.Layer(id)
	if err != nil {
		t.Fatalf("layer %s: %v", id, err)
	}
	return l
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// listenerPIDs returns the server processes of the tile version listeners
// on db's database.
func listenerPIDs(t *testing.T, db *pgxpool.Pool) map[int32]bool {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+notifyChannel+`'`)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[int32]bool, len(pids))
	for _, pid := range pids {
		m[pid] = true
	}
	return m
}

type testScopeKey struct{}

// scopeByName is an Access.Scope that gives each request the scope its
// X-Test-Scope header names in scopes, or the whole world.
func scopeByName(scopes map[string]*spatial.Scope) func(context.Context) *spatial.Scope {
	return func(ctx context.Context) *spatial.Scope {
		name, _ := ctx.Value(testScopeKey{}).(string)
		return scopes[name]
	}
}

// withWindow sets the version window.
func withWindow(d time.Duration) func(*Settings) { return func(s *Settings) { s.VersionWindow = d } }

// get serves one request; headers alternate names and values.
func (rp replica) get(t *testing.T, path string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	return rp.getFrom(t, "192.0.2.1:1234", path, headers...)
}

// getFrom is get from the peer address remote.
func (rp replica) getFrom(t *testing.T, remote, path string, headers ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = remote
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	rp.checked.ServeHTTP(w, req)
	return w
}

// redisClient opens url without checking that it answers.
func redisClient(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis.ParseURL(%q): %v", url, err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// decode decodes an MVT body (gzipped or not) and projects it to WGS84.
func decode(t *testing.T, body []byte, tl Tile) mvt.Layers {
	t.Helper()
	var ls mvt.Layers
	var err error
	if len(body) > 2 && body[0] == 0x1f && body[1] == 0x8b {
		ls, err = mvt.UnmarshalGzipped(body)
	} else {
		ls, err = mvt.Unmarshal(body)
	}
	if err != nil {
		t.Fatalf("decode tile %s: %v", tl, err)
	}
	ls.ProjectToWGS84(maptile.New(uint32(tl.X), uint32(tl.Y), maptile.Zoom(tl.Z)))
	return ls
}

// tileOf returns the tile at zoom z holding lng, lat.
func tileOf(lng, lat float64, z int) Tile {
	mt := maptile.At([2]float64{lng, lat}, maptile.Zoom(z))
	return Tile{Z: z, X: int(mt.X), Y: int(mt.Y)}
}

func tilePath(layer string, t Tile) string {
	return "/tiles/" + layer + "/" + t.String() + ".mvt"
}

// ogcPath is the OGC API - Tiles path of t: tileMatrix, tileRow (y),
// tileCol (x).
func ogcPath(collection string, t Tile) string {
	return fmt.Sprintf("/collections/%s/tiles/WebMercatorQuad/%d/%d/%d", collection, t.Z, t.Y, t.X)
}

// featureNames returns the names of layer's features.
func featureNames(ls mvt.Layers, layer string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, l := range ls {
		if l.Name != layer {
			continue
		}
		for _, f := range l.Features {
			if n, ok := f.Properties["name"].(string); ok {
				out[n] = f.Properties
			}
		}
	}
	return out
}

// hooks is a Gate for tests: hit and miss see the layers of cached and of
// rendered tiles, check decides access; a nil field admits.
type hooks struct {
	hit, miss func(ctx context.Context, layers []string) (func(), error)
	check     func(ctx context.Context, layer string) error
}

type donePass []func()

func (donePass) Header() http.Header { return nil }

func (donePass) Spent(gate.Usage) {}

func (donePass) Settle() {}

func (d donePass) Done() {
	for _, f := range d {
		if f != nil {
			f()
		}
	}
}

// Admit admits as the gate does, all or nothing: the render's layers
// first, then the cached ones.
func (g hooks) Admit(ctx context.Context, a gate.Ask) (gate.Pass, error) {
	for _, l := range append(slices.Clone(a.Layers), a.Cached...) {
		if err := g.Check(ctx, l); err != nil {
			return nil, err
		}
	}
	var p donePass
	for _, part := range []struct {
		f      func(context.Context, []string) (func(), error)
		layers []string
	}{{g.miss, a.Layers}, {g.hit, a.Cached}} {
		if part.f == nil || len(part.layers) == 0 {
			continue
		}
		done, err := part.f(ctx, part.layers)
		if err != nil {
			p.Done()
			return nil, err
		}
		p = append(p, done)
	}
	return p, nil
}

// Partition is "": every tile is everyone's (the gate's own tests and
// cmd/api's cover layers that run as their caller).
func (hooks) Partition(context.Context, string) string { return "" }

func (g hooks) Check(ctx context.Context, layer string) error {
	if g.check == nil {
		return nil
	}
	return g.check(ctx, layer)
}

// cache is the replica's Redis cache; it fails the test when the replica
// has none.
func (rp replica) cache(t *testing.T) *redisCache {
	t.Helper()
	c, ok := rp.svc.cache.(*redisCache)
	if !ok {
		t.Fatalf("the replica keeps no tiles in Redis (%T)", rp.svc.cache)
	}
	return c
}
