package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/testenv"
)

// The routes that read no layer and spend nothing: they never ask the
// gate. A new route is gated unless it is added here, knowingly.
var ungatedRoutes = []string{
	"GET /healthz", "GET /readyz", "GET /metrics",
	"GET /static/*filepath", "GET /favicon.ico", "GET /openapi.json", "GET /api", "GET /docs", "GET /redoc", "GET /docs/assets/*filepath",
	"PUT /geofences/contains", "DELETE /geofences/contains",
	"GET /admin/keys", "POST /admin/keys", "GET /admin/keys/{id}", "PATCH /admin/keys/{id}", "DELETE /admin/keys/{id}",
	"POST /admin/keys/{id}/rotate", "GET /admin/keys/{id}/usage", "GET /admin/tiers", "GET /admin/tiers/{tier}",
	"PUT /admin/tiers/{tier}", "DELETE /admin/tiers/{tier}", "GET /admin/audit",
	"GET /admin/dead-letters", "POST /admin/dead-letters/{id}/replay", "DELETE /admin/dead-letters/{id}",
}

// The gated routes that read no layer of their own: they answer a caller
// refused some layers, showing it only the layers it may read.
var serviceRoutes = []string{
	"GET /", "GET /layers", "GET /rate_limit", "GET /conformance", "GET /collections", "GET /tiles",
	"GET /tileMatrixSets", "GET /tileMatrixSets/{tileMatrixSetId}", "GET /styles", "GET /styles/{styleId}",
}

// The gated routes that read no layer but act on the caller's own devices
// and subscriptions: a caller refused some layers may still report
// positions (which tell it nothing of those layers), list what it owns
// and delete a subscription it can no longer hear.
var ownRoutes = []string{
	"POST /positions", "GET /positions", "GET /devices", "GET /subscriptions", "DELETE /subscriptions/{id}",
}

// walk is one request made from a route of the table.
type walk struct {
	name, method, url, body string
}

// walkParams are the values a walk puts into a route's path and query.
type walkParams struct {
	layer   string // the layer of routes that name one
	polygon string // the layer of the containment routes ("": the fences)
	fence   string // a fence id
	feature string // a feature id of layer
	sub     string // a subscription id of the caller
	// writable is the layer of the routes that write features, and
	// written its feature they replace, update and delete.
	writable, written string
}

// walkOf is the request that exercises route rt with p.
func walkOf(base string, rt route, p walkParams) walk {
	name := rt.method + " " + templatePath(rt.path)
	path := rt.path
	if strings.HasPrefix(path, "/subscriptions/") {
		path = strings.Replace(path, ":id", p.sub, 1)
	}
	for _, r := range [][2]string{
		{":collectionId", p.layer}, {":featureId", p.feature}, {":id", p.fence},
		{":layer/:z/:x/:y", p.layer + "/8/137/83.mvt"}, {":layer", p.layer + ".json"},
		{":tileMatrixSetId/:tileMatrix/:tileRow/:tileCol", "WebMercatorQuad/8/83/137"},
		{":tileMatrixSetId", "WebMercatorQuad"}, {":styleId", "default"},
	} {
		path = strings.Replace(path, r[0], r[1], 1)
	}
	if strings.HasPrefix(rt.path, "/collections/:collectionId/items") && rt.method != "GET" {
		path = strings.Replace(strings.Replace(rt.path, ":collectionId", p.writable, 1), ":featureId", p.written, 1)
	}
	w := walk{name: name, method: rt.method, url: base + path}
	switch name {
	case "POST /collections/{collectionId}/items":
		w.body = `{"type":"Feature","id":2,"geometry":{"type":"Point","coordinates":[13.4,52.5]},"properties":{"name":"walked"}}`
	case "PUT /collections/{collectionId}/items/{featureId}":
		w.body = `{"type":"Feature","geometry":{"type":"Point","coordinates":[13.41,52.5]},"properties":{"name":"replaced"}}`
	case "PATCH /collections/{collectionId}/items/{featureId}":
		w.body = `{"properties":{"name":"patched"}}`
	case "GET /within":
		w.url += "?lng=13.4&lat=52.5&radius=500&layer=" + p.layer
	case "GET /geofences/contains":
		w.url += "?lng=13.4&lat=52.5&layer=" + p.polygon
	case "POST /geofences/contains":
		w.url += "?layer=" + p.polygon
		w.body = `{"points":[[13.4,52.5]]}`
	case "POST /geofences", "PUT /geofences/{id}":
		w.body = walkFence
	case "POST /positions":
		w.body = `{"device":"walker","time":"2025-01-01T00:00:00Z","lng":13.4,"lat":52.5}`
	case "GET /positions":
		w.url += "?device=walker"
	case "POST /subscriptions":
		w.body = `{"layer":"` + p.polygon + `","kinds":["enter"]}`
	case "PATCH /subscriptions/{id}":
		w.body = `{"kinds":["enter","exit"]}`
	case "GET /events":
		w.url += "?subscription=" + p.sub
	case "GET /events/stream":
		// HEAD: the stream's answer without the stream, which would
		// last until the walk's client gave up.
		w.method = "HEAD"
		w.url += "?subscription=" + p.sub
	}
	return w
}

