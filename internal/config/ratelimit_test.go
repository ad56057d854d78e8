package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/ratelimit"
)

func TestLoadPolicies(t *testing.T) {
	load := func(t *testing.T, file string, kv ...string) (map[string]ratelimit.Policy, error) {
		t.Helper()
		m := map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0"}
		if file != "" {
			p := filepath.Join(t.TempDir(), "ratelimit.yaml")
			if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
				t.Fatal(err)
			}
			m["RATELIMIT_CONFIG"] = p
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		c, err := Load(env(m))
		return c.RateLimit, err
	}
	t.Run("Defaults", func(t *testing.T) {
		ps, err := load(t, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := ps["geofence"].Windows; !cmp.Equal(got, []ratelimit.Window{{Limit: 10, Period: time.Second}}) {
			t.Errorf("geofence windows = %v, want 10/1s", got)
		}
		for _, name := range []string{"tiles", "tiles-cached"} {
			if _, ok := ps[name]; !ok {
				t.Errorf("no built-in %s policy", name)
			}
		}
	})
	t.Run("FileAndEnv", func(t *testing.T) {
		ps, err := load(t, `
policies:
  geofence:
    failure: closed
    concurrency: 4
    tiers:
      pro: 50/1s, 3000/1m
    identities:
      "key:partner": 100/1s
  exports:
    windows: 5/1m
    shadow: true
`, "RATELIMIT_GEOFENCE", "10/1s,600/1m", "RATELIMIT_TILES_CACHED", "5000/1s")
		if err != nil {
			t.Fatal(err)
		}
		g := ps["geofence"]
		if g.Failure != ratelimit.FailClosed || g.Concurrency != 4 || g.Algorithm != ratelimit.Log {
			t.Errorf("geofence = %+v", g)
		}
		if want := []ratelimit.Window{{Limit: 10, Period: time.Second}, {Limit: 600, Period: time.Minute}}; !cmp.Equal(g.Windows, want) {
			t.Errorf("geofence windows = %v, want %v from the environment", g.Windows, want)
		}
		if got, want := g.Tiers["pro"], []ratelimit.Window{{Limit: 50, Period: time.Second}, {Limit: 3000, Period: time.Minute}}; !cmp.Equal(got, want) {
			t.Errorf("pro tier windows = %v, want %v", got, want)
		}
		if got, want := g.Identities["key:partner"], []ratelimit.Window{{Limit: 100, Period: time.Second}}; !cmp.Equal(got, want) {
			t.Errorf("identity override = %v, want %v", got, want)
		}
		if got := ps["tiles-cached"].Windows; !cmp.Equal(got, []ratelimit.Window{{Limit: 5000, Period: time.Second}}) {
			t.Errorf("tiles-cached windows = %v", got)
		}
		if e := ps["exports"]; !e.Shadow || e.Name != "exports" || e.Failure != ratelimit.FailLocal {
			t.Errorf("exports = %+v", e)
		}
	})
	for _, tc := range []struct {
		name, file string
		env        []string
		wantErr    []string
	}{
		{"UnknownField", "policies:\n  geofence:\n    limit: 5\n", nil, []string{"unknown field"}},
		{"BadAlgorithm", "policies:\n  geofence:\n    algorithm: gcra\n", nil, []string{"algorithm \"gcra\""}},
		{"BadFailure", "policies:\n  geofence:\n    failure: maybe\n", nil, []string{"failure \"maybe\""}},
		{"BadName", "policies:\n  Geo_Fence:\n    windows: 1/1s\n", nil, []string{"policy name \"Geo_Fence\""}},
		{"LogTooLarge", "policies:\n  big:\n    windows: 200000/1s\n", nil, []string{"use algorithm: counter"}},
		{"NoWindows", "policies:\n  empty:\n    failure: open\n", nil, []string{"no windows"}},
		{"BadEnvAndBadTier", "policies:\n  geofence:\n    tiers:\n      free: 5/1x\n", []string{"RATELIMIT_TILES", "ten/1s"},
			[]string{"tier free", "RATELIMIT_TILES=\"ten/1s\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.file, tc.env...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
