package config

import (
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/events"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaults(t *testing.T) {
	c, err := Load(env(map[string]string{
		"DATABASE_URL": "postgres://u@localhost/db",
		"REDIS_URL":    "redis://localhost:6379/0",
	}))
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	if c.Server.Port != 8000 {
		t.Errorf("Port = %d, want 8000", c.Server.Port)
	}
	if c.DB.QueryTimeout != 2*time.Second {
		t.Errorf("QueryTimeout = %v, want 2s", c.DB.QueryTimeout)
	}
	if !c.DB.MigrateOnStart {
		t.Errorf("MigrateOnStart = false, want true")
	}
	if c.Redis.Pipeline != 16 {
		t.Errorf("Redis.Pipeline = %d, want 16", c.Redis.Pipeline)
	}
	if want := (events.Keep{Events: 720 * time.Hour}); c.Events.Keep != want {
		t.Errorf("Events.Keep = %+v, want %+v (positions for ever, events 30 days)", c.Events.Keep, want)
	}
}

func TestLoadRetention(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want time.Duration
		bad  bool
	}{
		{"EVENTS_POSITIONS_RETENTION", "720h", 720 * time.Hour, false},
		{"EVENTS_POSITIONS_RETENTION", "0", 0, false},
		{"EVENTS_POSITIONS_RETENTION", "-1h", 0, true},
		{"EVENTS_POSITIONS_RETENTION", "a month", 0, true},
		{"EVENTS_RETENTION", "2160h", 2160 * time.Hour, false},
		{"EVENTS_RETENTION", "0", 0, false},
		{"EVENTS_RETENTION", "-5m", 0, true},
	} {
		c, err := Load(env(map[string]string{
			"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0",
			tc.name: tc.in,
		}))
		if tc.bad {
			if err == nil || !strings.Contains(err.Error(), tc.name) {
				t.Errorf("%s=%q: Load() error = %v, want one naming it", tc.name, tc.in, err)
			}
			continue
		}
		got := c.Events.Keep.Positions
		if tc.name == "EVENTS_RETENTION" {
			got = c.Events.Keep.Events
		}
		if err != nil || got != tc.want {
			t.Errorf("%s=%q: got %v, %v; want %v", tc.name, tc.in, got, err, tc.want)
		}
	}
}

func TestLoadNamesEveryBadSetting(t *testing.T) {
	_, err := Load(env(map[string]string{
		"DATABASE_URL":     "mysql://u@localhost/db",
		"REDIS_URL":        "redis://:topsecret@%zz",
		"PORT":             "70000",
		"DB_QUERY_TIMEOUT": "-1s",
		"LOG_LEVEL":        "loud",
		"MIGRATE_ON_START": "maybe",
		"REDIS_PIPELINE":   "0",
	}))
	if err == nil {
		t.Fatal("Load() = nil error, want one")
	}
	for _, want := range []string{"DATABASE_URL", "REDIS_URL", "PORT", "DB_QUERY_TIMEOUT", "LOG_LEVEL", "MIGRATE_ON_START", "REDIS_PIPELINE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Load() error lacks %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Errorf("Load() error leaks a password:\n%v", err)
	}
}

func TestPprofAddr(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		want    string
		wantErr string
	}{
		{"OffByDefault", "", "", ""},
		{"Loopback", "127.0.0.1:6060", "127.0.0.1:6060", ""},
		{"LoopbackIPv6", "[::1]:6060", "[::1]:6060", ""},
		{"HostName", "localhost:6060", "localhost:6060", ""},
		{"EveryInterface", ":6060", ":6060", ""},
		{"NoPort", "127.0.0.1", "", "not host:port"},
		{"PortOnlyNumber", "6060", "", "not host:port"},
		{"PortNotNumeric", "127.0.0.1:http", "", "port must be a number"},
		{"PortZero", "127.0.0.1:0", "127.0.0.1:0", ""},
		{"PortTooLarge", "127.0.0.1:70000", "", "port must be a number"},
		{"BadHost", "local host:6060", "", "host must be"},
		{"URL", "http://127.0.0.1:6060", "", "not host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(env(map[string]string{
				"DATABASE_URL": "postgres://u@localhost/db",
				"REDIS_URL":    "redis://localhost:6379/0",
				"PPROF_ADDR":   tt.value,
			}))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "PPROF_ADDR") || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Load(PPROF_ADDR=%q) error = %v, want one naming PPROF_ADDR with %q", tt.value, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load(PPROF_ADDR=%q) error = %v", tt.value, err)
			}
			if c.Server.PprofAddr != tt.want {
				t.Errorf("PprofAddr = %q, want %q", c.Server.PprofAddr, tt.want)
			}
		})
	}
}

func TestStatementTimeout(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    time.Duration
		wantErr string
	}{
		{"DefaultAboveRenderTimeout", nil, 12 * time.Second, ""},
		{"DefaultAboveQueryTimeout", map[string]string{"DB_QUERY_TIMEOUT": "30s"}, 32 * time.Second, ""},
		{"DefaultFollowsRenderTimeout", map[string]string{"TILES_RENDER_TIMEOUT": "1s", "DB_QUERY_TIMEOUT": "500ms"}, 3 * time.Second, ""},
		{"Set", map[string]string{"DB_STATEMENT_TIMEOUT": "1m"}, time.Minute, ""},
		{"Off", map[string]string{"DB_STATEMENT_TIMEOUT": "0"}, 0, ""},
		{"EqualToDeadline", map[string]string{"DB_STATEMENT_TIMEOUT": "10s"}, 10 * time.Second, ""},
		{"BelowRenderTimeout", map[string]string{"DB_STATEMENT_TIMEOUT": "5s"}, 0, "at least the longest query deadline"},
		{"BelowQueryTimeout", map[string]string{"DB_STATEMENT_TIMEOUT": "3s", "DB_QUERY_TIMEOUT": "4s", "TILES_RENDER_TIMEOUT": "1s"}, 0, "(4s)"},
		{"Negative", map[string]string{"DB_STATEMENT_TIMEOUT": "-1s"}, 0, "not a duration"},
		{"Garbage", map[string]string{"DB_STATEMENT_TIMEOUT": "soon"}, 0, "not a duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0"}
			for k, v := range tt.env {
				m[k] = v
			}
			c, err := Load(env(m))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "DB_STATEMENT_TIMEOUT") || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Load(%v) error = %v, want one naming DB_STATEMENT_TIMEOUT with %q", tt.env, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load(%v) error = %v", tt.env, err)
			}
			if c.DB.StatementTimeout != tt.want {
				t.Errorf("StatementTimeout = %v, want %v", c.DB.StatementTimeout, tt.want)
			}
		})
	}
}

func TestGCPercent(t *testing.T) {
	tests := []struct {
		gogc string
		want int
	}{
		{"", DefaultGCPercent},
		{"100", 0},
		{"off", 0},
	}
	for _, tt := range tests {
		t.Run(tt.gogc, func(t *testing.T) {
			c, err := Load(func(name string) string {
				if name == "GOGC" {
					return tt.gogc
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			if c.Server.GCPercent != tt.want {
				t.Errorf("GCPercent with GOGC=%q = %d, want %d", tt.gogc, c.Server.GCPercent, tt.want)
			}
		})
	}
}
