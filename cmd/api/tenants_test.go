package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/paulmach/orb/encoding/mvt"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/testenv"
)

// tenantFixture adds to a demo database a table of two tenants' sites in
// Berlin under row-level security: the role gg_tenant sees the rows of
// the tenant its claims name, gg_tenant_admin every row, and a view
// that runs as its invoker shows each what the table does. Roles are the
// cluster's: made once, shared by every test database.
func tenantFixture(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for _, sql := range []string{
		`DO $$ BEGIN CREATE ROLE gg_tenant NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
		`DO $$ BEGIN CREATE ROLE gg_tenant_admin NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
		`DO $$ BEGIN CREATE ROLE gg_outsider NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`,
		`CREATE TABLE public.tenant_sites (id int PRIMARY KEY, tenant text NOT NULL, name text NOT NULL, geom geometry(Point, 4326) NOT NULL)`,
		`CREATE INDEX ON public.tenant_sites USING gist (geom)`,
		`INSERT INTO public.tenant_sites VALUES
		   (1, 'a', 'a-one', 'SRID=4326;POINT(13.400 52.520)'), (2, 'a', 'a-two', 'SRID=4326;POINT(13.410 52.520)'),
		   (3, 'a', 'a-three', 'SRID=4326;POINT(13.420 52.525)'), (4, 'b', 'b-one', 'SRID=4326;POINT(13.405 52.521)'),
		   (5, 'b', 'b-two', 'SRID=4326;POINT(13.415 52.523)')`,
		`ALTER TABLE public.tenant_sites ENABLE ROW LEVEL SECURITY`,
		`CREATE POLICY own_tenant ON public.tenant_sites FOR SELECT TO gg_tenant
		   USING (tenant = current_setting('request.jwt.claims', true)::json->>'tenant')`,
		`CREATE POLICY every_tenant ON public.tenant_sites FOR SELECT TO gg_tenant_admin USING (true)`,
		`GRANT SELECT ON public.tenant_sites TO gg_tenant, gg_tenant_admin`,
		// Writes: a tenant writes only rows of its own.
		`CREATE POLICY own_rows_in ON public.tenant_sites FOR INSERT TO gg_tenant
		   WITH CHECK (tenant = current_setting('request.jwt.claims', true)::json->>'tenant')`,
		`CREATE POLICY own_rows_changed ON public.tenant_sites FOR UPDATE TO gg_tenant
		   USING (tenant = current_setting('request.jwt.claims', true)::json->>'tenant')
		   WITH CHECK (tenant = current_setting('request.jwt.claims', true)::json->>'tenant')`,
		`CREATE POLICY own_rows_out ON public.tenant_sites FOR DELETE TO gg_tenant
		   USING (tenant = current_setting('request.jwt.claims', true)::json->>'tenant')`,
		`GRANT INSERT, UPDATE, DELETE ON public.tenant_sites TO gg_tenant`,
		`CREATE VIEW public.tenant_sites_view WITH (security_invoker = true) AS SELECT id, tenant, name, geom FROM public.tenant_sites`,
		`GRANT SELECT ON public.tenant_sites_view TO gg_tenant, gg_tenant_admin`,
		// Each tenant's zone covers the same part of Berlin.
		`CREATE TABLE public.tenant_zones (id int PRIMARY KEY, tenant text NOT NULL, name text NOT NULL, geom geometry(Polygon, 4326) NOT NULL)`,
		`CREATE INDEX ON public.tenant_zones USING gist (geom)`,
		`INSERT INTO public.tenant_zones VALUES (1, 'a', 'zone-a', ST_MakeEnvelope(13.3, 52.4, 13.5, 52.6, 4326)),
		   (2, 'b', 'zone-b', ST_MakeEnvelope(13.35, 52.45, 13.45, 52.55, 4326))`,
		`ALTER TABLE public.tenant_zones ENABLE ROW LEVEL SECURITY`,
		`CREATE POLICY own_tenant ON public.tenant_zones FOR SELECT TO gg_tenant
		   USING (tenant = (SELECT current_setting('request.jwt.claims', true)::json->>'tenant'))`,
		`GRANT SELECT ON public.tenant_zones TO gg_tenant`,
		`CREATE POLICY own_zones_in ON public.tenant_zones FOR INSERT TO gg_tenant
		   WITH CHECK (tenant = (SELECT current_setting('request.jwt.claims', true)::json->>'tenant'))`,
		`GRANT INSERT ON public.tenant_zones TO gg_tenant`,
	} {
		if _, err := pool.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// tenantService serves the fixture with the layer file running both
// layers as their callers (the table cached per tenant, the view not
// cached), and returns its address, the env its CLI runs with, and the
// HS256 secret its tokens are signed with.
func tenantService(t *testing.T) (base string, env map[string]string, secret string) {
	t.Helper()
	return tenantServiceWith(t, nil)
}

// tenantServiceWith is tenantService with more settings, made from the
// database's URL.
func tenantServiceWith(t *testing.T, more func(dbURL string) map[string]string) (base string, env map[string]string, secret string) {
	t.Helper()
	pool, dbURL := testenv.DemoDBWithURL(t)
	tenantFixture(t, pool)
	file := filepath.Join(t.TempDir(), "layers.yaml")
	if err := os.WriteFile(file, []byte(`
layers:
  tenant_sites:
    as_caller: true
    cache_by: claim:tenant
    write: true
  tenant_sites_view:
    as_caller: true
  tenant_zones:
    as_caller: true
    write: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	secret = strings.Repeat("s3cr3t-", 6)
	env = map[string]string{
		"DATABASE_URL":          dbURL,
		"LAYERS_CONFIG":         file,
		"AUTH_ANONYMOUS_SCOPES": "none",
		"DB_CALLER_ROLES":       "gg_tenant,gg_tenant_admin",
		"JWT_HS256_SECRET":      secret,
	}
	if more != nil {
		maps.Copy(env, more(dbURL))
	}
	// Exact invalidation, so that tiles are cached by data version and
	// items pages are read ahead for walks, as on a published table.
	runCLI(t, env, "publish", "--invalidate", "tenant_sites")
	// A subdivided copy, which holds every tenant's zones, must not
	// answer a caller.
	runCLI(t, env, "publish", "--contains", "tenant_zones")
	base, _ = startService(t, env)
	return base, env, secret
}

// tenantToken is a token for subject with claims, signed with secret.
func tenantToken(t *testing.T, secret, subject string, claims map[string]any) string {
	t.Helper()
	tok, err := auth.MintHS256([]byte(secret), auth.MintOptions{Subject: subject, Scopes: auth.AllScopes, TTL: time.Hour, Claims: claims})
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// callAs sends a GET as the caller whose credentials are cred (an API
// key, or "Bearer <token>").
func callAs(t *testing.T, base, cred, path string) (int, []byte, http.Header) {
	t.Helper()
	return send(t, "GET", base+path, cred, "")
}

// featureNames are the name properties of a GeoJSON answer's features,
// sorted: a view's features have no key of their own to tell them by.
func featureNames(t *testing.T, body []byte) []string {
	t.Helper()
	var fc struct {
		Features []struct {
			Properties struct {
				Name string `json:"name"`
			} `json:"properties"`
		} `json:"features"`
	}
	if err := json.Unmarshal(body, &fc); err != nil {
		t.Fatalf("not GeoJSON: %v: %.300s", err, body)
	}
	var names []string
	for _, f := range fc.Features {
		names = append(names, f.Properties.Name)
	}
	slices.Sort(names)
	return names
}

// tileNames are the name properties of the features of layer in an MVT
// tile, sorted.
func tileNames(t *testing.T, body []byte, layer string) []string {
	t.Helper()
	ls, err := mvt.Unmarshal(body)
	if err != nil {
		t.Fatalf("not a tile: %v", err)
	}
	var ids []string
	for _, l := range ls {
		if l.Name != layer {
			continue
		}
		for _, f := range l.Features {
			ids = append(ids, fmt.Sprint(f.Properties["name"]))
		}
	}
	slices.Sort(ids)
	return ids
}

// TestTenantsSeeOnlyTheirRows serves a table under row-level security to
// two tenants' keys and tokens and to an admin role: every route returns
// each caller its own rows, the tile cache on, counts and extents
// included. The tile of one tenant is asked for right after the other's
// has been cached: a cross-tenant hit would be the worst defect here.
func TestTenantsSeeOnlyTheirRows(t *testing.T) {
	base, env, secret := tenantService(t)
	id := "ten-" + testenv.Prefix(t)
	ka := runCLI(t, env, "keys", "create", "--name", id+"-a", "--scopes", "all", "--db-role", "gg_tenant", "--claims", `{"tenant":"a"}`)
	kb := runCLI(t, env, "keys", "create", "--name", id+"-b", "--scopes", "all", "--db-role", "gg_tenant", "--claims", `{"tenant":"b"}`)
	ta := tenantToken(t, secret, "user-a", map[string]any{"role": "gg_tenant", "tenant": "a"})
	tb := tenantToken(t, secret, "user-b", map[string]any{"role": "gg_tenant", "tenant": "b"})
	admin := tenantToken(t, secret, "ops", map[string]any{"role": "gg_tenant_admin"})
	a, b := []string{"a-one", "a-three", "a-two"}, []string{"b-one", "b-two"}
	all := append(slices.Clone(a), b...)

	const tile = "/12/2200/1343"
	routes := []struct {
		name, path string
		names      func(t *testing.T, body []byte) []string
	}{
		{"Within", "/within?layer=tenant_sites&lng=13.41&lat=52.52&radius=5000", featureNames},
		{"Items", "/collections/tenant_sites/items?limit=100", featureNames},
		{"ItemsOfView", "/collections/tenant_sites_view/items?limit=100", featureNames},
		{"ItemsInBBox", "/collections/tenant_sites/items?bbox=13.3,52.4,13.5,52.6", featureNames},
		{"Tile", "/tiles/tenant_sites" + tile + ".mvt", func(t *testing.T, body []byte) []string { return tileNames(t, body, "tenant_sites") }},
		{"TileOfView", "/tiles/tenant_sites_view" + tile + ".mvt", func(t *testing.T, body []byte) []string { return tileNames(t, body, "tenant_sites_view") }},
		{"OGCTile", "/collections/tenant_sites/tiles/WebMercatorQuad/12/1343/2200", func(t *testing.T, body []byte) []string { return tileNames(t, body, "tenant_sites") }},
	}
	callers := []struct {
		name, cred string
		want       []string
	}{
		// Each route is asked by tenant a first, then by b, whose answer
		// would be a's were anything cached across them; then again.
		{"KeyA", ka, a}, {"KeyB", kb, b}, {"TokenA", ta, a}, {"TokenB", tb, b}, {"Admin", admin, all}, {"KeyAAgain", ka, a}, {"KeyBAgain", kb, b},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			for _, c := range callers {
				code, body, h := callAs(t, base, c.cred, r.path)
				if code != 200 {
					t.Fatalf("%s: %d %s", c.name, code, body)
				}
				if got := r.names(t, body); !slices.Equal(got, c.want) {
					t.Errorf("%s: features %v, want %v", c.name, got, c.want)
				}
				if strings.Contains(r.path, "tiles") && !strings.Contains(h.Get("Cache-Control"), "private") {
					t.Errorf("%s: Cache-Control %q: a caller's own tile must be private", c.name, h.Get("Cache-Control"))
				}
			}
		})
	}

	t.Run("Contains", func(t *testing.T) {
		for _, c := range []struct{ cred, want string }{{ka, "zone-a"}, {kb, "zone-b"}, {ta, "zone-a"}, {tb, "zone-b"}} {
			code, body, _ := callAs(t, base, c.cred, "/geofences/contains?lng=13.41&lat=52.52&layer=tenant_zones")
			var found struct {
				Fences []struct {
					Properties struct{ Name string }
				}
			}
			_ = json.Unmarshal(body, &found)
			var got []string
			for _, f := range found.Fences {
				got = append(got, f.Properties.Name)
			}
			if code != 200 || !slices.Equal(got, []string{c.want}) {
				t.Errorf("contains as the %s tenant: %d %v, want [%s]: %s", c.want, code, got, c.want, body)
			}
		}
	})

	// GDAL's OAPIF driver, a real client, copies each tenant's own rows.
	t.Run("GDAL", func(t *testing.T) {
		for _, c := range []struct {
			key  string
			want []string
		}{{ka, a}, {kb, b}} {
			out := gdal(t, "ogr2ogr", append(append([]string{"-f", "GeoJSON", "/vsistdout/"}, gdalAuth(c.key)...), "OAPIF:"+base, "tenant_sites")...)
			if got := featureNames(t, []byte(out)); !slices.Equal(got, c.want) {
				t.Errorf("ogr2ogr copied %v, want %v", got, c.want)
			}
		}
	})

	// OWSLib's OGC API Features client, with a key as Basic credentials.
	t.Run("OWSLib", func(t *testing.T) {
		for _, c := range []struct {
			key  string
			want int
		}{{"-a", len(a)}, {"-b", len(b)}} {
			secret := map[string]string{"-a": ka, "-b": kb}[c.key]
			var got struct {
				ID       string
				Features int
			}
			pythonClient(t, &got, "owslib_client.py", base, id+c.key, secret, "tenant_sites", "13.3,52.4,13.5,52.6")
			if got.ID != "tenant_sites" || got.Features != c.want {
				t.Errorf("OWSLib as key %s read %q with %d features, want %d", id+c.key, got.ID, got.Features, c.want)
			}
		}
	})

	t.Run("Counts", func(t *testing.T) {
		for _, c := range callers[:5] {
			_, body, _ := callAs(t, base, c.cred, "/collections/tenant_sites/items?limit=1")
			var page struct {
				Matched *int `json:"numberMatched"`
			}
			_ = json.Unmarshal(body, &page)
			if page.Matched != nil && *page.Matched != len(c.want) {
				t.Errorf("%s: numberMatched %d, want %d or none", c.name, *page.Matched, len(c.want))
			}
		}
	})

	t.Run("NoTableStatistics", func(t *testing.T) {
		_, body, _ := callAs(t, base, ka, "/layers")
		var ls struct {
			Layers []struct {
				ID     string      `json:"id"`
				Rows   *int64      `json:"estimated_rows"`
				Bounds *[4]float64 `json:"bounds"`
			} `json:"layers"`
		}
		if err := json.Unmarshal(body, &ls); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, l := range ls.Layers {
			if strings.HasPrefix(l.ID, "tenant_sites") {
				seen++
				if l.Rows != nil || l.Bounds != nil {
					t.Errorf("/layers shows %s with estimated_rows %v and bounds %v: the whole table's, want null", l.ID, l.Rows, l.Bounds)
				}
			}
		}
		if seen != 2 {
			t.Errorf("/layers lists %d tenant layers, want 2: %s", seen, body)
		}
		_, body, _ = callAs(t, base, kb, "/collections/tenant_sites")
		if !strings.Contains(string(body), `"bbox":[[-180,-90,180,90]]`) {
			t.Errorf("/collections/tenant_sites extent: want the world, not the table's: %s", body)
		}
	})
}

// TestCallersWithoutAnAcceptedRole: a layer that runs as its caller
// refuses, with a 403 that names no role, every caller that has no
// accepted role, and a token whose claims were not signed by the issuer
// is refused before any claim is read. A layer that does not run as its
// caller still serves them.
func TestCallersWithoutAnAcceptedRole(t *testing.T) {
	base, env, secret := tenantService(t)
	id := "norole-" + testenv.Prefix(t)
	plain := runCLI(t, env, "keys", "create", "--name", id+"-plain", "--scopes", "all")
	outsiderKey := runCLI(t, env, "keys", "create", "--name", id+"-outsider", "--scopes", "all", "--db-role", "gg_outsider", "--claims", `{"tenant":"a"}`)
	outsiderToken := tenantToken(t, secret, "intruder", map[string]any{"role": "gg_outsider", "tenant": "b"})
	forged := tenantToken(t, strings.Repeat("x", 40), "intruder", map[string]any{"role": "gg_tenant", "tenant": "b"})
	unsigned := "Bearer " + unsignedToken(map[string]any{"sub": "intruder", "role": "gg_tenant", "tenant": "b", "exp": time.Now().Add(time.Hour).Unix()})
	noRoleToken := tenantToken(t, secret, "someone", map[string]any{"tenant": "b"})

	paths := []string{
		"/within?layer=tenant_sites&lng=13.41&lat=52.52&radius=5000",
		"/collections/tenant_sites/items",
		"/collections/tenant_sites_view/items",
		"/tiles/tenant_sites/12/2200/1343.mvt",
		"/tiles/places,tenant_sites/12/2200/1343.mvt",
	}
	for _, c := range []struct {
		name, cred string
		want       int
	}{
		{"KeyWithoutRole", plain, 403}, {"KeyWithRoleNotAccepted", outsiderKey, 403}, {"TokenWithRoleNotAccepted", outsiderToken, 403},
		{"TokenWithoutRole", noRoleToken, 403}, {"ForgedToken", forged, 401}, {"UnsignedToken", unsigned, 401}, {"Anonymous", "", 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range paths {
				code, body, _ := callAs(t, base, c.cred, p)
				if code != c.want {
					t.Errorf("%s: %d %s, want %d", p, code, body, c.want)
				}
				if strings.Contains(string(body), "gg_") || !strings.Contains(string(body), `"detail"`) {
					t.Errorf("%s: %s: want a detail that names no role", p, body)
				}
			}
		})
	}
	if code, body, _ := callAs(t, base, plain, "/within?layer=places&lng=13.41&lat=52.52&radius=5000"); code != 200 {
		t.Errorf("a key without a role on a layer that does not run as its caller: %d %s, want 200", code, body)
	}
}

// unsignedToken is a JWT with alg none: claims anyone could have written.
func unsignedToken(claims map[string]any) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "none", "typ": "JWT"}) + "." + enc(claims) + "."
}

// TestCallerRoleTakenAway: a key whose db_role or claims an operator
// changes gets, from the next request on, what the change says: no rows
// of the layer without a role (403), the other tenant's with its claims,
// and no page read ahead under the former ones.
func TestCallerRoleTakenAway(t *testing.T) {
	base, env, _ := tenantService(t)
	id := "taken-" + testenv.Prefix(t)
	key := runCLI(t, env, "keys", "create", "--name", id, "--scopes", "all", "--db-role", "gg_tenant", "--claims", `{"tenant":"a"}`)
	admin := runCLI(t, env, "keys", "create", "--name", id+"-admin", "--scopes", "admin")
	patch := func(body string) {
		t.Helper()
		req, _ := http.NewRequest("PATCH", base+"/admin/keys/"+id, strings.NewReader(body))
		req.Header.Set("x-api-key", admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("PATCH %s: %d %s", body, resp.StatusCode, b)
		}
	}
	items := "/collections/tenant_sites/items?limit=1"
	names := func() (int, []string) {
		t.Helper()
		code, body, _ := callAs(t, base, key, items)
		if code != 200 {
			return code, nil
		}
		return code, featureNames(t, body)
	}
	if code, got := names(); code != 200 || !slices.Equal(got, []string{"a-one"}) {
		t.Fatalf("as tenant a: %d %v, want a-one", code, got)
	}
	// A walk begun as tenant a: following its first next link reads the
	// page after it ahead, as a.
	_, body, _ := callAs(t, base, key, items)
	_, body, _ = callAs(t, base, key, strings.TrimPrefix(nextLink(t, body), base))
	if got := featureNames(t, body); !slices.Equal(got, []string{"a-two"}) {
		t.Fatalf("the second page as tenant a: %v, want a-two", got)
	}
	next := nextLink(t, body)
	patch(`{"claims":{"tenant":"b"}}`)
	code, body, _ := callAs(t, base, key, strings.TrimPrefix(next, base))
	if code != 200 {
		t.Fatalf("the next page after the claims changed: %d %s", code, body)
	}
	for _, n := range featureNames(t, body) {
		if strings.HasPrefix(n, "a-") {
			t.Errorf("the next page after the key became tenant b's holds %s, a row of tenant a", n)
		}
	}
	if code, got := names(); code != 200 || !slices.Equal(got, []string{"b-one"}) {
		t.Errorf("as tenant b: %d %v, want b-one", code, got)
	}
	patch(`{"db_role":null}`)
	if code, _ := names(); code != 403 {
		t.Errorf("after the key's db_role was taken away: %d, want 403", code)
	}
}

// nextLink is the href of the next link of an items page.
func nextLink(t *testing.T, body []byte) string {
	t.Helper()
	var page struct {
		Links []struct{ Rel, Href string } `json:"links"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatal(err)
	}
	for _, l := range page.Links {
		if l.Rel == "next" {
			return l.Href
		}
	}
	t.Fatalf("no next link: %s", body)
	return ""
}

// TestTenantsOnAReplica: with reads on a streaming replica, each tenant
// still gets its own rows, from the replica: the caller's role and claims
// go with each statement wherever it runs.
func TestTenantsOnAReplica(t *testing.T) {
	base, env, _ := tenantServiceWith(t, func(dbURL string) map[string]string {
		return map[string]string{"DATABASE_REPLICA_URLS": testenv.ReplicaURL(t, dbURL), "DB_REPLICA_MAX_LAG": "60s"}
	})
	testenv.WaitFor(t, replicaCatchUp, "the replica healthy", func() bool {
		st, _, body := call(t, "GET", base+"/readyz", "", "")
		return st == http.StatusOK && strings.Contains(string(body), `"healthy":true`)
	})
	id := "replica-" + testenv.Prefix(t)
	ka := runCLI(t, env, "keys", "create", "--name", id+"-a", "--scopes", "all", "--db-role", "gg_tenant", "--claims", `{"tenant":"a"}`)
	kb := runCLI(t, env, "keys", "create", "--name", id+"-b", "--scopes", "all", "--db-role", "gg_tenant", "--claims", `{"tenant":"b"}`)
	before := replicaReads(t, base)
	for _, c := range []struct {
		key  string
		want []string
	}{{ka, []string{"a-one", "a-three", "a-two"}}, {kb, []string{"b-one", "b-two"}}} {
		for _, path := range []string{"/within?layer=tenant_sites&lng=13.41&lat=52.52&radius=5000", "/collections/tenant_sites/items"} {
			code, body, _ := callAs(t, base, c.key, path)
			if got := featureNames(t, body); code != 200 || !slices.Equal(got, c.want) {
				t.Errorf("%s: %d %v, want %v", path, code, got, c.want)
			}
		}
		code, body, _ := callAs(t, base, c.key, "/tiles/tenant_sites/12/2200/1343.mvt")
		if got := tileNames(t, body, "tenant_sites"); code != 200 || !slices.Equal(got, c.want) {
			t.Errorf("tile: %d %v, want %v", code, got, c.want)
		}
	}
	if after := replicaReads(t, base); after == before {
		t.Errorf("replica reads %s before and after: the tenants' reads did not reach the replica", after)
	}
}
