package ratelimit

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseWindows(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []Window
		wantErr string
	}{
		{in: "10/1s", want: []Window{{10, time.Second}}},
		{in: "600/1m, 10/1s", want: []Window{{10, time.Second}, {600, time.Minute}}},
		{in: "5/s,100/h,1000/d", want: []Window{{5, time.Second}, {100, time.Hour}, {1000, 24 * time.Hour}}},
		{in: "10/90s", want: []Window{{10, 90 * time.Second}}},
		{in: "", wantErr: "no windows"},
		{in: "10", wantErr: "want LIMIT/PERIOD"},
		{in: "0/1s", wantErr: "at least 1"},
		{in: "x/1s", wantErr: "whole number"},
		{in: "10/500ms", wantErr: "whole number of seconds"},
		{in: "10/1s,20/1s", wantErr: "two windows of 1s"},
		{in: "10/8d", wantErr: "at most 7d"},
		{in: "10/fortnight", wantErr: "want a duration"},
	} {
		got, err := ParseWindows(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseWindows(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseWindows(%q) error = %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseWindows(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestLoadPolicies(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	t.Run("defaults", func(t *testing.T) {
		ps, err := LoadPolicies(nil, env())
		if err != nil {
			t.Fatal(err)
		}
		if got := ps["geofence"].Windows; !cmp.Equal(got, []Window{{10, time.Second}}) {
			t.Errorf("geofence windows = %v, want 10/1s", got)
		}
		for _, name := range []string{"tiles", "tiles-cached"} {
			if _, ok := ps[name]; !ok {
				t.Errorf("no built-in %s policy", name)
			}
		}
	})
	t.Run("file and env", func(t *testing.T) {
		file := []byte(`
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
`)
		ps, err := LoadPolicies(file, env("RATELIMIT_GEOFENCE", "10/1s,600/1m", "RATELIMIT_TILES_CACHED", "5000/1s"))
		if err != nil {
			t.Fatal(err)
		}
		g := ps["geofence"]
		if g.Failure != FailClosed || g.Concurrency != 4 || g.Algorithm != Log {
			t.Errorf("geofence = %+v", g)
		}
		if want := []Window{{10, time.Second}, {600, time.Minute}}; !cmp.Equal(g.Windows, want) {
			t.Errorf("geofence windows = %v, want %v from the environment", g.Windows, want)
		}
		if got := compile(g).windowsFor("pro", "key:x").ws; !cmp.Equal(got, []Window{{50, time.Second}, {3000, time.Minute}}) {
			t.Errorf("pro tier windows = %v", got)
		}
		if got := compile(g).windowsFor("pro", "key:partner").ws; !cmp.Equal(got, []Window{{100, time.Second}}) {
			t.Errorf("identity override = %v", got)
		}
		if got := ps["tiles-cached"].Windows; !cmp.Equal(got, []Window{{5000, time.Second}}) {
			t.Errorf("tiles-cached windows = %v", got)
		}
		if e := ps["exports"]; !e.Shadow || e.Name != "exports" || e.Failure != FailLocal {
			t.Errorf("exports = %+v", e)
		}
	})
	for _, tc := range []struct {
		name, file string
		env        []string
		wantErr    []string
	}{
		{"unknown field", "policies:\n  geofence:\n    limit: 5\n", nil, []string{"unknown field"}},
		{"bad algorithm", "policies:\n  geofence:\n    algorithm: gcra\n", nil, []string{"algorithm \"gcra\""}},
		{"bad failure", "policies:\n  geofence:\n    failure: maybe\n", nil, []string{"failure \"maybe\""}},
		{"bad name", "policies:\n  Geo_Fence:\n    windows: 1/1s\n", nil, []string{"policy name \"Geo_Fence\""}},
		{"log too large", "policies:\n  big:\n    windows: 200000/1s\n", nil, []string{"use algorithm: counter"}},
		{"no windows", "policies:\n  empty:\n    failure: open\n", nil, []string{"no windows"}},
		{"bad env and bad tier", "policies:\n  geofence:\n    tiers:\n      free: 5/1x\n", []string{"RATELIMIT_TILES", "ten/1s"},
			[]string{"tier free", "RATELIMIT_TILES=\"ten/1s\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadPolicies([]byte(tc.file), env(tc.env...))
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
