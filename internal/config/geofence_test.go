package config

import (
	"strings"
	"testing"
)

func TestLoadGeofencePageBytes(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0"}
	tests := []struct {
		name    string
		value   string // "" leaves it unset
		want    int
		wantErr string
	}{
		{"Default", "", 8 << 20, ""},
		{"Set", "1048576", 1 << 20, ""},
		{"TooSmall", "1000", 0, "GEOFENCE_MAX_PAGE_BYTES=\"1000\": must be between 65536 and 1073741824"},
		{"NotANumber", "8MiB", 0, "GEOFENCE_MAX_PAGE_BYTES=\"8MiB\": not an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			if tt.value != "" {
				m["GEOFENCE_MAX_PAGE_BYTES"] = tt.value
			}
			c, err := Load(env(m))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Load() error = %v, want one with %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() error = %v", err)
			}
			if got := c.Geofence.MaxPageBytes; got != tt.want {
				t.Errorf("MaxPageBytes = %d, want %d", got, tt.want)
			}
		})
	}
}
