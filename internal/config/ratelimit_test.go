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
		{"BadTimezone", "policies:\n  geofence:\n    timezone: Mars/Olympus\n", nil, []string{"timezone \"Mars/Olympus\""}},
		{"LocalTimezone", "policies:\n  geofence:\n    timezone: Local\n", nil, []string{"timezone \"Local\""}},
		{"BadCalendar", "", []string{"RATELIMIT_GEOFENCE", "10/1s,5/1w@calendar"}, []string{"want 1d@calendar or 1mo@calendar"}},
		{"SlidingAndCalendarDay", "policies:\n  geofence:\n    windows: 10/1d, 20/1d@calendar\n", nil, []string{"a sliding window of 1d and a calendar day"}},
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

// TestCalendarQuotasInConfig: calendar windows are written wherever
// windows are (the file's windows, tiers and identities, and
// RATELIMIT_<POLICY>), with the policy's time zone from the file.
func TestCalendarQuotasInConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ratelimit.yaml")
	file := `
policies:
  geofence:
    timezone: Europe/Berlin
    tiers:
      pro: 50/1s, 1000000/1d@calendar
    identities:
      "key:partner": 100/1s, 30000000/1mo@calendar
  exports:
    windows: 5/1m, 100/1mo@calendar
`
	if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(env(map[string]string{
		"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0",
		"RATELIMIT_CONFIG": p, "RATELIMIT_GEOFENCE": "10/1s,100000/1d@calendar",
	}))
	if err != nil {
		t.Fatal(err)
	}
	g, e := c.RateLimit["geofence"], c.RateLimit["exports"]
	for _, tc := range []struct {
		name string
		got  []ratelimit.Window
		want []ratelimit.Window
	}{
		{"geofence", g.Windows, []ratelimit.Window{{Limit: 10, Period: time.Second}, ratelimit.CalendarWindow(100000, ratelimit.Day)}},
		{"geofence pro", g.Tiers["pro"], []ratelimit.Window{{Limit: 50, Period: time.Second}, ratelimit.CalendarWindow(1000000, ratelimit.Day)}},
		{"geofence partner", g.Identities["key:partner"], []ratelimit.Window{{Limit: 100, Period: time.Second}, ratelimit.CalendarWindow(30000000, ratelimit.Month)}},
		{"exports", e.Windows, []ratelimit.Window{{Limit: 5, Period: time.Minute}, ratelimit.CalendarWindow(100, ratelimit.Month)}},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s windows (-want +got):\n%s", tc.name, diff)
		}
	}
	if g.Location == nil || g.Location.String() != "Europe/Berlin" {
		t.Errorf("geofence time zone = %v, want Europe/Berlin", g.Location)
	}
	if e.Location != nil {
		t.Errorf("exports time zone = %v, want none (UTC)", e.Location)
	}
	if rl := c.RateLimit["rate-limit"]; !cmp.Equal(rl.Windows, []ratelimit.Window{{Limit: 60, Period: time.Minute}}) {
		t.Errorf("rate-limit windows = %v, want the built-in 60/1m", rl.Windows)
	}
}

// TestShippedPolicyFile: configs/ratelimit.yaml loads, and restates the
// built-in policies as they are.
func TestShippedPolicyFile(t *testing.T) {
	c, err := Load(env(map[string]string{
		"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0",
		"RATELIMIT_CONFIG": "../../configs/ratelimit.yaml",
	}))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range DefaultPolicies() {
		got, ok := c.RateLimit[name]
		if !ok || !cmp.Equal(got.Windows, want.Windows) || got.Algorithm != want.Algorithm || got.Failure != want.Failure {
			t.Errorf("policy %s from the file = %+v, want the built-in %+v", name, got, want)
		}
	}
}
