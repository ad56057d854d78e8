package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
	"github.com/redis/go-redis/v9"
)

// TestLogsHoldNoSecrets sends good and bad API keys and bearer tokens and
// checks that no secret, token or signing key reaches the service's logs.
func TestLogsHoldNoSecrets(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	const jwtSecret = "logs-test-signing-key-0123456789abcdef"
	env := map[string]string{
		"DATABASE_URL":     dbURL,
		"REDIS_URL":        testenv.Getenv(t, "TEST_REDIS_URL"),
		"JWT_HS256_SECRET": jwtSecret,
		"LOG_LEVEL":        "debug",
	}
	id := "logs-" + testenv.Prefix(t)
	secret := runCLI(t, env, "keys", "create", "--name", id, "--scopes", "proximity:read")
	token := runCLI(t, env, "token", "--sub", "logs-"+id, "--scopes", "proximity:read", "--ttl", "5m")
	const fakeKey = "gg_nobody_f4k3s3cr3tv4lu3"
	const fakeToken = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJlLWJ5dGVz"
	base, logs := startService(t, env)

	for _, h := range []struct{ name, value string }{
		{"x-api-key", secret}, {"x-api-key", fakeKey},
		{"Authorization", "Bearer " + token}, {"Authorization", "Bearer " + fakeToken},
	} {
		req, _ := http.NewRequest("GET", base+"/within?lng=13.4&lat=52.5&radius=500", nil)
		req.Header.Set(h.name, h.value)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// The access log line follows the answer.
	testenv.WaitFor(t, 5*time.Second, "four access log lines for /within", func() bool {
		return strings.Count(logs.String(), `"route":"/within"`) == 4
	})
	got := logs.String()
	for name, s := range map[string]string{
		"API key secret": secret, "unknown key": fakeKey, "token": token,
		"bad token": fakeToken, "signing key": jwtSecret,
	} {
		if strings.Contains(got, s) {
			t.Errorf("logs contain the %s %q", name, s)
		}
	}
}

// TestOneClientAddress: behind a trusted proxy, the client address that
// X-Forwarded-For names is the one authentication counts, the access log
// shows and, with X-Forwarded-Proto and -Host, TileJSON URLs are built
// from; from an untrusted peer, none of those headers counts.
func TestOneClientAddress(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	for _, tc := range []struct {
		name, trusted      string
		wantClient, wantTJ string
	}{
		// The contract proxy in front of the service dials from 127.x.y.z.
		{"TrustedProxy", "127.0.0.0/8", "198.51.100.7", "https://maps.example.org/tiles/places/{z}/{x}/{y}.mvt"},
		{"UntrustedPeer", "192.0.2.1", "127.", "http://127."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, logs := startService(t, map[string]string{
				"DATABASE_URL": dbURL, "REDIS_URL": testenv.Getenv(t, "TEST_REDIS_URL"), "TRUSTED_PROXIES": tc.trusted,
			})
			get := func(path string) *http.Response {
				req, _ := http.NewRequest("GET", base+path, nil)
				req.Header.Set("X-Forwarded-For", "198.51.100.7")
				req.Header.Set("X-Forwarded-Proto", "https")
				req.Header.Set("X-Forwarded-Host", "maps.example.org")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { resp.Body.Close() })
				return resp
			}
			if resp := get("/within?lng=13.4&lat=52.5&radius=500"); resp.StatusCode != 200 {
				t.Fatalf("/within = %d", resp.StatusCode)
			}
			var tj struct{ Tiles []string }
			if err := json.NewDecoder(get("/tiles/places.json").Body).Decode(&tj); err != nil || len(tj.Tiles) != 1 || !strings.HasPrefix(tj.Tiles[0], tc.wantTJ) {
				t.Errorf("TileJSON tiles = %v (%v), want a URL starting %s", tj.Tiles, err, tc.wantTJ)
			}
			var line map[string]any
			testenv.WaitFor(t, 5*time.Second, "the access log line of /within", func() bool {
				line = logLine(logs.String(), `"route":"/within"`)
				return line != nil
			})
			client, _ := line["client"].(string)
			identity, _ := line["identity"].(string)
			if !strings.HasPrefix(client, tc.wantClient) || identity != "ip:"+client {
				t.Errorf("access log client %q, identity %q; want client %s... and identity ip:<client>", client, identity, tc.wantClient)
			}
		})
	}
}

// logLine returns the first JSON log line of logs containing marker.
func logLine(logs, marker string) map[string]any {
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, marker) {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil {
				return m
			}
		}
	}
	return nil
}

// TestRedisKeysHoldNoSecrets: whatever credentials a request carries (a
// good key, an unknown key, a bearer token), the rate-limit keys in Redis
// name the identity (key:<id>, sub:<subject>, ip:<address>), never a
// secret or a token.
func TestRedisKeysHoldNoSecrets(t *testing.T) {
	_, dbURL := testenv.DBWithURL(t)
	redisProc := testenv.StartRedis(t) // its own Redis: every key in it is this test's
	const jwtSecret = "redis-keys-signing-key-0123456789abcdef"
	env := map[string]string{
		"DATABASE_URL": dbURL, "REDIS_URL": redisProc.URL(), "JWT_HS256_SECRET": jwtSecret,
	}
	id := "rk-" + testenv.Prefix(t)
	secret := runCLI(t, env, "keys", "create", "--name", id, "--scopes", "proximity:read,tiles:read")
	token := runCLI(t, env, "token", "--sub", "sub-"+id, "--scopes", "proximity:read", "--ttl", "5m")
	const fakeKey = "gg_nobody_f4k3s3cr3tv4lu3"
	base, _ := startService(t, env)
	for _, h := range []struct{ name, value string }{
		{"x-api-key", secret}, {"x-api-key", fakeKey}, {"Authorization", "Bearer " + token}, {"", ""},
	} {
		for _, path := range []string{"/within?lng=13.4&lat=52.5&radius=500", "/tiles/places/4/8/5.mvt"} {
			req, _ := http.NewRequest("GET", base+path, nil)
			if h.name != "" {
				req.Header.Set(h.name, h.value)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	ctx := context.Background()
	keys, err := redis.NewClient(redisProc.Options()).Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"rl:geofence:key:" + id: false, "rl:geofence:sub:sub-" + id: false}
	for _, k := range keys {
		if _, ok := want[k]; ok {
			want[k] = true
		}
		for name, s := range map[string]string{"API key secret": secret, "unknown key": fakeKey, "token": token} {
			if strings.Contains(k, s) {
				t.Errorf("Redis key %q holds the %s", k, name)
			}
		}
	}
	for k, found := range want {
		if !found {
			t.Errorf("no Redis key %s among %v", k, keys)
		}
	}
}
