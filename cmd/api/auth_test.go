package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/testenv"
)

// runCLI runs one api subcommand and returns its stdout.
func runCLI(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(context.Background(), args, envMap(env), &out, &errOut); err != nil {
		t.Fatalf("api %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// TestAuthEndToEnd provisions keys and a token with the CLI, starts the
// service on the same database, and checks who gets through /within: the
// limiter counts an API key under rl:geofence:key:<id>; missing, wrong,
// under-scoped and revoked credentials are refused.
func TestAuthEndToEnd(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	id := "e2e-" + testenv.Prefix(t)
	const jwtSecret = "e2e-secret-0123456789abcdef0123456789"
	env := map[string]string{
		"DATABASE_URL":          dbURL,
		"REDIS_URL":             testenv.Getenv(t, "TEST_REDIS_URL"),
		"JWT_HS256_SECRET":      jwtSecret,
		"AUTH_ANONYMOUS_SCOPES": "none",
		"API_KEY_CACHE_TTL":     "300ms",
	}
	secret := runCLI(t, env, "keys", "create", "--name", id, "--scopes", "proximity:read,geofences:read")
	if !strings.HasPrefix(secret, "gg_"+id+"_") {
		t.Fatalf("keys create printed %q, want a gg_%s_ secret", secret, id)
	}
	tilesOnly := runCLI(t, env, "keys", "create", "--name", id+"-tiles", "--scopes", "tiles:read")
	if list := runCLI(t, env, "keys", "list"); !strings.Contains(list, id) || strings.Contains(list, secret) {
		t.Errorf("keys list = %q, want the id and never the secret", list)
	}
	token := runCLI(t, env, "token", "--sub", "alice-"+id, "--scopes", "proximity:read", "--ttl", "5m")
	paris := runCLI(t, env, "token", "--sub", "paris", "--scopes", "all", "--ttl", "5m", "--bbox", "2,48,3,49")

	base, _ := startService(t, env)
	within := base + "/within?lng=13.4&lat=52.5&radius=500"
	get := func(header, value string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", within, nil)
		if header != "" {
			req.Header.Set(header, value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name, header, value string
		want                int
	}{
		{"APIKey", "x-api-key", secret, 200},
		{"Token", "Authorization", "Bearer " + token, 200},
		{"NoCredentials", "", "", 401},
		{"WrongKey", "x-api-key", secret + "x", 401},
		{"BadToken", "Authorization", "Bearer " + token + "x", 401},
		{"KeyWithoutScope", "x-api-key", tilesOnly, 403},
		{"TokenOutsideSpatialScope", "Authorization", "Bearer " + paris, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(tc.header, tc.value)
			if resp.StatusCode != tc.want {
				t.Fatalf("GET /within with %s = %d, want %d", tc.name, resp.StatusCode, tc.want)
			}
			if tc.want == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
		})
	}

	rdb := testenv.Redis(t)
	if n, err := rdb.Exists(context.Background(), "rl:geofence:key:"+id).Result(); err != nil || n != 1 {
		t.Errorf("EXISTS rl:geofence:key:%s = %d, %v; want 1", id, n, err)
	}

	runCLI(t, env, "keys", "revoke", id)
	deadline := time.Now().Add(2 * time.Second)
	for get("x-api-key", secret).StatusCode != http.StatusUnauthorized {
		if time.Now().After(deadline) {
			t.Fatalf("revoked key still accepted 2s after revoke (API_KEY_CACHE_TTL 300ms)")
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
}

func TestKeysAndTokenCLIErrors(t *testing.T) {
	env := map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "JWT_HS256_SECRET": "short"}
	noSecret := map[string]string{"DATABASE_URL": env["DATABASE_URL"]}
	for _, tc := range []struct {
		args []string
		env  map[string]string // nil: env
		want string
	}{
		{[]string{"keys"}, nil, "subcommand is required"},
		{[]string{"keys", "rename"}, nil, "unknown subcommand"},
		{[]string{"keys", "rotate"}, nil, "exactly one key id"},
		{[]string{"keys", "rotate", "--grace", "a day", "x"}, nil, "invalid value"},
		{[]string{"keys", "audit", "x"}, nil, "use --key ID"},
		{[]string{"keys", "audit", "--limit", "0"}, nil, "--limit must be from 1"},
		{[]string{"keys", "create", "--scopes", "all"}, nil, "--name and --scopes are required"},
		{[]string{"keys", "create", "--name", "x", "--scopes", "bogus"}, nil, `unknown scope "bogus"`},
		{[]string{"keys", "create", "--name", "x", "--scopes", "all", "--bbox", "1,2,3"}, nil, "--bbox must be"},
		{[]string{"keys", "create", "--name", "x", "--scopes", "all", "--bbox", "3,2,3,4"}, nil, "spatial scope"},
		{[]string{"keys", "create", "--name", "x", "--scopes", "all", "--bbox", "1,2,3,4", "--scope-geojson", "f"}, nil, "not both"},
		{[]string{"keys", "create", "--name", "x", "--scopes", "all", "--layers", ""}, nil, "--layers needs at least one layer id or pattern"},
		{[]string{"keys", "create", "--name", "x", "--scopes", "all", "--layers", " , "}, nil, "--layers needs at least one layer id or pattern"},
		{[]string{"keys", "create", "--name", "x", "--scopes", "all", "--layers", "roads,a b"}, nil, `entry 2 ("a b") is not a layer id or pattern`},
		{[]string{"keys", "create", "--name", "x", "--scopes", "all", "--layers", "zone[0-"}, nil, "is not a layer id or pattern"},
		{[]string{"keys", "revoke"}, nil, "exactly one key id"},
		{[]string{"token", "--sub", "a", "--scopes", "all"}, nil, "positive --ttl"},
		// A bad setting is the configuration's error, as for every command.
		{[]string{"token", "--sub", "a", "--scopes", "all", "--ttl", "1h"}, nil, `JWT_HS256_SECRET="(hidden)": must be at least 32 characters`},
		{[]string{"token", "--sub", "a", "--scopes", "all", "--ttl", "1h"}, noSecret, "JWT_HS256_SECRET must be set"},
		{[]string{"migrate"}, map[string]string{}, "DATABASE_URL"},
		{[]string{"keys", "list"}, map[string]string{"DATABASE_URL": env["DATABASE_URL"], "DB_MAX_CONNS": "lots"}, "DB_MAX_CONNS"},
	} {
		var out, errOut bytes.Buffer
		e := tc.env
		if e == nil {
			e = env
		}
		err := run(context.Background(), tc.args, envMap(e), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("api %s = %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestKeysLayersCLI: keys create --layers stores the key's layers, which
// list shows and a request with the key carries (every layer, "all", for a
// key created without); api token --layers puts them into the claim.
func TestKeysLayersCLI(t *testing.T) {
	db, dbURL := testenv.DBWithURL(t)
	ctx := context.Background()
	const jwtSecret = "layers-secret-0123456789abcdef0123456"
	env := map[string]string{"DATABASE_URL": dbURL, "JWT_HS256_SECRET": jwtSecret}
	some := runCLI(t, env, "keys", "create", "--name", "some", "--scopes", "tiles:read", "--layers", "places, transit__*,places")
	every := runCLI(t, env, "keys", "create", "--name", "every", "--scopes", "tiles:read")

	keys := auth.NewKeyCache(auth.NewStore(db), time.Minute, 10)
	tv, err := auth.NewTokenVerifier(auth.TokenOptions{HS256Secret: []byte(jwtSecret)})
	if err != nil {
		t.Fatal(err)
	}
	layersOf := func(header, value string) []string {
		t.Helper()
		req, _ := http.NewRequest("GET", "/tiles", nil)
		req.Header.Set(header, value)
		id, err := auth.NewAuthenticator(auth.Options{Keys: keys, Tokens: tv}).Authenticate(ctx, req)
		if err != nil {
			t.Fatalf("Authenticate(%s) = %v", header, err)
		}
		return id.Layers
	}
	token := runCLI(t, env, "token", "--sub", "alice", "--scopes", "tiles:read", "--ttl", "5m", "--layers", "roads")
	for _, tc := range []struct {
		name, header, value string
		want                []string
	}{
		{"KeyWithLayers", "x-api-key", some, []string{"places", "transit__*"}},
		{"KeyWithout", "x-api-key", every, nil},
		{"Token", "Authorization", "Bearer " + token, []string{"roads"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := layersOf(tc.header, tc.value)
			if diff := cmp.Diff(tc.want, got); diff != "" || (tc.want == nil) != (got == nil) {
				t.Errorf("layers of %s = %q, want %q", tc.name, got, tc.want)
			}
		})
	}

	list := strings.Split(runCLI(t, env, "keys", "list"), "\n")
	if len(list) != 3 || !strings.Contains(list[0], "LAYERS") {
		t.Fatalf("keys list = %q, want a header with LAYERS and two keys", list)
	}
	for _, tc := range []struct{ line, id, want string }{{list[1], "every", "all"}, {list[2], "some", "places,transit__*"}} {
		if f := strings.Fields(tc.line); len(f) < 6 || f[0] != tc.id || f[5] != tc.want {
			t.Errorf("keys list line %q: layers column = %q, want %s %s", tc.line, f, tc.id, tc.want)
		}
	}
}

// TestSpatialScopeOnFenceWrites checks that a key confined to a box
// around Berlin may write fences inside it only: a fence elsewhere or one
// straddling the box edge is refused with 403 on create and on update, and
// a refused update leaves the fence as it was.
func TestSpatialScopeOnFenceWrites(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	env := map[string]string{
		"DATABASE_URL": dbURL,
		"REDIS_URL":    testenv.Getenv(t, "TEST_REDIS_URL"),
	}
	key := runCLI(t, env, "keys", "create", "--name", "berlin-"+testenv.Prefix(t), "--scopes", "all", "--bbox", "13,52,14,53")
	base, _ := startService(t, env)

	fence := func(w, s, e, n float64) string {
		return fmt.Sprintf(`{"type":"Feature","properties":{"name":"f"},"geometry":{"type":"Polygon","coordinates":[[[%[1]g,%[2]g],[%[3]g,%[2]g],[%[3]g,%[4]g],[%[1]g,%[4]g],[%[1]g,%[2]g]]]}}`, w, s, e, n)
	}
	inside, paris, straddling := fence(13.3, 52.4, 13.5, 52.6), fence(2.2, 48.8, 2.4, 48.9), fence(13.9, 52.4, 14.1, 52.6)

	status, _, body := call(t, "POST", base+"/geofences", key, inside)
	if status != http.StatusCreated {
		t.Fatalf("POST a fence inside the scope = %d %.300s, want 201", status, body)
	}
	var created struct {
		ID any `json:"id"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.ID == nil {
		t.Fatalf("created fence %s: no id (%v)", body, err)
	}
	fenceURL := fmt.Sprintf("%s/geofences/%v", base, created.ID)

	for _, tc := range []struct {
		name, method, url, body string
	}{
		{"CreateElsewhere", "POST", base + "/geofences", paris},
		{"CreateStraddling", "POST", base + "/geofences", straddling},
		{"UpdateElsewhere", "PUT", fenceURL, paris},
		{"UpdateStraddling", "PUT", fenceURL, straddling},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := call(t, tc.method, tc.url, key, tc.body)
			var got struct{ Detail string }
			_ = json.Unmarshal(body, &got)
			if status != http.StatusForbidden || !strings.Contains(got.Detail, "spatial scope") {
				t.Errorf("%s = %d %.300s, want 403 naming the spatial scope", tc.name, status, body)
			}
		})
	}

	status, _, body = call(t, "GET", fenceURL, key, "")
	if status != http.StatusOK || !strings.Contains(string(body), "13.3") || strings.Contains(string(body), "2.2") {
		t.Errorf("GET the fence after refused updates = %d %.300s, want it unchanged inside Berlin", status, body)
	}
}