const walkFence = `{"type":"Feature","properties":{"name":"walk"},"geometry":{"type":"Polygon","coordinates":[[[13,52],[14,52],[14,53],[13,53],[13,52]]]}}`

// TestGateWalksEveryRoute walks every row of the route table: as a caller
// with every right, each gated route answers and asks the gate; as a key
// limited to places, a token limited to places and a caller without the
// scope the layer file asks for geofences, no route serves or changes the
// fences or names them, and a refused layer gets the same 403 whether it
// exists or not.
func TestGateWalksEveryRoute(t *testing.T) {
	db, dbURL := testenv.DBWithURL(t)
	ctx := context.Background()
	var place int64
	if err := db.QueryRow(ctx, `INSERT INTO places (name, geom) VALUES ('Berlin', ST_SetSRID(ST_Point(13.4, 52.5), 4326)) RETURNING id`).Scan(&place); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "layers.yaml")
	// A table to write features to: the fences' scope is asked of its
	// writes too, so that a caller refused the fences is refused it.
	if _, err := db.Exec(ctx, `CREATE TABLE public.walk_sites (id int PRIMARY KEY, name text, geom geometry(Point, 4326));
		INSERT INTO public.walk_sites VALUES (1, 'one', ST_SetSRID(ST_Point(13.4, 52.5), 4326))`); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("layers:\n  geofences:\n    scopes: [admin]\n  walk_sites:\n    write: true\n    scopes: [admin]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "walk-secret-0123456789abcdef0123456789"
	env := map[string]string{
		"DATABASE_URL": dbURL, "LAYERS_CONFIG": file, "JWT_HS256_SECRET": secret,
		"AUTH_ANONYMOUS_SCOPES": "none",
		"RATELIMIT_GEOFENCE":    "1000/1s", "RATELIMIT_FEATURES": "1000/1s",
	}
	readers := "proximity:read,geofences:read,geofences:write,tiles:read,features:read,features:write,positions:write,events:read,events:write"
	full := runCLI(t, env, "keys", "create", "--name", "walk-full", "--scopes", "all")
	limited := runCLI(t, env, "keys", "create", "--name", "walk-limited", "--scopes", "all", "--layers", "places")
	unscoped := runCLI(t, env, "keys", "create", "--name", "walk-unscoped", "--scopes", readers)
	token := runCLI(t, env, "token", "--sub", "walker", "--scopes", readers+",admin", "--ttl", "10m", "--layers", "places")
	base, logs := startService(t, env)
	rs := routes(&services{})

	send := func(w walk, header, value string) (int, string) {
		t.Helper()
		code, _, body := callWith(t, w.method, w.url, w.body, header, value)
		return code, string(body)
	}
	fenceOf := func() string {
		t.Helper()
		code, body := send(walk{method: "POST", url: base + "/geofences", body: walkFence}, "x-api-key", full)
		var f struct{ ID int64 }
		if err := json.Unmarshal([]byte(body), &f); code != 201 || err != nil {
			t.Fatalf("POST /geofences = %d %s", code, body)
		}
		return strconv.FormatInt(f.ID, 10)
	}
	kept, doomed := fenceOf(), fenceOf()
	// Each caller's subscriptions to the fences, one to keep and one to
	// delete, made as if before its layers were narrowed.
	subOf := func(owner string) string {
		t.Helper()
		var id string
		if err := db.QueryRow(ctx, `INSERT INTO event_subscriptions (owner, layer, kinds, secret)
VALUES ($1, 'geofences', '{enter}', 'whsec_x') RETURNING id::text`, owner).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	subs := map[string][2]string{}
	for _, owner := range []string{"key:walk-full", "key:walk-limited", "key:walk-unscoped", "sub:walker"} {
		subs[owner] = [2]string{subOf(owner), subOf(owner)}
	}

	var gated []route
	for _, rt := range rs {
		name := rt.method + " " + templatePath(rt.path)
		if rt.policy == ungated {
			if !slices.Contains(ungatedRoutes, name) {
				t.Errorf("%s does not go through the gate: every route that may read a layer or spend a policy must", name)
			}
			continue
		}
		gated = append(gated, rt)
	}

	t.Run("Full", func(t *testing.T) {
		for _, rt := range gated {
			p := walkParams{layer: "places", polygon: "geofences", fence: kept, feature: strconv.FormatInt(place, 10), sub: subs["key:walk-full"][0],
				writable: "walk_sites", written: "1"}
			if rt.method == "DELETE" {
				p.fence, p.sub = doomed, subs["key:walk-full"][1]
			}
			w := walkOf(base, rt, p)
			if code, body := send(w, "x-api-key", full); code >= 300 {
				t.Errorf("%s = %d %s, want success", w.name, code, body)
			}
		}
		if strings.Contains(logs.String(), "without asking the gate") {
			t.Errorf("a gated route answered without asking the gate:\n%s", logs)
		}
		if strings.Contains(logs.String(), "its row does not say it reads") {
			t.Errorf("a route named layers its row does not say it reads:\n%s", logs)
		}
	})

	fences := func() string {
		t.Helper()
		var s string
		if err := db.QueryRow(ctx, `SELECT string_agg(id || ' ' || name || ' ' || md5(ST_AsEWKB(geom)::text), ', ' ORDER BY id) FROM geofences`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := fences()

	refused := []struct {
		name, header, value string
		owner               string
		restricted          bool // refused layers outside its list, known or not
	}{
		{"LimitedKey", "x-api-key", limited, "key:walk-limited", true},
		{"LimitedToken", "Authorization", "Bearer " + token, "sub:walker", true},
		{"LayerFileScope", "x-api-key", unscoped, "key:walk-unscoped", false},
	}
	for _, who := range refused {
		t.Run(who.name, func(t *testing.T) {
			for _, rt := range gated {
				p := walkParams{layer: "geofences", polygon: "geofences", fence: kept, feature: "1", sub: subs[who.owner][0],
					writable: "walk_sites", written: "1"}
				if rt.method == "DELETE" {
					p.sub = subs[who.owner][1]
				}
				w := walkOf(base, rt, p)
				code, body := send(w, who.header, who.value)
				if slices.Contains(ownRoutes, w.name) {
					if code != 403 && code >= 300 {
						t.Errorf("%s = %d %s, want 403 (no scope) or success", w.name, code, body)
					}
					continue
				}
				if slices.Contains(serviceRoutes, w.name) {
					if code != 200 || strings.Contains(body, `"geofences"`) || strings.Contains(body, "s/geofences") {
						t.Errorf("%s = %d %s, want 200 naming no fence layer", w.name, code, body)
					}
					continue
				}
				if code != 403 {
					t.Errorf("%s = %d %s, want 403", w.name, code, body)
					continue
				}
				// The refusal says what was refused: a write on the
				// routes that change the layer, a read on the others.
				said, doing := "read", "Reading"
				if rt.scope == auth.ScopeGeofencesWrite || rt.scope == auth.ScopeFeaturesWrite {
					said, doing = "write", "Writing"
				}
				if w.method != "HEAD" && !strings.Contains(body, "may not "+said+" layer") && !strings.Contains(body, doing+" layer") {
					t.Errorf("%s = %s, want the refusal to say the caller may not %s the layer", w.name, body, said)
				}
				if !who.restricted || !strings.Contains(rt.path, ":") && !strings.Contains(w.url, "layer=") {
					continue
				}
				// The same answer for a layer that does not exist.
				u := walkOf(base, rt, walkParams{layer: "no_such_layer", polygon: "no_such_layer", fence: kept, feature: "1", sub: p.sub,
					writable: "no_such_layer", written: "1"})
				ucode, ubody := send(u, who.header, who.value)
				if ucode != 403 || strings.ReplaceAll(strings.ReplaceAll(ubody, "no_such_layer", "geofences"), "walk_sites", "geofences") != strings.ReplaceAll(body, "walk_sites", "geofences") {
					t.Errorf("%s of an unknown layer = %d %s, want the same as for a refused one: %d %s", u.name, ucode, ubody, code, body)
				}
			}
		})
	}

	// Nothing the refused callers sent changed the fences.
	if got := fences(); got != before {
		t.Errorf("fences after the refused walks: %s, want %s as before them", got, before)
	}
}
